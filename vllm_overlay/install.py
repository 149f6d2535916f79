"""Decide what to do with the installed vLLM, do it, and remember what was done.

The decision reads the installed ``rocm_attn.py`` by its AST (see
:mod:`vllm_overlay.capture_shape`): only the exact buggy shape is patched.
The patch itself waits until vLLM imports ``rocm_attn`` (see
:mod:`vllm_overlay.import_hook`), and then checks that the class it finds
was built from the very source that was inspected.
"""

from __future__ import annotations

import enum
import importlib.metadata
import importlib.util
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from vllm_overlay.capture_shape import CaptureCode, Shape, inspect_capture_source
from vllm_overlay.fix import FIX_MARKER, install_on
from vllm_overlay.import_hook import after_import

UPSTREAM_MODULE = "vllm.v1.attention.backends.rocm_attn"
COVERED_PATHS = (
    "ROCM_ATTN: RocmAttentionBackend.get_builder_cls()",
    "ROCM_AITER_UNIFIED_ATTN: RocmAiterUnifiedAttentionBackend.get_builder_cls()",
    "subclasses of RocmAttentionMetadataBuilder calling super()",
)
"""All reach vLLM's own builder class, which is where the fix goes."""

logger = logging.getLogger("vllm.plugins.vllm_overlay")


class Action(enum.StrEnum):
    INSTALLED = "installed"
    """Buggy shape: the fix is installed (or armed until rocm_attn loads)."""
    NOT_NEEDED = "not-needed"
    """The installed vLLM has the fix, or never had the bug."""
    DISABLED = "disabled"
    UNRECOGNISED = "unrecognised"
    """Code the overlay does not recognise: left exactly as it was."""
    ABSENT = "absent"
    """No vLLM, or no rocm_attn module in it."""


@dataclass
class InstallState:
    action: Action
    vllm_version: str
    reason: str
    code: CaptureCode | None = None
    covered: tuple[str, ...] = ()
    applied_to_class: bool = False
    """True once vLLM's builder class really carries the fixed method."""
    problems: list[str] = field(default_factory=list)
    kernel: str = "upstream"
    """Which prefix-prefill kernel vLLM's ROCm path calls: upstream or overlay."""


def vllm_version() -> str:
    """The running vLLM's version; metadata lookup only when not imported."""
    loaded = sys.modules.get("vllm")
    if loaded is not None and isinstance(getattr(loaded, "__version__", None), str):
        return loaded.__version__
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
    code = inspect_capture_source(source.read_text(), source)
    action = action_for(code.shape)
    if action is Action.INSTALLED:
        return InstallState(action, version, code.detail, code, COVERED_PATHS)
    if action is Action.NOT_NEEDED:
        return InstallState(action, version, code.detail, code)
    return InstallState(
        action,
        version,
        f"unrecognised {code.shape} code, left as it is: {code.detail}",
        code,
    )


def action_for(shape: Shape) -> Action:
    """The overlay's decision for a capture-method shape."""
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
    assert state.code is not None
    expected = state.code

    def patch(module: ModuleType) -> None:
        # Runs inside vLLM's own import of rocm_attn: a failure here must not
        # become a failed import of vLLM's module.
        try:
            _patch_loaded_module(module, expected, state)
        except Exception as exc:
            state.problems.append(f"patching failed: {exc!r}")
            logger.warning("vllm-overlay: fix not installed: %r", exc)

    after_import(UPSTREAM_MODULE, patch)


def _patch_loaded_module(
    module: ModuleType, expected: CaptureCode, state: InstallState
) -> None:
    """Install the fixed method if the loaded class is the inspected code."""
    method = getattr(
        getattr(module, "RocmAttentionMetadataBuilder", None),
        "build_for_cudagraph_capture",
        None,
    )
    code = getattr(method, "__code__", None)
    if getattr(method, FIX_MARKER, False):
        state.applied_to_class = True
        return
    if (
        code is None
        or Path(code.co_filename).resolve() != expected.file.resolve()
        or code.co_firstlineno != expected.line
    ):
        problem = (
            f"{UPSTREAM_MODULE}.RocmAttentionMetadataBuilder."
            "build_for_cudagraph_capture is not the code inspected at "
            f"{expected.file}:{expected.line} "
            "(already replaced by someone else?); not patched"
        )
        state.problems.append(problem)
        logger.warning("vllm-overlay: %s", problem)
        return
    install_on(module)
    state.applied_to_class = True
    logger.debug("vllm-overlay: fixed %s.RocmAttentionMetadataBuilder", UPSTREAM_MODULE)
