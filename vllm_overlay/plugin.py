"""The ``vllm.general_plugins`` entry point: install the fix at vLLM start-up.

vLLM calls :func:`register` in every process it starts, possibly more than
once. It never breaks start-up: outside strict mode every failure becomes a
warning and vLLM runs as it would without the overlay.

Environment:

* ``VLLM_OVERLAY_DISABLE=1``: do nothing.
* ``VLLM_OVERLAY_STRICT=1``: raise when the installed vLLM's code is not
  recognised (or the overlay fails), instead of warning.
* ``VLLM_OVERLAY_PREFIX_PREFILL=1``: opt in to the overlay's capture-safe
  prefix-prefill Triton kernel (see :mod:`vllm_overlay.kernel_switch`).
"""

from __future__ import annotations

import os

from vllm_overlay.install import Action, InstallState, arm, assess, logger, vllm_version
from vllm_overlay.kernel_switch import KERNEL_ENV, arm_kernel

DISABLE_ENV = "VLLM_OVERLAY_DISABLE"
STRICT_ENV = "VLLM_OVERLAY_STRICT"
_TRUE = {"1", "true", "yes", "on"}

_state: InstallState | None = None


class OverlayStrictError(RuntimeError):
    """Strict mode: the overlay could not recognise or fix the installed vLLM."""


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def current_state() -> InstallState | None:
    """What :func:`register` did in this process (None: not called yet)."""
    return _state


def register() -> None:
    """Entry point called by ``vllm.plugins.load_general_plugins``."""
    global _state
    if _state is not None:
        return
    strict = env_flag(STRICT_ENV)
    if env_flag(DISABLE_ENV):
        _state = InstallState(Action.DISABLED, vllm_version(), f"{DISABLE_ENV} is set")
        logger.info("vllm-overlay: disabled by %s", DISABLE_ENV)
        return
    try:
        state = assess()
        if state.action is Action.INSTALLED:
            arm(state)
        if env_flag(KERNEL_ENV):
            arm_kernel(state)
    except Exception as exc:
        _state = InstallState(
            Action.UNRECOGNISED, vllm_version(), f"overlay failed: {exc!r}"
        )
        if strict:
            raise OverlayStrictError(_state.reason) from exc
        logger.warning(
            "vllm-overlay: not installed on vLLM %s: %r", _state.vllm_version, exc
        )
        return
    _state = state
    if state.action is Action.INSTALLED:
        logger.info(
            "vllm-overlay: installed the #51585 capture fix on vLLM %s (%s)",
            state.vllm_version,
            state.code.file if state.code else "?",
        )
    elif state.action is Action.NOT_NEEDED:
        logger.debug("vllm-overlay: vLLM %s %s", state.vllm_version, state.reason)
    else:
        message = (
            f"vllm-overlay: nothing done on vLLM {state.vllm_version}: {state.reason}"
        )
        if strict:
            raise OverlayStrictError(message)
        logger.warning("%s", message)
