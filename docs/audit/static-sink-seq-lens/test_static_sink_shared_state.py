# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""StaticSinkAttentionBuilder.build must not write the shared seq_lens.

GPUModelRunner._build_attention_metadata hands every KV-cache group a
shallow copy of one CommonAttentionMetadata, so `seq_lens` is the same
tensor for every group's builder. A builder that changes it in place
changes the input of every builder that runs after it in the same step.
"""

import copy
import json

import pytest
import torch
from vllm.config import CacheConfig, DeviceConfig, ModelConfig, VllmConfig
from vllm.model_executor.layers.attention.static_sink_attention import (
    create_static_sink_attention_backend,
)
from vllm.utils.math_utils import cdiv
from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend

from tests.v1.attention.utils import (
    BatchSpec,
    create_common_attn_metadata,
    create_standard_kv_cache_spec,
)

BLOCK_SIZE = 16
SINK_LEN = 2 * BLOCK_SIZE


@pytest.mark.parametrize("num_groups", [1, 2])
def test_static_sink_build_leaves_shared_seq_lens_alone(num_groups: int, tmp_path):
    device = torch.device("cpu")
    # A tiny local model config: no download, no weights.
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "num_hidden_layers": 1,
                "vocab_size": 256,
                "max_position_embeddings": 1024,
            }
        )
    )
    model_config = ModelConfig(
        model=str(tmp_path), skip_tokenizer_init=True, dtype="float16"
    )
    vllm_config = VllmConfig(
        model_config=model_config,
        cache_config=CacheConfig(block_size=BLOCK_SIZE),
        device_config=DeviceConfig("cpu"),
    )
    kv_cache_spec = create_standard_kv_cache_spec(vllm_config)
    backend = create_static_sink_attention_backend(
        TritonAttentionBackend, sink_len=SINK_LEN
    )
    builder_cls = backend.get_builder_cls()

    batch = BatchSpec(seq_lens=[40, 17, 64], query_lens=[1, 1, 1])
    common = create_common_attn_metadata(batch, BLOCK_SIZE, device)
    # The runner's block table is as wide as max_model_len allows.
    width = cdiv(vllm_config.model_config.max_model_len, BLOCK_SIZE)
    common.block_table_tensor = torch.arange(
        batch.batch_size * width, dtype=torch.int32, device=device
    ).view(batch.batch_size, width)
    seq_lens = common.seq_lens.clone()

    # As the model runner does: one shallow copy per KV-cache group (e.g. the
    # full-attention and the sliding-window layers of openPangu).
    for group in range(num_groups):
        builder = builder_cls(
            kv_cache_spec, [f"layers.{group}.attn"], vllm_config, device
        )
        metadata = builder.build(0, copy.copy(common))
        # Each group attends over the sink once, whatever ran before it.
        assert metadata.seq_lens.tolist() == (seq_lens + SINK_LEN).tolist(), (
            f"group {group} sees {metadata.seq_lens.tolist()}"
        )

    assert torch.equal(common.seq_lens, seq_lens), (
        "StaticSinkAttentionBuilder.build changed the shared seq_lens in place: "
        f"{seq_lens.tolist()} -> {common.seq_lens.tolist()}"
    )
