"""Compile the overlay kernel for real GPU targets, with no GPU attached.

The interpreter runs Python, not the Triton compiler: type errors a GPU
build rejects (a constexpr branch returning another dtype, an unsupported
dot operand) pass on the CPU. Triton ships its compilers (LLVM, ptxas,
lld), so the full pipeline down to a cubin/hsaco runs on any machine.

Run as a script, never under ``TRITON_INTERPRET=1`` (kernels must be
``JITFunction`` objects): ``python -m tests.kernels.compile_check VARIANT...``
prints one JSON line per variant; a variant is
``TARGET-DTYPE-KV-FEATURES-HEAD``, e.g. ``sm90-bf16-fp8_e5m2-all-80``. The
signature comes from ``prefix_prefill.prepare`` on real (CPU) inputs, so it
is the one a real call would compile.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import mangle_type

from tests.kernels.inputs import Case, build, to_fp8_cache
from vllm_overlay.v1.attention.ops import prefix_prefill

TARGETS = {
    "sm90": GPUTarget("cuda", 90, 32),  # H100/H200
    "sm80": GPUTarget("cuda", 80, 32),  # A100
    "gfx942": GPUTarget("hip", "gfx942", 64),  # MI300X/MI325X
    "gfx90a": GPUTarget("hip", "gfx90a", 64),  # MI250X
}
FP8_E4M3 = {"cuda": torch.float8_e4m3fn, "hip": torch.float8_e4m3fnuz}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
FEATURES = {
    "plain": {},
    "all": {"alibi": True, "sinks": True, "sliding_window": 64, "skip_decode": True},
    "cachedkv": {"kv_from_cache": True, "causal": False, "sinks": True},
}


def variant_inputs(
    target: GPUTarget, dtype: str, kv: str, features: str, head: int
) -> dict[str, Any]:
    """The arguments of a real call for one variant."""
    case = Case(((3, 40), (2, 0)), 8, 2, head, 16, DTYPES[dtype], **FEATURES[features])
    inputs = build(case)
    if kv != "auto":
        fp8 = FP8_E4M3[target.backend] if kv == "fp8" else torch.float8_e5m2
        inputs = to_fp8_cache(inputs, fp8, kv)
    args = dict(inputs.args)
    if features == "all":
        fp8_out = FP8_E4M3[target.backend]
        args["o"] = args["o"].to(fp8_out)
        args["fp8_out_scale"] = torch.tensor(0.5)
    return args


def signature(launch: prefix_prefill.KernelLaunch) -> tuple[dict, dict]:
    kernel = prefix_prefill._prefix_prefill_kernel
    values = {**launch.args, **launch.constants}
    sig, constexprs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        value = values[name]
        if name in launch.constants or value is None:
            sig[name] = "constexpr"
            constexprs[(i,)] = value
        else:
            sig[name] = mangle_type(value)
    return sig, constexprs


def compile_variant(name: str) -> dict[str, Any]:
    target_name, dtype, kv, features, head = name.split("-")
    target = TARGETS[target_name]
    # The FP8 format vLLM picks on the target (e4m3fnuz on MI300), not here.
    prefix_prefill._platform_fp8_dtype = lambda: FP8_E4M3[target.backend]
    launch = prefix_prefill.prepare(
        **variant_inputs(target, dtype, kv, features, int(head))
    )
    sig, constexprs = signature(launch)
    start = time.perf_counter()
    result: dict[str, Any] = {"variant": name}
    try:
        compiled = triton.compile(
            ASTSource(prefix_prefill._prefix_prefill_kernel, sig, constexprs),
            target=target,
            options={"num_warps": launch.num_warps, "num_stages": launch.num_stages},
        )
    except Exception as exc:  # report every failure, keep compiling the rest
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}"[-3000:])
    else:
        binary = "cubin" if target.backend == "cuda" else "hsaco"
        result.update(
            ok=binary in compiled.asm,
            shared_bytes=compiled.metadata.shared,
            stages=sorted(compiled.asm),
        )
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def main(names: list[str]) -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("compile_check: unset TRITON_INTERPRET", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        result = compile_variant(name)
        failed += not result["ok"]
        print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
