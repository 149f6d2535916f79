"""Hypothesis strategies for batches of prefix-prefill requests.

Sizes are kept small because upstream's kernel runs one interpreted program
per (request, query head) and takes about 0.2 s per program on the CPU.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from tests.kernels.inputs import Case

HEAD_SIZES = (64, 80, 96, 112, 128, 192)  # 80..192: not powers of two
PAGES = (16, 32, 64, 544)  # 544: Qwen3-Next's block size


@st.composite
def cases(draw: st.DrawFn, max_programs: int = 8) -> Case:
    """A batch of 1-3 requests with every optional feature drawn independently.

    ``max_programs`` bounds requests x query heads (upstream's grid).
    """
    num_kv_heads = draw(st.sampled_from((1, 2)))
    group = draw(st.sampled_from((1, 2, 4, 8)).filter(lambda g: g * num_kv_heads <= 8))
    num_heads = num_kv_heads * group
    page = draw(st.sampled_from(PAGES))
    max_requests = max(1, min(3, max_programs // num_heads))
    n = draw(st.integers(1, max_requests))
    # Long contexts only where they cross a 544-token block.
    context = st.integers(0, 80)
    if page == 544:
        context = st.one_of(context, st.integers(530, 560))
    seqs = tuple(
        (draw(st.integers(0, 20)), draw(context)) for _ in range(n)
    )  # (new tokens, cached tokens); 0 new tokens is a padded request
    alibi = draw(st.booleans())
    return Case(
        seqs=seqs,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_size=draw(st.sampled_from(HEAD_SIZES)),
        page=page,
        dtype=draw(st.sampled_from((torch.float32, torch.float16))),
        sliding_window=draw(st.one_of(st.none(), st.integers(1, 48))),
        alibi=alibi,
        sinks=draw(st.booleans()),
        causal=True if alibi else draw(st.booleans()),
        skip_decode=draw(st.booleans()),
        kv_from_cache=draw(st.booleans()),
        kv_cache=draw(st.sampled_from(("auto", "auto", "fp8", "fp8_e5m2"))),
        sm_scale=draw(st.one_of(st.none(), st.floats(0.03, 0.2))),
        seed=draw(st.integers(0, 2**16)),
    )


def upstream_supports(case: Case) -> bool:
    """Whether vLLM 0.28.0's kernel defines the result for this case.

    Its ALiBi kernel rejects sinks and cached K/V and ignores the sliding
    window; the overlay supports all three, so those cases are checked
    against the reference only.
    """
    return not (
        case.alibi and (case.sinks or case.kv_from_cache or case.sliding_window)
    )
