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

from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import clone_release, release_tree
from vllm_patchkit.trees.tree_process import TreeLauncher

pytestmark = [pytest.mark.release_trees, pytest.mark.slow]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "audit"
STATIC_SINK = DOCS / "static-sink-seq-lens"


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


def test_static_sink_reproduction_fails_on_0_33_0() -> None:
    proc = reproduce(
        release_tree("0.33.0"), STATIC_SINK / "test_static_sink_shared_state.py"
    )

    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 failed" in proc.stdout
    assert "changed the shared seq_lens in place" in proc.stdout


def test_static_sink_reproduction_passes_with_the_fix(tmp_path: Path) -> None:
    tree = tmp_path / "vllm-0.33.0"
    clone_release("0.33.0", tree)
    Git(tree).run("apply", str(STATIC_SINK / "fix.patch"))

    proc = reproduce(tree, STATIC_SINK / "test_static_sink_shared_state.py")

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout
