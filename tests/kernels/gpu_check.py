"""What only a GPU can check: compiled kernels, bf16, FP8, CUDA graph capture.

The interpreter does integer arithmetic on bf16 bit patterns and has no
faithful FP8, so those paths are checked here, on a real device, against
the same float64 reference and vLLM 0.28.0's kernel; so is the overlay on
the capture-time metadata of ``scenarios``. Run as a module::

    python -m tests.kernels.gpu_check [--device cuda|cpu] [--tiny]
        [--shard I/N] [--list] [NAME...]

It prints a ``{"plan": [...]}`` line, then one JSON line per check with a
``status``: ``pass``, ``fail``, ``error``, or ``unjudged``. ``--device cpu``
runs every check through the Triton interpreter (the caller sets
``TRITON_INTERPRET=1``; ``tools/gpu-check --dry-run`` does, with
``--tiny``): the code paths all run, and a check whose result the
interpreter cannot produce faithfully (bf16, FP8 output, CUDA graphs) is
``unjudged``, never a pass. ``test_gpu.py`` and ``tools/gpu-check`` run it.

vLLM is imported only for upstream's kernel module, which ``tools/gpu-check``
supplies (through a shim) where vLLM is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tests.kernels.inputs import Case, Inputs, build, to_fp8_cache
from tests.kernels.reference import reference
from tests.kernels.scenarios import SCENARIOS, SENTINEL, Scenario, rows
from tests.kernels.strategies import upstream_supports
from tests.kernels.tolerances import VS_REFERENCE as CPU_VS_REFERENCE

# bf16 keeps 8 significant bits: P rounded to bf16 (2**-9 * max|v| = 8e-3)
# plus the output rounding (half an ulp at |o| < 4: 8e-3). One bf16 ulp at
# |o| < 4 is 2**-6 between the two kernels. fp16 as in tolerances.py.
VS_REFERENCE = {torch.float16: 5e-3, torch.bfloat16: 2e-2}
VS_UPSTREAM = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}

SHAPES = {
    "gqa4-page16": Case(((37, 300), (1, 60), (120, 0)), 16, 4, 128, 16),
    "gqa8-head80-page32": Case(((64, 129), (5, 0)), 16, 2, 80, 32),
    "mqa-head96-page64-window": Case(((50, 200),), 8, 1, 96, 64, sliding_window=33),
    "head112-page544-sinks": Case(((40, 600), (9, 3)), 8, 2, 112, 544, sinks=True),
    "head192-noncausal": Case(((33, 70),), 4, 2, 192, 16, causal=False),
    "alibi-skip-decode": Case(
        ((30, 90), (1, 40)), 8, 8, 128, 16, alibi=True, skip_decode=True
    ),  # fmt: skip
    "cached-kv": Case(((20, 45), (7, 0)), 8, 2, 128, 16, kv_from_cache=True),
}

NO_BF16 = "the interpreter has no bf16 arithmetic (it computes on bit patterns)"
NO_FP8_OUT = "the interpreter rounds to FP8 unlike hardware"
NO_GRAPHS = "no CUDA graphs without a GPU (launched eagerly instead)"


@dataclass(frozen=True)
class Context:
    device: str  # "cuda" (ROCm too) or "cpu" (the Triton interpreter)
    tiny: bool  # shrink every batch: for the interpreter's speed

    def case(self, case: Case) -> Case:
        """The batch to run: as given, or its tiny version (same features)."""
        if not self.tiny:
            return case
        group = min(case.num_heads // case.num_kv_heads, 2)
        seqs = tuple((min(q, 3), min(c, 18)) for q, c in case.seqs)
        return case.with_(seqs=seqs, num_heads=group, num_kv_heads=1)

    def unjudged(self, *reasons: str | None) -> str | None:
        """Why the interpreter cannot judge this check (None on a GPU)."""
        if self.device != "cpu":
            return None
        found = [r for r in reasons if r]
        return "; ".join(found) or None


def _upstream() -> Callable[..., None]:
    from vllm.v1.attention.ops.prefix_prefill import context_attention_fwd

    return context_attention_fwd


def _overlay() -> Callable[..., None]:
    from vllm_overlay.v1.attention.ops.prefix_prefill import context_attention_fwd

    return context_attention_fwd


def _fp8_dtype() -> torch.dtype:
    """The FP8 type both kernels read (vLLM's platform type; e4m3fn on CUDA)."""
    from vllm_overlay.v1.attention.ops import prefix_prefill

    return prefix_prefill._platform_fp8_dtype()


def _sync(ctx: Context) -> None:
    if ctx.device != "cpu":
        torch.cuda.synchronize()


def _max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.numel() == 0:
        return 0.0
    return (a.double().cpu() - b.double().cpu()).abs().max().item()


def _on_cpu(inputs: Inputs) -> Inputs:
    def cpu(value: Any) -> Any:
        return value.cpu() if isinstance(value, torch.Tensor) else value

    return Inputs(
        inputs.case,
        {name: cpu(value) for name, value in inputs.args.items()},
        [cpu(t) for t in inputs.keys],
        [cpu(t) for t in inputs.values],
    )


def check_dtype(
    ctx: Context, case: Case, dtype: torch.dtype, kv: str = "auto"
) -> dict[str, Any]:
    """Overlay vs reference and upstream for one shape, dtype and KV format."""
    inputs = build(ctx.case(case).with_(dtype=dtype), device=ctx.device)
    if kv != "auto":
        fp8 = _fp8_dtype() if kv == "fp8" else torch.float8_e5m2
        inputs = to_fp8_cache(inputs, fp8, kv)
    expected = reference(_on_cpu(inputs))
    ours = inputs.call(_overlay())
    _sync(ctx)
    result = {"vs_reference": _max_err(ours, expected), "tol": VS_REFERENCE[dtype]}
    ok = result["vs_reference"] <= VS_REFERENCE[dtype]
    if upstream_supports(case):
        theirs = inputs.call(_upstream())
        _sync(ctx)
        result["vs_upstream"] = _max_err(ours, theirs)
        ok = ok and result["vs_upstream"] <= VS_UPSTREAM[dtype]
    unjudged = ctx.unjudged(NO_BF16 if dtype == torch.bfloat16 else None)
    return {"ok": ok, "unjudged": unjudged, **result}


def check_fp8_output(ctx: Context, dtype: torch.dtype) -> dict[str, Any]:
    """FP8 output with a scale, against the scaled reference and upstream.

    Allowed: one FP8 rounding step (e4m3 keeps 4 significant bits, 2**-3
    relative) on top of the dtype's own error, scaled like the output.
    """
    case = ctx.case(Case(((40, 100), (9, 0)), 8, 2, 128, 16, dtype=dtype))
    inputs = build(case, device=ctx.device)
    fp8, scale = _fp8_dtype(), 0.25
    o8 = torch.zeros_like(inputs.args["o"], dtype=fp8)
    out_scale = torch.tensor(scale, device=ctx.device)
    ours = inputs.call(_overlay(), o=o8, fp8_out_scale=out_scale).double().cpu()
    theirs = inputs.call(_upstream(), o=o8, fp8_out_scale=out_scale).double().cpu()
    finfo = torch.finfo(fp8)
    expected = (reference(_on_cpu(inputs)) / scale).clamp(finfo.min, finfo.max)
    step = 2.0**-3 * torch.maximum(ours.abs(), expected.abs())
    vs_ref = ((ours - expected).abs() / (step + VS_REFERENCE[dtype] / scale)).max()
    vs_up = ((ours - theirs).abs() / (step + VS_UPSTREAM[dtype] / scale)).max()
    bf16 = NO_BF16 if dtype == torch.bfloat16 else None
    return {
        "ok": vs_ref.item() <= 1 and vs_up.item() <= 1,
        "unjudged": ctx.unjudged(NO_FP8_OUT, bf16),
        "vs_reference_in_bounds": vs_ref.item(),
        "vs_upstream_in_bounds": vs_up.item(),
    }


def check_graph_capture(ctx: Context) -> dict[str, Any]:
    """Capture and replay with capture-time metadata: the #25985 scenario.

    Real offsets with ``seq_lens`` of 1 (query length 3: a context of -2),
    a zeroed block table, query offsets past the end of q for a padded
    request: the overlay must capture, replay and synchronise cleanly and
    write only the one consistent request.
    """
    case = Case(((3, 20), (3, 20), (3, 20)), 8, 2, 128, 16, torch.bfloat16)
    inputs = build(ctx.case(case), device=ctx.device)
    args = dict(inputs.args)
    dev = ctx.device
    args["b_seq_len"] = torch.tensor([1, 23, 1], device=dev).int()
    args["b_loc"] = torch.zeros_like(args["b_loc"])
    args["b_start_loc"] = torch.tensor([0, 3, 6, 12], device=dev).int()
    args["max_input_len"] = 6
    fwd = _overlay()
    fwd(**args)  # compile outside the capture
    _sync(ctx)
    args["o"].fill_(SENTINEL)
    if ctx.device == "cpu":
        fwd(**args)
    else:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fwd(**args)
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
    o = args["o"]
    untouched = bool((o[:3] == SENTINEL).all() and (o[6:] == SENTINEL).all())
    written = bool((o[3:6] != SENTINEL).all() and o[3:6].isfinite().all())
    return {
        "ok": untouched and written,
        "unjudged": ctx.unjudged(NO_GRAPHS, NO_BF16),
        "untouched": untouched,
        "written": written,
    }


def check_scenario(ctx: Context, scenario: Scenario) -> dict[str, Any]:
    """The overlay on capture-time metadata: the consistent requests exact,
    the inconsistent ones untouched (upstream runs under the sanitizer)."""
    inputs = build(scenario.case, device=ctx.device)
    expected = reference(_on_cpu(inputs))
    out = inputs.call(_overlay(), **scenario.arguments(inputs))
    _sync(ctx)
    out = out.cpu()
    tol = CPU_VS_REFERENCE[scenario.case.dtype]
    errs = [
        _max_err(out[rows(inputs, r)], expected[rows(inputs, r)])
        for r in scenario.intact
    ]
    untouched = all(
        bool((out[rows(inputs, r)] == SENTINEL).all()) for r in scenario.untouched
    )
    worst = max(errs, default=0.0)
    return {
        "ok": untouched and worst <= tol,
        "unjudged": None,
        "vs_reference": worst,
        "tol": tol,
        "untouched": untouched,
    }


Check = Callable[[Context], dict[str, Any]]
CHECKS: dict[str, Check] = {}
for _shape, _case in SHAPES.items():
    for _name, _dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        CHECKS[f"{_shape}-{_name}"] = lambda ctx, c=_case, d=_dtype: check_dtype(
            ctx, c, d
        )
for _kv in ("fp8", "fp8_e5m2"):
    for _shape in ("gqa4-page16", "head112-page544-sinks", "cached-kv"):
        CHECKS[f"{_shape}-bf16-{_kv}"] = lambda ctx, s=_shape, k=_kv: check_dtype(
            ctx, SHAPES[s], torch.bfloat16, k
        )
CHECKS["fp8-output-fp16"] = lambda ctx: check_fp8_output(ctx, torch.float16)
CHECKS["fp8-output-bf16"] = lambda ctx: check_fp8_output(ctx, torch.bfloat16)
CHECKS["graph-capture"] = check_graph_capture
for _name, _scenario in SCENARIOS.items():
    CHECKS[f"capture-{_name}"] = lambda ctx, s=_scenario: check_scenario(ctx, s)


def run_check(ctx: Context, name: str) -> dict[str, Any]:
    """One check as a JSON-ready record; exceptions become ``error``."""
    start = time.perf_counter()
    try:
        found = CHECKS[name](ctx)
    except Exception:
        record: dict[str, Any] = {"status": "error", "error": traceback.format_exc()}
    else:
        ok, unjudged = found.pop("ok"), found.pop("unjudged")
        status = "unjudged" if unjudged else ("pass" if ok else "fail")
        record = {"status": status, **found}
        if unjudged:
            record["reason"] = unjudged
            record["would_pass"] = ok
    return {"check": name, **record, "seconds": round(time.perf_counter() - start, 2)}


def _select(names: list[str], shard: str | None) -> list[str]:
    chosen = names or list(CHECKS)
    unknown = [n for n in chosen if n not in CHECKS]
    if unknown:
        raise SystemExit(f"gpu_check: unknown checks: {', '.join(unknown)}")
    if shard:
        index, count = (int(p) for p in shard.split("/"))
        chosen = chosen[index::count]
    return chosen


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kernels.gpu_check")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="shrink every batch")
    parser.add_argument("--shard", metavar="I/N", help="every N-th check from I")
    parser.add_argument("--list", action="store_true", help="print the names")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    names = _select(args.names, args.shard)
    if args.list:
        print(json.dumps({"plan": names}))
        return 0
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    if args.device == "cuda" and (interpreting or not torch.cuda.is_available()):
        print("gpu_check: --device cuda needs a GPU and TRITON_INTERPRET unset",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.device == "cpu" and not interpreting:
        print("gpu_check: --device cpu needs TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    ctx = Context(args.device, args.tiny)
    print(json.dumps({"plan": names}), flush=True)
    failed = 0
    for name in names:
        result = run_check(ctx, name)
        failed += result["status"] in ("fail", "error")
        print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
