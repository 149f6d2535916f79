"""The opt-in kernel switch, through vLLM's real plugin loading.

With ``VLLM_OVERLAY_PREFIX_PREFILL=1`` vLLM's ROCm prefill path calls the
overlay's kernel; without it, vLLM's own. The kernel itself is tested in
tests/kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import importlib, json, sys
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm_overlay import plugin
from vllm_overlay.fixes.rocm_capture_host_offsets import (
    RECORD as CAPTURE_HOST_OFFSETS,
)
caller = importlib.import_module("vllm.v1.attention.ops.chunked_prefill_paged_decode")
state = plugin.current_states()[CAPTURE_HOST_OFFSETS.name]
json.dump({
    "kernel_module": caller.context_attention_fwd.__module__,
    "state_kernel": state.kernel,
    "problems": state.problems,
}, sys.stdout)
"""


def probe(opt_in: bool) -> dict[str, object]:
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "TRITON_INTERPRET": "1",
        "VLLM_LOGGING_LEVEL": "ERROR",
    }
    env.pop("VLLM_OVERLAY_PREFIX_PREFILL", None)
    if opt_in:
        env["VLLM_OVERLAY_PREFIX_PREFILL"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout[proc.stdout.index("{") :])


@pytest.mark.parametrize("opt_in", [True, False])
def test_kernel_switch(opt_in: bool) -> None:
    report = probe(opt_in)
    assert report["problems"] == []
    if opt_in:
        assert report["kernel_module"] == "vllm_overlay.v1.attention.ops.prefix_prefill"
        assert report["state_kernel"] == "overlay"
    else:
        assert report["kernel_module"] == "vllm.v1.attention.ops.prefix_prefill"
        assert report["state_kernel"] == "upstream"
