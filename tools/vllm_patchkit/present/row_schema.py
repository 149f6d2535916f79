"""Every field of a matrix row file (and of ``matrix.json``) checked in one place.

A row file is written by a job that ran release code, and a merge turns it
into ``docs/matrix.md``, a pull request and a commit made with the write
token: nothing in it is used before it is checked here. The file itself
comes first (:func:`read_json`): a regular file (a FIFO or a device would
block the reader or never end), under a size cap checked before a byte is
parsed, UTF-8, one JSON value with no key given twice (the last one
silently winning would let two readers see two documents) and no NaN or
Infinity. Then each field gets its type, a release its syntax
(:func:`parse_release`, exactly, with nothing around it), a fix its label
from the registry, a step its name, and a list of releases no release
twice. Whatever fails is a :class:`RowFileError` (exit 2) naming the file
and the field. Strings that pass are still free text: the renderers escape
them (:mod:`vllm_patchkit.present.tables`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, NoReturn

from vllm_overlay.fixes import FIXES
from vllm_overlay.releases import parse_release
from vllm_overlay.tree_files import NotRead, read_regular
from vllm_patchkit.errors import InputError
from vllm_patchkit.judge.matrix import MEASURED, Cell, Row

FORMAT = "vllm-patchkit matrix rows 1"
MAX_BYTES = 16 * 1024 * 1024
"""A row file's cap, checked before parsing (docs/matrix.json's 33 releases
take under 1 MiB)."""

STEPS = ("stock", "applied", "overlay", "audit")
"""The cell fields of a row (``applied`` is the series step)."""
_DERIVED = {"cached", "seconds"}
"""What :meth:`Row.to_json` adds and :meth:`Row.from_json` recomputes."""
_STATUS = re.compile(r"[a-z][a-z -]{0,39}")
_HEX = re.compile(r"[0-9a-f]{7,64}")


class RowFileError(InputError):
    """A row file or matrix.json the matrix cannot use."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise ValueError(f"key {', '.join(map(repr, twice))} given twice in one object")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_json(path: Path, what: str, max_bytes: int) -> Any:
    """The JSON value in ``path``, a regular file of at most ``max_bytes``,
    read by the one reader of files others give us
    (:mod:`vllm_overlay.tree_files`: ``O_NONBLOCK``, so a FIFO is refused at
    once; the size checked on the open file; the read stops one byte past
    the cap)."""
    try:
        data = read_regular(path, max_bytes)
    except NotRead as exc:
        if exc.size is not None:
            raise RowFileError(
                f"{path}: {exc.size} bytes, more than {what} may hold "
                f"({max_bytes} bytes)"
            ) from exc
        raise RowFileError(f"{path}: {exc.why}, not {what}") from exc
    if not data.strip():
        raise RowFileError(f"{path}: empty, not {what}")
    try:
        text = data.decode("utf-8")
        return json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant
        )
    except UnicodeDecodeError as exc:
        raise RowFileError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise RowFileError(f"{path}: not JSON: {exc}") from exc
    except ValueError as exc:  # the hooks above
        raise RowFileError(f"{path}: {exc}") from exc
    except RecursionError as exc:
        raise RowFileError(f"{path}: nested too deeply for {what}") from exc


class _Where:
    """A file and the path to a field in it, for the one message shape."""

    def __init__(self, path: Path, field: str = "") -> None:
        self.path, self.field = path, field

    def __truediv__(self, key: str | int) -> _Where:
        step = f"[{key}]" if isinstance(key, int) else key
        joined = step if not self.field or isinstance(key, int) else f".{step}"
        return _Where(self.path, self.field + joined)

    def fail(self, want: str, value: Any = MISSING) -> NoReturn:
        got = "missing" if value is MISSING else f"not {_shown(value)}"
        raise RowFileError(
            f"{self.path}: {self.field or 'the document'}: {want}, {got}"
        )


def _shown(value: Any) -> str:
    text = repr(value)
    return type(value).__name__ + " " + (text[:57] + "..." if len(text) > 60 else text)


def _dict(where: _Where, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        where.fail("an object", value)
    return value


def _list(where: _Where, value: Any) -> list[Any]:
    if not isinstance(value, list):
        where.fail("a list", value)
    return value


def _str(where: _Where, value: Any) -> str:
    if not isinstance(value, str):
        where.fail("a string", value)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate JSON's \u escapes allow
            where.fail("text that UTF-8 can write", value)
    return value


def _bool(where: _Where, value: Any, none: bool = False) -> None:
    if not (isinstance(value, bool) or (none and value is None)):
        where.fail("true, false" + (" or null" if none else ""), value)


def _count(where: _Where, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        where.fail("a whole number, 0 or more", value)
    return value


def _seconds(where: _Where, value: Any) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:
        where.fail("a number of seconds, 0 or more", value)


def release(where: _Where, value: Any) -> str:
    """A release as :func:`parse_release` reads it, with nothing around it."""
    text = _str(where, value)
    if text != text.strip() or parse_release(text) is None:
        where.fail("a vLLM release such as 0.28.0", value)
    return text


def _keys(where: _Where, data: dict[str, Any], cls: type, extra: set[str]) -> None:
    """No key the dataclass does not have, and every key it cannot default."""
    known = {f.name for f in fields(cls)} | extra
    unknown = sorted(set(data) - known)
    if unknown:
        (where / unknown[0]).fail(
            "not a field of a " + cls.__name__.lower(), data[unknown[0]]
        )
    for f in fields(cls):
        if f.default is MISSING and f.default_factory is MISSING and f.name not in data:
            (where / f.name).fail(f"a {cls.__name__.lower()} field")


def _counts(where: _Where, value: Any) -> None:
    if value is None:
        return
    for key, item in _dict(where, value).items():
        if key == "not_run":
            for i, entry in enumerate(_list(where / key, item)):
                at = where / key / i
                entry = _dict(at, entry)
                for name in ("name", "why"):
                    _str(at / name, entry.get(name, MISSING))
                if "status" in entry:
                    _str(at / "status", entry["status"])
        elif key in ("ran", "passed", "failed"):
            _count(where / key, item)


def _detail(where: _Where, value: Any) -> None:
    detail = _dict(where, value)
    if "why" in detail:
        _str(where / "why", detail["why"])
    if detail.get("findings") is not None:
        for i, finding in enumerate(_list(where / "findings", detail["findings"])):
            at = where / "findings" / i
            finding = _dict(at, finding)
            if "victims" in finding:
                _list(at / "victims", finding["victims"])


def cell(where: _Where, value: Any) -> None:
    data = _dict(where, value)
    _keys(where, data, Cell, set())
    status = _str(where / "status", data["status"])
    if not _STATUS.fullmatch(status):
        (where / "status").fail("a status word such as passes", status)
    _str(where / "text", data["text"])
    _seconds(where / "seconds", data.get("seconds", 0.0))
    _counts(where / "counts", data.get("counts"))
    _detail(where / "detail", data.get("detail", {}))
    for name in ("cached", "transient"):
        _bool(where / name, data.get(name, False))


FIX_LABELS = frozenset(fix.pr for fix in FIXES)
"""The fix columns a row may have: the registry's PR labels."""


def row(where: _Where, value: Any) -> str:
    """Check one row; its release."""
    data = _dict(where, value)
    _keys(where, data, Row, _DERIVED)
    version = release(where / "version", data["version"])
    commit = _str(where / "commit", data["commit"])
    if not _HEX.fullmatch(commit):
        (where / "commit").fail("a git commit id (hex)", commit)
    _bool(where / "affected", data["affected"], none=True)
    for label, needed in _dict(where / "fixes", data["fixes"]).items():
        if label not in FIX_LABELS:
            (where / "fixes").fail(
                f"fix labels of the registry ({', '.join(sorted(FIX_LABELS))})", label
            )
        _bool(where / "fixes" / label, needed, none=True)
    for name in ("shape", "series", "overlay_plan"):
        _str(where / name, data[name])
    if data["torch_pin"] is not None:
        _str(where / "torch_pin", data["torch_pin"])
    if data["runtime"] is not None:
        runtime = _dict(where / "runtime", data["runtime"])
        if runtime.get("torch") is not None:
            _str(where / "runtime" / "torch", runtime["torch"])
        for name in ("extras", "missing"):
            if runtime.get(name) is not None:
                at = where / "runtime" / name
                for i, item in enumerate(_list(at, runtime[name])):
                    _str(at / i, item)
    for step in STEPS:
        cell(where / step, data[step])
    _seconds(where / "static_seconds", data.get("static_seconds", 0.0))
    _bool(where / "static_cached", data.get("static_cached", False))
    if "cached" in data:
        _bool(where / "cached", data["cached"])
    if "seconds" in data:
        _seconds(where / "seconds", data["seconds"])
    return version


def rows(where: _Where, value: Any) -> list[Row]:
    """A non-empty list of checked rows, as :class:`Row` objects."""
    items = _list(where, value)
    if not items:
        where.fail("at least one row", items)
    named = [row(where / i, item) for i, item in enumerate(items)]
    twice = sorted({v for v in named if named.count(v) > 1})
    if twice:
        where.fail("one row per release", ", ".join(twice))
    return [Row.from_json(item) for item in items]


def _unique_releases(where: _Where, value: Any) -> list[str]:
    items = _list(where, value)
    if not items:
        where.fail("at least one release", items)
    named = [release(where / i, item) for i, item in enumerate(items)]
    twice = sorted({v for v in named if named.count(v) > 1})
    if twice:
        where.fail("each release once", ", ".join(twice))
    return named


def _digests(where: _Where, value: Any) -> None:
    digests = _dict(where, value)
    for name in ("code", "environment"):
        text = _str(where / name, digests.get(name, MISSING))
        if not _HEX.fullmatch(text):
            (where / name).fail("a hex digest", text)
    versions = _dict(where / "versions", digests.get("versions", MISSING))
    if not versions:
        (where / "versions").fail("the Python, torch and git versions", versions)
    for name, text in versions.items():
        _str(where / "versions" / name, text)


def _run(where: _Where, value: Any) -> dict[str, Any]:
    run = _dict(where, value)
    _seconds(where / "seconds", run.get("seconds", MISSING))
    jobs = _count(where / "jobs", run.get("jobs", MISSING))
    if jobs < 1:
        (where / "jobs").fail("at least 1", jobs)
    return run


def read_row_file(path: Path) -> dict[str, Any]:
    """A row file (``matrix --shard/--releases``), every field checked."""
    at = _Where(path)
    data = _dict(at, read_json(path, "a matrix row file", MAX_BYTES))
    if data.get("format") != FORMAT:
        raise RowFileError(
            f"{path}: not a matrix row file (no format {FORMAT!r}; "
            "write one with matrix --shard or --releases)"
        )
    known = {"format", "digests", "steps", "releases", "run", "rows"}
    for key in sorted(set(data) - known):
        (at / key).fail("not a field of a row file", data[key])
    _digests(at / "digests", data.get("digests", MISSING))
    steps = _list(at / "steps", data.get("steps", MISSING))
    for i, step in enumerate(steps):
        if step not in MEASURED:
            (at / "steps" / i).fail(f"one of {', '.join(MEASURED)}", step)
    if len(set(steps)) != len(steps):
        (at / "steps").fail("each step once", steps)
    _unique_releases(at / "releases", data.get("releases", MISSING))
    _run(at / "run", data.get("run", MISSING))
    rows(at / "rows", data.get("rows", MISSING))
    return data


def read_table(path: Path) -> tuple[list[Row], dict[str, Any]]:
    """``matrix.json`` (what a run or a merge wrote): its rows and run."""
    at = _Where(path)
    data = _dict(at, read_json(path, "a matrix.json", MAX_BYTES))
    return rows(at / "rows", data.get("rows", MISSING)), _run(
        at / "run", data.get("run", MISSING)
    )
