"""vllm-patchkit: keep the vllm-overlay patch series applied to vLLM trees.

The library behind the ``vllm-patchkit`` command; the tests import it directly.
"""
