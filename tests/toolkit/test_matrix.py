"""``vllm-patchkit matrix`` end to end on a small range, and its cache."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit
from vllm_patchkit.matrix import invariant_holds
from vllm_patchkit.paths import PROJECT_ROOT

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
        "applies, applies, applies",
        "#51585: installed, #53821: installed",
    )
    # Each fix separately: 0.28.0 needs both, 0.29.0 neither.
    assert old["fixes"] == {"#51585": True, "#53821": True}
    assert new["fixes"] == {"#51585": False, "#53821": False}
    assert old["suite"] == "bug reproduced (59 ran, 3 could not run: 38 failed)"
    assert old["checks"]["ran"] == 59 and len(old["checks"]["not_run"]) == 3
    assert (new["affected"], new["series"], new["overlay"]) == (
        False,
        "upstreamed, applies, upstreamed",
        "#51585: not-needed, #53821: not-needed",
    )
    assert new["suite"].startswith("passes (")
    table = (tmp_path / "matrix.md").read_text()
    row = (
        "| 0.28.0 | **yes** | **yes** | buggy | applies, applies, applies "
        "| #51585: installed, #53821: installed "
        "| bug reproduced (59 ran, 3 could not run: 38 failed) |"
    )
    assert row in table
    assert "- 0.28.0: could not run: rocm_then_triton_mla[q=3]: " in table
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


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("how", ["PIP_INDEX_URL", "PIP_CONFIG_FILE"])
def test_matrix_with_an_unreachable_index_is_an_environment_error(
    tmp_path: Path, how: str
) -> None:
    """Exit 3 with the reason, not "lists no releases" (a refusal, exit 2)."""
    url = f"http://127.0.0.1:{_closed_port()}/simple"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_INDEX")}
    if how == "PIP_INDEX_URL":
        env["PIP_INDEX_URL"] = url
    else:
        config = tmp_path / "pip.conf"
        config.write_text(f"[global]\nindex-url = {url}\n")
        env["PIP_CONFIG_FILE"] = str(config)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm_patchkit",
            "matrix",
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert f"package index {url}/vllm/ is unreachable" in proc.stderr
    assert "Connection refused" in proc.stderr
    assert not (tmp_path / "matrix.json").exists()


ROW_SCRIPT = """
import json, sys
from vllm_patchkit.matrix import build_matrix, cache_key
from vllm_patchkit.series import load_series
series = load_series()
rows = build_matrix(series, [sys.argv[1]], with_suite=False)
print(json.dumps({"key": cache_key(series, False), "cached": rows[0].cached}))
"""


def _row(project: Path, version: str) -> dict[str, object]:
    """One matrix row computed by a copy of the project (its own checkers)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(project / "tools"), str(project)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", ROW_SCRIPT, version],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=600,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


CHECKERS = [
    "tools/vllm_patchkit/invariants.py",
    "vllm_overlay/capture_shape.py",
    "vllm_overlay/install.py",
    # Wherever the series' invariant check lives (apply.py today).
    str(Path(inspect.getsourcefile(invariant_holds) or "").relative_to(PROJECT_ROOT)),
    "tools/vllm_patchkit/regression/verdict.py",
    "tools/vllm_patchkit/matrix.py",
    "patches/series",
]


def test_a_changed_checker_never_serves_a_stale_row(tmp_path: Path) -> None:
    """Each file that decides a row, changed in a copy: the row is recomputed."""
    project = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("tools", "vllm_overlay", "patches", "pyproject.toml"):
        source = PROJECT_ROOT / part
        if source.is_dir():
            shutil.copytree(source, project / part, ignore=ignore)
        else:
            shutil.copy2(source, project / part)
    first = _row(project, "0.29.0")
    again = _row(project, "0.29.0")
    assert again == {"key": first["key"], "cached": True}
    keys = {first["key"]}
    # A change no earlier run made: rows are cached across runs (the user's
    # cache), and a run of the same code made the same fixed change before.
    change = f"\n# changed by run {uuid.uuid4().hex}\n"
    for name in CHECKERS:
        path = project / name
        path.write_text(path.read_text() + change)
        row = _row(project, "0.29.0")
        assert row["cached"] is False, f"{name} changed, the row came from the cache"
        assert row["key"] not in keys, name
        keys.add(row["key"])
