"""``vllm-patchkit matrix`` end to end on a small range, and its cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit

pytestmark = pytest.mark.release_trees


def test_matrix_on_0_28_to_0_29(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = patchkit(
        "matrix",
        "--from",
        "0.28.0",
        "--to",
        "0.29.0",
        "--refresh",
        "--output-dir",
        str(tmp_path),
    )
    assert first.returncode == 0, first.stderr
    rows = json.loads((tmp_path / "matrix.json").read_text())["rows"]
    assert [r["version"] for r in rows] == ["0.28.0", "0.29.0"]
    old, new = rows
    assert (old["affected"], old["series"], old["overlay"]) == (
        True,
        "applies, applies",
        "installed",
    )
    assert old["suite"] == "bug reproduced"
    assert (new["affected"], new["series"], new["overlay"]) == (
        False,
        "upstreamed, applies",
        "not-needed",
    )
    assert new["suite"] == "passes"
    table = (tmp_path / "matrix.md").read_text()
    row = "| 0.28.0 | **yes** | buggy | applies, applies | installed | bug reproduced |"
    assert row in table
    assert "[1/2] vLLM 0.28.0" in first.stderr
    assert not any(r["cached"] for r in rows)

    second = patchkit(
        "matrix", "--from", "0.28.0", "--to", "0.29.0", "--output-dir", str(tmp_path)
    )
    assert second.returncode == 0
    again = json.loads((tmp_path / "matrix.json").read_text())
    assert all(r["cached"] for r in again["rows"])
    assert "(cached)" in second.stderr


def test_matrix_rejects_an_empty_range(tmp_path: Path) -> None:
    proc = patchkit(
        "matrix", "--from", "9.0.0", "--to", "9.1.0", "--output-dir", str(tmp_path)
    )
    assert proc.returncode == 2
    assert "no vLLM release between" in proc.stderr
