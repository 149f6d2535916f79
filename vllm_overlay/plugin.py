"""The ``vllm.general_plugins`` entry point: install the fixes at vLLM start-up.

vLLM calls :func:`register` in every process it starts, possibly more than
once, on every platform. Each fix of the registry is decided on its own, in
the registry's order, with the decisions of the fixes it needs. It never
breaks start-up: outside strict mode every failure becomes a warning, logged
when vLLM imports the module concerned (ROCm), and vLLM runs as it would
without that fix; elsewhere (CUDA, CPU) it logs nothing above debug level.
Its environment: :mod:`vllm_overlay.settings`, and
``VLLM_OVERLAY_PREFIX_PREFILL=1`` (:mod:`vllm_overlay.kernel_switch`).
"""

from __future__ import annotations

from vllm_overlay.arming import logger, warn_when_loaded
from vllm_overlay.fixes import FIXES, disable_setting
from vllm_overlay.fixes.base import Fix
from vllm_overlay.installed import vllm_version
from vllm_overlay.settings import (
    DISABLE_ENV,
    STRICT_ENV,
    env_flag,
    unknown_names_warning,
)
from vllm_overlay.state import Action, InstallState

_states: dict[str, InstallState] = {}
"""What :func:`register` did in this process, by fix name (empty: not yet)."""


class OverlayStrictError(RuntimeError):
    """Strict mode: the overlay could not recognise or fix the installed vLLM."""


def current_states() -> dict[str, InstallState]:
    """What :func:`register` did for each fix, in the registry's order."""
    return dict(_states)


def register() -> None:
    """Entry point called by ``vllm.plugins.load_general_plugins``. Logs at
    debug level only: the import hooks log "installed" (info) or why the
    code was left alone (warning) when vLLM loads the module."""
    if _states:
        return
    strict = env_flag(STRICT_ENV)
    disabled, unknown = disable_setting()
    if unknown:
        logger.warning(
            "%s", unknown_names_warning(unknown, [fix.name for fix in FIXES])
        )
    for fix in FIXES:
        state = _register_fix(fix, strict, disabled)
        if fix.also is not None and state.action is not Action.DISABLED:
            try:
                fix.also(state)
            except Exception as exc:
                if strict:
                    raise OverlayStrictError(f"{fix.name}: {exc!r}") from exc
                logger.debug("vllm-overlay: %s: %r", fix.name, exc)


def _register_fix(fix: Fix, strict: bool, disabled: set[str]) -> InstallState:
    """Decide one fix, arm it or arrange its warning; record the state."""
    name = fix.name
    if name in disabled:
        state = fix.state(Action.DISABLED, vllm_version(), f"{DISABLE_ENV} is set")
        _states[name] = state
        logger.debug("vllm-overlay: %s disabled by %s", name, DISABLE_ENV)
        return state
    try:
        state = fix.assess({need: _states[need] for need in fix.needs})
        if state.action is Action.UNRECOGNISED and strict:
            raise OverlayStrictError(
                f"vllm-overlay: {name}: nothing done on vLLM {state.vllm_version}: "
                f"{state.reason}"
            )
        if state.action is Action.INSTALLED:
            fix.arm(state)
        elif state.action is Action.UNRECOGNISED:
            warn_when_loaded(state, fix.module, fix.what)
    except OverlayStrictError:
        raise
    except Exception as exc:
        reason = f"overlay failed: {exc!r}"
        state = fix.state(Action.UNRECOGNISED, vllm_version(), reason)
        _states[name] = state
        if strict:
            raise OverlayStrictError(f"{name}: {state.reason}") from exc
        logger.debug("vllm-overlay: %s: %s", name, state.reason)
        try:
            warn_when_loaded(state, fix.module, fix.what)
        except Exception:
            logger.warning("vllm-overlay: %s: %s", name, state.reason)
        return state
    _states[name] = state
    if state.action is Action.INSTALLED:
        logger.debug(
            "vllm-overlay: armed %s on vLLM %s; when vLLM imports %s: %s",
            name,
            state.vllm_version,
            fix.module,
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
