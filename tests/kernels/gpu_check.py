"""What only a GPU can check: compiled kernels, bf16, FP8, CUDA graph capture.

The interpreter does integer arithmetic on bf16 bit patterns and has no
faithful FP8, so those paths are checked here, on a real device, against
the same float64 reference and vLLM 0.28.0's kernel. Run as a script with
the Triton interpreter off (``python -m tests.kernels.gpu_check [NAME...]``);
it prints one JSON line per check. ``test_gpu.py`` runs it when
``torch.cuda.is_available()`` (CUDA or ROCm) and is skipped otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch

from tests.kernels.inputs import Case, Inputs, build, to_fp8_cache
from tests.kernels.reference import reference
from tests.kernels.strategies import upstream_supports

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


def _upstream() -> Callable[..., None]:
    from vllm.v1.attention.ops.prefix_prefill import context_attention_fwd

    return context_attention_fwd


def _overlay() -> Callable[..., None]:
    from vllm_overlay.v1.attention.ops.prefix_prefill import context_attention_fwd

    return context_attention_fwd


def _max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.numel() == 0:
        return 0.0
    return (a.double().cpu() - b.double().cpu()).abs().max().item()


def _fp8_dtype() -> torch.dtype:
    from vllm.platforms import current_platform

    return current_platform.fp8_dtype()


def check_dtype(case: Case, dtype: torch.dtype, kv: str = "auto") -> dict[str, Any]:
    """Overlay vs reference and upstream for one shape, dtype and KV format."""
    inputs = build(case.with_(dtype=dtype), device="cuda")
    if kv != "auto":
        fp8 = _fp8_dtype() if kv == "fp8" else torch.float8_e5m2
        inputs = to_fp8_cache(inputs, fp8, kv)
    expected = reference(_on_cpu(inputs))
    ours = inputs.call(_overlay())
    torch.cuda.synchronize()
    result = {"vs_reference": _max_err(ours, expected), "tol": VS_REFERENCE[dtype]}
    ok = result["vs_reference"] <= VS_REFERENCE[dtype]
    if upstream_supports(case):
        theirs = inputs.call(_upstream())
        result["vs_upstream"] = _max_err(ours, theirs)
        ok = ok and result["vs_upstream"] <= VS_UPSTREAM[dtype]
    return {"ok": ok, **result}


def _on_cpu(inputs: Inputs) -> Inputs:
    def cpu(value: Any) -> Any:
        return value.cpu() if isinstance(value, torch.Tensor) else value

    return Inputs(
        inputs.case,
        {name: cpu(value) for name, value in inputs.args.items()},
        [cpu(t) for t in inputs.keys],
        [cpu(t) for t in inputs.values],
    )


def check_fp8_output(dtype: torch.dtype) -> dict[str, Any]:
    """FP8 output with a scale, against the scaled reference and upstream.

    Allowed: one FP8 rounding step (e4m3 keeps 4 significant bits, 2**-3
    relative) on top of the dtype's own error, scaled like the output.
    """
    case = Case(((40, 100), (9, 0)), 8, 2, 128, 16, dtype=dtype)
    inputs = build(case, device="cuda")
    fp8, scale = _fp8_dtype(), 0.25
    o8 = torch.zeros_like(inputs.args["o"], dtype=fp8)
    out_scale = torch.tensor(scale, device="cuda")
    ours = inputs.call(_overlay(), o=o8, fp8_out_scale=out_scale).double().cpu()
    theirs = inputs.call(_upstream(), o=o8, fp8_out_scale=out_scale).double().cpu()
    finfo = torch.finfo(fp8)
    expected = (reference(_on_cpu(inputs)) / scale).clamp(finfo.min, finfo.max)
    step = 2.0**-3 * torch.maximum(ours.abs(), expected.abs())
    vs_ref = ((ours - expected).abs() / (step + VS_REFERENCE[dtype] / scale)).max()
    vs_up = ((ours - theirs).abs() / (step + VS_UPSTREAM[dtype] / scale)).max()
    return {
        "ok": vs_ref.item() <= 1 and vs_up.item() <= 1,
        "vs_reference_in_bounds": vs_ref.item(),
        "vs_upstream_in_bounds": vs_up.item(),
    }


def check_graph_capture() -> dict[str, Any]:
    """Capture and replay with capture-time metadata: the #25985 scenario.

    Real offsets with ``seq_lens`` of 1 (query length 3: a context of -2),
    a zeroed block table, query offsets past the end of q for a padded
    request: the overlay must capture, replay and synchronise cleanly and
    write only the one consistent request.
    """
    case = Case(((3, 20), (3, 20), (3, 20)), 8, 2, 128, 16, torch.bfloat16)
    inputs = build(case, device="cuda")
    args = dict(inputs.args)
    args["b_seq_len"] = torch.tensor([1, 23, 1], device="cuda").int()
    args["b_loc"] = torch.zeros_like(args["b_loc"])
    args["b_start_loc"] = torch.tensor([0, 3, 6, 12], device="cuda").int()
    args["max_input_len"] = 6
    fwd = _overlay()
    fwd(**args)  # compile outside the capture
    torch.cuda.synchronize()
    args["o"].fill_(7.0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fwd(**args)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    o = args["o"]
    untouched = bool((o[:3] == 7.0).all() and (o[6:] == 7.0).all())
    written = bool((o[3:6] != 7.0).all() and o[3:6].isfinite().all())
    return {"ok": untouched and written, "untouched": untouched, "written": written}


CHECKS: dict[str, Callable[[], dict[str, Any]]] = {}
for _shape, _case in SHAPES.items():
    for _name, _dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        CHECKS[f"{_shape}-{_name}"] = lambda c=_case, d=_dtype: check_dtype(c, d)
for _kv in ("fp8", "fp8_e5m2"):
    for _shape in ("gqa4-page16", "head112-page544-sinks", "cached-kv"):
        CHECKS[f"{_shape}-bf16-{_kv}"] = lambda s=_shape, k=_kv: check_dtype(
            SHAPES[s], torch.bfloat16, k
        )
CHECKS["fp8-output-fp16"] = lambda: check_fp8_output(torch.float16)
CHECKS["fp8-output-bf16"] = lambda: check_fp8_output(torch.bfloat16)
CHECKS["graph-capture"] = check_graph_capture


def main(names: list[str]) -> int:
    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        print("gpu_check: needs a GPU and TRITON_INTERPRET unset", file=sys.stderr)
        return 2
    failed = 0
    for name in names or list(CHECKS):
        try:
            result = {"check": name, **CHECKS[name]()}
        except Exception:
            result = {"check": name, "ok": False, "error": traceback.format_exc()}
        failed += not result["ok"]
        print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
