"""The environment that turns the overlay, or some of its fixes, off.

One reading for the plugin and both doctors (the overlay's and the
toolkit's), so a report says what vLLM started in the same environment
would do.

* ``VLLM_OVERLAY_DISABLE=1`` (or ``all``): every fix off;
  ``VLLM_OVERLAY_DISABLE=NAME[,NAME]``: those fixes off (the others still
  install); a name that is no fix's is ignored with a warning that names
  the fixes, on every platform (it is the user's setting).
* ``VLLM_PLUGINS``: when set, vLLM loads only the plugins it names.
* ``VLLM_OVERLAY_STRICT=1``: raise when the installed vLLM's code is not
  recognised (or the overlay fails), instead of warning.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from vllm_overlay.entry_points import ENTRY_POINT_NAME

DISABLE_ENV = "VLLM_OVERLAY_DISABLE"
STRICT_ENV = "VLLM_OVERLAY_STRICT"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def disabled_names(known: Iterable[str]) -> tuple[set[str], list[str]]:
    """What ``VLLM_OVERLAY_DISABLE`` turns off among the ``known`` fix names
    (all of them for "1" or "all"), and the names in it that are no fix's."""
    known = set(known)
    value = os.environ.get(DISABLE_ENV, "").strip()
    if value.lower() in _TRUE | {"all"}:
        return known, []
    if value.lower() in _FALSE:
        return set(), []
    names = {name.strip() for name in value.split(",") if name.strip()}
    return names & known, sorted(names - known)


def unknown_names_warning(unknown: list[str], known: Iterable[str]) -> str:
    return (
        f"vllm-overlay: {DISABLE_ENV} names no fix: {', '.join(unknown)}; ignored "
        f"(the fixes: {', '.join(known)}; or 1 for all)"
    )


def allowed_by_vllm_plugins() -> bool:
    """vLLM loads a general plugin only if VLLM_PLUGINS is unset or names it."""
    value = os.environ.get("VLLM_PLUGINS")
    if value is None:
        return True
    return ENTRY_POINT_NAME in [name.strip() for name in value.split(",")]
