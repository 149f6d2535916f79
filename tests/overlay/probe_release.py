"""Run in a fresh process with a vLLM release first on PYTHONPATH.

Usage: ``python probe_release.py OUTPUT.json``. Loads vLLM's plugins as vLLM
does and records what the overlay did; on an affected release it also
checks vLLM's builder class and the capture scenario.
"""

from __future__ import annotations

import json
import sys
from typing import Any

UPSTREAM = "vllm.v1.attention.backends.rocm_attn"


def main(output: str) -> None:
    import vllm
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    from vllm_overlay import plugin
    from vllm_overlay.import_hook import _AfterImportFinder

    state = plugin.current_state()
    result: dict[str, Any] = {
        "vllm_version": vllm.__version__,
        "vllm_file": vllm.__file__,
        "action": str(state.action) if state else None,
        "reason": state.reason if state else None,
        "armed_hooks": sum(isinstance(f, _AfterImportFinder) for f in sys.meta_path),
        "rocm_attn_imported_by_plugins": UPSTREAM in sys.modules,
    }
    if state is not None and state.action == "installed":
        import importlib

        from vllm_overlay.fix import is_installed_on
        from vllm_patchkit.regression.scenarios import capture_effects

        upstream = importlib.import_module(UPSTREAM)
        result["fix_on_vllm_class"] = is_installed_on(upstream)
        facts = capture_effects(1).facts
        result["capture_keeps_host"] = facts["host_unchanged"]
        result["capture_zeroes_device"] = facts["device_zeroed"]
    with open(output, "w") as out:
        json.dump(result, out, indent=2)


if __name__ == "__main__":
    main(sys.argv[1])
