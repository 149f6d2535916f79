"""The record of what the overlay patches in vLLM, why, and when it goes away.

In the manner of vllm-ascend's patch notes: each target says what it
changes (Why / How), the upstream work it stands for (Related PR), and the
plan for its removal. ``python -m vllm_overlay`` and ``vllm-patchkit
doctor`` show it. A second target (issue #17: ROCM_AITER_UNIFIED_ATTN's own
builder) is one more :class:`PatchTarget` in :data:`RECORD`, with its own
classifier and install step keyed by :attr:`PatchTarget.name`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
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

RECORD: tuple[PatchTarget, ...] = (CAPTURE_HOST_OFFSETS,)
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
