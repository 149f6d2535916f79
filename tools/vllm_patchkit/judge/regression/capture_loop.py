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
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from vllm_patchkit.judge.regression import harness, layout
from vllm_patchkit.judge.regression.harness import NUM_REQS
from vllm_patchkit.judge.regression.records import (
    describe,
    error_info,
    involves_code_under_test,
)

MAX_NUM_REQS = 8
MAX_NUM_TOKENS = 64


class LoopUnavailable(Exception):
    """This tree lacks the loop, a group's backend, or runner API it needs."""


@dataclass
class Groups:
    kv_cache_config: Any
    attn_groups: list[list[Any]]
    layer_names: dict[str, str]
    """Group role (``rocm``, ``gdn``, ``indexer``) -> its layer name."""


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


def make_groups(decode_query_len: int, backends: list[tuple[str, type, Any]]) -> Groups:
    """One KV-cache group per ``(role, backend, spec)`` (spec None: a Mamba
    spec) and its attention group, builders made by vLLM."""
    try:
        from vllm.config import set_current_vllm_config
        from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.worker.utils import AttentionGroup
    except ImportError as exc:
        raise LoopUnavailable(str(exc)) from exc
    harness.init_distributed()
    config = harness.vllm_config(decode_query_len)
    kv_groups, attn_groups, names = [], [], {}
    for gid, (role, backend, spec) in enumerate(backends):
        spec = spec or harness.kv_cache_spec("mamba", decode_query_len)
        layer = f"model.layers.{gid}.{role}"
        names[role] = layer
        kv_groups.append(KVCacheGroupSpec([layer], spec))
        group = AttentionGroup(backend, [layer], spec, gid)
        with set_current_vllm_config(config):
            layout.create_metadata_builders(group, config, harness.CPU)
        attn_groups.append([group])
    kv_cache_config = KVCacheConfig(
        num_blocks=harness.NUM_GPU_BLOCKS,
        kv_cache_tensors=[],
        kv_cache_groups=kv_groups,
    )
    return Groups(kv_cache_config, attn_groups, names)


def _buffer(*size: int, dtype: torch.dtype) -> Any:
    from vllm.v1.utils import CpuGpuBuffer

    # Separate host and "device" tensors, as on a GPU (no pinned memory here).
    return CpuGpuBuffer(*size, dtype=dtype, device=harness.CPU, pin_memory=False)


def _declared(fn: Any, known: dict[str, Any]) -> dict[str, Any]:
    """Those of ``known`` that ``fn`` declares; releases add and drop some.
    LoopUnavailable when ``fn`` requires one that is not known."""
    params = inspect.signature(fn).parameters
    required = {
        n
        for n, p in params.items()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    if not required <= known.keys():
        name = getattr(fn, "__name__", fn)
        raise LoopUnavailable(f"{name} needs {sorted(required - known.keys())}")
    return {k: v for k, v in known.items() if k in params}


def minimal_v1_runner(decode_query_len: int, groups: Groups) -> Any:
    """A ``GPUModelRunner`` holding only what ``_build_attention_metadata`` reads.

    ``GPUModelRunner.__init__`` cannot run on a CPU-only host (it allocates
    pinned memory and builds the sampler, the input batch and the drafter), and
    a ``CPUModelRunner`` aliases every device buffer to its host buffer, which
    would make the device zeroing wipe the host offsets too. So the runner
    object is made without ``__init__`` and given the state the method reads:
    the persistent offsets as a real ``CpuGpuBuffer`` (distinct host and
    device tensors, as on a GPU), a real ``MultiGroupBlockTable``, the real
    KV-cache config and attention groups. Features the loop skips when off
    (async spec decode, multimodal prefix LM, DCP, routed experts, KV sharing)
    are off.
    """
    require_v1_runner()
    try:
        from vllm.v1.worker.block_table import MultiGroupBlockTable
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    except ImportError as exc:
        raise LoopUnavailable(str(exc)) from exc
    if not hasattr(GPUModelRunner, "_build_attention_metadata"):
        raise LoopUnavailable("GPUModelRunner has no _build_attention_metadata")
    config = harness.vllm_config(decode_query_len)
    specs = [g.kv_cache_spec for g in groups.kv_cache_config.kv_cache_groups]
    block_sizes = [s.block_size for s in specs]
    table = {
        "max_num_reqs": MAX_NUM_REQS,
        # Declared before 0.14.0; _declared passes only declared ones.
        "max_model_len": config.model_config.max_model_len,
        "max_num_batched_tokens": MAX_NUM_TOKENS,
        "pin_memory": False,
        "device": harness.CPU,
        "block_sizes": block_sizes,
        "kernel_block_sizes": block_sizes,
        "max_num_blocks": [MAX_NUM_TOKENS] * len(specs),
    }
    runner = GPUModelRunner.__new__(GPUModelRunner)
    state: dict[str, Any] = {
        "vllm_config": config,
        "model_config": config.model_config,
        "cache_config": config.cache_config,
        "parallel_config": config.parallel_config,
        "speculative_config": config.speculative_config,
        "device": harness.CPU,
        "max_model_len": config.model_config.max_model_len,
        "kv_cache_config": groups.kv_cache_config,
        "attn_groups": groups.attn_groups,
        "query_start_loc": _buffer(MAX_NUM_REQS + 1, dtype=torch.int32),
        "seq_lens": torch.zeros(MAX_NUM_REQS, dtype=torch.int32),
        "optimistic_seq_lens_cpu": torch.zeros(MAX_NUM_REQS, dtype=torch.int32),
        "positions": torch.zeros(MAX_NUM_TOKENS, dtype=torch.int64),
        "num_accepted_tokens": _buffer(MAX_NUM_REQS, dtype=torch.int32),
        "num_decode_draft_tokens": _buffer(MAX_NUM_REQS, dtype=torch.int32),
        "mamba_prev_last_scheduled_idx": None,
        "input_batch": types.SimpleNamespace(
            block_table=MultiGroupBlockTable(**_declared(MultiGroupBlockTable, table)),
            num_computed_tokens_cpu_tensor=torch.zeros(MAX_NUM_REQS, dtype=torch.int32),
            num_prompt_tokens_cpu_tensor=torch.zeros(MAX_NUM_REQS, dtype=torch.int32),
        ),
        "drafter": None,
        "dcp_world_size": 1,
        "use_async_spec_decode": False,
        "is_mm_prefix_lm": False,
        "routed_experts_initialized": False,
    }
    vars(runner).update(state)
    return runner


V1_RUNNER = "v1/worker/gpu_model_runner.py"
NO_V1_RUNNER = (
    f"not applicable on this release: it has no V1 model runner (vllm/{V1_RUNNER}"
    ", removed in 0.34.0); Model Runner V2 is its only runner"
)


def require_v1_runner() -> None:
    """LoopUnavailable, saying so, on a tree without the V1 runner's file."""
    if not harness.vllm_has(V1_RUNNER):
        raise LoopUnavailable(NO_V1_RUNNER)


def _uniform_decode(runner: Any, decode_query_len: int) -> torch.Tensor:
    """Fill the runner's buffers as ``_dummy_run`` does for a decode batch."""
    batch = harness.batch([decode_query_len] * NUM_REQS)
    runner.optimistic_seq_lens_cpu[:NUM_REQS] = batch.seq_lens
    runner.seq_lens.copy_(runner.optimistic_seq_lens_cpu)
    runner.query_start_loc.cpu[: NUM_REQS + 1] = batch.query_start_loc
    runner.query_start_loc.copy_to_gpu()
    runner.positions[: batch.num_tokens] = batch.positions
    runner.input_batch.num_computed_tokens_cpu_tensor[:NUM_REQS] = harness.CONTEXT_LEN
    runner.input_batch.num_prompt_tokens_cpu_tensor[:NUM_REQS] = harness.CONTEXT_LEN
    return batch.query_start_loc


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


def v1_capture_kwargs(
    groups: Groups, offsets: torch.Tensor, decode_query_len: int
) -> dict[str, Any]:
    """What ``_dummy_run`` passes the V1 runner's ``_build_attention_metadata``
    before capturing a decode batch with these query offsets."""
    num_tokens = int(offsets[-1])
    return {
        "num_tokens": num_tokens,
        "num_reqs": NUM_REQS,
        "max_query_len": decode_query_len,
        "for_cudagraph_capture": True,
        "slot_mappings": {
            gid: torch.arange(num_tokens, dtype=torch.int64)
            for gid in range(len(groups.attn_groups))
        },
        "use_spec_decode": decode_query_len > 1,
    }


def _v1_loop(groups: Groups, decode_query_len: int) -> dict[str, Any]:
    from vllm.config import set_current_vllm_config

    runner = minimal_v1_runner(decode_query_len, groups)
    offsets = _uniform_decode(runner, decode_query_len)
    method = runner._build_attention_metadata
    kwargs = v1_capture_kwargs(groups, offsets, decode_query_len)
    if _declared(method, kwargs).keys() != kwargs.keys():
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
    kwargs = _declared(build_attn_metadata, wanted)
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
    except AttributeError as exc:
        if runner is not None and getattr(exc, "obj", None) is runner:
            raise LoopUnavailable(
                f"this runner reads state the scenario does not build: {exc.name}"
            ) from exc
        facts["raised"] = error_info(exc)
        per_layer = {}
    except Exception as exc:  # a victim builder failing in the loop
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
