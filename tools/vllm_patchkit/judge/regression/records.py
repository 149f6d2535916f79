"""What a scenario run records: its outcome, and where an exception came from.

Shared by :mod:`.scenarios` and each fix's runs, and read by
:mod:`.verdict`; it imports neither torch nor vLLM, so the verdict side can
be loaded by a command that never runs a scenario.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from vllm_overlay.fixes import FIXES

DECODE_QUERY_LENS = (1, 3)
"""1: plain decode; 3: speculative decoding with two draft tokens."""

CODE_UNDER_TEST_FILES = tuple(fix.record.source_file for fix in FIXES)
"""The files the fixes change, whose code the suite judges (a mutant's copy
included): each fix record's ``source_file``."""


@dataclass
class Outcome:
    scenario: str
    decode_query_len: int
    status: str
    """``ok``; ``raised`` (the code under test, or a builder after it, raised);
    ``unavailable`` (could not run here: the reason is in ``error``); or
    ``error`` (the harness failed before the behaviour could be seen; a
    set-up step that failed is named in ``error["step"]``)."""
    facts: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def unavailable(
    scenario: str, decode_query_len: int, why: str, **facts: Any
) -> Outcome:
    """A scenario that could not run here, and why."""
    error = {"type": "unavailable", "message": why}
    return Outcome(scenario, decode_query_len, "unavailable", facts, error)


def vllm_relpath(filename: str) -> str:
    """``.../vllm/v1/x.py`` -> ``vllm/v1/x.py`` (the last ``/vllm/`` counts)."""
    _, sep, tail = filename.rpartition("/vllm/")
    return f"vllm/{tail}" if sep else filename


def error_info(exc: BaseException) -> dict[str, Any]:
    """The exception and the innermost vLLM frame that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    vllm_frames = [
        f
        for f in frames
        if "/vllm/" in f.filename and "vllm_patchkit" not in f.filename
    ] or frames
    info: dict[str, Any] = {
        "type": type(exc).__name__,
        "message": str(exc),
        "in_code_under_test": involves_code_under_test(exc),
    }
    if vllm_frames:
        last = vllm_frames[-1]
        info.update(
            file=last.filename,
            relpath=vllm_relpath(last.filename),
            line=last.lineno,
            function=last.name,
            source=(last.line or "").strip(),
        )
    return info


def describe(error: BaseException | dict[str, Any]) -> str:
    """An exception (or its :func:`error_info`) in one line:
    ``Type at vllm/file.py:line: message`` (the source line when the message
    is empty)."""
    if isinstance(error, BaseException):
        error = error_info(error)
    where = f" at {error['relpath']}:{error['line']}" if "relpath" in error else ""
    text = str(error.get("message", ""))[:200] or error.get("source", "")
    return f"{error.get('type')}{where}: {text}"


def involves_code_under_test(exc: BaseException) -> bool:
    """Did ``exc`` come through a function or method of a file a fix changes?

    Such an exception is the code under test misbehaving: a failure. Any
    other exception in a scenario is the harness or the host failing, and
    so is one raised while the module is imported (a missing dependency of
    this venv, or a file that does not compile): the behaviour was never
    reached. Chained exceptions (``raise ... from``) count too.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame in traceback.extract_tb(current.__traceback__):
            if frame.name != "<module>" and vllm_relpath(frame.filename) in (
                CODE_UNDER_TEST_FILES
            ):
                return True
        current = current.__cause__ or current.__context__
    return False


class SetupError(Exception):
    """The harness could not build a scenario's inputs on this tree: it
    called vLLM's API (a runner kernel, a constructor) the way another
    release wants it. The behaviour under test was never reached, so the
    check cannot judge; it is never "the bug reproduces"."""

    def __init__(self, step: str, cause: BaseException) -> None:
        super().__init__(f"cannot {step}: {describe(cause)}")
        self.step = step
        self.cause = cause


@contextmanager
def setting_up(step: str) -> Iterator[None]:
    """Run one set-up step of a scenario (``step``: what it does, as in
    "cannot <step>"). An exception that did not come through the code under
    test becomes :class:`SetupError`; one that did is the code under test
    failing, and propagates as it is."""
    try:
        yield
    except SetupError:
        raise
    except Exception as exc:
        if involves_code_under_test(exc):
            raise
        raise SetupError(step, exc) from exc


def raised_outcome(scenario: str, decode_query_len: int, exc: Exception) -> Outcome:
    """What a scenario's behaviour raising ``exc`` records: a set-up step
    that failed (:class:`SetupError`) is the harness's ``error``, with the
    step and the exception it failed with; anything else raised while the
    behaviour ran is ``raised``, a finding."""
    if isinstance(exc, SetupError):
        info = error_info(exc.cause)
        info["step"] = exc.step
        return Outcome(scenario, decode_query_len, "error", error=info)
    return Outcome(scenario, decode_query_len, "raised", error=error_info(exc))
