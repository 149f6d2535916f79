"""Decide, arm and log the #53821 fix (ROCM_AITER_UNIFIED_ATTN's builder).

The decision reads two files by their AST, imports neither: the AITER
module (:mod:`vllm_overlay.aiter_shape`) and ``rocm_attn.py``, whose capture
method the new builder inherits and must be a known shape that zeroes the
device offsets in place (buggy or #51585-fixed), so that putting them back is
exactly what 0.29.0's builder leaves. The install waits until vLLM imports
the AITER module (ROCm only); then, and only then, it logs above debug:
"installed" once the backend hands out the new builder, or a warning naming
the file, the line and why the code was left alone.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from vllm_overlay.aiter_fix import AITER_BUILDER, AiterPlan, FixRefused, install_on
from vllm_overlay.aiter_shape import AiterShape, inspect_aiter_source
from vllm_overlay.capture_shape import (
    CaptureCode,
    Shape,
    inspect_capture_source,
)
from vllm_overlay.import_hook import after_import
from vllm_overlay.install import (
    Action,
    InstallState,
    logger,
    upstream_source_file,
    vllm_version,
    warn_when_loaded,
)
from vllm_overlay.record import AITER_UNIFIED_OFFSETS

TARGET = AITER_UNIFIED_OFFSETS
AITER_MODULE = TARGET.module
WHAT = " for ROCM_AITER_UNIFIED_ATTN (#53821)"
"""Names this fix in shared log messages."""


def aiter_source_file() -> Path | None:
    """The installed ``rocm_aiter_unified_attn.py``, located without importing it."""
    try:
        spec = importlib.util.find_spec(AITER_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def assess_aiter(rocm: CaptureCode | None = None) -> InstallState:
    """What the overlay would do for the AITER backend of the installed vLLM.

    ``rocm``: the verdict on the installed ``rocm_attn.py`` when the caller
    has it already (read here otherwise).
    """
    version = vllm_version()
    file = aiter_source_file()
    if file is None:
        return _state(Action.ABSENT, version, f"vLLM {version} has no {AITER_MODULE}")
    if rocm is None:
        generic = upstream_source_file()
        if generic is None:
            return _state(
                Action.ABSENT, version, f"vLLM {version} has no rocm_attn module"
            )
        rocm = inspect_capture_source(generic.read_bytes(), generic)
    return assess_aiter_file(file, rocm, version)


def assess_aiter_file(file: Path, rocm: CaptureCode, version: str) -> InstallState:
    """The decision for one AITER module and the ``rocm_attn.py`` it imports."""
    code = inspect_aiter_source(file.read_bytes(), file)
    if code.shape is AiterShape.OWN_BUILDER:
        return _state(Action.NOT_NEEDED, version, code.detail, code)
    if code.shape is AiterShape.MISSING:
        return _state(Action.ABSENT, version, code.detail, code)
    if code.shape is not AiterShape.SHARED:
        why = code.detail
        if code.line and not why.startswith(str(code.file)):
            why = f"{code.file}:{code.line}: {why}"
        return _left_alone(version, code, f"unrecognised {code.shape} code: {why}")
    if rocm.shape is Shape.NO_ZEROING:
        return _state(
            Action.NOT_NEEDED,
            version,
            f"{code.detail}; its capture does not zero the offsets: {rocm.detail}",
            code,
        )
    if rocm.shape not in (Shape.BUGGY, Shape.FIXED):
        return _left_alone(
            version,
            code,
            f"{code.detail}; the builder's capture is not a known shape "
            f"({rocm.shape}): {rocm.detail}",
        )
    plan = AiterPlan(code)
    return InstallState(
        Action.INSTALLED,
        version,
        plan.summary,
        code,
        TARGET.reaches,
        plan=plan,
        name=TARGET.name,
    )


def _state(
    action: Action, version: str, reason: str, code: object = None
) -> InstallState:
    return InstallState(action, version, reason, code, name=TARGET.name)  # type: ignore[arg-type]


def _left_alone(version: str, code: object, why: str) -> InstallState:
    return _state(Action.UNRECOGNISED, version, f"left as it is: {why}", code)


def arm_aiter(state: InstallState) -> None:
    """Install the fix as soon as vLLM imports the AITER module."""
    assert isinstance(state.plan, AiterPlan)
    plan = state.plan

    def install(module: ModuleType) -> None:
        # Runs inside vLLM's import of the module: never fail that import.
        try:
            _install(module, plan, state)
        except Exception as exc:
            problem = f"installing failed: {exc!r}"
            state.problems.append(problem)
            logger.warning("vllm-overlay: fix%s not installed: %s", WHAT, problem)

    after_import(AITER_MODULE, install)


def warn_aiter_when_loaded(state: InstallState) -> None:
    warn_when_loaded(state, AITER_MODULE, WHAT)


def _install(module: ModuleType, plan: AiterPlan, state: InstallState) -> None:
    try:
        builder, new = install_on(module, plan)
    except FixRefused as exc:
        problem = f"left as it is: {exc}"
        state.problems.append(problem)
        logger.warning(
            "vllm-overlay: fix%s not installed on vLLM %s: %s",
            WHAT,
            state.vllm_version,
            problem,
        )
        return
    state.applied_to_class = True
    if new:
        logger.info(
            "vllm-overlay: installed the #53821 AITER unified capture fix on "
            "vLLM %s: %s (%s.%s)",
            state.vllm_version,
            plan.summary,
            builder.__module__,
            AITER_BUILDER,
        )
