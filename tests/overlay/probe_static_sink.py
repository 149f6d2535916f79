"""Run in a fresh process: vLLM's plugins, then static-sink builders on CPU.

Usage: ``python probe_static_sink.py OUTPUT.json``. Loads vLLM's general
plugins as vLLM does, records the overlay's StaticSink decision, then builds
as the model runner does for three KV-cache groups sharing one metadata: a
static-sink group, a second static-sink group and an ordinary full-attention
group (Triton's builder under both, which builds on CPU). Records the
lengths each saw and what the shared metadata holds after. Then a draft
step as Model Runner V2 takes it: the runner's ``seq_lens`` and block table
advanced in place, and the static-sink builder's
``update_draft_decode_metadata`` on the metadata it built; records what
that metadata reads then, and whether it is the same memory.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from typing import Any

SINK_LEN = 32
MODULE = "vllm.model_executor.layers.attention.static_sink_attention"


def main(output: str) -> None:
    import vllm
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    from vllm_overlay import plugin
    from vllm_overlay.arming import logger

    # The harness quiets vLLM's log handlers: keep the overlay's own lines.
    logged: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    from vllm_overlay.fixes.static_sink_seq_lens import NAME
    from vllm_overlay.fixes.static_sink_seq_lens import install as fix

    state = plugin.current_states().get(NAME)
    result: dict[str, Any] = {
        "vllm_version": vllm.__version__,
        "vllm_file": vllm.__file__,
        "action": str(state.action) if state else None,
        "reason": state.reason if state else None,
        "imported_by_plugins": MODULE in sys.modules,
    }
    result.update(_build_groups(fix))
    result["applied_to_class"] = bool(state and state.applied_to_class)
    result["problems"] = list(state.problems) if state else None
    result["overlay_log"] = logged
    with open(output, "w") as f:
        json.dump(result, f)


def _build_groups(fix: Any) -> dict[str, Any]:
    import importlib

    import torch
    from vllm.config import set_current_vllm_config
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend

    from vllm_patchkit.judge.regression import harness

    module = importlib.import_module(MODULE)
    backend = module.create_static_sink_attention_backend(
        TritonAttentionBackend, sink_len=SINK_LEN
    )
    sink_cls = backend.get_builder_cls()
    plain_cls = TritonAttentionBackend.get_builder_cls()
    config = harness.vllm_config()
    shared = harness.batch_metadata([1, 1, 1], context_len=40)
    # The runner's block table is as wide as max_model_len allows.
    width = -(-config.model_config.max_model_len // harness.BLOCK_SIZE)
    rows = shared.seq_lens.shape[0]
    shared.block_table_tensor = torch.arange(rows * width, dtype=torch.int32).view(
        rows, width
    )
    before = {
        "seq_lens": shared.seq_lens.tolist(),
        "max_seq_len": shared.max_seq_len,
        "block_table_id": id(shared.block_table_tensor),
    }
    seen = []
    builders, metadata = [], []
    with set_current_vllm_config(config):
        for name, cls in (("sink", sink_cls), ("sink2", sink_cls), ("full", plain_cls)):
            builder = harness.make_builder(cls, 1, f"layers.{name}.attn")
            built = builder.build(
                common_prefix_len=0, common_attn_metadata=copy.copy(shared)
            )
            seen.append(built.seq_lens.tolist())
            builders.append(builder)
            metadata.append(built)
    result = {
        "installed_on_module": fix.is_installed_on(sys.modules[MODULE]),
        "build_wrapped": bool(getattr(sink_cls.build, fix.FIX_MARKER, False)),
        "seq_lens_before": before["seq_lens"],
        "seen": seen,
        "shared_seq_lens_after": shared.seq_lens.tolist(),
        "shared_max_seq_len_kept": shared.max_seq_len == before["max_seq_len"],
        "shared_block_table_kept": id(shared.block_table_tensor)
        == before["block_table_id"],
        "sink_len": SINK_LEN,
        "torch": torch.__version__,
    }
    # After what the builds left is recorded: the draft step changes it.
    result.update(_draft_step(builders[0], metadata[0], shared, width))
    return result


def _draft_step(builder: Any, built: Any, shared: Any, width: int) -> dict[str, Any]:
    """Model Runner V2 between draft steps: the runner's tensors advanced in
    place, then ``update_draft_decode_metadata`` on the built metadata."""
    update = "update_draft_decode_metadata"
    cls = type(builder)
    result: dict[str, Any] = {
        "has_draft_update": hasattr(builder, update),
        "draft_update_own": update in cls.__dict__,
        # Set on the static-sink class itself (None: only inherited).
        "supports_update_block_table": cls.__dict__.get("supports_update_block_table"),
    }
    if not result["has_draft_update"]:
        return result
    address = built.seq_lens.data_ptr()
    table_address = built.block_table.data_ptr()
    shared.seq_lens += 1
    shared.block_table_tensor += 1000
    getattr(builder, update)(built)
    sink_blocks = builder.num_sink_blocks
    columns = min(width, builder.max_num_blocks)
    table = built.block_table[:, sink_blocks : sink_blocks + columns]
    result.update(
        {
            "draft_seen": built.seq_lens.tolist(),
            "draft_same_address": built.seq_lens.data_ptr() == address,
            "draft_shared_seq_lens": shared.seq_lens.tolist(),
            "draft_block_table_follows": table.tolist()
            == shared.block_table_tensor[:, :columns].tolist(),
            "draft_block_table_same_address": built.block_table.data_ptr()
            == table_address,
            "draft_sink_blocks_kept": built.block_table[:, :sink_blocks].tolist()
            == [list(range(1, sink_blocks + 1))] * built.block_table.shape[0],
        }
    )
    return result


if __name__ == "__main__":
    main(sys.argv[1])
