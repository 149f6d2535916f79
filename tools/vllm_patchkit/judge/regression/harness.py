"""Real vLLM objects for the scenarios: config, builders, batch metadata.

Everything here is vLLM's own code; the harness only supplies what a model
runner would: a tiny model config on disk, a one-process distributed group,
and the ``CommonAttentionMetadata`` of a uniform decode batch as built for
CUDA graph capture.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import sys
import tempfile
import types
import typing
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import torch

from vllm_patchkit.judge.regression import layout

# A llama-shaped model small enough to configure instantly. Only the config
# is read; no weights are loaded.
TINY_MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float16",
}
# A DeepSeek-V3.2-shaped model for the MLA builders: they read the latent
# dimensions (real DeepSeek sizes, which some kernels' checks insist on) and
# the sparse ones read the indexer's top-k.
TINY_DEEPSEEK_CONFIG = {
    **TINY_MODEL_CONFIG,
    "architectures": ["DeepseekV32ForCausalLM"],
    "model_type": "deepseek_v32",
    "num_key_value_heads": 4,
    "moe_intermediate_size": 32,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
    "q_lora_rank": None,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "index_topk": 64,
    "index_n_heads": 4,
    "index_head_dim": 128,
}
MODEL_CONFIGS = {"llama": TINY_MODEL_CONFIG, "deepseek": TINY_DEEPSEEK_CONFIG}
NUM_INDEX_HEADS = 4
SPARSE_TOPK_BLOCKS = 4
MINIMAX_M3_FIELDS: dict[str, Any] = {
    "sparse_attention_config": {
        "sparse_num_index_heads": NUM_INDEX_HEADS,
        "sparse_topk_blocks": SPARSE_TOPK_BLOCKS,
    },
    "index_n_heads": NUM_INDEX_HEADS,
    "index_topk_blocks": SPARSE_TOPK_BLOCKS,
}
"""MiniMax-M3's index heads and top-k blocks, as its indexer and sparse
builders read them from the model config, in every spelling a release
reads: ``sparse_attention_config`` (0.24.0-0.33.0), flat ``index_n_heads``
and ``index_topk_blocks`` (0.34.0). Each release reads its own; the
others are inert there."""
NUM_REQS = 4
"""Requests in the scenarios' batches."""
CONTEXT_LEN = 10
"""Tokens each request of a batch already has computed."""
BLOCK_SIZE = 16
HEAD_SIZE = 16
NUM_GPU_BLOCKS = 64
SLIDING_WINDOW = 32
ENCODER_LEN = 20
SNAPSHOT_MAX_NUMEL = 64
CPU = torch.device("cpu")


@cache
def workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="vllm-overlay-regression-"))


@cache
def model_dir(model: str = "llama") -> Path:
    path = workdir() / f"tiny-{model}"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(MODEL_CONFIGS[model]))
    return path


@cache
def vllm_config(decode_query_len: int = 1, model: str = "llama") -> Any:
    """A CPU VllmConfig; query length > 1 turns on n-gram speculative decoding.

    Speculative decoding is what makes uniform decode batches have query
    length 1 + k, and what raises the builders' reorder threshold to match.
    """
    from vllm.config import DeviceConfig, ModelConfig, VllmConfig

    model_config = ModelConfig(
        model=str(model_dir(model)), skip_tokenizer_init=True, dtype="float16"
    )
    for name, value in MINIMAX_M3_FIELDS.items():
        setattr(model_config.hf_config, name, value)
    extra: dict[str, Any] = {}
    if decode_query_len > 1:
        from vllm.config import SpeculativeConfig

        extra["speculative_config"] = SpeculativeConfig(
            method="ngram",
            num_speculative_tokens=decode_query_len - 1,
            prompt_lookup_max=2,
            prompt_lookup_min=1,
        )
    config = VllmConfig(
        model_config=model_config, device_config=DeviceConfig(device="cpu"), **extra
    )
    # The engine sets this after profiling memory; FlexAttention's builder
    # sizes its block mask from it.
    config.cache_config.num_gpu_blocks = NUM_GPU_BLOCKS
    layout.complete_config(config, BLOCK_SIZE)
    return config


@cache
def init_distributed() -> None:
    """A one-process gloo group: builders ask for the tensor-parallel size."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    with set_current_vllm_config(vllm_config()):
        init_distributed_environment(
            world_size=1,
            rank=0,
            local_rank=0,
            distributed_init_method=f"file://{workdir() / 'dist-init'}",
            backend="gloo",
        )
        initialize_model_parallel(1, 1)


def kv_cache_spec(kind: str = "full", decode_query_len: int = 1) -> Any:
    """The KV-cache spec a builder of this kind is made with by the runner."""
    from vllm.v1 import kv_cache_interface as kv

    heads = {
        "block_size": BLOCK_SIZE,
        "num_kv_heads": TINY_MODEL_CONFIG["num_key_value_heads"],
        "head_size": HEAD_SIZE,
        "dtype": torch.float16,
    }
    if kind == "full":
        return kv.FullAttentionSpec(**heads)
    if kind == "sliding_window":
        return kv.SlidingWindowSpec(**heads, sliding_window=SLIDING_WINDOW)
    if kind == "cross":
        return kv.CrossAttentionSpec(**heads)
    if kind == "mamba":
        # Conv and SSM state shapes of a tiny linear-attention layer; one
        # extra block per draft token, as the runner allocates them.
        return kv.MambaSpec(
            block_size=BLOCK_SIZE,
            shapes=((4, 8), (2, 4, 4)),
            dtypes=(torch.float16, torch.float16),
            num_speculative_blocks=decode_query_len - 1,
        )
    if kind == "mla":
        dims = TINY_DEEPSEEK_CONFIG
        return kv.MLAAttentionSpec(
            block_size=BLOCK_SIZE,
            num_kv_heads=1,
            head_size=int(dims["kv_lora_rank"]) + int(dims["qk_rope_head_dim"]),
            dtype=torch.float16,
        )
    if kind == "indexer":
        # DeepSeek-V3.2's indexer cache: FP8 keys plus a scale, 64-token blocks.
        return kv.MLAAttentionSpec(
            block_size=64, num_kv_heads=1, head_size=132, dtype=torch.uint8
        )
    raise ValueError(f"unknown KV-cache spec kind {kind!r}")


def make_builder(
    builder_cls: type,
    decode_query_len: int,
    layer: str,
    spec: Any | None = None,
    model: str = "llama",
    **kwargs: Any,
) -> Any:
    init_distributed()
    config = vllm_config(decode_query_len, model)
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(config):
        kwargs = declared_arguments(builder_cls, kwargs)
        return builder_cls(spec or kv_cache_spec(), [layer], config, CPU, **kwargs)


def apply_intended_capture_effects(metadata: Any) -> None:
    """What the ROCm capture is meant to leave in the shared metadata.

    The device offsets zeroed (the #25985 band-aid the fix keeps) and the
    device ``seq_lens`` filled with 1 (the ROCm metadata aliases it); nothing
    on the host. A later builder fed this must build what it builds after
    the real ROCm capture, or the capture leaks more than it should.
    """
    metadata.query_start_loc.zero_()
    metadata.seq_lens.fill_(1)


def snapshot(obj: Any, written: Any = None, prefix: str = "", depth: int = 0) -> dict:
    """Scalars and small tensors of built metadata, by dotted field name.

    Taken right after a build: builders return views of persistent buffers
    that the next build overwrites. A tensor that shares memory with
    ``written`` (the audit's written field) is keyed ``name@alias``.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = [(f.name, getattr(obj, f.name, None)) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "__dict__"):
        items = list(vars(obj).items())
    else:
        return {}
    out: dict[str, Any] = {}
    for name, value in items:
        key = f"{prefix}{name}"
        if value is None or isinstance(value, bool | int | float | str):
            out[key] = value
        elif isinstance(value, torch.Tensor):
            if value.numel() <= SNAPSHOT_MAX_NUMEL:
                alias = "@alias" if _overlaps(value, written) else ""
                out[key + alias] = value.tolist()
        elif depth < 2 and _nested(value):
            out.update(snapshot(value, written, f"{key}.", depth + 1))
    return out


def diff(expected: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """``[expected, got]`` for each key whose value two snapshots disagree on."""
    return {
        key: [expected.get(key), got.get(key)]
        for key in sorted(expected.keys() | got.keys())
        if expected.get(key) != got.get(key)
    }


def _nested(value: Any) -> bool:
    """Metadata nested in metadata: a dataclass, or a vLLM object."""
    if isinstance(value, type):
        return False
    from_vllm = type(value).__module__.startswith("vllm") and hasattr(value, "__dict__")
    return dataclasses.is_dataclass(value) or from_vllm


def _overlaps(a: Any, b: Any) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return False
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    return a.untyped_storage().nbytes() > 0


def rocm_builder_cls() -> type:
    from vllm.v1.attention.backends.rocm_attn import RocmAttentionMetadataBuilder

    return RocmAttentionMetadataBuilder


def rocm_backend_cls() -> type:
    from vllm.v1.attention.backends.rocm_attn import RocmAttentionBackend

    return RocmAttentionBackend


@cache
def capture_through(backend: type, decode_query_len: int) -> dict[str, Any]:
    """One capture build with ``backend``'s builder; what it left behind."""
    builder_cls = backend.get_builder_cls()
    builder = make_builder(builder_cls, decode_query_len, backend.get_name())
    metadata = uniform_decode_metadata(NUM_REQS, decode_query_len)
    device, host = metadata.query_start_loc, metadata.query_start_loc_cpu
    device_before, host_before = device.clone(), host.clone()
    device_ptr, seq_lens_ptr = device.data_ptr(), metadata.seq_lens.data_ptr()
    attn = builder.build_for_cudagraph_capture(metadata)
    return {
        "builder": builder_cls.__qualname__,
        "device_same_tensor": metadata.query_start_loc is device
        and device.data_ptr() == device_ptr,
        "device_unchanged": bool(torch.equal(device, device_before)),
        "device_zeroed": bool(torch.all(device == 0)),
        "host_same_tensor": metadata.query_start_loc_cpu is host,
        "host_unchanged": bool(torch.equal(metadata.query_start_loc_cpu, host_before)),
        "seq_lens_all_one": bool(torch.all(attn.seq_lens == 1)),
        # A captured graph reads the runner's persistent buffers: the backend
        # metadata must point at them, not at copies.
        "metadata_uses_shared_buffers": attn.query_start_loc.data_ptr() == device_ptr
        and attn.seq_lens.data_ptr() == seq_lens_ptr,
        "device_after": device.tolist(),
        "host_after": metadata.query_start_loc_cpu.tolist(),
    }


@cache
def init_workspace_manager() -> None:
    """The workspace manager the GPU runner starts, started on CPU.

    It empties the accelerator cache when it grows; on a host without one,
    vLLM's own CPU runner turns ``torch.accelerator``'s cache calls into
    no-ops first, and so does this.
    """
    from vllm.v1.worker.workspace import init_workspace_manager as start

    _accelerator_cache_noop()
    start(CPU)


def _accelerator_cache_noop() -> None:
    """vLLM's CPU runner's no-op for ``torch.accelerator``'s cache calls,
    where the release has one (``cpu_model_runner``, before 0.34.0);
    otherwise the same no-op here: 0.34.0 does it as a side effect of
    importing ``vllm.v1.worker.cpu.shm``, which patches much more of torch."""
    try:
        from vllm.v1.worker.cpu_model_runner import _set_torch_accelerator_to_noop
    except ModuleNotFoundError as exc:
        if exc.name != "vllm.v1.worker.cpu_model_runner":
            raise
        # Two distinct no-ops, as vLLM's: Dynamo keys on synchronize's object.
        torch.accelerator.synchronize = lambda *args, **kwargs: None
        torch.accelerator.empty_cache = lambda *args, **kwargs: None
        return
    _set_torch_accelerator_to_noop()


def register_mla_layer(config: Any, name: str) -> Any:
    """A real MLAAttention layer, registered in ``config``'s forward context.

    MLA builders read the latent sizes and the prefill backend from their
    layer. The layer is told its backends: automatic selection on a CPU-only
    host picks ones whose modules need CUDA. TRT-LLM ragged prefill constructs
    on CPU at no cost (it only takes a workspace); Tokenspeed's compiles
    CUTLASS kernels for a minute. The capture builds never call it.
    """
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention
    from vllm.model_executor.layers.linear import ColumnParallelLinear
    from vllm.v1.attention.backends.mla.prefill.trtllm_ragged import (
        TrtllmRaggedPrefillBackend,
    )
    from vllm.v1.attention.backends.mla.triton_mla import TritonMLABackend

    init_workspace_manager()
    dims = TINY_DEEPSEEK_CONFIG
    heads = int(dims["num_attention_heads"])
    rank = int(dims["kv_lora_rank"])
    nope, rope, v = (
        int(dims["qk_nope_head_dim"]),
        int(dims["qk_rope_head_dim"]),
        int(dims["v_head_dim"]),
    )
    with set_current_vllm_config(config):
        return MLAAttention(
            num_heads=heads,
            scale=(nope + rope) ** -0.5,
            qk_nope_head_dim=nope,
            qk_rope_head_dim=rope,
            v_head_dim=v,
            q_lora_rank=None,
            kv_lora_rank=rank,
            kv_b_proj=ColumnParallelLinear(rank, heads * (nope + v), bias=False),
            cache_config=config.cache_config,
            prefix=name,
            attn_backend=TritonMLABackend,
            prefill_backend_cls=TrtllmRaggedPrefillBackend,
        )


def declared_arguments(
    fn: Callable[..., Any], offered: dict[str, Any]
) -> dict[str, Any]:
    """Those of ``offered`` that ``fn`` declares (a class: any ``__init__`` of
    its MRO, since one may pass ``**kwargs`` on), each in the type the
    release declares it: an ``int`` where ``fn``'s annotation says tensor
    becomes a 0-d ``int32`` tensor (0.34.0's ``update_draft_inputs`` takes
    ``max_model_len`` as a device scalar its kernel loads; an int before).
    The signature decides, not the version: releases add and drop arguments
    (the DeepSeek-V3.2 indexer builder's ``block_table_width``)."""
    mro = getattr(fn, "__mro__", ())[::-1]
    params: dict[str, inspect.Parameter] = {}
    for f in [k.__dict__["__init__"] for k in mro if "__init__" in k.__dict__] or [fn]:
        params.update(inspect.signature(f).parameters)
    wanted = {}
    for name, value in offered.items():
        param = params.get(name)
        if param is None:
            continue
        if isinstance(value, int) and _declares_tensor(param.annotation):
            value = torch.tensor(value, dtype=torch.int32)
        wanted[name] = value
    return wanted


def _declares_tensor(annotation: Any) -> bool:
    """``torch.Tensor``, an optional one, or its name in a string annotation."""
    if isinstance(annotation, str):
        return "Tensor" in annotation
    if annotation is torch.Tensor:
        return True
    return torch.Tensor in typing.get_args(annotation)


def vllm_has(relpath: str) -> bool:
    """Whether the imported vLLM package has ``relpath`` (a file or package)."""
    import vllm

    return (Path(vllm.__file__).parent / relpath).exists()


def absent_module(exc: BaseException) -> str | None:
    """The vLLM module ``exc`` failed to import because the tree has no
    file for it; None for any other failure (an import that fails inside a
    file the tree has is a harness error, not an absence)."""
    name = getattr(exc, "name", None)
    if not isinstance(exc, ModuleNotFoundError) or not name:
        return None
    head, *parts = name.split(".")
    if head != "vllm" or not parts:
        return None
    relpath = "/".join(parts)
    present = vllm_has(relpath) or vllm_has(f"{relpath}.py")
    return None if present else name


def import_vllm(name: str) -> types.ModuleType:
    """Import vLLM's module ``name``; one inside a model package
    (``vllm.models.<model>.<...>``) without running that package's ``__init__``.

    MiniMax-M3's package ``__init__`` imports the whole model, which pulls in
    torchvision (not installable beside the CPU torch). The builders live in a
    subpackage that needs none of it, so the parent is registered as a bare
    package over its real directory.
    """
    parts = name.split(".")
    if not name.startswith("vllm.models.") or len(parts) <= 3:
        return importlib.import_module(name)
    package = ".".join(parts[:3])
    if package not in sys.modules:
        parent = importlib.import_module("vllm.models")
        directory = Path(parent.__file__).parent / parts[2]
        if not directory.is_dir():
            raise ModuleNotFoundError(f"{package} is not in this vLLM", name=package)
        bare = types.ModuleType(package)
        bare.__path__ = [str(directory)]
        sys.modules[package] = bare
    return importlib.import_module(name)


def uniform_decode_metadata(num_reqs: int, decode_query_len: int) -> Any:
    """CommonAttentionMetadata of a uniform decode batch, as capture builds it."""
    return batch_metadata([decode_query_len] * num_reqs)


@dataclasses.dataclass(frozen=True)
class Batch:
    """A batch's per-request tensors: every request has ``context_len``
    tokens already computed and its query after them."""

    query_lens: torch.Tensor
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    positions: torch.Tensor

    @property
    def num_tokens(self) -> int:
        return int(self.query_start_loc[-1])


def batch(query_lens: Sequence[int], context_len: int = CONTEXT_LEN) -> Batch:
    lens = torch.tensor(list(query_lens), dtype=torch.int32)
    offsets = torch.zeros(len(lens) + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(lens, 0)
    positions = [torch.arange(context_len, context_len + int(n)) for n in lens]
    return Batch(lens, offsets, context_len + lens, torch.cat(positions))


def batch_metadata(query_lens: Sequence[int], context_len: int = CONTEXT_LEN) -> Any:
    """CommonAttentionMetadata of a batch with these query lengths.

    Every request has ``context_len`` tokens already computed. Fields differ
    between releases (0.28.0 has ``_seq_lens_cpu``; 0.32.0 has
    ``seq_lens_cpu_upper_bound``), so the constructor arguments come from the
    fields the installed release declares.
    """
    CommonAttentionMetadata = layout.common_attention_metadata()  # noqa: N806

    made = batch(query_lens, context_len)
    lens, seq_lens = made.query_lens, made.seq_lens
    num_reqs = len(lens)
    blocks_per_req = -(-int(seq_lens.max()) // BLOCK_SIZE)
    values: dict[str, Any] = {
        "query_start_loc": made.query_start_loc.clone(),
        "query_start_loc_cpu": made.query_start_loc.clone(),
        "seq_lens": seq_lens.clone(),
        "num_reqs": num_reqs,
        "num_actual_tokens": made.num_tokens,
        "max_query_len": int(lens.max()),
        "max_seq_len": int(seq_lens.max()),
        "block_table_tensor": torch.arange(
            num_reqs * blocks_per_req, dtype=torch.int32
        ).reshape(num_reqs, blocks_per_req),
        "slot_mapping": torch.arange(made.num_tokens, dtype=torch.int64),
        # Host copies some releases carry; set when the release declares them.
        "seq_lens_cpu": seq_lens.clone(),
        "_seq_lens_cpu": seq_lens.clone(),
        "seq_lens_cpu_upper_bound": seq_lens.clone(),
        "num_computed_tokens_cpu": seq_lens - lens,
        "_num_computed_tokens_cpu": seq_lens - lens,
        # Set by the runner in recent releases; mamba-style builders need them.
        "is_prefilling": torch.zeros(num_reqs, dtype=torch.bool),
        "positions": made.positions,
    }
    fields = [f for f in dataclasses.fields(CommonAttentionMetadata) if f.init]
    missing = {
        f.name
        for f in fields
        if f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
        and f.name not in values
    }
    if missing:
        raise TypeError(
            f"this vLLM's CommonAttentionMetadata needs fields the harness does "
            f"not know: {sorted(missing)}"
        )
    return CommonAttentionMetadata(
        **{f.name: values[f.name] for f in fields if f.name in values}
    )


def track_host_offset_reads(metadata: Any) -> list[str]:
    """Record each read of ``metadata.query_start_loc_cpu`` from now on.

    The object's class becomes a subclass that notes the reads and behaves
    the same otherwise (``replace`` and ``copy`` keep it), so the scenario
    can say whether a builder looked at the host offsets on this path.
    """
    reads: list[str] = []
    base = type(metadata)

    class HostOffsetReads(base):  # type: ignore[misc, valid-type]
        def __getattribute__(self, name: str) -> Any:
            if name == "query_start_loc_cpu":
                reads.append(name)
            return super().__getattribute__(name)

    HostOffsetReads.__name__ = base.__name__
    HostOffsetReads.__qualname__ = base.__qualname__
    metadata.__class__ = HostOffsetReads
    return reads


def reset_process_state() -> None:
    """Forget this process's scratch directory and process group.

    For a process forked from one that warmed up imports and configs: it
    must rendezvous for its own process group (the file lives in the scratch
    directory). The inherited configs and model files stay valid.
    """
    for cached in (workdir, init_distributed, init_workspace_manager):
        cached.cache_clear()
