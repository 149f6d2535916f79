"""The overlay's ROCm attention backend and metadata builder (vLLM #51585).

Overrides of vLLM's own classes, not a copy of their module: everything but
``build_for_cudagraph_capture`` is inherited from the installed vLLM.
Importing this module imports vLLM's ``rocm_attn``; the plugin does that
only when vLLM itself selects the backend.
"""

from __future__ import annotations

from typing import Any

from vllm.v1.attention.backends import rocm_attn as upstream

FIX_MARKER = "__vllm_overlay_fix__"
"""Attribute set on the fixed method, so an install can tell it is done."""


def build_for_cudagraph_capture(self: Any, common_attn_metadata: Any) -> Any:
    """Build capture metadata, zeroing only the device query offsets.

    Zero ``query_start_loc`` in place: the prefix prefill kernel hits an
    invalid memory access during graph capture otherwise (#25985). Leave
    ``query_start_loc_cpu`` alone: the model runner shares that host tensor
    with the metadata builders of every other KV cache group, and zeroing it
    makes them see query length 0 (MiniMax-M3's indexer then asserts).
    """
    attn_metadata = self.build(0, common_attn_metadata)
    # seq_lens at max_model_len would make capture very slow; 1 is enough.
    attn_metadata.seq_lens.fill_(1)
    common_attn_metadata.query_start_loc.zero_()
    return attn_metadata


setattr(build_for_cudagraph_capture, FIX_MARKER, True)


class RocmAttentionMetadataBuilder(upstream.RocmAttentionMetadataBuilder):
    """vLLM's builder with the device-only zeroing of vLLM #51585."""

    build_for_cudagraph_capture = build_for_cudagraph_capture


class RocmAttentionBackend(upstream.RocmAttentionBackend):
    """vLLM's ROCM_ATTN backend, handing out the overlay's builder."""

    @staticmethod
    def get_builder_cls() -> type[RocmAttentionMetadataBuilder]:
        return RocmAttentionMetadataBuilder


def install_on(module: Any) -> None:
    """Give vLLM's own builder class the fixed method.

    Backends that import the class directly (``ROCM_AITER_UNIFIED_ATTN``)
    and subclasses that call ``super().build_for_cudagraph_capture`` reach
    vLLM's class, not the overlay's subclass.
    """
    module.RocmAttentionMetadataBuilder.build_for_cudagraph_capture = (
        build_for_cudagraph_capture
    )


def is_installed_on(module: Any) -> bool:
    method = module.RocmAttentionMetadataBuilder.build_for_cudagraph_capture
    return bool(getattr(method, FIX_MARKER, False))
