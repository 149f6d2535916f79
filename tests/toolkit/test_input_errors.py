"""Bad input is a PatchkitError that carries exit 2, in every command.

refresh, doctor, matrix and demo raised bare ``ValueError`` for input they
cannot use; ``cli.main`` mapped that to 2 only through a catch-all for
modules without a PatchkitError. Each case here checks both halves: the
library raises a :class:`RefusedError` (so it takes the one path from an
error to an exit code), and ``cli.main`` returns 2 with the reason, having
changed nothing. In-process: no CLI start-up to pay.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import checkout_state
from vllm_patchkit import cli
from vllm_patchkit.commands.matrix import MatrixRangeError, check_range
from vllm_patchkit.errors import EXIT_REFUSED, RefusedError
from vllm_patchkit.git.refresh import RefreshRefused, refresh_series
from vllm_patchkit.git.series import Series
from vllm_patchkit.gitcmd import init_repo
from vllm_patchkit.judge.demo import DemoInputError, run_checkout_demo
from vllm_patchkit.judge.doctor import NotAVllmTreeError, diagnose


def _tiny_vllm_checkout(root: Path) -> Path:
    """A git checkout with ``vllm/__init__.py`` and one commit: enough for
    every command to accept it as a vLLM checkout."""
    git = init_repo(root)
    (root / "vllm").mkdir()
    (root / "vllm" / "__init__.py").write_text('__version__ = "0.28.0"\n')
    git.run("add", "-A")
    git.run("commit", "--quiet", "-m", "vLLM")
    return root


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    # cli.main sets the process's SIGTERM and SIGHUP handlers: give them back.
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        assert cli.main(argv) == EXIT_REFUSED
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return capsys.readouterr().err


def test_refresh_without_a_base_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tiny_vllm_checkout(tmp_path / "vllm")
    patches = tmp_path / "patches"
    patches.mkdir()
    before = checkout_state(tree)
    with pytest.raises(RefreshRefused) as caught:
        refresh_series(tree, patches)
    assert isinstance(caught.value, RefusedError)
    err = _refused(["--patches", str(patches), "refresh", str(tree)], capsys)
    assert "no base to export from" in err
    assert checkout_state(tree) == before
    assert not any(patches.iterdir())


def test_doctor_on_a_directory_without_vllm_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], series: Series
) -> None:
    with pytest.raises(NotAVllmTreeError) as caught:
        diagnose(series, tmp_path)
    assert isinstance(caught.value, RefusedError)
    err = _refused(["doctor", str(tmp_path)], capsys)
    assert "not a vLLM tree (no vllm/__init__.py)" in err


@pytest.mark.parametrize(
    ("first", "last", "reason"),
    [
        ("0.29.0", "0.28.0", "--to 0.28.0 comes before --from 0.29.0"),
        ("banana", "latest", "--from 'banana' is not a vLLM release version"),
    ],
)
def test_matrix_with_a_bad_range_is_refused_before_the_index(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    first: str,
    last: str,
    reason: str,
) -> None:
    """The index named here refuses connections: asking it would be exit 3."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    with pytest.raises(MatrixRangeError) as caught:
        check_range(first, last)
    assert isinstance(caught.value, RefusedError)
    argv = ["matrix", "--no-suite", "--from", first, "--to", last]
    err = _refused([*argv, "--output-dir", str(tmp_path)], capsys)
    assert reason in err
    assert not any(tmp_path.iterdir())


def test_demo_on_a_dirty_checkout_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], series: Series
) -> None:
    tree = _tiny_vllm_checkout(tmp_path / "vllm")
    (tree / "mine.txt").write_text("uncommitted\n")
    before = checkout_state(tree)
    with pytest.raises(DemoInputError) as caught:
        run_checkout_demo(series, tree)
    assert isinstance(caught.value, RefusedError)
    err = _refused(["demo", str(tree)], capsys)
    assert "refusing a dirty checkout" in err and "mine.txt" in err
    assert checkout_state(tree) == before
