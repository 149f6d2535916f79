"""Every metadata builder of the importable vLLM, made on CPU as the runner makes it.

Runs inside the audited tree's runtime (the dynamic child). The list of
builders comes from the regression survey's parse of the tree's source, so
builders defined inside factory functions (subclassed backends such as
cross attention) are listed even though no class object exists until the
factory runs. A builder is then made from the regression suite's recipe for
it when the suite has one (:data:`vllm_patchkit.regression.victims.VICTIMS`:
its KV-cache spec, model shape, factory), else from a recipe guessed from its
bases. One that cannot be made is kept with the reason, never dropped.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_patchkit.regression import harness, survey, victims

ROCM_BUILDER = "vllm.v1.attention.backends.rocm_attn.RocmAttentionMetadataBuilder"


@dataclass(frozen=True)
class Recipe:
    """How to make one builder: a :class:`victims.Victim` minus its scenario."""

    spec: str = "full"
    model: str = "llama"
    mla_layer: bool = False
    factory: str | None = None
    factory_kwargs: dict[str, Any] = field(default_factory=dict)
    query_lens: tuple[int, ...] = (1, 3)
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Entry:
    """One builder class found in the tree's source."""

    qualname: str
    """``module.Class`` (factory-made: the factory's module)."""
    module: str
    name: str
    file: str
    line: int
    in_factory: bool


@dataclass
class Made:
    """A builder that was made, with what its runs need."""

    entry: Entry
    cls: type
    builder: Any
    config: Any
    recipe: Recipe

    @property
    def label(self) -> str:
        return self.entry.qualname


@dataclass
class NotMade:
    entry: Entry
    status: str
    """``abstract`` (runs only through its subclasses) or ``could not run``."""
    reason: str


def _recipes_from_suite() -> dict[str, Recipe]:
    out = {}
    for v in victims.VICTIMS:
        out[v.qualname] = Recipe(
            v.spec,
            v.model,
            v.mla_layer,
            v.factory,
            dict(v.factory_kwargs),
            tuple(v.query_lens),
            dict(v.kwargs),
        )
    return out


def discover(tree: Path) -> list[Entry]:
    """Builder classes defined in ``tree``'s ``vllm/`` (the survey's rules)."""
    modules = survey._parse(tree)
    state = survey._Survey(modules)
    found = []
    for module in modules.values():
        for cls in module.classes.values():
            if not state.is_builder(cls):
                continue
            found.append(
                Entry(
                    f"{module.name}.{cls.name}",
                    module.name,
                    cls.name,
                    str(module.path.relative_to(tree)),
                    cls.node.lineno,
                    cls.in_factory,
                )
            )
    return sorted(found, key=lambda e: e.qualname)


def _import(module: str) -> Any:
    parts = module.split(".")
    if module.startswith("vllm.models.") and len(parts) > 3:
        # Model packages' __init__ import the whole model (torchvision).
        return harness.import_without_parent_init(
            ".".join(parts[:3]), ".".join(parts[3:])
        )
    return importlib.import_module(module)


def _guess(cls: type) -> list[Recipe]:
    """Recipes to try for a builder the suite has none for, likeliest first."""
    names = {c.__name__ for c in cls.__mro__}
    mla = Recipe("mla", "deepseek", mla_layer=True)
    mamba = Recipe("mamba")
    if any("MLA" in n for n in names):
        return [mla, Recipe("full")]
    if any(k in n for n in names for k in ("Mamba", "GDN", "Linear", "Conv", "KDA")):
        return [mamba, Recipe("full")]
    return [Recipe("full"), Recipe("sliding_window"), mamba, mla]


def _make(cls: type, recipe: Recipe, qlen: int, layer: str) -> tuple[Any, Any]:
    config = harness.vllm_config(qlen, recipe.model)
    harness.init_distributed()
    if recipe.mla_layer:
        harness.register_mla_layer(config, layer)
    builder = harness.make_builder(
        cls,
        qlen,
        layer,
        harness.kv_cache_spec(recipe.spec, qlen),
        model=recipe.model,
        **recipe.kwargs,
    )
    return builder, config


def why(exc: BaseException) -> str:
    """The exception with the innermost vLLM line it passed through."""
    tb = exc.__traceback__
    where = ""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if "/vllm/" in name and "vllm_patchkit" not in name:
            where = f" at vllm/{name.rpartition('/vllm/')[2]}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"{type(exc).__name__}{where}: {str(exc)[:200]}"


def make_all(entries: list[Entry], qlen: int) -> tuple[list[Made], list[NotMade]]:
    """Make every listed builder for decode batches of query length ``qlen``."""
    suite = _recipes_from_suite()
    made: list[Made] = []
    not_made: list[NotMade] = []
    seen: set[type] = set()
    for entry in entries:
        recipe = suite.get(entry.qualname)
        try:
            module = _import(entry.module)
            if recipe is not None and recipe.factory:
                backend = getattr(module, recipe.factory)(
                    harness.rocm_backend_cls(), **recipe.factory_kwargs
                )
                cls = backend.get_builder_cls()
            elif entry.in_factory:
                not_made.append(
                    NotMade(
                        entry,
                        "could not run",
                        "made inside a factory function the audit has no "
                        "recipe for (the regression victim table names the "
                        "factories it can call)",
                    )
                )
                continue
            else:
                cls = getattr(module, entry.name)
        except Exception as exc:  # absent module, CUDA-only import
            not_made.append(NotMade(entry, "could not run", f"import: {why(exc)}"))
            continue
        if cls in seen:
            continue
        seen.add(cls)
        if inspect.isabstract(cls):
            not_made.append(
                NotMade(entry, "abstract", "abstract base: runs through its subclasses")
            )
            continue
        candidates = [recipe] if recipe is not None else _guess(cls)
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
            layer = f"audit.{entry.name}.{qlen}.{n}"
            try:
                builder, config = _make(cls, candidate, qlen, layer)
            except Exception as exc:  # another release's constructor, CUDA
                first_error = first_error or f"construct: {why(exc)}"
                continue
            made.append(Made(entry, cls, builder, config, candidate))
            break
        else:
            not_made.append(NotMade(entry, "could not run", first_error))
    return made, not_made
