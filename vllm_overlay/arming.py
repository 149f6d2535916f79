"""The overlay's logger, and arming a fix for the moment vLLM loads its module.

The overlay logs under vLLM's plugin logger, and above debug level only
when vLLM loads the module a fix concerns (ROCm): elsewhere the code it
left alone never runs. Every fix installs and warns through here, so a
failed install reads the same for each.
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

from vllm_overlay.import_hook import after_import
from vllm_overlay.proof import FixRefused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from vllm_overlay.state import InstallState

logger = logging.getLogger("vllm.plugins.vllm_overlay")


def arm(state: InstallState) -> None:
    """Install ``state``'s fix (its install module's ``install(module,
    state)``) once vLLM imports the module the fix patches.

    It runs inside vLLM's own import: a failure is recorded in ``state`` and
    logged, never raised into that import. :class:`FixRefused` means the
    loaded code is not what was inspected, so it is left as it is.
    """
    from vllm_overlay.fixes import by_name

    fix = by_name(state.name)
    install = importlib.import_module(fix.install).install

    def run(module: ModuleType) -> None:
        try:
            install(module, state)
        except FixRefused as exc:
            problem = f"left as it is: {exc}"
            state.problems.append(problem)
            logger.warning(
                "vllm-overlay: fix%s not installed on vLLM %s: %s",
                fix.what,
                state.vllm_version,
                problem,
            )
        except Exception as exc:
            problem = f"installing failed: {exc!r}"
            state.problems.append(problem)
            logger.warning("vllm-overlay: fix%s not installed: %s", fix.what, problem)

    after_import(fix.module, run)


def warn_when_loaded(state: InstallState, module_name: str, what: str = "") -> None:
    """Warn that the code was left alone, once vLLM loads ``module_name``."""

    def warn(module: ModuleType) -> None:
        logger.warning(
            "vllm-overlay: nothing done%s on vLLM %s: %s",
            what,
            state.vllm_version,
            state.reason,
        )

    after_import(module_name, warn)
