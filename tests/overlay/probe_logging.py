"""Run in a fresh process: every log record of the overlay, with its level.

Usage: ``python probe_logging.py OUTPUT.json [--import-rocm-attn]
[--import-aiter]``. Loads vLLM's plugins as vLLM does (phase "register"),
then, if asked, imports vLLM's ``rocm_attn`` (phase "import") and the AITER
unified backend's module (phase "import-aiter") as the ROCm platform would.
Each record notes whether vLLM's code carried each fix at the moment it was
emitted. The tests read the JSON.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

UPSTREAM = "vllm.v1.attention.backends.rocm_attn"
AITER = "vllm.v1.attention.backends.rocm_aiter_unified_attn"


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.phase = "register"
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        from vllm_overlay.fixes.rocm_aiter_unified_builder import install as aiter_fix
        from vllm_overlay.fixes.rocm_capture_host_offsets.install import is_installed_on

        module = sys.modules.get(UPSTREAM)
        aiter = sys.modules.get(AITER)
        self.records.append(
            {
                "phase": self.phase,
                "level": record.levelname,
                "message": record.getMessage(),
                "fix_on_class": bool(module and is_installed_on(module)),
                "aiter_fix_on_backend": bool(
                    aiter and aiter_fix.is_installed_on(aiter)
                ),
            }
        )


def main(output: str, import_rocm_attn: bool, import_aiter: bool) -> None:
    import vllm  # noqa: F401  (configures vLLM's logging first, as in vLLM)
    from vllm.plugins import load_general_plugins

    recorder = Recorder()
    overlay_logger = logging.getLogger("vllm.plugins.vllm_overlay")
    overlay_logger.setLevel(logging.DEBUG)
    overlay_logger.addHandler(recorder)
    load_general_plugins()
    if import_rocm_attn:
        recorder.phase = "import"
        import importlib

        importlib.import_module(UPSTREAM)
    if import_aiter:
        recorder.phase = "import-aiter"
        import importlib

        importlib.import_module(AITER)
    from vllm_overlay import plugin
    from vllm_overlay.fixes.rocm_capture_host_offsets import (
        RECORD as CAPTURE_HOST_OFFSETS,
    )

    state = plugin.current_states().get(CAPTURE_HOST_OFFSETS.name)
    result = {
        "action": str(state.action) if state else None,
        "status": getattr(state, "status", None),
        "reason": state.reason if state else None,
        "planned": bool(getattr(state, "plan", None)),
        "records": recorder.records,
        "fixes": {
            name: {"action": str(s.action), "status": s.status}
            for name, s in plugin.current_states().items()
        },
    }
    with open(output, "w") as out:
        json.dump(result, out, indent=2)


if __name__ == "__main__":
    flags = sys.argv[2:]
    main(sys.argv[1], "--import-rocm-attn" in flags, "--import-aiter" in flags)
