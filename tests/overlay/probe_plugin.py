"""Run in a fresh process: load vLLM's plugins the way vLLM does, then probe.

Usage: ``python probe_plugin.py OUTPUT.json``. Writes what the overlay did
and how vLLM's real builders behave afterwards. The tests read the JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def capture(builder_cls: type) -> tuple[bool, Any]:
    """Whether capture keeps the host offsets, and the builder it used."""
    from vllm_patchkit.judge.regression import harness

    builder = harness.make_builder(builder_cls, 1, "probe")
    metadata = harness.uniform_decode_metadata(4, 1)
    before = metadata.query_start_loc_cpu.clone()
    builder.build_for_cudagraph_capture(metadata)
    return bool((metadata.query_start_loc_cpu == before).all()), builder


def capture_keeps_host_offsets(builder_cls: type) -> bool:
    return capture(builder_cls)[0]


def offsets_after_capture(backend: type) -> dict[str, Any]:
    """One capture build through ``backend.get_builder_cls()``, as the runner
    makes it: what became of both offsets tensors and ``seq_lens``."""
    from vllm_patchkit.judge.regression import harness

    builder_cls = backend.get_builder_cls()
    builder = harness.make_builder(builder_cls, 1, backend.get_name())
    metadata = harness.uniform_decode_metadata(4, 1)
    device, host = metadata.query_start_loc, metadata.query_start_loc_cpu
    device_before, host_before = device.tolist(), host.tolist()
    attn = builder.build_for_cudagraph_capture(metadata)
    return {
        "builder": f"{builder_cls.__module__}.{builder_cls.__qualname__}",
        "device_same_tensor": metadata.query_start_loc is device,
        "device_before": device_before,
        "device_after": device.tolist(),
        "host_same_tensor": metadata.query_start_loc_cpu is host,
        "host_before": host_before,
        "host_after": host.tolist(),
        "seq_lens_after": attn.seq_lens.tolist(),
        "metadata_reads_device_offsets": attn.query_start_loc is device,
        # Set by a vendor line added to the generic method (test_vendor_build).
        "vendor_marker": builder.__dict__.get("_amd_marker"),
    }


def main(output: str) -> None:
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    import vllm.plugins

    # vLLM may load plugins more than once (several processes, or a reset
    # flag); registration must stay idempotent.
    vllm.plugins.plugins_loaded = False
    load_general_plugins()
    from vllm_overlay import plugin
    from vllm_overlay.import_hook import _AfterImportFinder

    plugin.register()
    from vllm_overlay.fixes.rocm_capture_host_offsets import (
        RECORD as CAPTURE_HOST_OFFSETS,
    )

    state = plugin.current_states().get(CAPTURE_HOST_OFFSETS.name)
    finders = [f for f in sys.meta_path if isinstance(f, _AfterImportFinder)]
    result: dict[str, Any] = {
        "action": str(state.action) if state else None,
        "reason": state.reason if state else None,
        "pending_import_hooks": sorted(f.name for f in finders),
    }
    from vllm.v1.attention.backends import rocm_aiter_unified_attn, rocm_attn
    from vllm.v1.attention.backends.rocm_aiter_unified_attn import (
        RocmAiterUnifiedAttentionBackend,
    )

    from vllm_overlay.fixes.rocm_aiter_unified_builder import install as aiter_fix
    from vllm_overlay.fixes.rocm_capture_host_offsets.install import is_installed_on

    states = plugin.current_states()
    result["fixes"] = {
        name: {
            "action": str(s.action),
            "status": s.status,
            "reason": s.reason,
            "problems": list(s.problems),
        }
        for name, s in states.items()
    }
    result["aiter_fix_installed"] = aiter_fix.is_installed_on(rocm_aiter_unified_attn)
    result["aiter_file"] = rocm_aiter_unified_attn.__file__
    aiter_builder = RocmAiterUnifiedAttentionBackend.get_builder_cls()
    result["aiter_builder_is_generic_subclass"] = issubclass(
        aiter_builder, rocm_attn.RocmAttentionMetadataBuilder
    )
    result["aiter_capture"] = offsets_after_capture(RocmAiterUnifiedAttentionBackend)
    result["rocm_capture"] = offsets_after_capture(rocm_attn.RocmAttentionBackend)

    class SuperCallingBuilder(rocm_attn.RocmAttentionMetadataBuilder):
        def build_for_cudagraph_capture(self, common_attn_metadata: Any) -> Any:
            return super().build_for_cudagraph_capture(common_attn_metadata)

    method = rocm_attn.RocmAttentionMetadataBuilder.build_for_cudagraph_capture
    result["method_from_vllm_file"] = method.__code__.co_filename == rocm_attn.__file__
    result["fix_on_vllm_class"] = is_installed_on(rocm_attn)
    result["applied_to_class"] = bool(state and state.applied_to_class)
    result["problems"] = list(state.problems) if state else []
    result["hooks_after_import"] = sorted(
        f.name for f in sys.meta_path if isinstance(f, _AfterImportFinder)
    )
    kept, builder = capture(rocm_attn.RocmAttentionBackend.get_builder_cls())
    result["rocm_attn_backend_keeps_host"] = kept
    # Set by a vendor line added to the method (test_vendor_build.py).
    result["vendor_marker"] = builder.__dict__.get("_amd_marker")
    result["method_file"] = method.__code__.co_filename
    result["method_line"] = method.__code__.co_firstlineno
    result["aiter_backend_keeps_host"] = capture_keeps_host_offsets(
        RocmAiterUnifiedAttentionBackend.get_builder_cls()
    )
    result["super_subclass_keeps_host"] = capture_keeps_host_offsets(
        SuperCallingBuilder
    )

    from vllm_patchkit.judge.regression.scenarios import run_all
    from vllm_patchkit.judge.regression.verdict import fixed_checks, reproduced

    outcomes = run_all(["capture_effects", "minimax_indexer_after_rocm"])
    checks = fixed_checks(outcomes)
    result["suite_fixed"] = bool(checks) and all(c.passed for c in checks)
    result["suite_bug_reproduced"] = reproduced(checks)
    result["vllm_file"] = rocm_attn.__file__
    with open(output, "w") as out:
        json.dump(result, out, indent=2)


if __name__ == "__main__":
    main(sys.argv[1])
