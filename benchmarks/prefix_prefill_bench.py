"""Prefix-prefill attention: the overlay kernel against vLLM 0.28.0's and SDPA.

On a GPU (CUDA or ROCm), one command prints latency, TFLOP/s and the
overlay's speedup over each competitor for every shape and dtype::

    python benchmarks/prefix_prefill_bench.py [--json rows.json] [--jsonl rows.jsonl]

``--smoke`` runs tiny shapes on the CPU through the Triton interpreter in
seconds: it proves the script works (CI runs it) and measures nothing.
``--jsonl`` appends each row as it is measured, so a run stopped for time
keeps what it finished (``tools/gpu-check`` relies on it). The overlay is
timed twice, first and last, and the spread between the two says how much
of a difference between kernels is noise.

All three run the same batches: new tokens attend causally to their cached
context through the paged cache (block size 16, K cache x-packed), with
``skip_decode=True`` as vLLM's chunked-prefill path calls the kernels, so
decode requests are skipped by all three. SDPA gets K/V already gathered
out of the cache into dense per-request tensors (the gather is not timed)
and runs one call per request: the dense-attention bound, not a paged one.
FLOPs count the attended (query, key) pairs only: 4 * heads * head_size
per pair.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import accumulate
from typing import Any

# Largest |overlay - upstream| on outputs |o| < 4: about one output ulp
# (fp16: 2**-11 * 4 = 2e-3, doubled; bf16: 2**-8 * 4 = 1.6e-2, the
# GPU tier's bound in tests/kernels/gpu_check.py).
AGREE = {"fp16": 4e-3, "bf16": 1.6e-2}


@dataclass(frozen=True)
class Shape:
    name: str
    seqs: tuple[tuple[int, int], ...]  # (new tokens, cached tokens) per request
    num_heads: int = 32
    group: int = 4  # query heads per KV head
    head_size: int = 128
    page: int = 16

    @property
    def num_kv_heads(self) -> int:
        return self.num_heads // self.group


def gpu_shapes() -> list[Shape]:
    shapes = []
    for group in (4, 8):
        shapes += [
            Shape("prefill-heavy", ((2048, 0),) * 2 + ((1024, 1024),) * 2, group=group),
            Shape("decode-mix", ((1, 2048),) * 56 + ((512, 1536),) * 4, group=group),
            Shape("long-context", ((512, 32256),) * 2, group=group),
        ]
    return shapes


def smoke_shapes() -> list[Shape]:
    return [
        Shape("smoke-mix", ((6, 20), (1, 9), (3, 0)), 4, 4, 64),
        Shape("smoke-gqa8", ((5, 17),), 8, 8, 64),
    ]


def attended_pairs(shape: Shape) -> int:
    """(query, key) pairs a causal prefix prefill computes; decodes skipped."""
    return sum(q * c + q * (q + 1) // 2 for q, c in shape.seqs if q > 1)


def build(shape: Shape, dtype: Any, device: str) -> dict[str, Any]:
    """Random paged-cache inputs for ``context_attention_fwd`` (shuffled blocks)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    kvh, d, page = shape.num_kv_heads, shape.head_size, shape.page
    x = 16 // torch.tensor([], dtype=dtype).element_size()
    blocks = [-(-(q + c) // page) for q, c in shape.seqs]
    perm = torch.randperm(sum(blocks), generator=gen, device=device)
    table = torch.zeros(len(blocks), max(blocks), dtype=torch.int32, device=device)
    starts = [0, *accumulate(blocks)]
    for i, n in enumerate(blocks):
        table[i, :n] = perm[starts[i] : starts[i + 1]]
    tokens = sum(q for q, _ in shape.seqs)

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=gen, device=device).to(dtype)

    lens = [q for q, _ in shape.seqs]
    return {
        "q": randn(tokens, shape.num_heads, d),
        "k": randn(tokens, kvh, d),
        "v": randn(tokens, kvh, d),
        "o": torch.zeros(tokens, shape.num_heads, d, dtype=dtype, device=device),
        "kv_cache_dtype": "auto",
        "k_cache": randn(sum(blocks), kvh, d // x, page, x),
        "v_cache": randn(sum(blocks), kvh, d, page),
        "b_loc": table,
        "b_start_loc": torch.tensor([0, *accumulate(lens)], device=device).int(),
        "b_seq_len": torch.tensor([q + c for q, c in shape.seqs], device=device).int(),
        "max_seq_len": max(q + c for q, c in shape.seqs),
        "max_input_len": max(lens),
        "k_scale": torch.ones((), device=device),
        "v_scale": torch.ones((), device=device),
        "skip_decode": True,
    }


def sdpa_runner(shape: Shape, args: dict[str, Any]) -> Callable[[], Any]:
    """SDPA over K/V gathered from the cache; one call per non-decode request."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right

    k_cache, v_cache, table = args["k_cache"], args["v_cache"], args["b_loc"]
    kvh, d, page, group = shape.num_kv_heads, shape.head_size, shape.page, shape.group
    calls = []
    row = 0
    for i, (q_len, c_len) in enumerate(shape.seqs):
        rows = slice(row, row + q_len)
        row += q_len
        if q_len <= 1:
            continue
        ids = table[i, : -(-c_len // page)].long()
        k_ctx = k_cache[ids].permute(0, 3, 1, 2, 4).reshape(-1, kvh, d)[:c_len]
        v_ctx = v_cache[ids].permute(0, 3, 1, 2).reshape(-1, kvh, d)[:c_len]
        keys = torch.cat([k_ctx, args["k"][rows]]).repeat_interleave(group, dim=1)
        values = torch.cat([v_ctx, args["v"][rows]]).repeat_interleave(group, dim=1)
        calls.append(
            (
                args["q"][rows].transpose(0, 1).unsqueeze(0),
                keys.transpose(0, 1).unsqueeze(0).contiguous(),
                values.transpose(0, 1).unsqueeze(0).contiguous(),
                causal_lower_right(q_len, q_len + c_len),
            )
        )

    def run() -> list[Any]:
        return [
            F.scaled_dot_product_attention(q, k, v, attn_mask=m) for q, k, v, m in calls
        ]

    return run


def timer(smoke: bool) -> Callable[[Callable[[], Any]], float]:
    """Milliseconds per call: Triton's do_bench on a GPU, one call in smoke mode."""
    if smoke:

        def once(fn: Callable[[], Any]) -> float:
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e3

        return once
    from triton.testing import do_bench

    return lambda fn: do_bench(fn, warmup=25, rep=200, return_mode="median")


def bench(shape: Shape, dtype_name: str, smoke: bool) -> dict[str, Any]:
    import torch
    from vllm.v1.attention.ops.prefix_prefill import (
        context_attention_fwd as upstream,
    )

    from vllm_overlay.v1.attention.ops.prefix_prefill import context_attention_fwd

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    device = "cpu" if smoke else "cuda"
    args = build(shape, dtype, device)
    o_overlay, o_upstream = args["o"].clone(), args["o"].clone()
    kernels = {
        "overlay": lambda: context_attention_fwd(**dict(args, o=o_overlay)),
        "upstream": lambda: upstream(**dict(args, o=o_upstream)),
        "sdpa": sdpa_runner(shape, args),
    }
    measure = timer(smoke)
    flops = 4 * shape.num_heads * shape.head_size * attended_pairs(shape)
    result: dict[str, Any] = {
        **asdict(shape),
        "seqs": len(shape.seqs),
        "dtype": dtype_name,
    }
    for name, fn in kernels.items():
        ms = measure(fn)
        result[f"{name}_ms"] = ms
        result[f"{name}_tflops"] = flops / (ms * 1e-3) / 1e12
    again = measure(kernels["overlay"])
    result["overlay_ms_again"] = again
    result["overlay_spread"] = abs(again - result["overlay_ms"]) / min(
        again, result["overlay_ms"]
    )
    diff = (o_overlay.float() - o_upstream.float()).abs().max().item()
    result["max_abs_diff_vs_upstream"] = diff
    result["agree"] = math.isfinite(diff) and diff <= AGREE[dtype_name]
    return result


def report(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'shape':15} {'dtype':5} {'q/kv':>4} | {'overlay ms':>10} {'TFLOP/s':>7} | "
        f"{'upstream ms':>11} {'TFLOP/s':>7} | {'sdpa ms':>9} {'TFLOP/s':>7} | "
        f"{'vs upstream':>11} {'vs sdpa':>7} | {'max diff':>8} {'spread':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['name']:15} {r['dtype']:5} {r['group']:>4} | "
            f"{r['overlay_ms']:10.3f} {r['overlay_tflops']:7.2f} | "
            f"{r['upstream_ms']:11.3f} {r['upstream_tflops']:7.2f} | "
            f"{r['sdpa_ms']:9.3f} {r['sdpa_tflops']:7.2f} | "
            f"{r['upstream_ms'] / r['overlay_ms']:10.2f}x "
            f"{r['sdpa_ms'] / r['overlay_ms']:6.2f}x | "
            f"{r['max_abs_diff_vs_upstream']:8.1e} {r['overlay_spread']:6.1%}"
        )
    lines.append("vs X: X's latency / the overlay's (above 1: the overlay is faster)")
    lines.append("spread: the overlay timed twice; smaller differences are noise")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--smoke", action="store_true", help="tiny shapes on the CPU interpreter"
    )
    parser.add_argument("--dtype", nargs="+", default=None, choices=("fp16", "bf16"))
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    parser.add_argument(
        "--jsonl", metavar="FILE", help="append each row to FILE as it is measured"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        # Before anything imports Triton or vLLM (see tests/kernels/conftest.py).
        os.environ["TRITON_INTERPRET"] = "1"
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import torch

    if not args.smoke and not torch.cuda.is_available():
        print("no GPU here; --smoke runs the CPU interpreter mode", file=sys.stderr)
        return 2
    # The interpreter cannot do bf16 arithmetic: smoke runs fp16 only.
    dtypes = args.dtype or (["fp16"] if args.smoke else ["fp16", "bf16"])
    shapes = smoke_shapes() if args.smoke else gpu_shapes()
    rows = []
    for dtype in dtypes:
        for shape in shapes:
            rows.append(bench(shape, dtype, args.smoke))
            if args.jsonl:
                with open(args.jsonl, "a") as fh:
                    fh.write(json.dumps(rows[-1]) + "\n")
    if not args.smoke:
        name = torch.cuda.get_device_name()
        print(f"device: {name}; torch {torch.__version__}")
    print(report(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    apart = [r for r in rows if not r["agree"]]
    for r in apart:
        print(
            f"overlay and upstream disagree on {r['name']} {r['dtype']}: max |diff| "
            f"= {r['max_abs_diff_vs_upstream']} > {AGREE[r['dtype']]}",
            file=sys.stderr,
        )
    return 1 if apart else 0


if __name__ == "__main__":
    sys.exit(main())
