"""The StaticSink fix through vLLM's real ``load_general_plugins()``.

Each case is a fresh process (:mod:`tests.overlay.probe_static_sink`) that
loads vLLM's plugins, then builds three KV-cache groups on one shared
metadata, as the model runner hands it out: a static-sink group, a second
static-sink group, and an ordinary full-attention group. On the installed
vLLM 0.28.0 and on the 0.33.0 release (its release tree in its runtime) the
overlay installs the fix: each static-sink group sees the sink once, the
full-attention group sees the lengths it was handed, and the shared
metadata is as it was. Then Model Runner V2's draft step: the runner's
``seq_lens`` advanced in place and ``update_draft_decode_metadata`` on the
built metadata: the static-sink metadata reads input + 1 + sink from the
same buffer. A vendor build whose factory differs (a line in ``build``, or
one of the issue's shapes around it) is left alone, with a warning naming
the file and the line: the overlay does not touch it (and the bug it
carries stays visible), ``python -m vllm_overlay`` exits 1 and
``VLLM_OVERLAY_STRICT=1`` stops vLLM at plugin load.
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
from tests.overlay.sink_vendor_shapes import capture_adds_sink, empty_subclass
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
    assert_draft_step_refreshed(report)


def assert_draft_step_refreshed(report: dict[str, Any]) -> None:
    """After the runner's in-place +1 and ``update_draft_decode_metadata``:
    the sink group reads input + 1 + sink from the buffer it built with, the
    block table behind the sink blocks is the runner's again, the shared
    lengths are the runner's own (+1, no sink), and the update_block_table
    shortcut is off."""
    assert report["has_draft_update"], "vLLM's base builder has the method"
    assert report["draft_update_own"]
    assert report["supports_update_block_table"] is False
    before, sink = report["seq_lens_before"], report["sink_len"]
    assert report["draft_seen"] == [n + 1 + sink for n in before]
    assert report["draft_same_address"]
    assert report["draft_shared_seq_lens"] == [n + 1 for n in before]
    assert report["draft_block_table_follows"]
    assert report["draft_block_table_same_address"]
    assert report["draft_sink_blocks_kept"]


@pytest.mark.slow
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


def vendor_line_in_build(text: str) -> str:
    return insert_before(text, "common_attn_metadata.seq_lens[:] = (", VENDOR_LINE)


VENDOR_EDITS = {
    "line-in-build": vendor_line_in_build,
    "empty-subclass": empty_subclass,
    "capture-adds-sink": capture_adds_sink,
}
"""A vendor line in ``build``, and the issue's shapes (a) and (d) (all four
are judged by the AST in tests/unit/test_static_sink_releases.py). Each
is a vLLM start-up through the plugin and the doctor: the extended
``slow`` tier (the default run drives #51585's vendor build,
tests/overlay/test_vendor_build.py)."""


@pytest.fixture(params=sorted(VENDOR_EDITS))
def vendor_tree(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    """The shadow copy's PYTHONPATH entry and its edited module."""
    tree = tmp_path / "tree"
    edited = shadow_installed_vllm(tree, VENDOR_EDITS[request.param], file=STATIC_SINK)
    return tree, edited


def with_tree(tree: Path, **more: str) -> dict[str, str]:
    env = {**os.environ, **more}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(tree), os.environ.get("PYTHONPATH")) if p
    )
    return env


def factory_line(edited: Path) -> int:
    return next(
        i
        for i, text in enumerate(edited.read_text().splitlines(), 1)
        if text.startswith("def create_static_sink_attention_backend(")
    )


@pytest.mark.slow
def test_a_vendor_build_is_left_alone_with_a_warning(
    tmp_path: Path, vendor_tree: tuple[Path, Path]
) -> None:
    tree, edited = vendor_tree
    report = probe(tmp_path, with_tree(tree))
    assert report["vllm_file"] == str(tree / "vllm/__init__.py")
    assert report["action"] == "unrecognised", report["reason"]
    where = f"{edited}:{factory_line(edited)}"
    assert where in report["reason"]
    warnings = [
        text
        for text in report["log"].splitlines()
        if "WARNING" in text and "vllm-overlay: nothing done for StaticSink" in text
    ]
    assert len(warnings) == 1 and where in warnings[0], report["log"]
    # Not touched: vLLM's own factory and method, which still write the
    # shared lengths (the vendor's bug, shown, not hidden).
    assert not report["installed_on_module"] and not report["build_wrapped"]
    assert report["shared_seq_lens_after"] != report["seq_lens_before"]
    assert not report["draft_update_own"]


@pytest.mark.slow
def test_a_vendor_build_fails_the_doctor_and_strict_mode(
    tmp_path: Path, vendor_tree: tuple[Path, Path]
) -> None:
    """Needed and not active: the doctor exits 1 naming the file and line;
    strict mode stops vLLM at plugin load."""
    tree, edited = vendor_tree
    where = f"{edited}:{factory_line(edited)}"
    quiet = {"CUDA_VISIBLE_DEVICES": "", "PYTHONDONTWRITEBYTECODE": "1"}
    doctor = subprocess.run(
        [sys.executable, "-m", "vllm_overlay", "--json"],
        capture_output=True,
        text=True,
        env=with_tree(tree, **quiet),
        cwd=tmp_path,
        timeout=900,
    )
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    (entry,) = [e for e in json.loads(doctor.stdout)["fixes"] if e["name"] == FIX]
    assert entry["status"] == "unrecognised" and entry["active"] is not True
    assert any(where in problem for problem in entry["problems"]), entry
    strict = subprocess.run(
        [
            sys.executable,
            "-c",
            "from vllm.plugins import load_general_plugins; load_general_plugins()",
        ],
        capture_output=True,
        text=True,
        env=with_tree(tree, VLLM_OVERLAY_STRICT="1", **quiet),
        cwd=tmp_path,
        timeout=900,
    )
    assert strict.returncode != 0, strict.stdout + strict.stderr
    assert "OverlayStrictError" in strict.stderr
    assert f"{FIX}: nothing done" in strict.stderr and where in strict.stderr
