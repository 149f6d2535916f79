"""The band-aids upstream wrote on purpose: shared writes that are not bugs.

A write listed here is ``intentional`` for the backend it was made for. Whom
else it reaches is :mod:`.reach`'s question: a band-aid another backend's
builder inherits, or is handed, and whose written value that backend then
reads, is harmful for it. Standard library only: the static pass (and the
pre-commit hook built on it) reads this without torch or vLLM.
"""

from __future__ import annotations

from typing import Protocol

from vllm_overlay.fixes import FIXES
from vllm_overlay.fixes.base import IntentionalWrite


class _Write(Protocol):
    """What a band is matched on (an observed write, a static write, a finding)."""

    file: str
    method: str
    field: str
    operation: str


Band = IntentionalWrite
"""A write upstream made on purpose, with where it is documented (the
fixes' records and this module name them in one type; :mod:`.reach` asks
whom else a band that ``guards`` its own backend's kernel reaches)."""


INTENTIONAL: tuple[Band, ...] = (
    # Band-aids in code no fix touches.
    IntentionalWrite.capture_speed("triton_attn.py", "TritonAttentionMetadataBuilder"),
    IntentionalWrite.capture_speed("turboquant_attn.py", "TurboQuantMetadataBuilder"),
    *(write for fix in FIXES for write in fix.intentional_writes),
)
"""Matched by file, method, field and operation (line numbers move between
releases); those in the code of a fix come from its record
(:attr:`Fix.intentional_writes <vllm_overlay.fixes.base.Fix.intentional_writes>`).
Nothing is intentional by guess: a write not listed here is harmful or
latent by what it does."""


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
