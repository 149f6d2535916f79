"""Where each vLLM release keeps what the harness uses: one place for layouts.

The harness drives vLLM's own classes, whose modules and signatures moved
between releases. Every difference found by running the suite on release
trees (0.11.0 on) is answered here, newest layout first, so the scenarios
stay written against one vocabulary and a layout this module does not know
fails as a harness error naming what it looked for.

- ``CommonAttentionMetadata``: ``vllm.v1.attention.backend`` from 0.14.0;
  ``vllm.v1.attention.backends.utils`` before.
- ``AttentionGroup.create_metadata_builders``: ``kernel_block_size`` has a
  default from 0.14.0; 0.11.x-0.13.x require it (None: the spec's own size).
- ``CompilationConfig.max_cudagraph_capture_size``: 0.11.x-0.13.x leave it
  None on a CPU platform (the GPU platform sets it), and the Mamba-family
  and GDN builders compare against it.
- Builder keyword arguments a release does not declare (the DeepSeek-V3.2
  indexer's ``block_table_width``, later releases) are not passed.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

ATTENTION_METADATA_MODULES = (
    "vllm.v1.attention.backend",  # 0.14.0 on
    "vllm.v1.attention.backends.utils",  # 0.11.x - 0.13.x
)


class LayoutUnknown(ImportError):
    """This vLLM keeps a name where no known layout has it."""


def attention_name(name: str) -> Any:
    """``name`` (CommonAttentionMetadata, AttentionMetadataBuilder, ...) from
    the module this release defines it in."""
    tried = []
    for module_name in ATTENTION_METADATA_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            tried.append(f"{module_name} (absent)")
            continue
        if hasattr(module, name):
            return getattr(module, name)
        tried.append(f"{module_name} (no {name})")
    raise LayoutUnknown(f"{name} is in none of the known layouts: {', '.join(tried)}")


def common_attention_metadata() -> type:
    return attention_name("CommonAttentionMetadata")


def create_metadata_builders(group: Any, config: Any, device: Any) -> None:
    """``group.create_metadata_builders`` with the spec's own block size."""
    params = inspect.signature(group.create_metadata_builders).parameters
    if "kernel_block_size" in params:
        group.create_metadata_builders(config, device, kernel_block_size=None)
    else:
        group.create_metadata_builders(config, device)


def complete_config(config: Any) -> None:
    """Fill what a GPU platform would have set and older releases read."""
    compilation = config.compilation_config
    if getattr(compilation, "max_cudagraph_capture_size", 0) is None:
        # vLLM's own default for it: min(max_num_seqs * 2, 512).
        max_num_seqs = config.scheduler_config.max_num_seqs
        compilation.max_cudagraph_capture_size = min(max_num_seqs * 2, 512)


def declared_kwargs(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Those of ``kwargs`` that some ``__init__`` of ``cls`` names."""
    declared: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            declared.update(inspect.signature(init).parameters)
    return {k: v for k, v in kwargs.items() if k in declared}
