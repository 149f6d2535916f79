"""The run-wide patched tree of ``tests/vllm/shared_fixtures.py``."""

from __future__ import annotations

from tests.vllm.shared_fixtures import patched_installed_tree

__all__ = ["patched_installed_tree"]
