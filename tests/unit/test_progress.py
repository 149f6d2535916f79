"""Progress: a person at a terminal sees each step and a line through every
silence; ``--json`` and a stderr that is not a terminal get none of it.

Each case is a real process whose stderr is a pseudo-terminal (``pty``) or
a pipe, as a user's terminal or a script's capture would be.
"""

from __future__ import annotations

import errno
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """
import sys, time
from vllm_patchkit import progress
progress.HEARTBEAT = 0.3
progress.start(json_output=sys.argv[1] == "json")
progress.step("first")
with progress.phase("waiting"):
    time.sleep(1.2)
progress.step("last")
progress.stop()
print("the end", file=sys.stderr)
"""


def run(
    argv: list[str], *, tty: bool, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """(exit, stdout, stderr) of ``argv`` with stderr a terminal or a pipe."""
    inherited = {k: v for k, v in os.environ.items() if k != "VLLM_PATCHKIT_PROGRESS"}
    environ = {**inherited, **(env or {})}
    if not tty:
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=environ, timeout=300
        )
        return proc.returncode, proc.stdout, proc.stderr
    leader, follower = pty.openpty()
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=follower, text=True, env=environ
    ) as child:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError as exc:  # EIO: the child closed the terminal
                assert exc.errno == errno.EIO
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        stdout = child.stdout.read() if child.stdout else ""
        code = child.wait(timeout=300)
    return code, stdout, b"".join(chunks).decode().replace("\r\n", "\n")


def lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if re.match(r"\[ *\d+s\] ", line)]


def test_at_a_terminal_each_step_and_a_line_through_each_silence() -> None:
    code, _, stderr = run([sys.executable, "-c", PROGRAM, "text"], tty=True)
    assert code == 0, stderr
    said = lines(stderr)
    assert said[0].endswith("] first") and said[1].endswith("] waiting")
    assert said[-1].endswith("] last")
    still = [line for line in said if "... waiting (" in line]
    assert 2 <= len(still) <= 5, said  # 1.2 s of silence, a line per 0.3 s
    assert stderr.rstrip().endswith("the end")


@pytest.mark.parametrize(("mode", "tty"), [("json", True), ("text", False)])
def test_json_and_a_pipe_get_no_progress_only_the_rest(mode: str, tty: bool) -> None:
    code, _, stderr = run([sys.executable, "-c", PROGRAM, mode], tty=tty)
    assert code == 0, stderr
    assert stderr.strip() == "the end"


def test_the_setting_shows_it_on_a_pipe_or_hides_it_at_a_terminal() -> None:
    _, _, piped = run(
        [sys.executable, "-c", PROGRAM, "text"],
        tty=False,
        env={"VLLM_PATCHKIT_PROGRESS": "1"},
    )
    assert len(lines(piped)) >= 4
    _, _, hidden = run(
        [sys.executable, "-c", PROGRAM, "text"],
        tty=True,
        env={"VLLM_PATCHKIT_PROGRESS": "0"},
    )
    assert hidden.strip() == "the end"


def fake_tree(tmp_path: Path) -> Path:
    """A directory that passes for a vLLM tree until its code is run."""
    tree = tmp_path / "vllm-tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("raise ImportError('not vLLM')\n")
    return tree


def test_the_command_line_shows_test_s_steps_at_a_terminal_only(
    tmp_path: Path,
) -> None:
    """``vllm-patchkit test`` as a user runs it: which step, on which tree;
    with ``--json`` one object on stdout and no progress on stderr."""
    tree = fake_tree(tmp_path)
    command = [sys.executable, "-m", "vllm_patchkit", "test", str(tree)]
    code, _, stderr = run([*command, "--no-baseline"], tty=True)
    said = lines(stderr)
    assert any(line.endswith(f"test 1/1: {tree} as it is (after)") for line in said)
    assert any(f"regression suite on {tree}" in line for line in said), stderr
    assert code != 0  # not vLLM: the suite cannot run there

    code_json, stdout, quiet = run([*command, "--no-baseline", "--json"], tty=True)
    assert code_json == code
    assert stdout.lstrip().startswith("{")
    assert lines(quiet) == [], quiet
    _, _, piped = run([*command, "--no-baseline"], tty=False)
    assert lines(piped) == [], piped


def test_the_matrix_sweep_lines_are_always_shown() -> None:
    """``matrix``'s line per release and step is its CI job's log: shown on
    a pipe too, in the format the workflow's readers know."""
    program = (
        "from vllm_patchkit.progress import Sweep\n"
        "Sweep(12)(3, '0.28.0', 'stock ...')\n"
    )
    code, _, stderr = run([sys.executable, "-c", program], tty=False)
    assert code == 0, stderr
    assert stderr == "[ 3/12]  0m00s vLLM 0.28.0   stock ...\n"
