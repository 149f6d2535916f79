"""Run in a fresh process with a vLLM release first on PYTHONPATH.

Usage: ``python probe_release.py OUTPUT.json``. Loads vLLM's plugins as vLLM
does and records what the overlay did for each fix; then imports both ROCm
backends' modules and records whose code they run (vLLM's or the overlay's)
and what a capture build through each backend's builder leaves.
"""

from __future__ import annotations

import json
import sys
from typing import Any

UPSTREAM = "vllm.v1.attention.backends.rocm_attn"
AITER = "vllm.v1.attention.backends.rocm_aiter_unified_attn"


def main(output: str) -> None:
    import vllm
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    from vllm_overlay import plugin
    from vllm_overlay.fixes.rocm_capture_host_offsets import (
        RECORD as CAPTURE_HOST_OFFSETS,
    )
    from vllm_overlay.import_hook import _AfterImportFinder

    state = plugin.current_states().get(CAPTURE_HOST_OFFSETS.name)
    result: dict[str, Any] = {
        "vllm_version": vllm.__version__,
        "vllm_file": vllm.__file__,
        "action": str(state.action) if state else None,
        "reason": state.reason if state else None,
        "armed_hooks": sum(isinstance(f, _AfterImportFinder) for f in sys.meta_path),
        "rocm_attn_imported_by_plugins": UPSTREAM in sys.modules,
        "aiter_imported_by_plugins": AITER in sys.modules,
        "fixes": {
            name: {"action": str(s.action), "reason": s.reason}
            for name, s in plugin.current_states().items()
        },
    }
    if state is not None and state.action == "installed":
        import importlib

        from vllm_overlay.fixes.rocm_capture_host_offsets.install import is_installed_on
        from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets import (
            runs,
        )

        upstream = importlib.import_module(UPSTREAM)
        result["fix_on_vllm_class"] = is_installed_on(upstream)
        facts = runs.capture_effects(1).facts
        result["capture_keeps_host"] = facts["host_unchanged"]
        result["capture_zeroes_device"] = facts["device_zeroed"]
    import importlib

    # probe_plugin.py is this script's neighbour, on sys.path as its directory:
    # a release tree's root holds vLLM's own ``tests`` package, which would
    # shadow the project's (``tests.overlay.probe_plugin``).
    from probe_plugin import offsets_after_capture

    from vllm_overlay.fixes.rocm_aiter_unified_builder import install as aiter_fix

    rocm_attn = importlib.import_module(UPSTREAM)
    aiter = importlib.import_module(AITER)
    method = rocm_attn.RocmAttentionMetadataBuilder.build_for_cudagraph_capture
    result["rocm_method_is_vllms"] = (
        method.__code__.co_filename == rocm_attn.__file__
        and not getattr(method, "__vllm_overlay_fix__", False)
    )
    builder = aiter.RocmAiterUnifiedAttentionBackend.get_builder_cls()
    result["aiter_fix_installed"] = aiter_fix.is_installed_on(aiter)
    result["aiter_builder_module"] = builder.__module__
    result["aiter_capture"] = offsets_after_capture(
        aiter.RocmAiterUnifiedAttentionBackend
    )
    result["rocm_capture"] = offsets_after_capture(rocm_attn.RocmAttentionBackend)
    with open(output, "w") as out:
        json.dump(result, out, indent=2)


if __name__ == "__main__":
    main(sys.argv[1])
