"""The pre-commit hook reads Python as Python does, and passes nothing it did not read.

``vllm-patchkit metadata-writes`` runs, as pre-commit runs it (a real
subprocess), on a copy of stock vLLM 0.28.0's ``vllm/`` whose
``rocm_attn.py`` (a harmful write) is saved as an editor may save it: with a
UTF-8 BOM, or declaring latin-1 and holding a latin-1 byte. Python imports
both, so the hook reads both and fails on the write (exit 1). A module it
cannot read (past the size bound, a FIFO, a link to ``/dev/zero``) is named
as not read and the exit is 3, never 0; a special file under ``vllm/`` is
neither waited on nor read, even when it is not among the files passed.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_patchkit.errors import EXIT_ERROR, EXIT_FAILED
from vllm_patchkit.trees.releases import release_tree

pytestmark = pytest.mark.release_trees

ROCM = "vllm/v1/attention/backends/rocm_attn.py"
FLASH = "vllm/v1/attention/backends/flash_attn.py"
HARMFUL = ": harmful: zero_ of query_start_loc in RocmAttentionMetadataBuilder"
MEMORY_CAP = 3 << 30
"""Address space of the hook's process: a read of ``/dev/zero`` ends in a
MemoryError here instead of taking the machine's memory."""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """0.28.0's ``vllm/`` as hard links (the hook only reads; a test
    replaces a file by unlinking it first, never writes through a link)."""
    root = tmp_path / "vllm-0.28.0"
    shutil.copytree(
        release_tree("0.28.0") / "vllm", root / "vllm", copy_function=os.link
    )
    return root


def replace(tree: Path, relative: str, data: bytes) -> None:
    path = tree / relative
    path.unlink()  # a hard link into the release cache: never written through
    path.write_bytes(data)


def hook(tree: Path, *files: str) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    return subprocess.run(
        [sys.executable, "-m", "vllm_patchkit", "metadata-writes", *files],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=cap,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


def test_a_file_saved_with_a_bom_is_read(tree: Path) -> None:
    replace(tree, ROCM, b"\xef\xbb\xbf" + (tree / ROCM).read_bytes())

    proc = hook(tree, ROCM)

    assert proc.returncode == EXIT_FAILED, proc.stdout + proc.stderr
    assert f"{ROCM}:" in proc.stdout and HARMFUL in proc.stdout, proc.stdout


def test_a_file_declaring_latin_1_is_read(tree: Path) -> None:
    lines = (tree / ROCM).read_bytes().split(b"\n")
    # The declaration on line 1 and a latin-1 byte in a comment on line 2, in
    # place of the SPDX lines: every later line keeps its number.
    lines[0] = b"# -*- coding: latin-1 -*-"
    lines[1] = b"# Copyright \xa9 the vLLM authors"
    replace(tree, ROCM, b"\n".join(lines))

    proc = hook(tree, ROCM)

    assert proc.returncode == EXIT_FAILED, proc.stdout + proc.stderr
    assert HARMFUL in proc.stdout, proc.stdout


def test_a_file_past_the_size_bound_is_named_not_read(tree: Path) -> None:
    padding = b"# padding\n" * 210_000
    replace(tree, ROCM, (tree / ROCM).read_bytes() + padding)
    assert (tree / ROCM).stat().st_size > 2_000_000

    proc = hook(tree, ROCM)

    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr
    assert f"{ROCM}: not read: " in proc.stdout, proc.stdout
    assert "past the 2 MB bound" in proc.stdout


def test_special_files_under_vllm_are_not_waited_on_nor_read(tree: Path) -> None:
    """A FIFO (a read would wait for a writer forever) and a link to
    ``/dev/zero`` (a read never ends): not among the files passed, yet in
    the tree the hook indexes."""
    os.mkfifo(tree / "vllm" / "fifo.py")
    (tree / "vllm" / "zero.py").symlink_to("/dev/zero")

    proc = hook(tree, FLASH)  # no harmful write of its own: exit 0 on stock

    assert proc.returncode == EXIT_ERROR, proc.stdout + proc.stderr
    assert "vllm/fifo.py: not read: a FIFO" in proc.stdout, proc.stdout
    assert "vllm/zero.py: not read: a character device" in proc.stdout


def test_a_harmful_write_still_decides_beside_a_file_not_read(tree: Path) -> None:
    os.mkfifo(tree / "vllm" / "fifo.py")

    proc = hook(tree, ROCM)

    assert proc.returncode == EXIT_FAILED, proc.stdout + proc.stderr
    assert HARMFUL in proc.stdout and "vllm/fifo.py: not read" in proc.stdout
