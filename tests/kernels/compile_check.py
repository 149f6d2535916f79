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

``upstream:VARIANT`` compiles vLLM 0.28.0's kernels instead, as its own host
code launches them: the call runs with a stand-in driver that names the
target and a ``jit_cache_hook`` that takes each launch's specialization and
stops it before compiling or launching; the kernels are then compiled from
those specializations. Its platform answers as the target's would (device
capability), so the block sizes are the ones a real call there picks.
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
    "alibi": {"alibi": True, "skip_decode": True},  # upstream's second kernel
}
CAPABILITY = {"sm90": (9, 0), "sm80": (8, 0)}
# vLLM 0.28.0's two kernels, as its host code launches them on an H200.
UPSTREAM = ("upstream:sm90-bf16-fp8-plain-128", "upstream:sm90-fp16-auto-alibi-128")


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


class _CompileOnlyDriver:
    """Stands in for the GPU driver: names the target, never runs anything."""

    def __init__(self, target: GPUTarget) -> None:
        self.target = target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        return self.target


def compile_upstream(name: str) -> dict[str, Any]:
    """vLLM 0.28.0's kernels, specialised by its own host code for the target."""
    target_name, dtype, kv, features, head = name.removeprefix("upstream:").split("-")
    target = TARGETS[target_name]
    import vllm

    if not getattr(vllm, "GPU_CHECK_SHIM", False):
        # Only the shim's platform can be told to answer as the target would.
        return {"variant": name, "ok": False, "error": "vllm is not the shim: put "
                "`tools/gpu-check --shim DIR`'s DIR first on PYTHONPATH"}  # fmt: skip
    from vllm.platforms import DeviceCapability, current_platform

    cap = CAPABILITY.get(target_name)  # what the target's platform would say
    current_platform.get_device_capability = lambda device_id=0: (
        DeviceCapability(*cap) if cap else None
    )
    current_platform.fp8_dtype = lambda: FP8_E4M3[target.backend]
    from vllm.v1.attention.ops.prefix_prefill import context_attention_fwd

    args = variant_inputs(target, dtype, kv, features, int(head))
    args.pop("fp8_out_scale", None)  # upstream's ALiBi kernel rejects both
    args["o"] = args["o"].to(args["q"].dtype)
    launches: list[tuple[Any, dict[str, Any]]] = []

    def capture(*, fn: Any, compile: dict[str, Any], **_: Any) -> bool:
        launches.append((fn.jit_function, compile))
        return True  # skip: compiled below, never launched

    start = time.perf_counter()
    result: dict[str, Any] = {"variant": name, "kernels": []}
    config = triton.runtime.driver
    saved = config._active  # resetting would look for a real driver
    config.set_active(_CompileOnlyDriver(target))
    triton.knobs.runtime.jit_cache_hook = capture
    try:
        context_attention_fwd(**args)
        for kernel, spec in launches:
            compiled = triton.compile(
                ASTSource(kernel, spec["signature"], spec["constants"],
                          spec["configs"][0]),
                target=target,
                options={"num_warps": spec["num_warps"],
                         "num_stages": spec["num_stages"]},
            )  # fmt: skip
            result["kernels"].append(kernel.fn.__name__)
            result.setdefault("stages", sorted(compiled.asm))
    except Exception as exc:
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}"[-3000:])
    else:
        binary = "cubin" if target.backend == "cuda" else "hsaco"
        result["ok"] = bool(launches) and binary in result.get("stages", [])
    finally:
        triton.knobs.runtime.jit_cache_hook = None
        config._active = saved
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def main(names: list[str]) -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("compile_check: unset TRITON_INTERPRET", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        if name.startswith("upstream:"):
            result = compile_upstream(name)
        else:
            result = compile_variant(name)
        failed += not result["ok"]
        print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
