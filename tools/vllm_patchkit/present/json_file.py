"""A JSON document read from a file another machine wrote: bounded, and never
a wait.

The matrix's row files come from jobs that ran release code, so the file
itself is input to distrust before its fields are: it must be a regular file
(a FIFO or a device would block the reader or never end), no bigger than a
cap checked before a byte is parsed, UTF-8, one JSON value with no key given
twice (the last one silently winning would let two readers see two
documents) and no NaN or Infinity (not JSON). Anything else is an
:class:`~vllm_patchkit.errors.InputError` naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vllm_overlay.tree_files import NotRead, read_regular
from vllm_patchkit.errors import InputError


class JsonFileError(InputError):
    """A file that is not one bounded JSON document (refused, exit 2)."""


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
            raise JsonFileError(
                f"{path}: {exc.size} bytes, more than {what} may hold "
                f"({max_bytes} bytes)"
            ) from exc
        raise JsonFileError(f"{path}: {exc.why}, not {what}") from exc
    if not data.strip():
        raise JsonFileError(f"{path}: empty, not {what}")
    try:
        text = data.decode("utf-8")
        return json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant
        )
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise JsonFileError(f"{path}: not JSON: {exc}") from exc
    except ValueError as exc:  # the hooks above
        raise JsonFileError(f"{path}: {exc}") from exc
    except RecursionError as exc:
        raise JsonFileError(f"{path}: nested too deeply for {what}") from exc
