"""The overlay's ROCm attention backend and metadata builder (vLLM #51585).

Overrides of vLLM's own classes, not a copy of their module: everything but
``build_for_cudagraph_capture`` is inherited from the installed vLLM.
"""

from __future__ import annotations

from vllm.v1.attention.backends import rocm_attn as upstream

from vllm_overlay.fix import build_for_cudagraph_capture


class RocmAttentionMetadataBuilder(upstream.RocmAttentionMetadataBuilder):
    """vLLM's builder with the device-only zeroing of vLLM #51585."""

    build_for_cudagraph_capture = build_for_cudagraph_capture


class RocmAttentionBackend(upstream.RocmAttentionBackend):
    """vLLM's ROCM_ATTN backend, handing out the overlay's builder."""

    @staticmethod
    def get_builder_cls() -> type[RocmAttentionMetadataBuilder]:
        return RocmAttentionMetadataBuilder
