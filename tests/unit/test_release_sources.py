"""A few files of a release's sdist, kept once read (``release_sources``).

Built on a small sdist of its own in a cache of its own: the kept copy
serves without decompressing the sdist again, a changed sdist is read
afresh, a file the release lacks is None, and a damaged entry is read again.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from vllm_patchkit.trees.releases import release_sources

VERSION = "0.28.0"
A = "vllm/a.py"
B = "vllm/sub/b.py"


def write_sdist(cache: Path, files: dict[str, bytes]) -> Path:
    sdist = cache / "sdists" / f"vllm-{VERSION}.tar.gz"
    sdist.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist, "w:gz") as tar:
        for relative, data in files.items():
            info = tarfile.TarInfo(f"vllm-{VERSION}/{relative}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return sdist


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path))
    return tmp_path


def test_files_are_read_then_kept(cache: Path) -> None:
    sdist = write_sdist(cache, {A: b"a = 1\n", B: b"b = 2\n"})
    wanted = (A, "vllm/missing.py")
    assert release_sources(VERSION, wanted) == {A: b"a = 1\n", "vllm/missing.py": None}
    # The sdist made unreadable as gzip, its size and time kept: the kept
    # copy serves, so nothing was decompressed.
    stat = sdist.stat()
    sdist.write_bytes(b"\0" * stat.st_size)
    os.utime(sdist, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert release_sources(VERSION, wanted) == {A: b"a = 1\n", "vllm/missing.py": None}
    # A file never asked for is read from the sdist: here, not gzip.
    with pytest.raises(tarfile.ReadError):
        release_sources(VERSION, (B,))


def test_a_changed_sdist_is_read_afresh(cache: Path) -> None:
    sdist = write_sdist(cache, {A: b"a = 1\n"})
    assert release_sources(VERSION, (A,)) == {A: b"a = 1\n"}
    write_sdist(cache, {A: b"a = 22\n"})
    os.utime(sdist, ns=(1, 1))  # a new time, whatever the clock's resolution
    assert release_sources(VERSION, (A,)) == {A: b"a = 22\n"}


@pytest.mark.parametrize(
    "damage",
    ["", "{", "[]", '{"sdist": [1, 2], "files": []}', '{"files": {"vllm/a.py": 7}}'],
)
def test_a_damaged_entry_is_read_again(cache: Path, damage: str) -> None:
    write_sdist(cache, {A: b"a = 1\n"})
    kept = cache / "sdist-files" / f"vllm-{VERSION}.json"
    kept.parent.mkdir(parents=True)
    kept.write_text(damage)
    assert release_sources(VERSION, (A,)) == {A: b"a = 1\n"}
