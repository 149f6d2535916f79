"""The overlay's logger, and its one deferred warning.

The overlay logs under vLLM's plugin logger, and above debug level only
when vLLM loads the module a fix concerns (ROCm): elsewhere the code it
left alone never runs.
"""

from __future__ import annotations

import logging
from types import ModuleType

from vllm_overlay.import_hook import after_import

TYPE_CHECKING = False
if TYPE_CHECKING:
    from vllm_overlay.state import InstallState

logger = logging.getLogger("vllm.plugins.vllm_overlay")


def warn_when_loaded(state: InstallState, module_name: str, what: str = "") -> None:
    """Warn that the code was left alone, once vLLM loads ``module_name``.
    ``what`` names the fix in the message ("" for the #51585 fix)."""

    def warn(module: ModuleType) -> None:
        logger.warning(
            "vllm-overlay: nothing done%s on vLLM %s: %s",
            what,
            state.vllm_version,
            state.reason,
        )

    after_import(module_name, warn)
