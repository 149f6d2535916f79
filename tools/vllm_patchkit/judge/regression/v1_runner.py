"""vLLM's V1 model runner, made on CPU with only what its metadata loop reads.

A fix's scenario that drives the runner's own per-KV-cache-group loop
(``GPUModelRunner._build_attention_metadata``, as ``_dummy_run`` calls it
for capture) makes its groups with :func:`make_groups`, the runner with
:func:`minimal_v1_runner`, fills it with :func:`uniform_decode` and passes
:func:`v1_capture_kwargs`. On a tree without what the loop needs, each says
so with :class:`LoopUnavailable`.
"""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass
from typing import Any

import torch

from vllm_overlay.code import V1_RUNNER as V1_RUNNER_FILE
from vllm_patchkit.judge.regression import harness, layout
from vllm_patchkit.judge.regression.harness import NUM_REQS

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


def buffer(*size: int, dtype: torch.dtype) -> Any:
    from vllm.v1.utils import CpuGpuBuffer

    # Separate host and "device" tensors, as on a GPU (no pinned memory here).
    return CpuGpuBuffer(*size, dtype=dtype, device=harness.CPU, pin_memory=False)


def declared(fn: Any, known: dict[str, Any]) -> dict[str, Any]:
    """:func:`.harness.declared_arguments`; LoopUnavailable when ``fn``
    requires one that is not known."""
    required = {
        n
        for n, p in inspect.signature(fn).parameters.items()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    if not required <= known.keys():
        name = getattr(fn, "__name__", fn)
        raise LoopUnavailable(f"{name} needs {sorted(required - known.keys())}")
    return harness.declared_arguments(fn, known)


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
        # Declared before 0.14.0; declared passes only declared ones.
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
        "query_start_loc": buffer(MAX_NUM_REQS + 1, dtype=torch.int32),
        "seq_lens": torch.zeros(MAX_NUM_REQS, dtype=torch.int32),
        "optimistic_seq_lens_cpu": torch.zeros(MAX_NUM_REQS, dtype=torch.int32),
        "positions": torch.zeros(MAX_NUM_TOKENS, dtype=torch.int64),
        "num_accepted_tokens": buffer(MAX_NUM_REQS, dtype=torch.int32),
        "num_decode_draft_tokens": buffer(MAX_NUM_REQS, dtype=torch.int32),
        "mamba_prev_last_scheduled_idx": None,
        "input_batch": types.SimpleNamespace(
            block_table=MultiGroupBlockTable(**declared(MultiGroupBlockTable, table)),
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


V1_RUNNER = V1_RUNNER_FILE.relative_to("vllm").as_posix()
NO_V1_RUNNER = (
    f"not applicable on this release: it has no V1 model runner (vllm/{V1_RUNNER}"
    ", removed in 0.34.0); Model Runner V2 is its only runner"
)


def require_v1_runner() -> None:
    """LoopUnavailable, saying so, on a tree without the V1 runner's file."""
    if not harness.vllm_has(V1_RUNNER):
        raise LoopUnavailable(NO_V1_RUNNER)


def uniform_decode(runner: Any, decode_query_len: int) -> torch.Tensor:
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
