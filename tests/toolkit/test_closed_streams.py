"""Every command as a script or a service may start it: stderr or stdout
closed (``2>&-``), or a reader gone (a broken pipe).

The command still does its work and exits with the code the README's table
gives (0 applied, 2 refused), saying what it can where it can: with stderr
closed, ``apply`` applies the series and stdout still says so. Before, a
closed stderr made every command exit 1 ("bad verdict") having done nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from vllm_patchkit.errors import EXIT_OK, EXIT_REFUSED
from vllm_patchkit.gitcmd import Git

pytestmark = pytest.mark.release_trees

RELEASE = "0.28.0"


def run(*args: str, stdout: str, stderr: str) -> tuple[int, str]:
    """``vllm-patchkit ARGS`` with each of stdout and stderr ``open`` (a pipe
    read to the end), ``closed`` (no such descriptor) or ``broken`` (a pipe
    whose reader is gone); its exit code and what stdout said."""
    closed = [fd for fd, how in ((1, stdout), (2, stderr)) if how == "closed"]
    broken: dict[int, int] = {}
    for fd, how in ((1, stdout), (2, stderr)):
        if how == "broken":
            reader, writer = os.pipe()
            os.close(reader)
            broken[fd] = writer

    def close() -> None:
        for fd in closed:
            os.close(fd)

    def stream(fd: int, how: str) -> int:
        return broken[fd] if how == "broken" else subprocess.PIPE

    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm_patchkit", *args],
            stdout=stream(1, stdout),
            stderr=stream(2, stderr),
            preexec_fn=close,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
    finally:
        for fd in broken.values():
            os.close(fd)
    out, _ = proc.communicate(timeout=600)
    return proc.returncode, (out or b"").decode()


STREAMS = [
    ("open", "closed"),
    ("closed", "open"),
    ("broken", "open"),
    ("open", "broken"),
]
IDS = ["stderr-closed", "stdout-closed", "stdout-broken", "stderr-broken"]


@pytest.mark.parametrize(("stdout", "stderr"), STREAMS, ids=IDS)
def test_apply_applies_and_exits_0(
    release_clone: Callable[[str], Path], stdout: str, stderr: str
) -> None:
    tree = release_clone(RELEASE)
    before = Git(tree).head()

    code, out = run("apply", str(tree), stdout=stdout, stderr=stderr)

    assert code == EXIT_OK, out
    assert Git(tree).head() != before  # the series is on the branch
    assert Git(tree).out("status", "--porcelain") == ""
    if stdout == "open":
        assert "applied" in out, out


@pytest.mark.parametrize(("stdout", "stderr"), STREAMS, ids=IDS)
def test_a_refusal_exits_2(tmp_path: Path, stdout: str, stderr: str) -> None:
    code, out = run("apply", str(tmp_path), "--json", stdout=stdout, stderr=stderr)

    assert code == EXIT_REFUSED, out
    if stdout == "open":  # one JSON object, nothing else (no message strayed)
        assert json.loads(out)["status"] == "refused", out
