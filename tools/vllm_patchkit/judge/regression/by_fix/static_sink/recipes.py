"""How the static-sink builder is made on CPU, for the audit as for these
scenarios: by its factory, around another backend, with a sink of one block."""

from __future__ import annotations

from vllm_overlay.fixes.static_sink_seq_lens import BUILDER, FACTORY
from vllm_patchkit.judge.regression.by_fix.static_sink import MODULE
from vllm_patchkit.judge.regression.harness import BLOCK_SIZE
from vllm_patchkit.judge.regression.recipes import Recipe

RECIPES: dict[str, Recipe] = {
    f"{MODULE}.{BUILDER}": Recipe(
        factory=FACTORY, factory_kwargs={"sink_len": BLOCK_SIZE}
    ),
}
"""The builder, by its qualified name, and its factory's arguments."""
