"""#53821: ROCM_AITER_UNIFIED_ATTN gets a capture builder of its own.

The decision reads two files by their AST, imports neither: the AITER
module (:mod:`.code`) and ``rocm_attn.py``, whose capture method the new
builder inherits and must be a known shape that zeroes the device offsets
in place (buggy or #51585-fixed), so that putting them back is exactly what
0.29.0's builder leaves. That capture is the #51585 fix's inspected code,
so this fix ``needs`` it and reads it from that decision.
"""

from __future__ import annotations

from pathlib import Path

from vllm_overlay.code import Code, Shape
from vllm_overlay.fixes import rocm_capture_host_offsets as capture
from vllm_overlay.fixes.base import Fix, IntentionalWrite, deferred
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    AITER_UNIFIED_ATTN,
    inspect_aiter_source,
    inspect_aiter_tree,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    CaptureCode,
    inspect_capture_tree,
)
from vllm_overlay.record import PatchTarget
from vllm_overlay.state import Action, InstallState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from vllm_overlay.fixes.base import Before

RECORD = PatchTarget(
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
    affected="0.11.1..0.28.0",
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


def decide(file: Path, version: str, before: Before) -> InstallState:
    """The decision for the AITER module at ``file``, with the capture it hands
    out: the #51585 fix's reading, or (that fix off) ``rocm_attn.py`` beside it."""
    state = before.get(capture.NAME)
    rocm = state.code if state is not None else None
    if not isinstance(rocm, CaptureCode):
        rocm = inspect_capture_tree(file.parents[len(AITER_UNIFIED_ATTN.parts) - 1])
    return assess_file(file, rocm, version)


def assess_file(file: Path, rocm: CaptureCode, version: str) -> InstallState:
    """The decision for one AITER module and the ``rocm_attn.py`` it imports."""
    code = inspect_aiter_source(file.read_bytes(), file)
    if code.shape is not Shape.BUGGY:
        return FIX.decided(version, code)
    if rocm.shape is Shape.NOT_FOR:
        return FIX.state(
            Action.NOT_NEEDED,
            version,
            f"{code.detail}; its capture does not zero the offsets: {rocm.detail}",
            code,
        )
    if rocm.shape not in (Shape.BUGGY, Shape.FIXED):
        # The bug is the AITER hand-out and the capture's zeroing together:
        # with the capture unread, whether this vLLM needs the fix is unknown.
        why = (
            f"{code.detail}; the builder's capture is not a known shape "
            f"({rocm.shape}): {rocm.detail}"
        )
        shape = rocm.shape if not rocm.judged else Shape.UNKNOWN
        return FIX.left_alone(version, Code(shape, rocm.file, rocm.line, why), why)
    return FIX.decided(version, code, lambda: deferred(FIX.install, "AiterPlan")(code))


FIX = Fix(
    order=20,
    record=RECORD,
    pr="#53821",
    install=f"{__name__}.install",
    decide=decide,
    read_tree=inspect_aiter_tree,
    what=" for ROCM_AITER_UNIFIED_ATTN (#53821)",
    needs=(capture.NAME,),
    rules=f"{__name__}.series",
    intentional_writes=(
        # The fix's builder keeps it too.
        IntentionalWrite.capture_speed(
            "rocm_aiter_unified_attn.py", "RocmAiterUnifiedAttentionMetadataBuilder"
        ),
    ),
)
