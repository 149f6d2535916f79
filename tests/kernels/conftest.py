"""Kernel tier: Triton kernels run by the interpreter on the CPU.

The interpreter must be on before Triton or vLLM is imported:
``TRITON_INTERPRET=1`` makes ``triton.jit`` build interpreted kernels, and,
on a machine with no GPU, ``CUDA_VISIBLE_DEVICES=""`` keeps vLLM's import
shim from disabling Triton for want of a driver. Both are set here, the
kernel modules are imported, and the environment is then put back as it
was, so that subprocesses (other tiers, the GPU and compile checks) see the
caller's environment. Triton keeps interpreting through its in-process knob.
"""

from __future__ import annotations

import os

from tests.kernels.devices import HAS_GPU

_saved = {k: os.environ.get(k) for k in ("TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES")}
os.environ["TRITON_INTERPRET"] = "1"
if not HAS_GPU:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

import triton  # noqa: E402

triton.knobs.runtime.interpret = True
import vllm.v1.attention.ops.prefix_prefill  # noqa: E402, F401

import vllm_overlay.v1.attention.ops.prefix_prefill  # noqa: E402, F401

for _key, _value in _saved.items():
    if _value is None:
        os.environ.pop(_key, None)
    else:
        os.environ[_key] = _value


from vllm_patchkit.memcheck.fixture import memcheck  # noqa: E402, F401
