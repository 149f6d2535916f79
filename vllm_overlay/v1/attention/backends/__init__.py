"""Overlay counterparts of ``vllm.v1.attention.backends`` modules."""
