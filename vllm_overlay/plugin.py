"""The ``vllm.general_plugins`` entry point: install the fixes at vLLM start-up.

vLLM calls :func:`register` in every process it starts, possibly more than
once, on every platform. Each fix in :data:`vllm_overlay.record.RECORD` is
decided on its own (a vLLM can need one, both or none): the #51585 capture
fix on ``rocm_attn`` and the #53821 builder for ``ROCM_AITER_UNIFIED_ATTN``.
It never breaks start-up: outside strict mode every failure becomes a
warning, logged when vLLM imports the module concerned (ROCm), and vLLM
runs as it would without that fix. On platforms that never load those
modules (CUDA, CPU) it logs nothing above debug level.

Environment:

* ``VLLM_OVERLAY_DISABLE=1`` (or ``all``): do nothing.
  ``VLLM_OVERLAY_DISABLE=NAME[,NAME]``: skip the fixes of those record names
  (the others still install); a name that is no fix's is ignored with a
  warning that names the fixes, on every platform (it is the user's setting).
* ``VLLM_OVERLAY_STRICT=1``: raise when the installed vLLM's code is not
  recognised (or the overlay fails), instead of warning.
* ``VLLM_OVERLAY_PREFIX_PREFILL=1``: opt in to the overlay's capture-safe
  prefix-prefill Triton kernel (see :mod:`vllm_overlay.kernel_switch`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from vllm_overlay.aiter_install import (
    AITER_MODULE,
    arm_aiter,
    assess_aiter,
    warn_aiter_when_loaded,
)
from vllm_overlay.capture_shape import CaptureCode
from vllm_overlay.install import (
    UPSTREAM_MODULE,
    Action,
    InstallState,
    arm,
    assess,
    logger,
    vllm_version,
    warn_when_loaded,
)
from vllm_overlay.kernel_switch import KERNEL_ENV, arm_kernel
from vllm_overlay.record import AITER_UNIFIED_OFFSETS, CAPTURE_HOST_OFFSETS, RECORD

DISABLE_ENV = "VLLM_OVERLAY_DISABLE"
STRICT_ENV = "VLLM_OVERLAY_STRICT"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}

_states: dict[str, InstallState] = {}
"""What :func:`register` did in this process, by fix name (empty: not yet)."""


class OverlayStrictError(RuntimeError):
    """Strict mode: the overlay could not recognise or fix the installed vLLM."""


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def disable_setting() -> tuple[set[str], list[str]]:
    """What ``VLLM_OVERLAY_DISABLE`` turns off (record names; all of them for
    "1" or "all"), and the names in it that are no fix's (ignored)."""
    known = {target.name for target in RECORD}
    value = os.environ.get(DISABLE_ENV, "").strip()
    if value.lower() in _TRUE | {"all"}:
        return known, []
    if value.lower() in _FALSE:
        return set(), []
    names = {name.strip() for name in value.split(",") if name.strip()}
    return names & known, sorted(names - known)


def disabled_fixes() -> set[str]:
    """The record names ``VLLM_OVERLAY_DISABLE`` turns off."""
    return disable_setting()[0]


def unknown_names_warning(unknown: list[str]) -> str:
    known = ", ".join(target.name for target in RECORD)
    return (
        f"vllm-overlay: {DISABLE_ENV} names no fix: {', '.join(unknown)}; ignored "
        f"(the fixes: {known}; or 1 for all)"
    )


def current_states() -> dict[str, InstallState]:
    """What :func:`register` did for each fix, in the record's order."""
    return dict(_states)


def register() -> None:
    """Entry point called by ``vllm.plugins.load_general_plugins``.

    Logs at debug level only: registration happens on every platform, and
    the fixes matter only where vLLM loads the ROCm modules. The import
    hooks log "installed" (info) or why the code was left alone (warning)
    at that moment.
    """
    if _states:
        return
    strict = env_flag(STRICT_ENV)
    disabled, unknown = disable_setting()
    if unknown:
        logger.warning("%s", unknown_names_warning(unknown))
    capture = _register_fix(
        CAPTURE_HOST_OFFSETS.name,
        UPSTREAM_MODULE,
        assess,
        arm,
        warn_when_loaded,
        strict,
        disabled,
    )
    rocm = capture.code if isinstance(capture.code, CaptureCode) else None
    _register_fix(
        AITER_UNIFIED_OFFSETS.name,
        AITER_MODULE,
        lambda: assess_aiter(rocm),
        arm_aiter,
        warn_aiter_when_loaded,
        strict,
        disabled,
    )
    if env_flag(KERNEL_ENV) and capture.action is not Action.DISABLED:
        try:
            arm_kernel(capture)
        except Exception as exc:
            if strict:
                raise OverlayStrictError(f"kernel switch failed: {exc!r}") from exc
            logger.debug("vllm-overlay: kernel switch failed: %r", exc)


def _register_fix(
    name: str,
    module: str,
    assess_fix: Callable[[], InstallState],
    arm_fix: Callable[[InstallState], None],
    warn_fix: Callable[[InstallState], None],
    strict: bool,
    disabled: set[str],
) -> InstallState:
    """Decide one fix, arm it or arrange its warning; record the state."""
    if name in disabled:
        state = InstallState(
            Action.DISABLED, vllm_version(), f"{DISABLE_ENV} is set", name=name
        )
        _states[name] = state
        logger.debug("vllm-overlay: %s disabled by %s", name, DISABLE_ENV)
        return state
    try:
        state = assess_fix()
        if state.action is Action.UNRECOGNISED and strict:
            raise OverlayStrictError(
                f"vllm-overlay: {name}: nothing done on vLLM {state.vllm_version}: "
                f"{state.reason}"
            )
        if state.action is Action.INSTALLED:
            arm_fix(state)
        elif state.action is Action.UNRECOGNISED:
            warn_fix(state)
    except OverlayStrictError:
        raise
    except Exception as exc:
        state = InstallState(
            Action.UNRECOGNISED, vllm_version(), f"overlay failed: {exc!r}", name=name
        )
        _states[name] = state
        if strict:
            raise OverlayStrictError(f"{name}: {state.reason}") from exc
        logger.debug("vllm-overlay: %s: %s", name, state.reason)
        try:
            warn_fix(state)
        except Exception:
            logger.warning("vllm-overlay: %s: %s", name, state.reason)
        return state
    _states[name] = state
    if state.action is Action.INSTALLED:
        logger.debug(
            "vllm-overlay: armed %s on vLLM %s; when vLLM imports %s: %s",
            name,
            state.vllm_version,
            module,
            state.reason,
        )
    else:
        logger.debug(
            "vllm-overlay: %s: %s on vLLM %s: %s",
            name,
            state.action,
            state.vllm_version,
            state.reason,
        )
    return state
