"""Inputs of ``context_attention_fwd`` for a batch of requests, as vLLM lays them out.

Every token's K/V (context and new) is written to the paged cache through a
shuffled block table, the way vLLM's cache update does before attention, and
the new tokens' K/V are also passed densely. The plain per-request K/V are
kept for the reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch


@dataclass(frozen=True)
class Case:
    """One batch: ``seqs`` holds (new tokens, cached context tokens) per request."""

    seqs: tuple[tuple[int, int], ...]
    num_heads: int = 4
    num_kv_heads: int = 2
    head_size: int = 64
    page: int = 16
    dtype: torch.dtype = torch.float32
    sliding_window: int | None = None
    alibi: bool = False
    sinks: bool = False
    causal: bool = True
    skip_decode: bool = False
    kv_from_cache: bool = False
    kv_cache: str = "auto"  # or "fp8" (e4m3) / "fp8_e5m2", stored as uint8
    sm_scale: float | None = None
    seed: int = 0

    def with_(self, **changes: Any) -> Case:
        return replace(self, **changes)


@dataclass
class Inputs:
    case: Case
    args: dict[str, Any]
    keys: list[torch.Tensor] = field(default_factory=list)  # [seq, kv_heads, d]
    values: list[torch.Tensor] = field(default_factory=list)

    def call(self, fn: Any, **overrides: Any) -> torch.Tensor:
        """Run a ``context_attention_fwd`` on a fresh copy of ``o``; return it."""
        args = {**self.args, **overrides}
        args["o"] = args["o"].clone()
        fn(**args)
        return args["o"]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def build(case: Case, device: str = "cpu") -> Inputs:
    gen = torch.Generator().manual_seed(case.seed)
    dt, page, kvh, d = case.dtype, case.page, case.num_kv_heads, case.head_size
    x = 16 // torch.tensor([], dtype=dt).element_size()

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float32)

    blocks = [_cdiv(q + c, page) for q, c in case.seqs]
    width = max(blocks, default=0) + 1  # a spare column, as in padded tables
    num_blocks = sum(blocks) + 2
    perm = torch.randperm(num_blocks, generator=gen).to(torch.int32)
    table = torch.zeros(len(case.seqs), width, dtype=torch.int32)
    k_cache = randn(num_blocks, kvh, d // x, page, x)  # stale data elsewhere
    v_cache = randn(num_blocks, kvh, d, page)
    q_rows, k_rows, v_rows, keys, values = [], [], [], [], []
    used = 0
    for i, (q_len, c_len) in enumerate(case.seqs):
        table[i, : blocks[i]] = perm[used : used + blocks[i]]
        used += blocks[i]
        seq_k, seq_v = randn(q_len + c_len, kvh, d), randn(q_len + c_len, kvh, d)
        seq_k, seq_v = seq_k.to(dt), seq_v.to(dt)
        for t in range(q_len + c_len):
            blk, off = int(table[i, t // page]), t % page
            k_cache[blk, :, :, off, :] = seq_k[t].view(kvh, d // x, x).float()
            v_cache[blk, :, :, off] = seq_v[t].float()
        keys.append(seq_k)
        values.append(seq_v)
        q_rows.append(randn(q_len, case.num_heads, d).to(dt))
        k_rows.append(seq_k[c_len:])
        v_rows.append(seq_v[c_len:])
    starts = [0]
    for q_len, _ in case.seqs:
        starts.append(starts[-1] + q_len)
    q = torch.cat(q_rows) if q_rows else torch.empty(0, case.num_heads, d, dtype=dt)
    k = torch.cat(k_rows) if k_rows else torch.empty(0, kvh, d, dtype=dt)
    v = torch.cat(v_rows) if v_rows else torch.empty(0, kvh, d, dtype=dt)
    one = torch.ones((), dtype=torch.float32)
    args: dict[str, Any] = {
        "q": q,
        "k": None if case.kv_from_cache else k,
        "v": None if case.kv_from_cache else v,
        # A sentinel, so rows a kernel must not write are seen untouched.
        "o": torch.full_like(q, 7.0),
        "kv_cache_dtype": "auto",
        "k_cache": k_cache.to(dt),
        "v_cache": v_cache.to(dt),
        "b_loc": table,
        "b_start_loc": torch.tensor(starts, dtype=torch.int32),
        "b_seq_len": torch.tensor([q + c for q, c in case.seqs], dtype=torch.int32),
        "max_seq_len": max((q + c for q, c in case.seqs), default=0),
        "max_input_len": max((q for q, _ in case.seqs), default=0),
        "k_scale": one,
        "v_scale": one.clone(),
        "alibi_slopes": alibi_slopes(case.num_heads) if case.alibi else None,
        "sliding_window": case.sliding_window,
        "sm_scale": case.sm_scale,
        "skip_decode": case.skip_decode,
        "sinks": randn(case.num_heads) if case.sinks else None,
        "causal": case.causal,
    }
    args = {
        name: value.to(device) if isinstance(value, torch.Tensor) else value
        for name, value in args.items()
    }
    keys = [t.to(device) for t in keys]
    values = [t.to(device) for t in values]
    inputs = Inputs(case, args, keys, values)
    if case.kv_cache != "auto":
        inputs = to_fp8_cache(inputs, _FP8[case.kv_cache], case.kv_cache)
    return inputs


# What vLLM's CPU and CUDA platforms use; ROCm MI300 uses e4m3fnuz.
_FP8 = {"fp8": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The geometric ALiBi slopes of Press et al. (power-of-two head counts)."""
    base = 2.0 ** (-8.0 / num_heads)
    return torch.tensor([base ** (h + 1) for h in range(num_heads)])


def to_fp8_cache(
    inputs: Inputs, fp8: torch.dtype, kv_cache_dtype: str, scale: float = 0.5
) -> Inputs:
    """The same batch with an FP8 KV cache stored as uint8, as vLLM keeps it.

    The reference keys/values of cached tokens become the dequantized cache
    contents, which is all a kernel can see.
    """
    a, case = inputs.args, inputs.case
    k_scale = torch.full((), scale, device=a["k_cache"].device)
    v_scale = torch.full((), scale * 0.75, device=a["k_cache"].device)
    k_q = (a["k_cache"].float() / k_scale).to(fp8)
    v_q = (a["v_cache"].float() / v_scale).to(fp8)
    k_deq = k_q.float() * k_scale
    v_deq = v_q.float() * v_scale
    keys, values = [], []
    for i, (q_len, c_len) in enumerate(case.seqs):
        cached = q_len + c_len if case.kv_from_cache else c_len
        seq_k, seq_v = inputs.keys[i].clone(), inputs.values[i].clone()
        for t in range(cached):
            blk, off = int(a["b_loc"][i, t // case.page]), t % case.page
            seq_k[t] = k_deq[blk, :, :, off, :].reshape(seq_k.shape[1:])
            seq_v[t] = v_deq[blk, :, :, off]
        keys.append(seq_k)
        values.append(seq_v)
    args = dict(
        a,
        kv_cache_dtype=kv_cache_dtype,
        k_cache=k_q.view(torch.uint8),
        v_cache=v_q.view(torch.uint8),
        k_scale=k_scale,
        v_scale=v_scale,
    )
    return Inputs(case, args, keys, values)
