"""vLLM imported into a test process once, the same way in every process.

Most tiers run vLLM in child processes. The few tests that call it in the
test process (the kernel tier under the Triton interpreter, the overlay's
install steps on the real ``rocm_attn`` module) share their worker with
whatever ran before them, and a first import of vLLM changes the whole
interpreter: setuptools puts its vendored packages on ``sys.path``,
transformers adds an import hook, vLLM's Triton shim decides once whether
Triton is usable. Done here, before any test (the kernel tier's conftest,
and the ``vllm_in_process`` fixture for other tests), that first import
happens at one known point, so every such test starts from the same state,
in whatever order or company it runs.

The interpreter must be on before Triton or vLLM is imported:
``TRITON_INTERPRET=1`` makes ``triton.jit`` build interpreted kernels, and,
on a machine with no GPU, ``CUDA_VISIBLE_DEVICES=""`` keeps vLLM's import
shim from disabling Triton for want of a driver. Both are set for the
import and then put back as they were, so that subprocesses (other tiers,
the GPU and compile checks) see the caller's environment. Triton keeps
interpreting through its in-process knob.
"""

from __future__ import annotations

import importlib
import os

IMPORTED = (
    "vllm.v1.attention.ops.prefix_prefill",
    "vllm.v1.attention.backends.rocm_attn",
    "vllm.plugins",
    "vllm_overlay.v1.attention.ops.prefix_prefill",
)
"""Every vLLM module a test calls in-process, and the overlay's kernels."""


def import_vllm() -> None:
    """Import :data:`IMPORTED` under the kernel tier's environment; idempotent."""
    from tests.kernels.devices import HAS_GPU

    saved = {k: os.environ.get(k) for k in ("TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES")}
    os.environ["TRITON_INTERPRET"] = "1"
    if not HAS_GPU:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        import triton

        triton.knobs.runtime.interpret = True
        for name in IMPORTED:
            importlib.import_module(name)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
