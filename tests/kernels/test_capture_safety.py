"""Capture-time and padded metadata: where vLLM 0.28.0's kernel leaves its tensors.

Each scenario feeds both kernels the same inputs, with metadata as CUDA
graph capture or batch padding produces it. For upstream the test expects
the memory checker's violation (kernel, argument, byte offset: the findings
in docs/kernels.md); the overlay must stay in bounds, write nothing for the
requests whose metadata does not fit, and still compute the others exactly.
"""

from __future__ import annotations

import pytest
from vllm.v1.attention.ops.prefix_prefill import (
    context_attention_fwd as upstream_fwd,
)

from tests.kernels.inputs import build
from tests.kernels.reference import reference
from tests.kernels.scenarios import SCENARIOS, SENTINEL, Scenario, rows
from tests.kernels.tolerances import VS_REFERENCE, assert_close
from vllm_overlay.v1.attention.ops.prefix_prefill import context_attention_fwd
from vllm_patchkit.judge.memcheck import MemoryViolation, memcheck

pytestmark = pytest.mark.kernels


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_upstream(scenario: Scenario) -> None:
    inputs = build(scenario.case)
    overrides = scenario.overrides(inputs)
    if scenario.upstream is None:
        with memcheck() as seen:
            inputs.call(upstream_fwd, **overrides)
        assert seen.lanes > 0
        return
    kernel, argument, offset = scenario.upstream
    with pytest.raises(MemoryViolation) as caught, memcheck():
        inputs.call(upstream_fwd, **overrides)
    found = caught.value
    assert (found.kernel, found.argument, found.offset) == (
        kernel,
        argument,
        offset(inputs),
    ), str(found)


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_overlay(scenario: Scenario) -> None:
    inputs = build(scenario.case)
    expected = reference(inputs)
    with memcheck() as seen:
        out = inputs.call(context_attention_fwd, **scenario.overrides(inputs))
    assert seen.launches == 1
    for request in scenario.intact:
        where = rows(inputs, request)
        assert_close(out[where], expected[where], VS_REFERENCE[scenario.case.dtype])
    for request in scenario.untouched:
        assert (out[rows(inputs, request)] == SENTINEL).all()
