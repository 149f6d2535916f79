"""The record of what the overlay patches in vLLM, why, and when it goes away.

In the manner of vllm-ascend's patch notes: each target says what it
changes (Why / How), the upstream work it stands for (Related PR), and the
plan for its removal. ``python -m vllm_overlay`` and ``vllm-patchkit
doctor`` show it. Each fix of :mod:`vllm_overlay.fixes` carries its
target; :attr:`PatchTarget.name` is the fix's name (also the name
``VLLM_OVERLAY_DISABLE`` takes to turn one off).
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
    """vLLM releases that need the patch, as a patch's ``Affects:`` writes
    them: ``first..last`` inclusive, or ``first..`` while no release fixes
    the bug (a bug upstream has not fixed has no last release)."""
    inert_from: str
    """The first release whose code the overlay leaves alone (fixed there)."""
    removal: str
    reaches: tuple[str, ...] = ()
    """The paths in vLLM through which the patched callable is used."""

    @property
    def target(self) -> str:
        return f"{self.module}:{self.qualname}"

    @property
    def unfixed(self) -> bool:
        """No release fixes the bug yet: :attr:`affected` has no last release."""
        span = self._span
        return span is not None and span.last is None

    @property
    def affected_text(self) -> str:
        """:attr:`affected` for a reader: ``0.11.1-0.28.0``, or ``0.14.0 and
        later (no release fixes it yet)``."""
        span = self._span
        if span is None:
            return self.affected
        if span.last is None:
            return f"{span.first} and later (no release fixes it yet)"
        return f"{span.first}-{span.last}"

    def predates(self, version: str) -> bool:
        """Whether release ``version`` is older than every release this
        target's bug is in (False for a version that is no release)."""
        span, release = self._span, _read(version)
        return span is not None and release is not None and release < span.first

    def affects(self, version: str) -> bool:
        """Whether release ``version`` is in :attr:`affected` (inclusive)."""
        span, release = self._span, _read(version)
        return span is not None and release is not None and release in span

    @property
    def _span(self) -> Any:
        return _read(self.affected, as_range=True)

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, **asdict(self)}


def _read(text: str, as_range: bool = False) -> Any:
    """The release range ``text`` writes, or the release it names (a
    development version: its tag's); None for neither, or without
    ``packaging`` to read it with (then nothing is comparable, so nothing
    predates)."""
    try:
        from vllm_overlay.releases import release_range, version_release
    except ImportError:
        return None
    return release_range(text) if as_range else version_release(text.strip())


def render_record(targets: tuple[PatchTarget, ...]) -> list[str]:
    """Plain-text lines for a human report."""
    lines = []
    for target in targets:
        lines += [
            f"patch {target.name}",
            f"  target: {target.target} ({target.source_file})",
            f"  affects vLLM {target.affected_text}; inert from {target.inert_from}",
            f"  why: {target.why}",
            f"  how: {target.how}",
        ]
        lines += [f"  related: {item}" for item in target.related]
        lines.append(f"  removal: {target.removal}")
        lines += [f"  reaches: {path}" for path in target.reaches]
    return lines
