"""One kernel on capture-time metadata, in a process of its own, for a memory checker.

``tools/gpu-check`` starts this module under ``compute-sanitizer --tool
memcheck`` on a GPU, and under the Triton interpreter's checker
(``vllm_patchkit.judge.memcheck``) in its dry run. A process of its own because
an out-of-bounds access can leave the CUDA context unusable (or, unchecked
in the interpreter, corrupt the heap)::

    python -m tests.kernels.sanitize_child --kernel overlay|upstream|probe
        [--device cuda|cpu] [--checker none|interpreter] SCENARIO...

Per scenario it prints ``{"scenario", "event": "begin", "expected"}`` (the
interpreter's finding for upstream, null for a clean case) before the launch
and ``{"scenario", "event": "end", "status", ...}`` after synchronising, so
sanitizer reports written to the same stream fall between the two. Status:
``done`` (returned), ``violation`` (the interpreter's checker stopped an
access: kernel, argument, byte offset), ``error`` (anything else). The
``probe`` kernel reads one element past the end of its input: a checker
that does not report it cannot judge the others. The probe's child also
prints the scenarios, ``{"scenarios": {name: upstream's stray kernel or
null}}``, so the caller needs no process of its own to learn them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from tests.kernels.inputs import build
from tests.kernels.scenarios import SCENARIOS

PROBE = "probe-one-past-the-end"


@triton.jit
def _oob_probe(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    live = offs < n
    tl.store(dst + offs, tl.load(src + offs + 1, mask=live), mask=live)


def _probe(device: str) -> None:
    """Reads src[1..8] of an 8-element src: 0 bytes past its end."""
    src = torch.arange(8.0, device=device)
    dst = torch.zeros(8, device=device)
    _oob_probe[(1,)](src, dst, 8, BLOCK=8)


def _kernel(name: str) -> Callable[..., None]:
    if name == "upstream":
        from vllm.v1.attention.ops.prefix_prefill import context_attention_fwd
    else:
        from vllm_overlay.v1.attention.ops.prefix_prefill import (
            context_attention_fwd,
        )
    return context_attention_fwd


def expected(kernel: str, name: str) -> dict[str, Any] | None:
    """The first stray access the interpreter's checker finds, if any.

    Offsets depend only on shapes and strides, so a CPU build gives them.
    """
    if kernel == "probe":
        return {"kernel": "_oob_probe", "argument": "src", "offset": 32}
    scenario = SCENARIOS[name]
    if kernel != "upstream" or scenario.upstream is None:
        return None
    where, argument, offset = scenario.upstream
    at = offset(build(scenario.case))
    return {"kernel": where, "argument": argument, "offset": at}


def run(kernel: str, name: str, device: str, checker: str) -> dict[str, Any]:
    def launch() -> None:
        if kernel == "probe":
            _probe(device)
        else:
            scenario = SCENARIOS[name]
            inputs = build(scenario.case, device=device)
            inputs.call(_kernel(kernel), **scenario.arguments(inputs))
        if device == "cuda":
            torch.cuda.synchronize()  # the launch's reports come before "end"

    if checker != "interpreter":
        launch()
        return {"status": "done"}
    from vllm_patchkit.judge.memcheck import MemoryViolation, memcheck

    try:
        with memcheck():
            launch()
    except MemoryViolation as exc:
        seen = {"kernel": exc.kernel, "argument": exc.argument, "offset": exc.offset}
        return {"status": "violation", "violation": seen}
    return {"status": "done"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kernels.sanitize_child")
    parser.add_argument("--kernel", choices=("overlay", "upstream", "probe"))
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--checker", choices=("none", "interpreter"), default="none")
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args(argv)
    if args.kernel == "probe":  # the caller learns the scenarios from it
        listing = {
            n: s.upstream[0] if s.upstream else None for n, s in SCENARIOS.items()
        }
        print(json.dumps({"scenarios": listing}), flush=True)
    names = [PROBE] if args.kernel == "probe" else args.scenarios
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    if args.device == "cpu" and args.checker != "interpreter":
        # Unchecked, upstream's stray accesses hit this process's own heap.
        print("sanitize_child: on the CPU only with --checker interpreter",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.checker == "interpreter" and not interpreting:
        print("sanitize_child: --checker interpreter needs TRITON_INTERPRET=1",
              file=sys.stderr)  # fmt: skip
        return 2
    status = 0
    for name in names:
        begin = {
            "scenario": name,
            "event": "begin",
            "expected": expected(args.kernel, name),
        }
        print(json.dumps(begin), flush=True)
        try:
            result = run(args.kernel, name, args.device, args.checker)
        except Exception:
            result = {"status": "error", "error": traceback.format_exc()[-3000:]}
            status = 3
        print(json.dumps({"scenario": name, "event": "end", **result}), flush=True)
        if status:
            break  # the CUDA context may be gone; the caller starts afresh
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
