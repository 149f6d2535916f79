"""The overlay on four real vLLM releases (slower tier).

0.27.0 and 0.28.0 are affected by both bugs: the #51585 fix is installed on
vLLM's class and the AITER unified backend hands out the overlay's builder.
0.29.0 and 0.32.0 carry both ROCm fixes: the overlay does nothing for them,
arms only the StaticSink fix (tests/overlay/test_static_sink_plugin.py) and
imports nothing, and both backends run vLLM's own code, with upstream's
behaviour. 0.28.0 is the venv's own install; each other release is its
release tree (the released source) run in its tree runtime, as the overlay
probe runs one: the tree first on ``PYTHONPATH``, then the release's
pure-Python requirements the venv lacks, with the venv's torch 2.13.0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.overlay.test_plugin import (
    AITER_FIX,
    CAPTURE_FIX,
    assert_keeps_both_offsets,
    assert_zeroes_device_keeps_host,
)
from vllm_overlay.fixes import FIXES
from vllm_patchkit.trees.installed import installed_vllm_dir
from vllm_patchkit.trees.releases import release_tree
from vllm_patchkit.trees.tree_process import TreeLauncher

pytestmark = [pytest.mark.plugin_releases, pytest.mark.release_trees]

PROBE = Path(__file__).with_name("probe_release.py")
SINK_FIX = "static-sink-keeps-shared-seq-lens"


def probe(version: str, tmp_path: Path) -> dict[str, Any]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("VLLM_PLUGINS", None)
    if version != "0.28.0":  # the venv's own vLLM
        # The release and its extras first; the checkout after them (the
        # probe imports tests).
        env = TreeLauncher.of(release_tree(version)).env(VLLM_PLUGINS=None)
    output = tmp_path / "probe.json"
    proc = subprocess.run(
        [sys.executable, str(PROBE), str(output)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert output.is_file(), proc.stdout + proc.stderr
    report = json.loads(output.read_text())
    if version != "0.28.0":  # the release tree's vLLM ran, not the venv's
        assert Path(report["vllm_file"]).parent == release_tree(version) / "vllm"
    return report


@pytest.mark.parametrize(
    "version",
    # The venv's 0.28.0 through the plugin loader: tests/overlay/test_plugin.py
    # by default; this probe of it runs in the extended tier.
    [pytest.param(v, marks=pytest.mark.slow) for v in ("0.27.0", "0.28.0")],
)
def test_affected_release_gets_the_fix(version: str, tmp_path: Path) -> None:
    report = probe(version, tmp_path)
    assert report["vllm_version"] == version
    if version == "0.28.0":
        assert Path(report["vllm_file"]).parent == installed_vllm_dir()
    assert report["action"] == "installed", report["reason"]
    assert report["fix_on_vllm_class"]
    assert report["capture_keeps_host"] and report["capture_zeroes_device"]
    assert report["fixes"][AITER_FIX]["action"] == "installed"
    assert report["aiter_fix_installed"]
    assert (
        report["aiter_builder_module"]
        == "vllm_overlay.fixes.rocm_aiter_unified_builder.install"
    )
    assert_keeps_both_offsets(report["aiter_capture"])
    assert_zeroes_device_keeps_host(report["rocm_capture"])


@pytest.mark.parametrize(
    "version",
    [pytest.param("0.29.0", marks=pytest.mark.slow), "0.32.0"],
)
def test_fixed_release_is_left_alone(version: str, tmp_path: Path) -> None:
    report = probe(version, tmp_path)
    assert report["vllm_version"] == version
    assert report["action"] == "not-needed"
    assert "leaves query_start_loc_cpu alone" in report["reason"]
    aiter = report["fixes"][AITER_FIX]
    assert aiter["action"] == "not-needed"
    assert (
        "hands out its own RocmAiterUnifiedAttentionMetadataBuilder"
        in (aiter["reason"])
    )
    assert report["fixes"][CAPTURE_FIX]["action"] == "not-needed"
    # A hook per fix whose record names the release: of the series' three,
    # StaticSink's alone (affected up to the newest release).
    assert report["fixes"][SINK_FIX]["action"] == "installed"
    assert report["armed_hooks"] == sum(fix.record.affects(version) for fix in FIXES)
    assert not report["rocm_attn_imported_by_plugins"]
    assert not report["aiter_imported_by_plugins"]
    # Nothing of either backend changed: vLLM's own code, upstream's behaviour.
    assert report["rocm_method_is_vllms"] and not report["aiter_fix_installed"]
    assert report["aiter_builder_module"] == (
        "vllm.v1.attention.backends.rocm_aiter_unified_attn"
    )
    assert_keeps_both_offsets(report["aiter_capture"])
    assert_zeroes_device_keeps_host(report["rocm_capture"])
