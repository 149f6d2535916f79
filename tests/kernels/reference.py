"""Plain PyTorch prefix-prefill attention in float64: what the kernels must compute.

Written from the semantics, one request at a time, with no tiling, no online
softmax and no paged cache, so it shares no code path with the kernels.
"""

from __future__ import annotations

import math

import torch

from tests.kernels.inputs import Inputs


def reference(inputs: Inputs) -> torch.Tensor:
    """The expected ``o``; rows a kernel must not write keep their old value."""
    a, case = inputs.args, inputs.case
    out = a["o"].double().clone()
    q_all = a["q"].double()
    scale = a["sm_scale"] or 1.0 / math.sqrt(case.head_size)
    group = case.num_heads // case.num_kv_heads
    window = a["sliding_window"] or 0
    start = 0
    for i, (q_len, c_len) in enumerate(case.seqs):
        rows = slice(start, start + q_len)
        start += q_len
        if q_len == 0 or (case.skip_decode and q_len == 1):
            continue
        keys = inputs.keys[i].double().repeat_interleave(group, dim=1)
        values = inputs.values[i].double().repeat_interleave(group, dim=1)
        q = q_all[rows]
        logits = torch.einsum("mhd,nhd->hmn", q, keys) * scale
        q_pos = torch.arange(c_len, c_len + q_len)[:, None]
        k_pos = torch.arange(c_len + q_len)[None, :]
        allowed = (k_pos <= q_pos) | (not case.causal)
        if window > 0:
            allowed = allowed & (q_pos - k_pos < window)
        if a["alibi_slopes"] is not None:
            slopes = a["alibi_slopes"].double()[:, None, None]
            logits = logits + slopes * (k_pos - q_pos).double()
        logits = logits.masked_fill(~allowed, -math.inf)
        if a["sinks"] is not None:
            sink = a["sinks"].double()[:, None, None].expand(-1, q_len, 1)
            logits = torch.cat([logits, sink], dim=-1)
            values = torch.cat([values, values.new_zeros(1, *values.shape[1:])])
        peak = logits.amax(dim=-1, keepdim=True).clamp(min=-1e300)
        weights = torch.exp(logits - peak)
        total = weights.sum(dim=-1, keepdim=True)
        probs = torch.where(total > 0, weights / total, 0.0)
        out[rows] = torch.einsum("hmn,nhd->mhd", probs, values)
    return out
