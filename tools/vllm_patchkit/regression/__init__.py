"""The regression suite for the capture bug, runnable against any vLLM tree.

Scenarios drive real vLLM builders on CPU. They run in whichever process
imports them, so pointing ``PYTHONPATH`` at a source tree tests that tree:
``python -m vllm_patchkit.regression --json`` is what the tests and the
demo run in a subprocess for each tree.
"""
