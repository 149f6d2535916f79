"""Every metadata builder of the importable vLLM, made on CPU as the runner makes it.

Runs inside the audited tree's runtime (the dynamic child). The list of
builders comes from the regression survey's parse of the tree's source, so
builders defined inside factory functions (subclassed backends such as
cross attention) are listed even though no class object exists until the
factory runs. A builder is then made from the regression suite's recipe for
it when the suite has one (:data:`vllm_patchkit.judge.regression.victims.VICTIMS`:
its KV-cache spec, model shape, factory), else from a recipe guessed from its
bases. One that cannot be made is kept with the reason, never dropped.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any

from vllm_patchkit.judge.regression import harness, victims
from vllm_patchkit.judge.regression.records import describe
from vllm_patchkit.judge.regression.survey import Builder
from vllm_patchkit.judge.regression.victims import Recipe


@dataclass
class Made:
    """A builder that was made, with what its runs need."""

    entry: Builder
    cls: type
    builder: Any
    config: Any
    recipe: Recipe

    @property
    def label(self) -> str:
        return self.entry.qualname


@dataclass
class NotMade:
    entry: Builder
    status: str
    """``abstract`` (runs only through its subclasses) or ``could not run``."""
    reason: str


_LAYERS = "vllm.model_executor.layers.attention"
FACTORY_RECIPES: dict[str, Recipe] = {
    f"{_LAYERS}.static_sink_attention.StaticSinkAttentionBuilder": Recipe(
        factory="create_static_sink_attention_backend",
        factory_kwargs={"sink_len": harness.BLOCK_SIZE},
    ),
    f"{_LAYERS}.chunked_local_attention.ChunkedLocalAttentionBuilder": Recipe(
        factory="create_chunked_local_attention_backend",
        factory_kwargs={"attention_chunk_size": 2 * harness.BLOCK_SIZE},
    ),
    f"{_LAYERS}.encoder_only_attention.EncoderOnlyAttentionBuilder": Recipe(
        factory="create_encoder_only_attention_backend"
    ),
    "vllm.v1.attention.backends.utils.FastPrefillAttentionBuilder": Recipe(
        factory="create_fast_prefill_custom_backend",
        factory_kwargs={"prefix": "Audit_"},
    ),
}
"""Factory-made builders the regression suite has no victim for: the factory
and its arguments. Like the suite's, each wraps the ROCm backend (a backend
every release can make on CPU), so the subclass's own code runs on top of it."""


def _guess(cls: type, suite: dict[str, Recipe]) -> list[Recipe]:
    """Recipes to try for a builder the suite has none for, likeliest first:
    the recipe of the nearest base the suite knows, then by the bases' names."""
    inherited = [
        suite[f"{c.__module__}.{c.__qualname__}"]
        for c in cls.__mro__[1:]
        if f"{c.__module__}.{c.__qualname__}" in suite
    ]
    inherited = [dataclasses.replace(r, factory=None) for r in inherited[:1]]
    names = {c.__name__ for c in cls.__mro__}
    mla = Recipe(spec="mla", model="deepseek", mla_layer=True)
    mamba = Recipe(spec="mamba")
    if any("MLA" in n for n in names):
        return [*inherited, mla, Recipe(spec="full")]
    if any(k in n for n in names for k in ("Mamba", "GDN", "Linear", "Conv", "KDA")):
        return [*inherited, mamba, Recipe(spec="full")]
    return [*inherited, Recipe(spec="full"), Recipe(spec="sliding_window"), mamba, mla]


def make_all(entries: list[Builder], qlen: int) -> tuple[list[Made], list[NotMade]]:
    """Make every listed builder for decode batches of query length ``qlen``."""
    suite = {**FACTORY_RECIPES, **{v.qualname: v for v in victims.VICTIMS}}
    made: list[Made] = []
    not_made: list[NotMade] = []
    seen: set[type] = set()
    for entry in entries:
        recipe = suite.get(entry.qualname)
        try:
            module = harness.import_vllm(entry.module)
            if recipe is not None and recipe.factory:
                cls = victims.from_factory(module, recipe)
            elif entry.in_factory:
                not_made.append(
                    NotMade(
                        entry,
                        "could not run",
                        "made inside a factory function the audit has no "
                        "recipe for (the regression victim table and "
                        "FACTORY_RECIPES name the factories it can call)",
                    )
                )
                continue
            else:
                cls = getattr(module, entry.name)
        except Exception as exc:  # absent module, CUDA-only import
            not_made.append(NotMade(entry, "could not run", f"import: {describe(exc)}"))
            continue
        if cls in seen:
            continue
        seen.add(cls)
        if inspect.isabstract(cls):
            not_made.append(
                NotMade(entry, "abstract", "abstract base: runs through its subclasses")
            )
            continue
        candidates = [recipe] if recipe is not None else _guess(cls, suite)
        if recipe is not None and qlen not in recipe.query_lens:
            not_made.append(
                NotMade(
                    entry,
                    "could not run",
                    f"the regression suite runs it only at query lengths "
                    f"{recipe.query_lens} on CPU",
                )
            )
            continue
        first_error = ""
        for n, candidate in enumerate(candidates):
            layer = f"audit.{entry.qualname}.{qlen}.{n}"
            try:
                config = harness.vllm_config(qlen, candidate.model)
                builder = victims.make_builder(cls, candidate, qlen, layer, config)
            except Exception as exc:  # another release's constructor, CUDA
                first_error = first_error or f"construct: {describe(exc)}"
                continue
            made.append(Made(entry, cls, builder, config, candidate))
            break
        else:
            not_made.append(NotMade(entry, "could not run", first_error))
    return made, not_made


def fresh_metadata(query_len: int) -> Any:
    """The base metadata of one run: a uniform decode batch."""
    return harness.uniform_decode_metadata(harness.NUM_REQS, query_len)


def group_copy(base: Any, made: Made) -> Any:
    """The copy of ``base`` the runner would hand ``made``'s group."""
    cm = copy.copy(base)
    victims.add_group_fields(made.recipe, cm)
    return cm


def call(made: Made, mode: str, cm: Any) -> Any:
    """``made``'s build in ``mode`` (``capture`` or normal) on ``cm``."""
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(made.config):
        if mode == "capture":
            return made.builder.build_for_cudagraph_capture(cm)
        return made.builder.build(common_prefix_len=0, common_attn_metadata=cm)
