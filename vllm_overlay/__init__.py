"""vllm-overlay: the fixes of the vllm-overlay patch series for an already
installed vLLM.

Each fix is one module of :mod:`vllm_overlay.fixes` (its record, how it reads
vLLM's code and how it installs); the plugin decides and installs each on
its own when vLLM loads its plugins. Which fixes, for which releases:
``docs/index.md`` (rendered from the registry).
"""

__version__ = "0.1.0"
