"""Scenarios and verdicts for the pair of ROCm capture builders (#53821).

``ROCM_ATTN`` and ``ROCM_AITER_UNIFIED_ATTN`` need different capture
behaviour: ROCM_ATTN's capture zeroes the device query offsets in place (the
#25985 guard for its prefix prefill kernel), while AITER unified attention
reads those offsets whenever its graph is replayed, so its capture must leave
them alone. Neither may touch the host offsets (#51585). Each builder is
reached the way the model runner reaches it, through its backend's
``get_builder_cls``, so a backend handing out the wrong builder shows.

A scenario only records facts; the fix's ``FACTS`` (:mod:`.`) judge them.
It takes the backend class as an argument (default: the importable one) so
mutants can be run in one process.
"""

from __future__ import annotations

from typing import Any

import torch

from vllm_overlay.fixes.rocm_aiter_unified_builder.code import AITER_MODULE
from vllm_patchkit.judge.regression import harness, layout, v1_runner
from vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified import (
    AITER_CAPTURE,
    AITER_LOOP,
    ROCM_CAPTURE,
)
from vllm_patchkit.judge.regression.records import Outcome, error_info, unavailable

AITER_BACKEND = "RocmAiterUnifiedAttentionBackend"


class BackendUnavailable(Exception):
    """This tree has no such backend (0.11.0 has no AITER unified module)."""


def aiter_backend() -> type:
    import importlib

    try:
        module = importlib.import_module(AITER_MODULE)
    except ImportError as exc:
        raise BackendUnavailable(f"no {AITER_MODULE}: {exc}") from exc
    except Exception:
        # 0.33.0 imports vllm.platforms.rocm at module level, which asks the
        # GPU for its arch: retry once with the layout's amdsmi stand-in.
        if not layout.import_rocm_platform():
            raise
        module = importlib.import_module(AITER_MODULE)
    return getattr(module, AITER_BACKEND)


def aiter_unified_capture(decode_query_len: int, backend: Any = None) -> Outcome:
    """ROCM_AITER_UNIFIED_ATTN's capture build on a uniform decode batch."""
    try:
        backend = backend or aiter_backend()
    except BackendUnavailable as exc:
        return unavailable(AITER_CAPTURE, decode_query_len, str(exc))
    facts = harness.capture_through(backend, decode_query_len)
    return Outcome(AITER_CAPTURE, decode_query_len, "ok", facts)


def rocm_attn_capture_via_backend(
    decode_query_len: int, backend: Any = None
) -> Outcome:
    """ROCM_ATTN's capture build, its builder taken from the backend."""
    facts = harness.capture_through(
        backend or harness.rocm_backend_cls(), decode_query_len
    )
    return Outcome(ROCM_CAPTURE, decode_query_len, "ok", facts)


def aiter_unified_runner_loop(decode_query_len: int, backend: Any = None) -> Outcome:
    """vLLM's V1 per-group loop for capture, one ROCM_AITER_UNIFIED_ATTN group.

    ``GPUModelRunner._build_attention_metadata(for_cudagraph_capture=True)``
    is what ``_dummy_run`` calls before capturing a FULL graph and, from
    0.27.0, before replaying one for a dummy batch. Its metadata points at
    the runner's persistent offsets buffer: whatever the capture leaves there
    is what the graph's attention kernel reads until the runner writes the
    buffer again.
    """
    try:
        backend = backend or aiter_backend()
        aiter = ("aiter", backend, harness.kv_cache_spec("full"))
        groups = v1_runner.make_groups(decode_query_len, [aiter])
        runner = v1_runner.minimal_v1_runner(decode_query_len, groups)
    except (BackendUnavailable, v1_runner.LoopUnavailable) as exc:
        return unavailable(AITER_LOOP, decode_query_len, str(exc))
    from vllm.config import set_current_vllm_config

    offsets = v1_runner.uniform_decode(runner, decode_query_len)
    n = len(offsets)
    device, host = runner.query_start_loc.gpu, runner.query_start_loc.cpu
    kwargs = v1_runner.v1_capture_kwargs(groups, offsets, decode_query_len)
    try:
        with set_current_vllm_config(harness.vllm_config(decode_query_len)):
            per_layer, _ = runner._build_attention_metadata(**kwargs)
    except TypeError as exc:  # another release's signature
        return unavailable(AITER_LOOP, decode_query_len, f"runner API: {exc}")
    except Exception as exc:  # the loop itself failing is a finding
        return Outcome(AITER_LOOP, decode_query_len, "raised", error=error_info(exc))
    attn = per_layer[groups.layer_names["aiter"]]
    facts = {
        "builder": type(groups.attn_groups[0][0].get_metadata_builder()).__qualname__,
        "runner_device_kept": bool(torch.equal(device[:n], offsets)),
        "runner_host_kept": bool(torch.equal(host[:n], offsets)),
        "metadata_reads_runner_buffer": attn.query_start_loc.data_ptr()
        == device.data_ptr(),
        "seq_lens_all_one": bool(torch.all(attn.seq_lens == 1)),
        "runner_device_after": device[:n].tolist(),
        "runner_host_after": host[:n].tolist(),
    }
    return Outcome(AITER_LOOP, decode_query_len, "ok", facts)


SCENARIOS = {
    AITER_CAPTURE: aiter_unified_capture,
    ROCM_CAPTURE: rocm_attn_capture_via_backend,
    AITER_LOOP: aiter_unified_runner_loop,
}
