"""The band-aids upstream wrote on purpose: shared writes that are not bugs.

A write listed here is ``intentional`` for the backend it was made for. Whom
else it reaches is :mod:`.reach`'s question: a band-aid another backend's
builder inherits, or is handed, and whose written value that backend then
reads, is harmful for it. Standard library only: the static pass (and the
pre-commit hook built on it) reads this without torch or vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class _Write(Protocol):
    """What a band is matched on (an observed write, a static write, a finding)."""

    file: str
    method: str
    field: str
    operation: str


@dataclass(frozen=True)
class Band:
    """A write upstream made on purpose, with where it is documented."""

    file: str
    method: str
    field: str
    operations: tuple[str, ...]
    reason: str
    guards: str = ""
    """What another backend's reader gets, when the band guards its own
    backend's kernel only (:mod:`.reach` then asks whom else it reaches);
    empty for a value every backend can run on."""


_CAPTURE_SPEED = (
    "capture speed, as the code's comment says: with seq_lens at max_model_len "
    "graph capture is very slow, so the capture build sets the (device) "
    "seq_lens its metadata aliases to 1; the runner fills the buffer again "
    "before every replay; a length of 1 is a valid batch for any backend "
    "(#53821's AITER builder keeps the same fill)"
)
_BACKENDS = "vllm/v1/attention/backends"

INTENTIONAL: tuple[Band, ...] = (
    Band(
        f"{_BACKENDS}/rocm_attn.py",
        "RocmAttentionMetadataBuilder.build_for_cudagraph_capture",
        "query_start_loc",
        ("zero_",),
        "#25985 band-aid (PR #25983): the device query offsets are zeroed during "
        "capture to avoid an illegal memory access in the prefix-prefill kernel; "
        "#51585 kept it and removed only the host zeroing",
        guards="all-zero query offsets: every request's query length is 0",
    ),
    *(
        Band(
            f"{_BACKENDS}/{file}",
            f"{cls}.build_for_cudagraph_capture",
            "seq_lens",
            ("fill_",),
            _CAPTURE_SPEED,
        )
        for file, cls in (
            ("rocm_attn.py", "RocmAttentionMetadataBuilder"),
            ("rocm_aiter_unified_attn.py", "RocmAiterUnifiedAttentionMetadataBuilder"),
            ("triton_attn.py", "TritonAttentionMetadataBuilder"),
            ("turboquant_attn.py", "TurboQuantMetadataBuilder"),
        )
    ),
)
"""Matched by file, method, field and operation (line numbers move between
releases). Nothing is intentional by guess: a write not listed here is
harmful or latent by what it does."""


def intentional(write: _Write) -> Band | None:
    """The band that documents ``write``, if upstream made it on purpose."""
    for band in INTENTIONAL:
        if (
            write.file == band.file
            and write.method == band.method
            and write.field == band.field
            and write.operation in band.operations
        ):
            return band
    return None
