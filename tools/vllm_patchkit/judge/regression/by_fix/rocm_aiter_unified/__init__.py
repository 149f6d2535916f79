"""#53821's scenarios and mutants: the pair of ROCm capture builders.

Torch-free: :mod:`.runs` runs the scenarios, :mod:`.mutants` rewrites the
pair's methods for the mutation tier; both are named here, not imported.
"""

from __future__ import annotations

from vllm_overlay.fixes.rocm_aiter_unified_builder import RECORD

FIX = RECORD.name
AITER_CAPTURE = "aiter_unified_capture"
ROCM_CAPTURE = "rocm_attn_capture_via_backend"
AITER_LOOP = "aiter_unified_runner_loop"
SCENARIOS = (AITER_CAPTURE, AITER_LOOP)
"""Its fix's scenarios; ROCM_CAPTURE, run here, is #51585's."""
CORE = (AITER_CAPTURE,)

FACTS = {
    AITER_CAPTURE: (
        "device_same_tensor",
        "device_unchanged",
        "host_same_tensor",
        "host_unchanged",
        "seq_lens_all_one",
        "metadata_uses_shared_buffers",
    ),
    ROCM_CAPTURE: (
        "device_same_tensor",
        "device_zeroed",
        "host_same_tensor",
        "host_unchanged",
        "seq_lens_all_one",
        "metadata_uses_shared_buffers",
    ),
    AITER_LOOP: (
        "runner_device_kept",
        "runner_host_kept",
        "metadata_reads_runner_buffer",
        "seq_lens_all_one",
    ),
}
"""What each scenario of the ROCm builder pair must show: AITER unified keeps
both offsets, ROCM_ATTN reached through its backend zeroes the device ones
only."""


RUNS = f"{__name__}.runs"
MUTATION = f"{__name__}.mutants"
