"""Kernel tier: Triton kernels run by the interpreter on the CPU.

vLLM, its kernels and the overlay's are imported here, before any kernel
test module, the way :mod:`tests.vllm_in_process` says.
"""

from __future__ import annotations

from tests.vllm_in_process import import_vllm

import_vllm()

from vllm_patchkit.judge.memcheck.fixture import memcheck  # noqa: E402, F401
