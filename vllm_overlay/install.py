"""Decide what to do with the installed vLLM, do it, and remember what was done.

The decision reads the installed ``rocm_attn.py`` by its AST (see
:mod:`vllm_overlay.capture_shape`) and plans the fix on the method as
installed (see :mod:`vllm_overlay.fix`): only the known bug is patched, and
only by removing its one statement. The patch itself waits until vLLM
imports ``rocm_attn`` (see :mod:`vllm_overlay.import_hook`); only then, and
only on the platform that loads it (ROCm), does the overlay log above debug
level: "installed" once vLLM's class carries the fix, or a warning naming
the file, the line and why it left the code alone.
"""

from __future__ import annotations

import enum
import importlib.util
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from vllm_overlay.aiter_fix import AiterPlan
from vllm_overlay.aiter_shape import AiterCode
from vllm_overlay.capture_shape import (
    CaptureCode,
    Shape,
    classify_module,
    parse_source,
)
from vllm_overlay.fix import FIX_MARKER, FixPlan, FixRefused, fixed_function, plan_fix
from vllm_overlay.import_hook import after_import
from vllm_overlay.record import CAPTURE_HOST_OFFSETS

TARGET = CAPTURE_HOST_OFFSETS
UPSTREAM_MODULE = TARGET.module
COVERED_PATHS = TARGET.reaches
"""All reach vLLM's own builder class, which is where the fix goes."""

logger = logging.getLogger("vllm.plugins.vllm_overlay")


class Action(enum.StrEnum):
    """The overlay's decision for one vLLM (the matrix prints these words)."""

    INSTALLED = "installed"
    """The known bug: the fix is armed, and installed when rocm_attn loads."""
    NOT_NEEDED = "not-needed"
    """The installed vLLM has the fix, or never had the bug."""
    DISABLED = "disabled"
    UNRECOGNISED = "unrecognised"
    """Code the overlay cannot prove it may change: left exactly as it was."""
    ABSENT = "absent"
    """No vLLM, or no rocm_attn module in it."""


@dataclass
class InstallState:
    """One fix's decision and what became of it in this process."""

    action: Action
    vllm_version: str
    reason: str
    code: CaptureCode | AiterCode | None = None
    covered: tuple[str, ...] = ()
    applied_to_class: bool = False
    """True once vLLM's builder class really carries the fixed method."""
    problems: list[str] = field(default_factory=list)
    kernel: str = "upstream"
    """Which prefix-prefill kernel vLLM's ROCm path calls: upstream or overlay."""
    plan: FixPlan | AiterPlan | None = None
    """For INSTALLED: what the install step will do (the statement to remove,
    or the builder to hand out)."""
    name: str = CAPTURE_HOST_OFFSETS.name
    """The record's name for the fix (:mod:`vllm_overlay.record`)."""

    @property
    def status(self) -> str:
        """What is true now: armed (waiting for rocm_attn), installed, ..."""
        if self.action is Action.INSTALLED:
            if self.applied_to_class:
                return "installed"
            return "refused" if self.problems else "armed"
        return str(self.action)


def vllm_version() -> str:
    """The running vLLM's version; metadata lookup only when not imported."""
    loaded = sys.modules.get("vllm")
    if loaded is not None and isinstance(getattr(loaded, "__version__", None), str):
        return loaded.__version__
    import importlib.metadata  # here: costs the toolkit's doctor a third

    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def upstream_source_file() -> Path | None:
    """The installed ``rocm_attn.py``, located without importing it."""
    try:
        spec = importlib.util.find_spec(UPSTREAM_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def assess() -> InstallState:
    """What the overlay would do on this vLLM, without changing anything."""
    version = vllm_version()
    source = upstream_source_file()
    if source is None:
        return InstallState(
            Action.ABSENT, version, f"vLLM {version} has no {UPSTREAM_MODULE}"
        )
    return assess_file(source, version)


def assess_file(source: Path, version: str) -> InstallState:
    """The decision for one ``rocm_attn.py`` (installed, or in a tree)."""
    module = parse_source(source.read_bytes(), source)
    if isinstance(module, CaptureCode):
        return _left_alone(version, module, f"{source}:{module.line}: {module.detail}")
    method, code = classify_module(module, source)
    action = action_for(code.shape)
    if action is Action.INSTALLED:
        assert method is not None
        try:
            plan = plan_fix(method, code)
        except FixRefused as exc:
            return _left_alone(version, code, str(exc))
        return InstallState(
            action, version, plan.summary, code, COVERED_PATHS, plan=plan
        )
    if action is Action.UNRECOGNISED:
        return _left_alone(
            version, code, f"unrecognised {code.shape} code: {code.detail}"
        )
    return InstallState(action, version, code.detail, code)


def _left_alone(version: str, code: CaptureCode, why: str) -> InstallState:
    return InstallState(Action.UNRECOGNISED, version, f"left as it is: {why}", code)


def action_for(shape: Shape) -> Action:
    """The overlay's decision for a capture-method shape (before planning)."""
    return {
        Shape.BUGGY: Action.INSTALLED,
        Shape.FIXED: Action.NOT_NEEDED,
        Shape.NO_ZEROING: Action.NOT_NEEDED,
        Shape.MISSING: Action.ABSENT,
    }.get(shape, Action.UNRECOGNISED)


def arm(state: InstallState) -> None:
    """Fix vLLM's builder class as soon as ``rocm_attn`` is imported.

    Patching the class itself, rather than registering a subclass as the
    backend, is what reaches every path in ``COVERED_PATHS``.
    """
    assert state.plan is not None
    plan = state.plan

    def patch(module: ModuleType) -> None:
        # Runs inside vLLM's own import of rocm_attn: a failure here must not
        # become a failed import of vLLM's module.
        try:
            _patch_loaded_module(module, plan, state)
        except Exception as exc:
            problem = f"patching failed: {exc!r}"
            state.problems.append(problem)
            logger.warning("vllm-overlay: fix not installed: %s", problem)

    after_import(UPSTREAM_MODULE, patch)


def warn_when_loaded(
    state: InstallState, module_name: str = UPSTREAM_MODULE, what: str = ""
) -> None:
    """Warn that the code was left alone, once it matters: when vLLM loads
    ``module_name`` (ROCm). Elsewhere the unpatched code never runs.
    ``what`` names the fix in the message ("" for the #51585 fix)."""

    def warn(module: ModuleType) -> None:
        logger.warning(
            "vllm-overlay: nothing done%s on vLLM %s: %s",
            what,
            state.vllm_version,
            state.reason,
        )

    after_import(module_name, warn)


def _patch_loaded_module(
    module: ModuleType, plan: FixPlan, state: InstallState
) -> None:
    """Install the fixed method if the loaded class is the inspected code."""
    owner_name, method_name = TARGET.qualname.split(".")
    owner = getattr(module, owner_name, None)
    live = owner.__dict__.get(method_name) if isinstance(owner, type) else None
    if getattr(live, FIX_MARKER, False):
        state.applied_to_class = True
        return
    try:
        fixed = fixed_function(plan, live)
    except FixRefused as exc:
        problem = f"left as it is: {exc}"
        state.problems.append(problem)
        logger.warning(
            "vllm-overlay: fix not installed on vLLM %s: %s",
            state.vllm_version,
            problem,
        )
        return
    setattr(owner, method_name, fixed)
    state.applied_to_class = owner.__dict__.get(method_name) is fixed
    if not state.applied_to_class:
        problem = f"{TARGET.target} did not take the fixed method"
        state.problems.append(problem)
        logger.warning("vllm-overlay: fix not installed: %s", problem)
        return
    logger.info(
        "vllm-overlay: installed the #51585 capture fix on vLLM %s: %s",
        state.vllm_version,
        plan.summary,
    )
