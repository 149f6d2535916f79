"""How to make one metadata builder on CPU, as the model runner makes it.

A :class:`Recipe` names what a builder needs (its KV-cache spec, the model
shape it reads, the factory that makes it around another backend); the
fixes' scenarios (:mod:`.by_fix`) and the audit's dynamic pass make builders
from recipes through the functions here. Torch-free at import (the fixes'
modules name their recipes' scenarios), the functions import :mod:`.harness`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """How to make one builder on CPU (the audit makes others from it too)."""

    spec: str = "full"
    """:func:`harness.kv_cache_spec` kind, or ``indexer`` / ``cross``."""
    model: str = "llama"
    """``llama``, or ``deepseek`` for MLA builders (they read MLA dims)."""
    mla_layer: bool = False
    """The builder reads its MLA layer from the forward context."""
    factory: str | None = None
    """``module`` function that wraps the ROCm backend into this builder's."""
    factory_kwargs: dict[str, Any] = field(default_factory=dict)
    query_lens: tuple[int, ...] = (1, 3)
    kwargs: dict[str, Any] = field(default_factory=dict)


def from_factory(module: Any, recipe: Recipe, backend: type | None = None) -> type:
    """The builder class ``recipe``'s factory in ``module`` makes around
    ``backend`` (None: the ROCm backend)."""
    from vllm_patchkit.judge.regression import harness

    factory = getattr(module, recipe.factory or "")
    backend = backend or harness.rocm_backend_cls()
    if "underlying_attn_backend" in inspect.signature(factory).parameters:
        made = factory(underlying_attn_backend=backend, **recipe.factory_kwargs)
    else:
        made = factory(backend, **recipe.factory_kwargs)
    return made.get_builder_cls()


def make_builder(
    cls: type, recipe: Recipe, decode_query_len: int, layer: str, config: Any = None
) -> Any:
    """``cls`` made from ``recipe`` as the model runner makes it; an MLA
    recipe's layer is registered in ``config`` (made here when None: a caller
    that runs the builder later passes the config it runs it under)."""
    from vllm_patchkit.judge.regression import harness

    if config is None:
        config = harness.vllm_config(decode_query_len, recipe.model)
    harness.init_distributed()
    if recipe.mla_layer:
        harness.register_mla_layer(config, layer)
    return harness.make_builder(
        cls,
        decode_query_len,
        layer,
        harness.kv_cache_spec(recipe.spec, decode_query_len),
        model=recipe.model,
        **recipe.kwargs,
    )


def add_group_fields(recipe: Recipe, metadata: Any) -> None:
    """Per-kind extras the runner puts in a group's metadata: a
    cross-attention group's encoder lengths."""
    if recipe.spec == "cross":
        import numpy as np
        import torch

        from vllm_patchkit.judge.regression.harness import ENCODER_LEN

        reqs = (metadata.num_reqs,)
        metadata.encoder_seq_lens = torch.full(reqs, ENCODER_LEN, dtype=torch.int32)
        metadata.encoder_seq_lens_cpu = np.full(reqs, ENCODER_LEN, dtype=np.int32)
