"""The record of what the overlay patches in vLLM, why, and when it goes away.

In the manner of vllm-ascend's patch notes: each target says what it
changes (Why / How), the upstream work it stands for (Related PR), and the
plan for its removal. ``python -m vllm_overlay`` and ``vllm-patchkit
doctor`` show it. Each target has its own classifier and install step,
keyed by :attr:`PatchTarget.name` (also the name ``VLLM_OVERLAY_DISABLE``
takes to turn one off).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class PatchTarget:
    """One vLLM callable the overlay changes."""

    name: str
    """Stable key for code and reports."""
    module: str
    qualname: str
    """``Class.method`` inside :attr:`module`."""
    source_file: str
    """The file, relative to the vLLM source root."""
    why: str
    how: str
    related: tuple[str, ...]
    affected: str
    """vLLM releases that need the patch (first-last, inclusive)."""
    inert_from: str
    """The first release whose code the overlay leaves alone (fixed there)."""
    removal: str
    reaches: tuple[str, ...] = ()
    """The paths in vLLM through which the patched callable is used."""

    @property
    def target(self) -> str:
        return f"{self.module}:{self.qualname}"

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, **asdict(self)}


CAPTURE_HOST_OFFSETS = PatchTarget(
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
    affected="0.11.1-0.28.0",
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

AITER_UNIFIED_OFFSETS = PatchTarget(
    name="rocm-aiter-unified-capture-keeps-offsets",
    module="vllm.v1.attention.backends.rocm_aiter_unified_attn",
    qualname="RocmAiterUnifiedAttentionBackend.get_builder_cls",
    source_file="vllm/v1/attention/backends/rocm_aiter_unified_attn.py",
    why=(
        "ROCM_AITER_UNIFIED_ATTN hands out the generic ROCm builder, whose "
        "capture zeroes the device query offsets (query_start_loc) to keep "
        "ROCM_ATTN's prefix-prefill kernel in bounds (#25985). AITER unified "
        "attention does not run that kernel: its metadata points at the model "
        "runner's persistent offsets buffer, which the captured graph reads "
        "as cu_seqlens_q on every replay. After the zeroing, a graph run "
        "before the runner rewrites the buffer (the FULL-graph replays of "
        "dummy batches, the V2 runner's capture warm-up) reads query length 0 "
        "for every request, and so do the builders of later KV-cache groups "
        "in the same capture loop. Upstream fixed it in 0.29.0 (#53821)."
    ),
    how=(
        "At start-up the plugin reads rocm_aiter_unified_attn.py by its AST "
        "(no import): get_builder_cls must be a plain @staticmethod whose body "
        "is exactly `return RocmAttentionMetadataBuilder`, that name bound only "
        "by its import from rocm_attn, and rocm_attn's capture must zero the "
        "device offsets in place (the shape of 0.11.1-0.28.0, with or without "
        "the #51585 fix). When vLLM imports the AITER module (ROCm only), after "
        "proving the loaded get_builder_cls is the code that was read, it "
        "creates RocmAiterUnifiedAttentionMetadataBuilder, a subclass of vLLM's "
        "RocmAttentionMetadataBuilder whose capture calls the inherited method "
        "(every vendor line and the #51585 fix run as installed) and then "
        "copies the saved device offsets back into the same tensor; the host "
        "offsets are not touched. get_builder_cls is wrapped to hand out that "
        "subclass where it handed out the generic builder; ROCM_ATTN keeps the "
        "generic one. Code it cannot prove is left alone, with a warning naming "
        "the file, the line and why."
    ),
    related=(
        (
            "vLLM PR #53821: [Bugfix][ROCm] Preserve AITER unified-attention "
            "metadata during graph replay (the AITER builder, in 0.29.0)"
        ),
        (
            "vLLM issue #25985: why the generic capture zeroes the device "
            "offsets (band-aid PR #25983; ROCM_ATTN keeps it)"
        ),
        (
            "vLLM PR #51585: the host offsets, kept by "
            "rocm-capture-keeps-host-offsets (the inherited method runs it)"
        ),
    ),
    affected="0.11.1-0.28.0",
    inert_from="0.29.0",
    removal=(
        "Inert from vLLM 0.29.0, whose AITER unified backend hands out its own "
        "builder (the overlay sees that shape and does nothing). Remove this "
        "target together with rocm-capture-keeps-host-offsets, when the oldest "
        "vLLM release the overlay supports is 0.29.0 or newer."
    ),
    reaches=(
        (
            "ROCM_AITER_UNIFIED_ATTN: RocmAiterUnifiedAttentionBackend."
            "get_builder_cls() (the runner's attention groups and its CUDA-graph "
            "support check)"
        ),
        (
            "builders vLLM derives from it (fast-prefill KV sharing, "
            "encoder-only, chunked-local, static-sink) subclass the builder it "
            "hands out"
        ),
        "subclasses of RocmAiterUnifiedAttentionBackend that inherit get_builder_cls",
    ),
)

RECORD: tuple[PatchTarget, ...] = (CAPTURE_HOST_OFFSETS, AITER_UNIFIED_OFFSETS)
"""Every target the overlay patches, in the order it arms them."""


def render_record(targets: tuple[PatchTarget, ...] = RECORD) -> list[str]:
    """Plain-text lines for a human report."""
    lines = []
    for target in targets:
        lines += [
            f"patch {target.name}",
            f"  target: {target.target} ({target.source_file})",
            f"  affects vLLM {target.affected}; inert from {target.inert_from}",
            f"  why: {target.why}",
            f"  how: {target.how}",
        ]
        lines += [f"  related: {item}" for item in target.related]
        lines.append(f"  removal: {target.removal}")
        lines += [f"  reaches: {path}" for path in target.reaches]
    return lines
