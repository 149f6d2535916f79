"""A regression run leaves no temporary directory (issue 50, item 7).

Every suite run left ``$TMPDIR/vllm-overlay-regression-*`` (the harness's
tiny model and rendezvous files): 62 on one machine. The real suite, on the
installed vLLM, in a process of its own with its own ``TMPDIR``: finished,
and stopped by SIGTERM (as the command line handles it) once the harness
made its directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from vllm_patchkit.judge.regression import report_cache
from vllm_patchkit.trees.tree_process import TOOLKIT_PATHS

PREFIX = "vllm-overlay-regression-"
RUN = """\
import signal
from vllm_patchkit.cli import _terminate
from vllm_patchkit.judge.regression.runner import run_scenarios
signal.signal(signal.SIGTERM, _terminate)
print(run_scenarios(None, ["capture_effects"]).returncode)
"""


def run_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != report_cache.ENV}
    env["TMPDIR"] = str(tmp)
    env["PYTHONPATH"] = os.pathsep.join(TOOLKIT_PATHS)
    return env


def left(tmp: Path) -> list[str]:
    return sorted(
        str(path.relative_to(tmp))
        for path in tmp.rglob("*")
        if path.name.startswith(("vllm-overlay-", "vllm-patchkit-"))
    )


def test_a_finished_run_leaves_no_temporary_directory(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", RUN],
        env=run_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.stdout.strip() in ("0", "1"), done.stderr  # the suite ran
    assert left(tmp_path) == []


def test_an_interrupted_run_leaves_no_temporary_directory(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [sys.executable, "-c", RUN],
        env=run_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not any(p.name.startswith(PREFIX) for p in tmp_path.rglob("*")):
            assert time.monotonic() < deadline, "the harness made no directory"
            assert run.poll() is None, "the run ended before the harness began"
            time.sleep(0.1)
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
    finally:
        run.kill()
        run.wait()

    assert left(tmp_path) == []
