"""Where an exception came from: the innermost vLLM line, never the toolkit's.

:func:`vllm_patchkit.judge.regression.records.error_info` locates a raised
exception for every report (the suite's outcomes, the audit's runs, the
overlay probe); :func:`~vllm_patchkit.judge.regression.records.describe`
says it in one line. The frames are real: code compiled under the file
names it would have in a vLLM tree and in a checkout of this project that
sits in a directory named ``vllm``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vllm_patchkit.judge.regression.records import describe, error_info

VLLM_FILE = "/venv/lib/python3.11/site-packages/vllm/v1/attention/fake.py"
TOOLKIT_FILE = "/home/dev/vllm/vllm-overlay/tools/vllm_patchkit/judge/fake.py"


def _function(filename: str, source: str, name: str, **scope: object) -> Callable:
    namespace: dict[str, object] = dict(scope)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]  # type: ignore[return-value]


def _raised(call: Callable[[], object]) -> BaseException:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


def test_the_innermost_vllm_line_is_named() -> None:
    build = _function(
        VLLM_FILE, "def build():\n    raise ValueError('boom')\n", "build"
    )
    exc = _raised(build)
    info = error_info(exc)
    assert (info["relpath"], info["line"]) == ("vllm/v1/attention/fake.py", 2)
    assert describe(exc) == "ValueError at vllm/v1/attention/fake.py:2: boom"
    assert describe(info) == describe(exc)


def test_a_toolkit_frame_under_a_vllm_directory_is_not_vllm() -> None:
    """The harness raising from inside a vLLM call: blamed on vLLM's line."""
    harness = _function(
        TOOLKIT_FILE, "def check():\n    raise TypeError('harness')\n", "check"
    )
    build = _function(
        VLLM_FILE, "def build():\n    x = 1\n    check()\n", "build", check=harness
    )
    info = error_info(_raised(build))
    assert (info["relpath"], info["line"]) == ("vllm/v1/attention/fake.py", 3)
