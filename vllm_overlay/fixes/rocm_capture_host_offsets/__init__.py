"""#51585: ROCM_ATTN's capture zeroes the device query offsets only.

The decision reads the installed ``rocm_attn.py`` by its AST (see
:mod:`.code`) and plans the fix on the method as installed (see
:mod:`.install`): only the known bug is patched, and only by removing its
one statement. The opt-in prefix-prefill kernel
(:mod:`vllm_overlay.kernel_switch`) rides on this fix.
"""

from __future__ import annotations

from pathlib import Path

from vllm_overlay.fixes.base import Fix, IntentionalWrite, deferred
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    inspect_capture_tree,
    read_capture,
)
from vllm_overlay.record import PatchTarget
from vllm_overlay.state import InstallState

RECORD = PatchTarget(
    name="rocm-capture-keeps-host-offsets",
    module="vllm.v1.attention.backends.rocm_attn",
    qualname="RocmAttentionMetadataBuilder.build_for_cudagraph_capture",
    source_file="vllm/v1/attention/backends/rocm_attn.py",
    why=(
        "During full CUDA graph capture on ROCm the method zeroes the host copy "
        "of the query offsets (query_start_loc_cpu) as well as the device copy. "
        "The model runner shares that host tensor with the metadata builders of "
        "every other KV-cache group, so in hybrid-attention models (MiniMax-M3) "
        "the later builders see query length 0 and the engine fails to start "
        "(AssertionError in minimax_m3 indexer.py). Only the device zeroing is "
        "needed, to keep the prefix-prefill kernel in bounds during capture."
    ),
    how=(
        "At vLLM start-up the plugin reads rocm_attn.py by its AST (no import) "
        "and arms an import hook. When vLLM imports rocm_attn (ROCm only), the "
        "method as installed is recompiled with the one statement "
        "`<metadata>.query_start_loc_cpu.zero_()` removed and every other line "
        "kept (vendor lines included), after an AST diff proves that statement "
        "is the only change and an equal code object proves the loaded method "
        "is the source that was read; it then replaces the method on vLLM's own "
        "class. Code it cannot prove is left alone, with a warning naming the "
        "file, the line and why."
    ),
    related=(
        (
            "vLLM PR #51585: [ROCm] [Bugfix] Preserve CPU query offsets during "
            "capture (the fix, in 0.29.0)"
        ),
        (
            "vLLM issue #25985: invalid memory access in prefix prefill during "
            "capture (why the device offsets are zeroed; band-aid PR #25983)"
        ),
    ),
    affected="0.11.1..0.28.0",
    inert_from="0.29.0",
    removal=(
        "Inert from vLLM 0.29.0, whose method zeroes only the device offsets "
        "(the overlay sees the fixed shape and does nothing). Remove this "
        "target when the oldest vLLM release the overlay supports is 0.29.0 "
        "or newer."
    ),
    reaches=(
        "ROCM_ATTN: RocmAttentionBackend.get_builder_cls()",
        "ROCM_AITER_UNIFIED_ATTN: RocmAiterUnifiedAttentionBackend.get_builder_cls()",
        "subclasses of RocmAttentionMetadataBuilder calling super()",
    ),
)
NAME = RECORD.name


def assess_file(source: Path, version: str) -> InstallState:
    """The decision for one ``rocm_attn.py`` (installed, or in a tree)."""
    method, code = read_capture(source.read_bytes(), source)
    return FIX.decided(
        version, code, lambda: deferred(FIX.install, "plan_fix")(method, code)
    )


FIX = Fix(
    order=10,
    record=RECORD,
    pr="#51585",
    install=f"{__name__}.install",
    decide=assess_file,
    read_tree=inspect_capture_tree,
    also=deferred("vllm_overlay.kernel_switch", "kernel_opt_in"),
    rules=f"{__name__}.series",
    intentional_writes=(
        IntentionalWrite(
            RECORD.source_file,
            RECORD.qualname,
            "query_start_loc",
            ("zero_",),
            "#25985 band-aid (PR #25983): the device query offsets are zeroed "
            "during capture to avoid an illegal memory access in the "
            "prefix-prefill kernel; #51585 kept it and removed only the host "
            "zeroing",
            guards="all-zero query offsets: every request's query length is 0",
        ),
        IntentionalWrite.capture_speed("rocm_attn.py", "RocmAttentionMetadataBuilder"),
    ),
)
