"""vLLM's own per-KV-cache-group metadata loop, driven for graph capture on CPU.

The bug lives between groups: the model runner builds one
``CommonAttentionMetadata`` per KV-cache group, all of them pointing at the
runner's persistent host offsets buffer, and hands each group's builder the
result with ``for_cudagraph_capture=True``. Here that loop is vLLM's own code:

- ``GPUModelRunner._build_attention_metadata`` (the default V1 runner, called
  by ``_dummy_run`` during capture);
- ``vllm.v1.worker.gpu.attn_utils.build_attn_metadata`` (the V2 runner).

Groups, in capture order: ROCm attention, a GDN linear-attention group (the
hybrid layer of Qwen3-Next-style models) and MiniMax-M3's indexer (the PR's
crash). The builders are made by vLLM's ``AttentionGroup`` from the real
backends.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from vllm_patchkit.judge.regression import harness
from vllm_patchkit.judge.regression.harness import NUM_REQS
from vllm_patchkit.judge.regression.records import (
    describe,
    error_info,
    involves_code_under_test,
)
from vllm_patchkit.judge.regression.v1_runner import (
    MAX_NUM_REQS,
    Groups,
    LoopUnavailable,
    declared,
    make_groups,
    minimal_v1_runner,
    require_v1_runner,
    uniform_decode,
    v1_capture_kwargs,
)


def _backends() -> list[tuple[str, type, Any]]:
    try:
        from vllm.v1.attention.backends.gdn_attn import GDNAttentionBackend

        indexer = harness.import_vllm("vllm.models.minimax_m3.common.indexer")
    except (ImportError, AttributeError) as exc:
        raise LoopUnavailable(f"a group's backend is missing: {exc}") from exc
    return [
        ("rocm", harness.rocm_backend_cls(), harness.kv_cache_spec("full")),
        ("gdn", GDNAttentionBackend, None),
        ("indexer", indexer.MiniMaxM3IndexerBackend, harness.kv_cache_spec("full")),
    ]


def run_v1_loop(decode_query_len: int) -> dict[str, Any]:
    """Capture-time metadata for a decode batch through the V1 runner."""
    require_v1_runner()
    return _with_control(_v1_loop, decode_query_len)


def run_v2_loop(decode_query_len: int) -> dict[str, Any]:
    """Capture-time metadata for a decode batch through the V2 runner's loop."""
    return _with_control(_v2_loop, decode_query_len)


Loop = Callable[[Groups, int], dict[str, Any]]


def _with_control(loop: Loop, decode_query_len: int) -> dict[str, Any]:
    """The loop without the ROCm group first: it must run, or nothing it does
    with the ROCm group says anything about the ROCm builder.

    On another release the runner may read state this module does not build,
    or a group's builder may need more than a CPU host has; both show here
    and make the scenario ``unavailable`` rather than failed. Making the
    ROCm group's builder runs the code under test: if that raises, the
    scenario has failed, and says where.
    """
    try:
        backends = _backends()
        others = [b for b in backends if b[0] != "rocm"]
        control = loop(make_groups(decode_query_len, others), decode_query_len)
        groups = make_groups(decode_query_len, backends)
    except LoopUnavailable:
        raise
    except Exception as exc:  # another release's API, or the code under test
        if involves_code_under_test(exc):
            return {"raised": error_info(exc), "host_offsets_after": None}
        raise LoopUnavailable(f"cannot set up: {type(exc).__name__}: {exc}") from exc
    raised = control["raised"]
    if raised:
        raise LoopUnavailable(
            f"the loop fails without the ROCm group too: {describe(raised)}"
        )
    return loop(groups, decode_query_len)


def _v1_loop(groups: Groups, decode_query_len: int) -> dict[str, Any]:
    from vllm.config import set_current_vllm_config

    runner = minimal_v1_runner(decode_query_len, groups)
    offsets = uniform_decode(runner, decode_query_len)
    method = runner._build_attention_metadata
    kwargs = v1_capture_kwargs(groups, offsets, decode_query_len)
    if declared(method, kwargs).keys() != kwargs.keys():
        raise LoopUnavailable(f"unknown signature {inspect.signature(method)}")
    with set_current_vllm_config(harness.vllm_config(decode_query_len)):
        return _loop_facts(
            lambda: method(**kwargs)[0],
            runner.query_start_loc.cpu,
            runner.query_start_loc.gpu,
            offsets,
            groups,
            runner,
        )


def _v2_loop(groups: Groups, decode_query_len: int) -> dict[str, Any]:
    from vllm.config import set_current_vllm_config

    try:
        from vllm.v1.worker.gpu.attn_utils import build_attn_metadata
    except ImportError as exc:
        raise LoopUnavailable(str(exc)) from exc
    batch = harness.batch([decode_query_len] * NUM_REQS)
    offsets, seq_lens = batch.query_start_loc, batch.seq_lens
    num_tokens = batch.num_tokens
    host = torch.zeros(MAX_NUM_REQS + 1, dtype=torch.int32)
    host[: NUM_REQS + 1] = offsets
    device = host.clone()
    num_groups = len(groups.attn_groups)
    wanted = {
        "attn_groups": groups.attn_groups,
        "num_reqs": NUM_REQS,
        "num_tokens": num_tokens,
        "query_start_loc_gpu": device[: NUM_REQS + 1],
        "query_start_loc_cpu": host[: NUM_REQS + 1],
        "max_query_len": decode_query_len,
        "seq_lens": seq_lens.clone(),
        "max_seq_len": harness.vllm_config(decode_query_len).model_config.max_model_len,
        "block_tables": [torch.zeros((NUM_REQS, 4), dtype=torch.int32)] * num_groups,
        "slot_mappings": torch.arange(num_tokens, dtype=torch.int64).repeat(
            num_groups, 1
        ),
        "kv_cache_config": groups.kv_cache_config,
        "seq_lens_cpu_upper_bound": seq_lens.clone(),
        "positions": batch.positions,
        "is_prefilling": torch.zeros(NUM_REQS, dtype=torch.bool),
        "for_cudagraph_capture": True,
    }
    kwargs = declared(build_attn_metadata, wanted)
    with set_current_vllm_config(harness.vllm_config(decode_query_len)):
        return _loop_facts(
            lambda: build_attn_metadata(**kwargs),
            host,
            device,
            offsets,
            groups,
            None,
        )


def _loop_facts(
    call: Any,
    host: torch.Tensor,
    device: torch.Tensor,
    offsets: torch.Tensor,
    groups: Groups,
    runner: Any,
) -> dict[str, Any]:
    """Run the loop; what it left in the shared buffers and what groups built.

    A builder raising inside the loop is recorded, not raised: the buffers'
    state after the failure is part of the evidence.
    """
    n = len(offsets)
    facts: dict[str, Any] = {"raised": None}
    try:
        per_layer = call()
    except Exception as exc:  # a victim builder failing in the loop
        if isinstance(exc, AttributeError) and runner is not None and exc.obj is runner:
            raise LoopUnavailable(
                f"this runner reads state the scenario does not build: {exc.name}"
            ) from exc
        facts["raised"] = error_info(exc)
        per_layer = {}
    facts["host_offsets_after"] = host[:n].tolist()
    facts["host_offsets_kept"] = bool(torch.equal(host[:n], offsets))
    facts["device_offsets_zeroed"] = bool(torch.all(device[:n] == 0))
    gdn = per_layer.get(groups.layer_names.get("gdn", ""))
    indexer = per_layer.get(groups.layer_names.get("indexer", ""))
    facts["groups_built"] = sorted(
        role for role, layer in groups.layer_names.items() if layer in per_layer
    )
    facts["gdn"] = (
        None
        if gdn is None
        else {
            k: getattr(gdn, k, None)
            for k in ("num_decodes", "num_decode_tokens", "num_prefills")
        }
    )
    facts["indexer_decode_query_len"] = (
        indexer.decode.decode_query_len
        if indexer is not None and indexer.decode is not None
        else None
    )
    return facts
