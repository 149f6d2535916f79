"""``matrix --shard/--releases`` and ``--merge``: the matrix split across
processes (one GitHub Actions job per release) gives the table one run gives.

Cheap on purpose: ``--no-suite`` rows (the release trees read, no suite run)
on 0.27.0..0.29.0, in a cache of the test's own that shares the trees; the
full cells (suite, overlay, audit) are exercised by merging the rows of
``docs/matrix.json`` split three ways.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.toolkit.cli_helpers import patchkit
from tests.toolkit.matrix_helpers import own_matrix_cache, project_copy
from vllm_patchkit.git.series import load_series
from vllm_patchkit.judge.matrix import Row
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.present.matrix_shards import (
    MatrixShardError,
    digests,
    parse_shard,
    row_file,
    shard_versions,
)
from vllm_patchkit.present.matrix_table import (
    README_END,
    README_START,
    markdown,
    to_json,
)

pytestmark = pytest.mark.release_trees

RANGE = ["--from", "0.27.0", "--to", "0.29.0", "--no-suite"]
RELEASES = ["0.27.0", "0.27.1", "0.28.0", "0.29.0"]
README = f"# Releases\n\n{README_START}\nold table\n{README_END}\n\nAfter.\n"


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "vllm_patchkit", "matrix", *args]


def _ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A warm-up run (fills the cache), the unsharded run, and three shards
    run at once as separate processes, every one reading the same cache."""
    root = tmp_path_factory.mktemp("shards")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **own_matrix_cache(root)}
    _ok(patchkit("matrix", *RANGE, "--output-dir", str(root / "warm"), env=env))
    whole = root / "whole"
    whole.mkdir()
    (whole / "README.md").write_text(README)
    readme = ["--readme", str(whole / "README.md")]
    _ok(patchkit("matrix", *RANGE, *readme, "--output-dir", str(whole), env=env))
    shards = {}
    for k in (1, 2, 3):
        out = root / f"shard-{k}"
        args = _command(*RANGE, "--shard", f"{k}/3", "--output-dir", str(out))
        shards[k] = (out, subprocess.Popen(args, env=env, stderr=subprocess.PIPE))
    for _, proc in shards.values():
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err.decode()
    files = [out / "matrix-rows.json" for out, _ in shards.values()]
    return {"root": root, "env": env, "whole": whole, "files": files}


def test_three_shards_merge_to_the_unsharded_table(runs: dict[str, Any]) -> None:
    files, whole = runs["files"], runs["whole"]
    dealt = [[r["version"] for r in json.loads(f.read_text())["rows"]] for f in files]
    assert dealt == [["0.27.0", "0.29.0"], ["0.27.1"], ["0.28.0"]]
    merged = runs["root"] / "merged"
    merged.mkdir()
    (merged / "README.md").write_text(README)
    # The files in any order: the table is in release order.
    proc = patchkit(
        "matrix",
        "--merge",
        *map(str, reversed(files)),
        "--readme",
        str(merged / "README.md"),
        "--output-dir",
        str(merged),
        env=runs["env"],
    )
    _ok(proc)

    table = (merged / "matrix.md").read_bytes()
    assert table == (whole / "matrix.md").read_bytes()
    assert b"| [0.27.1](#vllm-0271) |" in table
    assert b"| [0.28.0](#vllm-0280) | **yes** |" in table
    readme = (merged / "README.md").read_text()
    assert readme == (whole / "README.md").read_text()
    assert "old table" not in readme and "| [0.27.1](#vllm-0271) |" in readme
    ours, theirs = (
        json.loads((d / "matrix.json").read_text()) for d in (merged, whole)
    )
    assert ours["rows"] == theirs["rows"]
    assert [r["version"] for r in ours["rows"]] == RELEASES
    # The run summary: the same counts; the wall time is the slowest shard's.
    per_run = {"seconds", "jobs", "shards", "digests"}
    assert {k: v for k, v in ours["run"].items() if k not in per_run} == {
        k: v for k, v in theirs["run"].items() if k not in per_run
    }
    assert ours["run"]["jobs"] == 3
    assert [s["releases"] for s in ours["run"]["shards"]] == list(reversed(dealt))


def test_merge_refuses_a_gap_a_duplicate_and_other_code(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    one, two, three = runs["files"]
    out = ["--output-dir", str(tmp_path / "out")]

    gap = patchkit("matrix", "--merge", str(one), str(three), *out)
    assert gap.returncode == 2, gap.stderr
    assert "gap: no row file has 0.27.1 (of 4 releases in the range)" in gap.stderr

    again = tmp_path / "again" / "matrix-rows.json"
    again.parent.mkdir()
    shutil.copy(three, again)
    duplicate = patchkit(
        "matrix", "--merge", str(one), str(two), str(three), str(again), *out
    )
    assert duplicate.returncode == 2, duplicate.stderr
    assert f"duplicate row: 0.28.0 is in {three} and {again}" in duplicate.stderr

    # 0.27.1 from a copy of the project whose matrix code differs by a line.
    project = project_copy(tmp_path / "project")
    decider = project / "tools/vllm_patchkit/judge/matrix.py"
    decider.write_text(decider.read_text() + f"\n# changed {uuid.uuid4().hex}\n")
    env = {
        **runs["env"],
        "PYTHONPATH": os.pathsep.join([str(project / "tools"), str(project)]),
    }
    other = tmp_path / "other"
    proc = subprocess.run(
        _command(*RANGE, "--releases", "0.27.1", "--output-dir", str(other)),
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads((other / "matrix-rows.json").read_text())
    ours = json.loads(two.read_text())
    assert theirs["digests"]["code"] != ours["digests"]["code"]
    assert theirs["digests"]["environment"] == ours["digests"]["environment"]
    # The rows themselves are the same: only the digest tells them apart.
    assert theirs["rows"][0]["series"] == ours["rows"][0]["series"]

    mixed = patchkit(
        "matrix", "--merge", str(one), str(other / "matrix-rows.json"), str(three), *out
    )
    assert mixed.returncode == 2, mixed.stderr
    assert "code digests differ:" in mixed.stderr
    assert ours["digests"]["code"] in mixed.stderr
    assert theirs["digests"]["code"] in mixed.stderr
    assert not (tmp_path / "out").exists()


def _split(rows: list[dict[str, Any]], n: int) -> list[list[dict[str, Any]]]:
    return [rows[k::n] for k in range(n)]


def test_docs_rows_split_three_ways_merge_back_exactly(tmp_path: Path) -> None:
    """The measured rows of docs/matrix.json (every step's cells: suite
    counts, apply records, overlay, audit findings) survive a row file."""
    docs = json.loads((PROJECT_ROOT / "docs/matrix.json").read_text())
    rows = [Row.from_json(r) for r in docs["rows"]]
    versions = [r.version for r in rows]
    keys = digests(load_series())
    files = []
    for k, part in enumerate(_split(docs["rows"], 3), 1):
        shard = [Row.from_json(r) for r in part]
        data = row_file(shard, docs["run"], versions, ("stock", "audit"), keys)
        path = tmp_path / f"shard-{k}.json"
        path.write_text(json.dumps(data, indent=2) + "\n")
        files.append(str(path))

    proc = patchkit("matrix", "--merge", *files, "--output-dir", str(tmp_path))

    # docs/matrix.json has cells no step can judge (exit 3, as unsharded).
    assert proc.returncode == 3, proc.stderr
    assert "0.11.0 audit" in proc.stderr
    merged = json.loads((tmp_path / "matrix.json").read_text())
    assert merged["rows"] == to_json(rows, docs["run"])["rows"]
    assert (tmp_path / "matrix.md").read_text() == markdown(rows)
    assert merged["run"]["compute_seconds"] == docs["run"]["compute_seconds"]


def test_shards_partition_the_range_in_the_same_way_every_time() -> None:
    versions = [f"0.{m}.0" for m in range(11, 34)]
    for n in range(1, 6):
        shards = [shard_versions(versions, k, n) for k in range(1, n + 1)]
        assert sorted(v for s in shards for v in s) == sorted(versions)
        assert sum(map(len, shards)) == len(versions)
        assert max(map(len, shards)) - min(map(len, shards)) <= 1
        assert shards == [shard_versions(versions, k, n) for k in range(1, n + 1)]
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "3", "a/b", "-1/2"):
        with pytest.raises(MatrixShardError):
            parse_shard(bad)
    with pytest.raises(MatrixShardError, match="only 2 release"):
        shard_versions(versions[:2], 3, 3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shard", "4/3"], "--shard '4/3': give K/N"),
        (["--releases", "0.30.0"], "--releases 0.30.0: not a release of the range"),
        (["--releases", "0.28.0,0.28.0"], "--releases names 0.28.0 twice"),
        (["--shard", "1/2", "--readme", "README.md"], "--readme takes the whole"),
    ],
)
def test_a_subset_that_is_not_one_is_refused(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = patchkit("matrix", *RANGE, *args, "--output-dir", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "out").exists()


def test_merge_refuses_a_file_that_is_no_row_file(tmp_path: Path) -> None:
    docs = str(PROJECT_ROOT / "docs/matrix.json")
    proc = patchkit("matrix", "--merge", docs, "--output-dir", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert "not a matrix row file" in proc.stderr
    assert not (tmp_path / "matrix.md").exists()


def test_list_gives_the_workflow_its_job_matrix() -> None:
    proc = patchkit("matrix", *RANGE, "--list", "--json")
    _ok(proc)
    assert json.loads(proc.stdout) == RELEASES


def test_a_readme_without_both_markers_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    """The README check is the table writer's own: a README whose block has
    no end marker is refused up front, not after the table is written."""
    readme = tmp_path / "README.md"
    readme.write_text(f"# Releases\n\n{README_START}\nold table\n")
    out = tmp_path / "out"
    proc = patchkit("matrix", *RANGE, "--readme", str(readme), "--output-dir", str(out))
    assert proc.returncode == 2, proc.stderr
    assert f"no '{README_START}' ... '{README_END}' block" in proc.stderr
    assert not out.exists()
    assert readme.read_text().endswith("old table\n")
