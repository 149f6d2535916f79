"""The child-process round trip the suite, the audit and the overlay probe share.

Each test starts a real Python child (a small module written to a scratch
directory and put on its ``PYTHONPATH``): one that writes its report, one
that writes it and exits nonzero, one that writes none, one that writes
something that is not JSON, one that sleeps past the timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_patchkit.trees.child_json import ChildResult, run_json_child

MODULE = "patchkit_json_child"
CHILD = """\
import json, os, sys, time

mode, output = sys.argv[1], sys.argv[2]
print("to stdout", flush=True)
print("to stderr", file=sys.stderr, flush=True)
report = {"argv": sys.argv[1:], "cwd": os.getcwd(), "mark": os.environ.get("MARK")}
if mode in ("report", "report-exit-5"):
    with open(output, "w") as out:
        json.dump(report, out)
    sys.exit(5 if mode == "report-exit-5" else 0)
if mode == "not-json":
    with open(output, "w") as out:
        out.write('{"half": ')
if mode == "sleep":
    with open(os.environ["PID_FILE"], "w") as out:
        out.write(str(os.getpid()))
    time.sleep(120)
sys.exit(3)
"""


def run(tmp_path: Path, mode: str, timeout_s: float = 120) -> ChildResult:
    modules = tmp_path / "modules"
    modules.mkdir(exist_ok=True)
    (modules / f"{MODULE}.py").write_text(CHILD)
    env = {
        **os.environ,
        "PYTHONPATH": str(modules),
        "MARK": "from the parent",
        "PID_FILE": str(tmp_path / "pid"),
    }
    return run_json_child(
        MODULE,
        lambda output: [mode, str(output)],
        env=env,
        timeout_s=timeout_s,
        scratch_prefix="child-json-test-",
        output_name="written.json",
    )


def test_reads_the_report_the_child_wrote_in_its_scratch_dir(tmp_path: Path) -> None:
    result = run(tmp_path, "report")
    assert result.argv[:3] == (sys.executable, "-m", MODULE)
    assert result.returncode == 0 and not result.timed_out
    data = result.data
    assert data["mark"] == "from the parent"
    output = Path(data["argv"][1])
    # The child ran in the scratch dir, wrote where it was told, and the
    # scratch dir is gone once the report is read.
    assert output.name == "written.json"
    assert Path(data["cwd"]) == output.parent
    assert output.parent.name.startswith("child-json-test-")
    assert not output.parent.exists()
    assert result.log == "to stdout\nto stderr\n"


def test_a_report_is_read_whatever_the_exit_status(tmp_path: Path) -> None:
    result = run(tmp_path, "report-exit-5")
    assert result.returncode == 5 and not result.timed_out
    assert result.data["argv"][0] == "report-exit-5"


def test_no_report_is_none_with_the_exit_status_and_output(tmp_path: Path) -> None:
    result = run(tmp_path, "none")
    assert result.returncode == 3 and not result.timed_out
    assert result.data is None
    assert result.log == "to stdout\nto stderr\n"


def test_a_report_that_is_not_json_raises(tmp_path: Path) -> None:
    with pytest.raises(json.JSONDecodeError):
        run(tmp_path, "not-json")


def test_a_child_past_the_timeout_is_killed_and_says_so(tmp_path: Path) -> None:
    start = time.monotonic()
    result = run(tmp_path, "sleep", timeout_s=3)
    assert time.monotonic() - start < 60
    assert result.timed_out and result.returncode is None
    assert result.data is None
    # What it printed before the timeout is kept, as text.
    assert "to stdout" in result.log and "to stderr" in result.log
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_child_ends_with_its_main_s_status_without_the_collector() -> None:
    """``exit_with`` is each tree child's entry point: ``main()``'s status
    is the exit status, and the cyclic collector is off while it runs."""
    program = (
        "import gc\n"
        "from vllm_patchkit.trees.child_json import exit_with\n"
        "exit_with(lambda: 7 if gc.isenabled() else 5)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 5, proc.stderr
