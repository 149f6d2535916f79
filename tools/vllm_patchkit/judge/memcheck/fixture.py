"""The ``memcheck`` pytest fixture: the test body runs under the checker.

Use it from a conftest with ``from vllm_patchkit.judge.memcheck.fixture import
memcheck  # noqa: F401``; the conftest must set ``TRITON_INTERPRET=1``
before anything imports Triton.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vllm_patchkit.judge.memcheck import checker


@pytest.fixture
def memcheck() -> Iterator[checker.Stats]:
    """Check every interpreted access of the test; yields what was checked."""
    with checker.memcheck() as stats:
        yield stats
