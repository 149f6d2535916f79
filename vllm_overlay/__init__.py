"""vllm-overlay: the fix of vLLM PR #51585 for an already installed vLLM.

The patched ``RocmAttentionMetadataBuilder.build_for_cudagraph_capture``
zeroes only the device copy of the query offsets during full CUDA graph
capture, so the metadata builders of other KV cache groups (hybrid models
such as MiniMax-M3) still see the real host offsets.
"""

__version__ = "0.1.0"
