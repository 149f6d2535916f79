"""``check``'s trial tree goes to tmpfs unless the user names a place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_patchkit.paths import SHARED_MEMORY, memory_scratch


def test_tmpdir_decides_when_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert memory_scratch() is None  # tempfile's default: TMPDIR


@pytest.mark.skipif(
    not os.access(SHARED_MEMORY, os.W_OK), reason="no writable /dev/shm here"
)
def test_shared_memory_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    assert memory_scratch() == str(SHARED_MEMORY)
