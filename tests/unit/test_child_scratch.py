"""A tree child's temporary files go with it (issue 50, item 7).

Each child of :func:`~vllm_patchkit.trees.child_json.run_in_group` gets a
temporary directory of its own, removed when it ends: when it finishes,
when it is killed past its timeout, and when the run that started it is
interrupted. Real processes; the child makes its directory the way the
regression harness does (``tempfile.mkdtemp``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_patchkit.trees.child_json import run_in_group
from vllm_patchkit.trees.tree_process import TOOLKIT_PATHS

PREFIX = "vllm-overlay-regression-"
CHILD = f"""\
import sys, tempfile, time
made = tempfile.mkdtemp(prefix={PREFIX!r})
open(made + "/config.json", "w").write("{{}}")
time.sleep(float(sys.argv[1]))
"""
PARENT = """\
import signal, sys
from pathlib import Path
from vllm_patchkit.cli import _terminate
from vllm_patchkit.trees.child_json import run_in_group
signal.signal(signal.SIGTERM, _terminate)
# As at a terminal: a shell's background job (CI scripts run so) starts
# with SIGINT ignored, which every child would inherit.
signal.signal(signal.SIGINT, signal.default_int_handler)
child = [sys.executable, "-c", sys.argv[1], "600"]
run_in_group(child, cwd=Path.cwd(), env=dict(__import__("os").environ), timeout_s=None)
"""


def left(scratch: Path) -> list[str]:
    """What the runs left in ``scratch`` (the toolkit's and the child's)."""
    return sorted(
        str(path.relative_to(scratch))
        for path in scratch.rglob("*")
        if path.name.startswith(("vllm-overlay-", "vllm-patchkit-"))
    )


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setenv("TMPDIR", str(directory))
    return directory


@pytest.mark.parametrize(("sleep", "timeout"), [(0, 60), (60, 1)])
def test_a_finished_or_timed_out_child_leaves_nothing(
    scratch: Path, sleep: float, timeout: float
) -> None:
    done = run_in_group(
        [sys.executable, "-c", CHILD, str(sleep)],
        cwd=scratch,
        env=dict(os.environ),
        timeout_s=timeout,
    )

    assert done.timed_out == (sleep > timeout), done.log
    assert left(scratch) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_nothing(
    scratch: Path, signum: signal.Signals
) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(TOOLKIT_PATHS))
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD], cwd=scratch, env=env
    )
    try:
        deadline = time.monotonic() + 60
        while not any(p.name.startswith(PREFIX) for p in scratch.rglob("*")):
            assert time.monotonic() < deadline, "the child never made its directory"
            assert parent.poll() is None, "the run ended early"
            time.sleep(0.05)
        parent.send_signal(signum)
        parent.wait(timeout=60)
    finally:
        parent.kill()
        parent.wait()

    assert left(scratch) == []
