"""Reading the files of a user's tree: regular files only, bounded, never a wait.

A FIFO (a read waits for a writer forever), a link to ``/dev/zero`` (a read
never ends) and a file past the cap are named, not read, by the one reader
(:mod:`vllm_overlay.tree_files`) and by each walk that reads a tree through
it: the report cache's fingerprint of a tree and the search for a fix's
regression test among vLLM's tests. Each test runs under an alarm, so that
a read that waits fails the test instead of hanging the run.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_overlay.code import Shape
from vllm_overlay.tree_files import NotRead, read_python, read_regular
from vllm_overlay.vllm_tests import ATTENTION_TESTS, find_test
from vllm_patchkit.judge.regression.report_cache import fingerprints


@pytest.fixture(autouse=True)
def alarm() -> Iterator[None]:
    def waited(signum: int, frame: object) -> None:
        raise TimeoutError("a read waited")

    previous = signal.signal(signal.SIGALRM, waited)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def specials(directory: Path, suffix: str = ".py") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    os.mkfifo(directory / f"fifo{suffix}")
    (directory / f"zero{suffix}").symlink_to("/dev/zero")


def test_the_reader_names_what_it_does_not_read(tmp_path: Path) -> None:
    specials(tmp_path)
    (tmp_path / "big.py").write_bytes(b"#" * 101)

    with pytest.raises(NotRead, match="a FIFO, not a regular file"):
        read_regular(tmp_path / "fifo.py", 100)
    with pytest.raises(NotRead, match="a character device, not a regular file"):
        read_regular(tmp_path / "zero.py", 100)
    with pytest.raises(NotRead) as too_big:
        read_regular(tmp_path / "big.py", 100)
    assert too_big.value.size == 101
    assert read_regular(tmp_path / "big.py", 101) == b"#" * 101


def test_python_is_decoded_as_python_decodes_it(tmp_path: Path) -> None:
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbfx = 1\r\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\ns = '\xe9'\n")
    (tmp_path / "bad.py").write_bytes(b"s = '\xe9'\n")

    assert read_python(tmp_path / "bom.py", 100) == "x = 1\n"
    assert read_python(tmp_path / "latin.py", 100).endswith("s = '\u00e9'\n")
    with pytest.raises(NotRead, match="not Python source text"):
        read_python(tmp_path / "bad.py", 100)


def test_the_report_cache_fingerprint_names_special_files(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("")
    plain = fingerprints(tree, with_view=True)

    specials(tree / "vllm")
    with_specials = fingerprints(tree, with_view=True)

    assert None not in with_specials
    assert with_specials != plain  # named: a tree with them is another tree


def test_the_regression_test_search_skips_special_files(tmp_path: Path) -> None:
    specials(tmp_path / ATTENTION_TESTS, suffix="")
    for name in ("fifo", "zero"):
        (tmp_path / ATTENTION_TESTS / name).rename(
            tmp_path / ATTENTION_TESTS / f"test_{name}.py"
        )
    seen: list[str] = []

    code = find_test(tmp_path, lambda source: seen.append(source) or None, "absent")

    assert (code.shape, seen) == (Shape.BUGGY, [])
