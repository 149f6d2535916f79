"""Prefix-prefill attention, capture-safe by construction.

A drop-in replacement for ``context_attention_fwd`` of vLLM 0.28.0
(``vllm/v1/attention/ops/prefix_prefill.py``): each request's new query
tokens attend to its cached context (paged, x-packed K cache) and, causally
or not, to its own new tokens.

Why an overlay kernel: upstream trusts its metadata. Under CUDA graph
capture the metadata is synthetic (offsets zeroed, ``seq_lens`` filled with
1, padded requests), and upstream then addresses memory outside its tensors
(vLLM #25985). This kernel checks each request's metadata against the real
extents of the tensors (rows of q/k/v/o, length of a block-table row, number
of cache blocks) before touching memory, and a request whose metadata is
inconsistent writes nothing. Every load and store is masked, so no metadata
can make it read or write outside its arguments.

One program handles a tile of (query token, query head) rows of one request
and one KV head, so K/V tiles are loaded once per KV head, not once per query
head (GQA/MQA).

Only torch and triton are imported here: the overlay plugin must stay light.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

__all__ = ["KernelLaunch", "context_attention_fwd", "prepare"]

_LOG2E = 1.4426950408889634


@triton.jit
def _request_bounds(
    Query_start,
    Seq_lens,
    req,
    num_rows,
    table_len,
    window,
    PAGE: tl.constexpr,
    USE_WINDOW: tl.constexpr,
    KV_FROM_CACHE: tl.constexpr,
):
    """Read one request's metadata and say whether it fits the tensors.

    Returns (start, query_len, ctx_len, first_block, num_blocks, ok): the
    request owns rows [start, start + query_len) of q/k/v/o and the cache
    blocks listed in its block-table row at [first_block, num_blocks).
    """
    start = tl.load(Query_start + req).to(tl.int64)
    stop = tl.load(Query_start + req + 1).to(tl.int64)
    seq_len = tl.load(Seq_lens + req).to(tl.int64)
    query_len = stop - start
    ctx_len = seq_len - query_len
    # Keys that live in the paged cache: the context, plus the new tokens
    # when they are not passed densely.
    cached_len = seq_len if KV_FROM_CACHE else ctx_len
    # The oldest key any query of this request can see.
    first_key = ctx_len * 0
    if USE_WINDOW:
        first_key = tl.maximum(ctx_len - window + 1, 0)
    first_block = first_key // PAGE
    num_blocks = (cached_len + PAGE - 1) // PAGE
    ok = (start >= 0) & (query_len >= 0) & (stop <= num_rows)
    ok = ok & (ctx_len >= 0) & (num_blocks <= table_len)
    return start, query_len, ctx_len, first_block, num_blocks, ok


@triton.jit
def _blocks_in_range(
    Block_table,
    table_row,
    first_block,
    num_blocks,
    stride_btc,
    num_cache_blocks,
    BLOCK: tl.constexpr,
):
    """Whether every block id this request reads names an existing block."""
    bad = tl.zeros([BLOCK], dtype=tl.int32)
    for i in range(first_block, num_blocks, BLOCK):
        idx = i + tl.arange(0, BLOCK)
        live = idx < num_blocks
        ids = tl.load(Block_table + table_row + idx * stride_btc, mask=live, other=0)
        ids = ids.to(tl.int64)
        bad += (live & ((ids < 0) | (ids >= num_cache_blocks))).to(tl.int32)
    return tl.sum(bad, axis=0) == 0


@triton.jit
def _cache_offsets(
    Block_table,
    table_row,
    stride_btc,
    pos,
    live,
    offs_d,
    kv_head,
    stride_kc_b,
    stride_kc_h,
    stride_kc_d,
    stride_kc_t,
    stride_kc_x,
    stride_vc_b,
    stride_vc_h,
    stride_vc_d,
    stride_vc_t,
    PAGE: tl.constexpr,
    X: tl.constexpr,
):
    """Element offsets of keys at positions ``pos`` in the paged caches.

    K cache: [num_blocks, num_kv_heads, head_size // X, PAGE, X], returned as
    [D, N]; V cache: [num_blocks, num_kv_heads, head_size, PAGE], as [N, D].
    Lanes that are not ``live`` never read the block table (they resolve to
    block 0 and the caller masks their K/V loads too).
    """
    slot = tl.load(Block_table + table_row + (pos // PAGE) * stride_btc, mask=live)
    block = tl.where(live, slot, 0).to(tl.int64)
    in_page = (pos % PAGE).to(tl.int64)
    off_k = (
        block[None, :] * stride_kc_b
        + kv_head * stride_kc_h
        + (offs_d[:, None] // X) * stride_kc_d
        + in_page[None, :] * stride_kc_t
        + (offs_d[:, None] % X) * stride_kc_x
    )
    off_v = (
        block[:, None] * stride_vc_b
        + kv_head * stride_vc_h
        + offs_d[None, :] * stride_vc_d
        + in_page[:, None] * stride_vc_t
    )
    return off_k, off_v


@triton.jit
def _scores(
    q,
    k,
    q_pos,
    k_pos,
    allowed,
    slope,
    qk_scale,
    USE_ALIBI: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """Base-2 logits of one tile; -inf where a key must not be seen."""
    s = tl.dot(q, k, input_precision=DOT_PRECISION) * qk_scale
    if USE_ALIBI:
        bias = (k_pos[None, :] - q_pos[:, None]).to(tl.float32)
        s += bias * (slope * 1.4426950408889634)[:, None]
    return tl.where(allowed, s, float("-inf"))


@triton.jit
def _softmax_step(m_i, l_i, acc, s, v, DOT_PRECISION: tl.constexpr):
    """One online-softmax update; rows that saw no key so far stay at zero."""
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s - m_ref[:, None])
    alpha = tl.math.exp2(m_i - m_ref)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(v.dtype), v, acc=acc, input_precision=DOT_PRECISION)
    return m_new, l_i, acc


@triton.jit
def _prefix_prefill_kernel(
    Q,
    K,
    V,
    Out,
    K_cache,
    V_cache,
    Block_table,
    Query_start,
    Seq_lens,
    K_scale,
    V_scale,
    Out_scale_inv,
    Sinks,
    Alibi_slopes,
    qk_scale,
    window,
    num_rows,
    table_len,
    num_cache_blocks,
    stride_qt,
    stride_qh,
    stride_qd,
    stride_kt,
    stride_kh,
    stride_kd,
    stride_vt,
    stride_vh,
    stride_vd,
    stride_ot,
    stride_oh,
    stride_od,
    stride_btr,
    stride_btc,
    stride_kc_b,
    stride_kc_h,
    stride_kc_d,
    stride_kc_t,
    stride_kc_x,
    stride_vc_b,
    stride_vc_h,
    stride_vc_d,
    stride_vc_t,
    QPK: tl.constexpr,
    HEAD: tl.constexpr,
    HEAD_PAD: tl.constexpr,
    X: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    USE_WINDOW: tl.constexpr,
    USE_ALIBI: tl.constexpr,
    USE_SINKS: tl.constexpr,
    SKIP_DECODE: tl.constexpr,
    KV_FROM_CACHE: tl.constexpr,
    KV_FP8: tl.constexpr,
    OUT_FP8: tl.constexpr,
    FP8_MIN: tl.constexpr,
    FP8_MAX: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """Grid: (request, KV head, tile of BLOCK_M (token, query head) rows)."""
    req = tl.program_id(0)
    kv_head = tl.program_id(1)
    row0 = tl.program_id(2) * BLOCK_M

    start, query_len, ctx_len, first_block, num_blocks, ok = _request_bounds(
        Query_start,
        Seq_lens,
        req,
        num_rows,
        table_len,
        window,
        PAGE,
        USE_WINDOW,
        KV_FROM_CACHE,
    )
    # Inconsistent metadata (capture-time dummies, padding) writes nothing;
    # so do tiles past the request's rows and, with skip_decode, decodes.
    skip = (ok == 0) | (row0 >= query_len * QPK)
    if SKIP_DECODE:
        skip = skip | (query_len == 1)
    if skip:
        return
    table_row = req.to(tl.int64) * stride_btr
    blocks_ok = _blocks_in_range(
        Block_table,
        table_row,
        first_block,
        num_blocks,
        stride_btc,
        num_cache_blocks,
        BLOCK_N,
    )
    if blocks_ok == 0:
        return

    rows = row0 + tl.arange(0, BLOCK_M)
    tok = rows // QPK
    head = kv_head * QPK + rows % QPK
    row_ok = tok < query_len
    offs_d = tl.arange(0, HEAD_PAD)
    d_ok = offs_d < HEAD
    offs_n = tl.arange(0, BLOCK_N)
    q_pos = ctx_len + tok  # absolute positions of the queries

    q = tl.load(
        Q
        + (start + tok)[:, None] * stride_qt
        + head[:, None] * stride_qh
        + offs_d[None, :] * stride_qd,
        mask=row_ok[:, None] & d_ok[None, :],
        other=0.0,
    )
    slope = tl.zeros([BLOCK_M], dtype=tl.float32)
    if USE_ALIBI:
        slope = tl.load(Alibi_slopes + head, mask=row_ok, other=0.0).to(tl.float32)
    if USE_SINKS:
        # A sink is one more logit in the denominator, with no value.
        sink = tl.load(Sinks + head, mask=row_ok, other=float("-inf"))
        m_i = sink.to(tl.float32) * 1.4426950408889634
        l_i = tl.where(m_i > float("-inf"), 1.0, 0.0)
    else:
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_PAD], dtype=tl.float32)
    if KV_FP8:
        # FP8 cache entries times their scale, in the query dtype (as upstream).
        k_scale = tl.load(K_scale)
        v_scale = tl.load(V_scale)

    # Keys a query at position p may see: (p - window, p] with a window.
    tok_lo = row0 // QPK
    tok_hi = tl.minimum((row0 + BLOCK_M - 1) // QPK, query_len - 1)
    key_lo = ctx_len * 0
    if USE_WINDOW:
        key_lo = tl.maximum(ctx_len + tok_lo - window + 1, 0)

    # 1) The cached context: positions [key_lo, ctx_len).
    for n0 in range(key_lo // BLOCK_N * BLOCK_N, ctx_len, BLOCK_N):
        pos = n0 + offs_n
        live = (pos >= key_lo) & (pos < ctx_len)
        off_k, off_v = _cache_offsets(
            Block_table,
            table_row,
            stride_btc,
            pos,
            live,
            offs_d,
            kv_head,
            stride_kc_b,
            stride_kc_h,
            stride_kc_d,
            stride_kc_t,
            stride_kc_x,
            stride_vc_b,
            stride_vc_h,
            stride_vc_d,
            stride_vc_t,
            PAGE,
            X,
        )
        k = tl.load(K_cache + off_k, mask=d_ok[:, None] & live[None, :], other=0.0)
        if KV_FP8:
            k = (k.to(tl.float32) * k_scale).to(q.dtype)
        allowed = row_ok[:, None] & live[None, :]
        if USE_WINDOW:
            allowed = allowed & (q_pos[:, None] - pos[None, :] < window)
        s = _scores(
            q, k, q_pos, pos, allowed, slope, qk_scale, USE_ALIBI, DOT_PRECISION
        )
        v = tl.load(V_cache + off_v, mask=live[:, None] & d_ok[None, :], other=0.0)
        if KV_FP8:
            v = (v.to(tl.float32) * v_scale).to(q.dtype)
        m_i, l_i, acc = _softmax_step(m_i, l_i, acc, s, v, DOT_PRECISION)

    # 2) The request's own new tokens: indices [new_lo, new_hi).
    new_lo = ctx_len * 0
    if USE_WINDOW:
        new_lo = tl.maximum(tok_lo - window + 1, 0)
    new_hi = tok_hi + 1 if CAUSAL else query_len
    for n0 in range(new_lo // BLOCK_N * BLOCK_N, new_hi, BLOCK_N):
        j = n0 + offs_n
        live = (j >= new_lo) & (j < new_hi)
        if KV_FROM_CACHE:
            off_k, off_v = _cache_offsets(
                Block_table,
                table_row,
                stride_btc,
                ctx_len + j,
                live,
                offs_d,
                kv_head,
                stride_kc_b,
                stride_kc_h,
                stride_kc_d,
                stride_kc_t,
                stride_kc_x,
                stride_vc_b,
                stride_vc_h,
                stride_vc_d,
                stride_vc_t,
                PAGE,
                X,
            )
            k = tl.load(K_cache + off_k, mask=d_ok[:, None] & live[None, :], other=0.0)
            if KV_FP8:
                k = (k.to(tl.float32) * k_scale).to(q.dtype)
            v = tl.load(V_cache + off_v, mask=live[:, None] & d_ok[None, :], other=0.0)
            if KV_FP8:
                v = (v.to(tl.float32) * v_scale).to(q.dtype)
        else:
            k = tl.load(
                K
                + (start + j)[None, :] * stride_kt
                + kv_head * stride_kh
                + offs_d[:, None] * stride_kd,
                mask=d_ok[:, None] & live[None, :],
                other=0.0,
            )
            v = tl.load(
                V
                + (start + j)[:, None] * stride_vt
                + kv_head * stride_vh
                + offs_d[None, :] * stride_vd,
                mask=live[:, None] & d_ok[None, :],
                other=0.0,
            )
        allowed = row_ok[:, None] & live[None, :]
        if CAUSAL:
            allowed = allowed & (j[None, :] <= tok[:, None])
        if USE_WINDOW:
            allowed = allowed & (tok[:, None] - j[None, :] < window)
        s = _scores(
            q, k, q_pos, ctx_len + j, allowed, slope, qk_scale, USE_ALIBI,
            DOT_PRECISION,
        )  # fmt: skip
        m_i, l_i, acc = _softmax_step(m_i, l_i, acc, s, v, DOT_PRECISION)

    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    if OUT_FP8:
        out = tl.clamp(out * tl.load(Out_scale_inv), FP8_MIN, FP8_MAX)
    tl.store(
        Out
        + (start + tok)[:, None] * stride_ot
        + head[:, None] * stride_oh
        + offs_d[None, :] * stride_od,
        out.to(Out.dtype.element_ty),
        mask=row_ok[:, None] & d_ok[None, :],
    )


def _platform_fp8_dtype() -> torch.dtype:
    """vLLM's FP8 dtype for this platform (e4m3fnuz on MI300), looked up lazily.

    Imported at call time only, so that importing this module never imports
    vLLM; without vLLM, OCP e4m3 is the only sensible default.
    """
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return torch.float8_e4m3fn
    return current_platform.fp8_dtype()


def _fp8_cache_dtype(kv_cache_dtype: str) -> torch.dtype:
    if kv_cache_dtype in ("fp8", "fp8_e4m3"):
        return _platform_fp8_dtype()
    if kv_cache_dtype == "fp8_e5m2":
        return torch.float8_e5m2
    raise ValueError(f"unsupported FP8 KV cache dtype: {kv_cache_dtype!r}")


def _is_fp8(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point and dtype.itemsize == 1


def _launch_config(head_pad: int, dtype: torch.dtype) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps): tiles that fit registers and LDS.

    Rows are (token, query head) pairs, so BLOCK_M covers several heads of a
    GQA group. fp32 and 256-wide heads halve the tiles to stay in registers.
    """
    if dtype == torch.float32 or head_pad > 128:
        return 64, 32, 4
    return 128, 64, 8


@dataclass(frozen=True)
class KernelLaunch:
    """Everything one launch of the kernel takes, computed on the host.

    Split from the launch itself so that a compile check can build the
    exact signature of real calls without a GPU.
    """

    grid: tuple[int, int, int]
    args: dict[str, Any]  # runtime arguments, by kernel parameter name
    constants: dict[str, Any]  # constexpr arguments
    num_warps: int
    num_stages: int = 1


def prepare(
    q: torch.Tensor,
    k: torch.Tensor | None,
    v: torch.Tensor | None,
    o: torch.Tensor,
    kv_cache_dtype: str,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    b_loc: torch.Tensor,
    b_start_loc: torch.Tensor,
    b_seq_len: torch.Tensor,
    max_seq_len: int | None,
    max_input_len: int,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
    alibi_slopes: torch.Tensor | None = None,
    sliding_window: int | None = None,
    sm_scale: float | None = None,
    skip_decode: bool = False,
    fp8_out_scale: torch.Tensor | None = None,
    sinks: torch.Tensor | None = None,
    is_block_table_ptr: bool = False,
    causal: bool = True,
) -> KernelLaunch:
    """Validate the arguments of ``context_attention_fwd``; plan its launch.

    Reads only shapes, strides and dtypes (never tensor contents), so it
    never synchronises with the device.
    """
    del max_seq_len
    if "fp8" in kv_cache_dtype:
        for cache in (k_cache, v_cache):
            if cache.dtype != torch.uint8 and not _is_fp8(cache.dtype):
                raise ValueError(f"FP8 KV cache stored as {cache.dtype}")
        target = _fp8_cache_dtype(kv_cache_dtype)
        k_cache, v_cache = k_cache.view(target), v_cache.view(target)
    elif k_cache.dtype == torch.uint8 or v_cache.dtype == torch.uint8:
        raise ValueError("kv_cache_dtype='auto' cannot read a uint8 (FP8) KV cache")
    if (k is None) != (v is None):
        raise ValueError("k and v must both be tensors or both be None")
    kv_from_cache = k is None
    if alibi_slopes is not None and not causal:
        raise ValueError("ALiBi is only defined for causal attention here")

    num_tokens, num_heads, head_size = q.shape
    num_kv_heads = k_cache.shape[1]
    if num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} query heads, {num_kv_heads} KV heads")
    k_dense = q if k is None else k  # never read when the cache holds them
    v_dense = q if v is None else v
    if k_dense.shape[-1] != head_size or v_dense.shape[-1] != head_size:
        raise ValueError("q, k and v must have the same head size")
    batch = b_seq_len.shape[0]
    if b_start_loc.shape[0] != batch + 1:
        raise ValueError("b_start_loc must have len(b_seq_len) + 1 entries")

    if is_block_table_ptr:
        # Entries are byte addresses of K cache blocks; turn them into ids.
        block_bytes = k_cache.stride(0) * k_cache.element_size()
        b_loc = torch.where(
            b_loc > 0, (b_loc - k_cache.data_ptr()) // block_bytes, b_loc
        )
    b_loc = b_loc.to(torch.int32)

    # Rows every dense tensor has: a request must fit all of them.
    num_rows = min(num_tokens, o.shape[0])
    if not kv_from_cache:
        num_rows = min(num_rows, k_dense.shape[0], v_dense.shape[0])

    window = 0 if sliding_window is None or sliding_window <= 0 else sliding_window
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_size)
    head_pad = max(16, triton.next_power_of_2(head_size))
    block_m, block_n, num_warps = _launch_config(head_pad, q.dtype)
    qpk = num_heads // num_kv_heads

    out_scale_inv = None
    fp8_min = fp8_max = 0.0
    if fp8_out_scale is not None:
        # Multiply by a host-side inverse, as upstream does (same rounding).
        out_scale_inv = 1.0 / fp8_out_scale
        fp8 = o.dtype if _is_fp8(o.dtype) else _platform_fp8_dtype()
        fp8_min, fp8_max = torch.finfo(fp8).min, torch.finfo(fp8).max

    args: dict[str, Any] = {
        "Q": q,
        "K": k_dense,
        "V": v_dense,
        "Out": o,
        "K_cache": k_cache,
        "V_cache": v_cache,
        "Block_table": b_loc,
        "Query_start": b_start_loc,
        "Seq_lens": b_seq_len,
        "K_scale": k_scale,
        "V_scale": v_scale,
        "Out_scale_inv": out_scale_inv,
        "Sinks": sinks,
        "Alibi_slopes": alibi_slopes,
        "qk_scale": sm_scale * _LOG2E,
        "window": window,
        "num_rows": num_rows,
        "table_len": b_loc.shape[1],
        "num_cache_blocks": min(k_cache.shape[0], v_cache.shape[0]),
    }
    for prefix, tensor in (
        ("q", q),
        ("k", k_dense),
        ("v", v_dense),
        ("o", o),
        ("bt", b_loc),
        ("kc", k_cache),
        ("vc", v_cache),
    ):
        names = [f"stride_{prefix}{suffix}" for suffix in _STRIDES[prefix]]
        args.update(zip(names, tensor.stride(), strict=True))
    constants = {
        "QPK": qpk,
        "HEAD": head_size,
        "HEAD_PAD": head_pad,
        "X": k_cache.shape[4],
        "PAGE": v_cache.shape[3],
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "CAUSAL": causal,
        "USE_WINDOW": window > 0,
        "USE_ALIBI": alibi_slopes is not None,
        "USE_SINKS": sinks is not None,
        "SKIP_DECODE": skip_decode,
        "KV_FROM_CACHE": kv_from_cache,
        "KV_FP8": _is_fp8(k_cache.dtype),
        "OUT_FP8": fp8_out_scale is not None,
        "FP8_MIN": fp8_min,
        "FP8_MAX": fp8_max,
        # fp32 callers want fp32 accuracy, not TF32; 16-bit inputs ignore it.
        "DOT_PRECISION": "ieee" if q.dtype == torch.float32 else None,
    }
    grid = (batch, num_kv_heads, triton.cdiv(max_input_len * qpk, block_m))
    return KernelLaunch(grid, args, constants, num_warps)


# Stride argument suffixes per tensor, in dimension order.
_STRIDES = {
    "q": ("t", "h", "d"),
    "k": ("t", "h", "d"),
    "v": ("t", "h", "d"),
    "o": ("t", "h", "d"),
    "bt": ("r", "c"),
    "kc": ("_b", "_h", "_d", "_t", "_x"),
    "vc": ("_b", "_h", "_d", "_t"),
}


@torch.inference_mode()
def context_attention_fwd(
    q: torch.Tensor,
    k: torch.Tensor | None,
    v: torch.Tensor | None,
    o: torch.Tensor,
    kv_cache_dtype: str,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    b_loc: torch.Tensor,
    b_start_loc: torch.Tensor,
    b_seq_len: torch.Tensor,
    max_seq_len: int | None,
    max_input_len: int,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
    alibi_slopes: torch.Tensor | None = None,
    sliding_window: int | None = None,
    sm_scale: float | None = None,
    skip_decode: bool = False,
    fp8_out_scale: torch.Tensor | None = None,
    sinks: torch.Tensor | None = None,
    is_block_table_ptr: bool = False,
    causal: bool = True,
) -> None:
    """Write attention of the new tokens of each request into ``o``.

    Same arguments and semantics as vLLM 0.28.0's ``context_attention_fwd``:
    ``q``/``k``/``v``/``o`` are token-major ``[tokens, heads, head_size]``;
    request ``i`` owns rows ``b_start_loc[i]:b_start_loc[i + 1]`` and has
    ``b_seq_len[i]`` tokens in all, the first ones in the paged cache through
    row ``i`` of ``b_loc``. ``k is None`` reads the new tokens' K/V from the
    cache too. ``max_seq_len`` is accepted for compatibility and unused.

    Differences, all in requests upstream would mishandle: a request whose
    metadata does not fit the tensors writes nothing; ALiBi also works with a
    sliding window, sinks, FP8 output and cached K/V (upstream ignores the
    window and rejects the others). No host synchronisation: safe to capture.
    """
    launch = prepare(
        q,
        k,
        v,
        o,
        kv_cache_dtype,
        k_cache,
        v_cache,
        b_loc,
        b_start_loc,
        b_seq_len,
        max_seq_len,
        max_input_len,
        k_scale,
        v_scale,
        alibi_slopes,
        sliding_window,
        sm_scale,
        skip_decode,
        fp8_out_scale,
        sinks,
        is_block_table_ptr,
        causal,
    )
    if min(launch.grid) <= 0:
        return
    _prefix_prefill_kernel[launch.grid](
        **launch.args,
        **launch.constants,
        num_warps=launch.num_warps,
        num_stages=launch.num_stages,
    )
