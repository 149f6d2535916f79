"""The StaticSink fix through vLLM's real ``load_general_plugins()``.

Each case is a fresh process (:mod:`tests.overlay.probe_static_sink`) that
loads vLLM's plugins, then builds three KV-cache groups on one shared
metadata, as the model runner hands it out: a static-sink group, a second
static-sink group, and an ordinary full-attention group. On the installed
vLLM 0.28.0 and on the 0.33.0 release (its release tree in its runtime) the
overlay installs the fix: each static-sink group sees the sink once, the
full-attention group sees the lengths it was handed, and the shared
metadata is as it was. A vendor build whose ``build`` differs is left alone,
with a warning naming the file and the line: the overlay does not touch it
(and the bug it carries stays visible).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.overlay.shadow_vllm import insert_before, shadow_installed_vllm
from vllm_overlay.fixes.static_sink_seq_lens import STATIC_SINK
from vllm_patchkit.trees.releases import release_tree
from vllm_patchkit.trees.tree_process import TreeLauncher

pytestmark = [pytest.mark.plugin_releases, pytest.mark.release_trees]

PROBE = Path(__file__).with_name("probe_static_sink.py")
FIX = "static-sink-keeps-shared-seq-lens"


def probe(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    env = {
        **env,
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONDONTWRITEBYTECODE": "1",
        "VLLM_LOGGING_LEVEL": "INFO",
    }
    env.pop("VLLM_PLUGINS", None)
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
    report["log"] = proc.stdout + proc.stderr
    return report


def assert_fixed(report: dict[str, Any]) -> None:
    assert report["action"] == "installed", report["reason"]
    assert report["applied_to_class"] and report["problems"] == []
    assert report["installed_on_module"] and report["build_wrapped"]
    before, sink = report["seq_lens_before"], report["sink_len"]
    with_sink = [n + sink for n in before]
    # Each static-sink group sees the sink once; the full group, no sink.
    assert report["seen"] == [with_sink, with_sink, before]
    assert report["shared_seq_lens_after"] == before
    assert report["shared_max_seq_len_kept"] and report["shared_block_table_kept"]
    (line,) = [
        text for text in report["overlay_log"] if "installed the StaticSink" in text
    ]
    assert "on StaticSinkAttentionBuilder" in line


def test_installed_vllm_gets_the_fix(tmp_path: Path) -> None:
    report = probe(tmp_path, dict(os.environ))
    assert report["vllm_version"] == "0.28.0"
    assert_fixed(report)


def test_newest_release_gets_the_fix(tmp_path: Path) -> None:
    tree = release_tree("0.33.0")
    report = probe(tmp_path, TreeLauncher.of(tree).env(VLLM_PLUGINS=None))
    assert report["vllm_version"] == "0.33.0"
    assert Path(report["vllm_file"]).parent == tree / "vllm"
    assert_fixed(report)


VENDOR_LINE = "            self.vendor_builds = getattr(self, 'vendor_builds', 0) + 1\n"


def test_a_vendor_build_is_left_alone_with_a_warning(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    edited = shadow_installed_vllm(
        tree,
        lambda text: insert_before(
            text, "common_attn_metadata.seq_lens[:] = (", VENDOR_LINE
        ),
        file=STATIC_SINK,
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(tree), os.environ.get("PYTHONPATH")) if p
    )
    report = probe(tmp_path, env)
    assert report["vllm_file"] == str(tree / "vllm/__init__.py")
    assert report["action"] == "unrecognised"
    line = next(
        i
        for i, text in enumerate(edited.read_text().splitlines(), 1)
        if text.strip() == "def build("
    )
    assert f"{edited}:{line}" in report["reason"]
    warnings = [
        text
        for text in report["log"].splitlines()
        if "WARNING" in text and "vllm-overlay: nothing done for StaticSink" in text
    ]
    assert len(warnings) == 1 and f"{edited}:{line}" in warnings[0], report["log"]
    # Not touched: vLLM's own factory and method, which still write the
    # shared lengths (the vendor's bug, shown, not hidden).
    assert not report["installed_on_module"] and not report["build_wrapped"]
    assert report["shared_seq_lens_after"] != report["seq_lens_before"]
