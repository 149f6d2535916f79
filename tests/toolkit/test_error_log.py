"""The traceback log of an unexpected failure (``cli.error_handler``) cannot
be aimed: a link planted where the log would go, or a ``logs/`` that is a
link, is never written through; the log is private and its name unguessable.

Each test drives the real error path with a command that raises.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_patchkit.cli import error_handler
from vllm_patchkit.errors import EXIT_ERROR


def _boom(args: argparse.Namespace) -> int:
    raise ZeroDivisionError("boom")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    directory = tmp_path / "cache"
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(directory))
    old = os.umask(0o022)  # a common umask: a plain write_text gives 0644
    try:
        yield directory
    finally:
        os.umask(old)


def _fail_once(capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, str], str]:
    code = error_handler(argparse.Namespace(json=True), _boom)
    assert code == EXIT_ERROR
    out, err = capsys.readouterr()
    return json.loads(out), err


def test_a_link_planted_at_the_log_path_is_not_followed(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Links at every name ``error-STAMP-PID.log`` the next seconds could
    give (the old predictable name): the file they point at is untouched."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    logs = cache / "logs"
    logs.mkdir(parents=True)
    now = time.time()
    for second in range(-1, 10):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + second))
        (logs / f"error-{stamp}-{os.getpid()}.log").symlink_to(victim)
    payload, _ = _fail_once(capsys)
    assert victim.read_text() == "precious\n"
    log = Path(payload["log"])
    assert not log.is_symlink() and "ZeroDivisionError" in log.read_text()


def test_a_symlinked_logs_directory_is_not_written_through(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``CACHE/logs`` is a link to another directory: nothing is written
    there; the traceback goes to stderr with the reason."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache.mkdir()
    (cache / "logs").symlink_to(elsewhere)
    payload, err = _fail_once(capsys)
    assert list(elsewhere.iterdir()) == []
    assert "log" not in payload
    assert "ZeroDivisionError: boom" in err
    assert "not logged" in err and "symbolic link" in err


def test_the_log_is_private_and_its_name_unguessable(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Mode 0600 whatever the umask; two failures of one process within the
    same second get two different logs, neither named by time and pid."""
    first, _ = _fail_once(capsys)
    second, _ = _fail_once(capsys)
    logs = [Path(first["log"]), Path(second["log"])]
    assert logs[0] != logs[1]
    for log in logs:
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        assert not log.name.endswith(f"-{os.getpid()}.log")
        assert "ZeroDivisionError" in log.read_text()
    assert stat.S_IMODE((cache / "logs").stat().st_mode) & 0o077 == 0
