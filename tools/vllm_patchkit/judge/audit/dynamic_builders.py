"""Every metadata builder of the importable vLLM, made on CPU as the runner makes it.

Runs inside the audited tree's runtime (the dynamic child). The list of
builders comes from the regression survey's parse of the tree's source, so
builders defined inside factory functions (subclassed backends such as
cross attention) are listed even though no class object exists until the
factory runs. A builder is then made from the regression suite's recipe for
it when the suite has one (each fix's, :func:`vllm_patchkit.judge.regression.
by_fix.recipes`: its KV-cache spec, model shape, factory), else from a recipe
guessed from its bases. One that cannot be made is kept with the reason, never dropped.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any

from vllm_patchkit.judge.regression import by_fix, harness
from vllm_patchkit.judge.regression.recipes import (
    Recipe,
    add_group_fields,
    from_factory,
    make_builder,
)
from vllm_patchkit.judge.regression.records import describe
from vllm_patchkit.judge.regression.survey import Builder


@dataclass
class Made:
    """A builder that was made, with what its runs need."""

    entry: Builder
    cls: type
    builder: Any
    config: Any
    recipe: Recipe
    over: str = ""
    """For a factory-made builder made around another backend than its
    recipe's (:func:`wrapped_over`): that backend's class name."""

    @property
    def label(self) -> str:
        if self.over:
            return f"{self.entry.qualname} over {self.over}"
        return self.entry.qualname


@dataclass
class NotMade:
    entry: Builder
    status: str
    """``abstract`` (runs only through its subclasses) or ``could not run``."""
    reason: str


_LAYERS = "vllm.model_executor.layers.attention"
FACTORY_RECIPES: dict[str, Recipe] = {
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
"""Factory-made builders the regression suite has no recipe for: the factory
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
    suite = {**FACTORY_RECIPES, **by_fix.recipes()}
    made: list[Made] = []
    not_made: list[NotMade] = []
    seen: set[type] = set()
    for entry in entries:
        recipe = suite.get(entry.qualname)
        try:
            module = harness.import_vllm(entry.module)
            if recipe is not None and recipe.factory:
                cls = from_factory(module, recipe)
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
                builder = make_builder(cls, candidate, qlen, layer, config)
            except Exception as exc:  # another release's constructor, CUDA
                first_error = first_error or f"construct: {describe(exc)}"
                continue
            made.append(Made(entry, cls, builder, config, candidate))
            break
        else:
            not_made.append(NotMade(entry, "could not run", first_error))
    return made, not_made


def backend_of(made: Made) -> type | None:
    """The backend class of ``made``'s module whose builder is ``made.cls``."""
    module = harness.import_vllm(made.entry.module)
    for value in vars(module).values():
        getter = getattr(value, "get_builder_cls", None)
        if not isinstance(value, type) or inspect.isabstract(value) or getter is None:
            continue
        with contextlib.suppress(Exception):  # an abstract get_builder_cls
            if getter() is made.cls:
                return value
    return None


def wrapped_over(
    made: list[Made], wrapped: list[Made], qlen: int
) -> tuple[list[Made], list[NotMade]]:
    """Each factory-made builder of ``made`` made again around the backend of
    each builder in ``wrapped`` (plain attention builders, not factory-made;
    one whose module has no backend class for it is skipped).

    A factory-made builder inherits its underlying builder's class
    attributes and ``__init__``, so what it promises (such as
    ``supports_draft_decode_metadata_update``) depends on the backend it
    wraps; the recipe's ROCm backend shows only one of them.
    """
    out: list[Made] = []
    not_made: list[NotMade] = []
    # A builder no backend class of its module names cannot be wrapped.
    backends = [b for b in (backend_of(m) for m in wrapped) if b is not None]
    for wrapper in (m for m in made if m.recipe.factory):
        for backend in backends:
            name = backend.__name__
            try:
                module = harness.import_vllm(wrapper.entry.module)
                cls = from_factory(module, wrapper.recipe, backend)
                config = harness.vllm_config(qlen, wrapper.recipe.model)
                layer = f"audit.{wrapper.entry.qualname}.over.{name}.{qlen}"
                builder = make_builder(cls, wrapper.recipe, qlen, layer, config)
            except Exception as exc:  # a pairing this CPU cannot make
                reason = f"over {name}: {describe(exc)}"
                not_made.append(NotMade(wrapper.entry, "could not run", reason))
                continue
            out.append(Made(wrapper.entry, cls, builder, config, wrapper.recipe, name))
    return out, not_made


def fresh_metadata(query_len: int) -> Any:
    """The base metadata of one run: a uniform decode batch."""
    return harness.uniform_decode_metadata(harness.NUM_REQS, query_len)


def group_copy(base: Any, made: Made) -> Any:
    """The copy of ``base`` the runner would hand ``made``'s group."""
    cm = copy.copy(base)
    add_group_fields(made.recipe, cm)
    return cm


def call(made: Made, mode: str, cm: Any) -> Any:
    """``made``'s build in ``mode`` (``capture`` or ``build``) on ``cm``, or
    its method of that name (the draft update), under its config."""
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(made.config):
        if mode == "capture":
            return made.builder.build_for_cudagraph_capture(cm)
        if mode == "build":
            return made.builder.build(common_prefix_len=0, common_attn_metadata=cm)
        return getattr(made.builder, mode)(cm)
