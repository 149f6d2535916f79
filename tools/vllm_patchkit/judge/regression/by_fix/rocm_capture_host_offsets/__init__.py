"""#51585's scenarios, their judge and mutants: the ROCm capture keeps the
host query offsets.

Torch-free: :mod:`.runs` runs the scenarios (with :mod:`.capture_loop`, the
runners' per-group loops, and :mod:`.victims`, every builder that reads the
host offsets), :mod:`.checks` judges them by rules of their own (a victim's
build compared with the one it makes from the intended metadata, the PR's
crash by its file and line), :mod:`.mutants` rewrites the capture method for
the mutation tier; all but :mod:`.victims` (torch-free: it names the
victims' scenarios) are named here, not imported.
"""

from __future__ import annotations

from vllm_overlay.fixes.rocm_capture_host_offsets import RECORD
from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets.victims import (
    VICTIMS,
)

FIX = RECORD.name
CAPTURE, REPEATED = "capture_effects", "repeated_capture"
MINIMAX = "minimax_indexer_after_rocm"
LOOP_V1, LOOP_V2 = "capture_loop_v1", "capture_loop_v2"
"""vLLM's per-group capture loops, V1 and V2 (the runner's own path)."""
CORE = (CAPTURE, MINIMAX)
SCENARIOS = (
    *CORE,
    REPEATED,
    # The ROCM_ATTN half of #53821's pair: ROCM_ATTN's capture, reached
    # through its backend (run by that fix's module).
    "rocm_attn_capture_via_backend",
    LOOP_V1,
    LOOP_V2,
    # Each builder run after ROCM_ATTN's capture on the shared offsets.
    *(victim.scenario for victim in VICTIMS),
)

RUNS = f"{__name__}.runs"
CHECKS = f"{__name__}.checks"
"""The module whose ``check`` judges each outcome (torch-free)."""
RECIPES = f"{__name__}.victims"
"""The module of its victims' recipes (``RECIPES``), which the audit uses."""
MUTATION = f"{__name__}.mutants"
