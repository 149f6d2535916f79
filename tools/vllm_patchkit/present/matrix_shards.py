"""The matrix split across machines: a subset of the releases as a row file,
and the merge of row files into the table one unsharded run writes.

A row file holds the rows ``matrix.json`` holds, the release list of the
range it was cut from, the steps it ran, and the code and environment
digests that key the cell cache. A merge puts rows in one table only when
every file ran the same code in the same environment on the same steps,
and every release of the range has exactly one row.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from vllm_patchkit.errors import InputError
from vllm_patchkit.git.series import Series
from vllm_patchkit.judge.matrix import Row, code_digest, environment
from vllm_patchkit.present.matrix_table import summary, to_json
from vllm_patchkit.present.row_schema import FORMAT, read_row_file, read_table


class MatrixShardError(InputError):
    """A --shard or --releases that names no part of the range."""


class MatrixMergeError(InputError):
    """Row files that do not make one table: different code, environment,
    steps or range, a release twice, or a release missing."""


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` -> (K, N), 1 <= K <= N."""
    index, sep, total = text.partition("/")
    if sep and index.isdigit() and total.isdigit():
        k, n = int(index), int(total)
        if 1 <= k <= n:
            return k, n
    raise MatrixShardError(f"--shard {text!r}: give K/N with 1 <= K <= N, e.g. 2/3")


def shard_versions(versions: list[str], k: int, n: int) -> list[str]:
    """Shard ``k`` of ``n``: every n-th release from the k-th, dealt in index
    order, so old (slow, docs/matrix.json) and new releases share out evenly.
    The same range always gives the same shards."""
    chosen = versions[k - 1 :: n]
    if not chosen:
        raise MatrixShardError(
            f"--shard {k}/{n}: the range has only {len(versions)} release(s)"
        )
    return chosen


def pick_releases(versions: list[str], text: str) -> list[str]:
    """The releases ``text`` names (comma-separated), in range order; each
    must be a release of the range, named once."""
    named = [v.strip() for v in text.split(",") if v.strip()]
    if not named:
        raise MatrixShardError("--releases: name at least one release")
    twice = sorted({v for v in named if named.count(v) > 1})
    if twice:
        raise MatrixShardError(f"--releases names {', '.join(twice)} twice")
    outside = [v for v in named if v not in versions]
    if outside:
        raise MatrixShardError(
            f"--releases {', '.join(outside)}: not a release of the range "
            f"{versions[0]}..{versions[-1]} on the index"
        )
    return [v for v in versions if v in named]


def digests(series: Series) -> dict[str, Any]:
    """What keys the cache besides the release: the code (every step's
    deciders and the series) and the environment (Python, torch, git)."""
    env = environment()
    blob = json.dumps(env, sort_keys=True).encode()
    return {
        "code": code_digest(series),
        "environment": hashlib.sha256(blob).hexdigest()[:16],
        "versions": env,
    }


def row_file(
    rows: list[Row],
    run: dict[str, Any],
    releases: list[str],
    steps: tuple[str, ...],
    keys: dict[str, Any],
) -> dict[str, Any]:
    """The document a sharded run writes."""
    return {
        "format": FORMAT,
        "digests": keys,
        "steps": list(steps),
        "releases": releases,
        **to_json(rows, run),
    }


RowFile = tuple[Path, dict[str, Any]]
"""A row file's path and its document."""


def _same(files: list[RowFile], what: str, value: Any, why: str) -> None:
    """Refuse unless ``value(document)`` is one value across ``files``."""
    (first_path, first), *others = files
    for path, data in others:
        if value(data) != value(first):
            raise MatrixMergeError(
                f"{what} differ: {first_path} has {value(first)}, {path} has "
                f"{value(data)}; {why}"
            )


def merge(
    paths: list[Path], onto: Path | None = None
) -> tuple[list[Row], dict[str, Any]]:
    """The rows of every file in release order, and the merged run's
    summary; refused (exit 2) unless the files make one table.

    ``onto`` (a ``matrix.json``, the committed table): its rows stand for
    the releases of the range no row file has, so a new release, or a few
    measured again, join the table without a sweep of every release. The
    row files must still agree with each other; the rows kept were measured
    by the code of the run that wrote ``onto``, and the run record says
    which those are (``kept``)."""
    if not paths:
        raise MatrixMergeError("--merge: name the row files to merge")
    files = [(p, read_row_file(p)) for p in paths]
    again = "run every shard from one commit in one environment"
    _same(files, "code digests", lambda f: f["digests"]["code"], again)
    _same(files, "environments", lambda f: f["digests"]["versions"], again)
    _same(files, "steps", lambda f: f["steps"], "run every shard with one --steps")
    _same(files, "release lists", lambda f: f["releases"], "give every shard one range")
    releases: list[str] = files[0][1]["releases"]
    owner: dict[str, Path] = {}
    rows: dict[str, Row] = {}
    for path, data in files:
        for row in data["rows"]:
            version = row["version"]
            if version not in releases:
                raise MatrixMergeError(
                    f"{path}: {version} is not in the range's release list"
                )
            if version in owner:
                raise MatrixMergeError(
                    f"duplicate row: {version} is in {owner[version]} and {path}"
                )
            owner[version] = path
            rows[version] = Row.from_json(row)
    kept = _kept_rows(onto, releases, rows) if onto is not None else {}
    rows |= kept
    missing = [v for v in releases if v not in rows]
    if missing:
        raise MatrixMergeError(
            f"gap: no row file has {', '.join(missing)} (of {len(releases)} "
            "releases in the range); rerun those shards"
        )
    ordered = [rows[v] for v in releases]
    shards = [
        {
            "file": path.name,
            "releases": [r["version"] for r in data["rows"]],
            "seconds": data["run"]["seconds"],
            "jobs": data["run"]["jobs"],
        }
        for path, data in files
    ]
    # The shards ran side by side: the merged run took its slowest shard.
    wall = max(s["seconds"] for s in shards)
    run = summary(ordered, wall, sum(s["jobs"] for s in shards))
    run["shards"] = shards
    run["digests"] = files[0][1]["digests"]
    if onto is not None:
        run["kept"] = {
            "from": onto.name,
            "releases": [v for v in releases if v in kept],
            "why": "measured by the run that wrote it, not by these row files",
        }
    return ordered, run


def _kept_rows(
    onto: Path, releases: list[str], measured: dict[str, Row]
) -> dict[str, Row]:
    """``onto``'s rows of the releases the row files did not measure (each
    field checked, as a row file's); refused when it holds a release
    outside the range, which the merged table would drop unsaid."""
    table, _ = read_table(onto)
    outside = [row.version for row in table if row.version not in releases]
    if outside:
        raise MatrixMergeError(
            f"--onto {onto}: {', '.join(outside)} not in the row files' range "
            f"{releases[0]}..{releases[-1]}; give the row files that range"
        )
    return {row.version: row for row in table if row.version not in measured}
