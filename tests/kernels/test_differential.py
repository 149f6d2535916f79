"""The overlay kernel against a float64 PyTorch reference and vLLM 0.28.0's kernel.

Both kernels run under the memory checker on the same inputs: valid
metadata must never make either of them leave its tensors.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from vllm.v1.attention.ops.prefix_prefill import (
    context_attention_fwd as upstream_fwd,
)

from tests.kernels.inputs import Case, build
from tests.kernels.reference import reference
from tests.kernels.strategies import cases, upstream_supports
from tests.kernels.tolerances import VS_REFERENCE, VS_UPSTREAM, assert_close
from vllm_overlay.v1.attention.ops.prefix_prefill import context_attention_fwd
from vllm_patchkit.judge.memcheck import memcheck

pytestmark = pytest.mark.kernels

_SETTINGS = {
    "deadline": None,
    "derandomize": True,  # the same examples on every run and machine
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def _events(case: Case) -> None:
    """Feature tallies for ``--hypothesis-show-statistics``."""
    event(f"dtype={case.dtype}, page={case.page}, head={case.head_size}")
    event(f"query heads per KV head={case.num_heads // case.num_kv_heads}")
    for name in ("alibi", "sinks", "skip_decode", "kv_from_cache"):
        if getattr(case, name):
            event(name)
    event(f"kv cache {case.kv_cache}")
    event("window" if case.sliding_window else "no window")
    event("causal" if case.causal else "non-causal")
    event("vs upstream" if upstream_supports(case) else "vs reference only")


def check(case: Case) -> None:
    inputs = build(case)
    expected = reference(inputs)
    with memcheck():
        ours = inputs.call(context_attention_fwd)
    assert_close(ours, expected, VS_REFERENCE[case.dtype])
    if upstream_supports(case):
        with memcheck():
            theirs = inputs.call(upstream_fwd)
        assert_close(ours, theirs, VS_UPSTREAM[case.dtype])


FEATURES = {
    "gqa4-fp16-page32": Case(((7, 40), (1, 9)), 4, 1, 64, 32, torch.float16),
    "mqa8-head80": Case(((5, 20), (3, 0)), 8, 1, 80, 16),
    "head96-page64-window": Case(((9, 70), (4, 3)), 4, 2, 96, 64, sliding_window=5),
    "head112-sinks-noncausal": Case(
        ((6, 17),), 4, 1, 112, 16, sinks=True, causal=False
    ),
    "head192-kv-from-cache": Case(((6, 33), (2, 0)), 2, 1, 192, 16, kv_from_cache=True),
    "page544-crossing": Case(((5, 540), (3, 2)), 2, 1, 64, 544, torch.float16),
    "alibi-skip-decode": Case(
        ((6, 30), (1, 12), (4, 0)), 2, 2, 64, 16, alibi=True, skip_decode=True
    ),  # fmt: skip
    "alibi-window-sinks": Case(
        ((8, 40),), 4, 2, 64, 16, sliding_window=9, alibi=True, sinks=True
    ),  # fmt: skip
    "padded-requests": Case(((4, 10), (0, 0), (0, 1)), 2, 1, 64, 16),
    "fp32-sm-scale": Case(((3, 25), (2, 5)), 2, 2, 128, 32, sm_scale=0.07),
    # FP8 KV caches dequantized to fp16/fp32: the interpreter's FP8 decoding
    # is exact for finite values (FP8 *output* needs rounding: GPU tier).
    "fp8-e4m3-kv-fp16": Case(
        ((6, 40), (2, 9)), 4, 2, 64, 16, torch.float16, kv_cache="fp8"
    ),  # fmt: skip
    "fp8-e5m2-kv-cached": Case(
        ((5, 20),), 2, 1, 80, 32, kv_from_cache=True, kv_cache="fp8_e5m2"
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", FEATURES.values(), ids=FEATURES.keys())
def test_feature(case: Case) -> None:
    check(case)


@settings(max_examples=20, **_SETTINGS)
@given(case=cases())
def test_random_batches(case: Case) -> None:
    _events(case)
    check(case)


@pytest.mark.slow
@settings(max_examples=200, **_SETTINGS)
@given(case=cases(max_programs=6))
def test_random_batches_slow(case: Case) -> None:
    _events(case)
    check(case)


def test_block_table_of_pointers() -> None:
    """``is_block_table_ptr``: entries are byte addresses of K cache blocks."""
    inputs = build(Case(((5, 40), (3, 20)), 4, 2, 64, 16))
    cache = inputs.args["k_cache"]
    ids = inputs.args["b_loc"].long()
    pointers = cache.data_ptr() + ids * cache.stride(0) * cache.element_size()
    pointers[ids == 0] = 0  # unused entries, as vLLM leaves them
    kwargs = {"b_loc": pointers, "is_block_table_ptr": True}
    with memcheck():
        ours = inputs.call(context_attention_fwd, **kwargs)
        theirs = inputs.call(upstream_fwd, **kwargs)
    assert_close(ours, reference(inputs), VS_REFERENCE[torch.float32])
    assert_close(ours, theirs, VS_UPSTREAM[torch.float32])
