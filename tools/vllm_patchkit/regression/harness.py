"""Real vLLM objects for the scenarios: config, builders, batch metadata.

Everything here is vLLM's own code; the harness only supplies what a model
runner would: a tiny model config on disk, a one-process distributed group,
and the ``CommonAttentionMetadata`` of a uniform decode batch as built for
CUDA graph capture.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
import tempfile
import types
from functools import cache
from pathlib import Path
from typing import Any

import torch

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
NUM_INDEX_HEADS = 4
BLOCK_SIZE = 16
HEAD_SIZE = 16
CPU = torch.device("cpu")


@cache
def workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="vllm-overlay-regression-"))


@cache
def model_dir() -> Path:
    path = workdir() / "tiny-llama"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(TINY_MODEL_CONFIG))
    return path


@cache
def vllm_config(decode_query_len: int = 1) -> Any:
    """A CPU VllmConfig; query length > 1 turns on n-gram speculative decoding.

    Speculative decoding is what makes uniform decode batches have query
    length 1 + k, and what raises the builders' reorder threshold to match.
    """
    from vllm.config import DeviceConfig, ModelConfig, VllmConfig

    model = ModelConfig(
        model=str(model_dir()), skip_tokenizer_init=True, dtype="float16"
    )
    # MiniMax-M3's indexer reads its head count from the model config.
    model.hf_config.sparse_attention_config = {
        "sparse_num_index_heads": NUM_INDEX_HEADS
    }
    extra: dict[str, Any] = {}
    if decode_query_len > 1:
        from vllm.config import SpeculativeConfig

        extra["speculative_config"] = SpeculativeConfig(
            method="ngram",
            num_speculative_tokens=decode_query_len - 1,
            prompt_lookup_max=2,
            prompt_lookup_min=1,
        )
    return VllmConfig(
        model_config=model, device_config=DeviceConfig(device="cpu"), **extra
    )


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


def attention_spec() -> Any:
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    return FullAttentionSpec(
        block_size=BLOCK_SIZE,
        num_kv_heads=TINY_MODEL_CONFIG["num_key_value_heads"],
        head_size=HEAD_SIZE,
        dtype=torch.float16,
    )


def make_builder(builder_cls: type, decode_query_len: int, layer: str) -> Any:
    init_distributed()
    config = vllm_config(decode_query_len)
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(config):
        return builder_cls(attention_spec(), [layer], config, CPU)


def rocm_builder_cls() -> type:
    from vllm.v1.attention.backends.rocm_attn import RocmAttentionMetadataBuilder

    return RocmAttentionMetadataBuilder


def import_without_parent_init(package: str, module: str) -> types.ModuleType:
    """Import ``package.module`` without running ``package/__init__.py``.

    MiniMax-M3's package ``__init__`` imports the whole model, which pulls in
    torchvision (not installable beside the CPU torch). The builders live in a
    subpackage that needs none of it, so the parent is registered as a bare
    package over its real directory.
    """
    if package not in sys.modules:
        parent_name, _, leaf = package.rpartition(".")
        parent = importlib.import_module(parent_name)
        directory = Path(parent.__file__).parent / leaf
        if not directory.is_dir():
            raise ModuleNotFoundError(f"{package} is not in this vLLM", name=package)
        bare = types.ModuleType(package)
        bare.__path__ = [str(directory)]
        sys.modules[package] = bare
    return importlib.import_module(f"{package}.{module}")


def uniform_decode_metadata(
    num_reqs: int, decode_query_len: int, context_len: int = 10
) -> Any:
    """CommonAttentionMetadata of a uniform decode batch, as capture builds it.

    Fields differ between releases (0.28.0 has ``_seq_lens_cpu``; 0.32.0 has
    ``seq_lens_cpu_upper_bound``), so the constructor arguments come from the
    fields the installed release declares.
    """
    from vllm.v1.attention.backend import CommonAttentionMetadata

    num_tokens = num_reqs * decode_query_len
    query_start_loc = torch.arange(
        0, num_tokens + 1, decode_query_len, dtype=torch.int32
    )
    seq_lens = torch.full(
        (num_reqs,), context_len + decode_query_len, dtype=torch.int32
    )
    blocks_per_req = -(-(context_len + decode_query_len) // BLOCK_SIZE)
    values: dict[str, Any] = {
        "query_start_loc": query_start_loc.clone(),
        "query_start_loc_cpu": query_start_loc.clone(),
        "seq_lens": seq_lens.clone(),
        "num_reqs": num_reqs,
        "num_actual_tokens": num_tokens,
        "max_query_len": decode_query_len,
        "max_seq_len": int(seq_lens.max()),
        "block_table_tensor": torch.arange(
            num_reqs * blocks_per_req, dtype=torch.int32
        ).reshape(num_reqs, blocks_per_req),
        "slot_mapping": torch.arange(num_tokens, dtype=torch.int64),
        # Host copies some releases carry; set when the release declares them.
        "seq_lens_cpu": seq_lens.clone(),
        "_seq_lens_cpu": seq_lens.clone(),
        "seq_lens_cpu_upper_bound": seq_lens.clone(),
        "num_computed_tokens_cpu": seq_lens - decode_query_len,
        "_num_computed_tokens_cpu": seq_lens - decode_query_len,
    }
    declared = {f.name for f in dataclasses.fields(CommonAttentionMetadata)}
    required = {
        f.name
        for f in dataclasses.fields(CommonAttentionMetadata)
        if f.init
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    }
    missing = required - values.keys()
    if missing:
        raise TypeError(
            f"this vLLM's CommonAttentionMetadata needs fields the harness does "
            f"not know: {sorted(missing)}"
        )
    init_fields = {
        f.name for f in dataclasses.fields(CommonAttentionMetadata) if f.init
    }
    return CommonAttentionMetadata(
        **{k: v for k, v in values.items() if k in declared and k in init_fields}
    )
