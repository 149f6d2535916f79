"""Each reproduction under docs/audit/ fails on the release where the bug lives
and passes once its fix is applied: the evidence that it reproduces the bug.

Each runs in a real process with the tree's runtime, through
docs/audit/run_reproduction.py (vLLM's own test helpers, a local model
config, the CPU).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vllm_overlay.fixes.static_sink_seq_lens import FIX as STATIC_SINK_FIX
from vllm_patchkit.git.series import load_series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import clone_release
from vllm_patchkit.trees.tree_process import TreeLauncher

pytestmark = [pytest.mark.release_trees, pytest.mark.slow]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "audit"
PATCHES = DOCS.parents[1] / "patches"


def reproduce(
    tree: Path, test: Path, *pytest_args: str
) -> subprocess.CompletedProcess[str]:
    """``test`` run against ``tree``; ``pytest_args`` go to pytest (a test
    inside the tree needs ``--noconftest``: vLLM's conftest imports what a
    CPU runtime lacks)."""
    env = TreeLauncher.of(tree).env()
    script = DOCS / "run_reproduction.py"
    return subprocess.run(
        [sys.executable, str(script), str(tree), str(test), *pytest_args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        timeout=600,
    )


def _static_sink_tree(tmp_path: Path, *, fixed: bool) -> tuple[Path, Path]:
    """A clone of 0.33.0 with StaticSink's test patch (and its fix, with the
    V1 runner's opt-out), from the series itself: the finding's fix is the
    series' patch. Triton's and ROCm Octave's cases run on the CPU (six);
    FlashAttention's need CUDA."""
    tree = tmp_path / "vllm-0.33.0"
    clone_release("0.33.0", tree)
    fix, test, opt_out = (p.path for p in load_series().of_fix(STATIC_SINK_FIX))
    for patch in (fix, test, opt_out) if fixed else (test,):
        Git(tree).run("apply", str(patch))
    return tree, tree / "tests/v1/attention/test_static_sink_shared_state.py"


def test_static_sink_reproduction_fails_on_0_33_0(tmp_path: Path) -> None:
    proc = reproduce(*_static_sink_tree(tmp_path, fixed=False), "--noconftest")

    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "6 failed, 3 skipped" in proc.stdout
    # The second static-sink group sees the sink twice.
    assert "group 1 sees [104, 81, 128, 0]" in proc.stdout


def test_static_sink_reproduction_passes_with_the_fix(tmp_path: Path) -> None:
    proc = reproduce(*_static_sink_tree(tmp_path, fixed=True), "--noconftest")

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "6 passed, 4 skipped" in proc.stdout
