"""Overlay code that mirrors the layout of ``vllm.v1``."""
