"""The fixed ``build_for_cudagraph_capture`` (vLLM #51585), free of vLLM imports.

Kept apart from the overlay's backend module, which imports vLLM's
``rocm_attn``: the plugin installs this function from inside that import
(see :mod:`vllm_overlay.import_hook`) and must not import it back.
"""

from __future__ import annotations

from typing import Any

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


def install_on(module: Any) -> None:
    """Give vLLM's own builder class (in ``module``) the fixed method.

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
