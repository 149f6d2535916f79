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
- Builder keyword arguments a release does not declare are not passed
  (:func:`.harness.declared_arguments`).
- ``vllm.platforms.rocm`` resolves the GPU's GCN arch when imported (amdsmi,
  else ``torch.cuda``), and from 0.33.0 the AITER unified backend imports it
  at module level: on a host without an AMD GPU it is imported with a
  stand-in for ``amdsmi`` that answers that one question (see
  :func:`import_rocm_platform`); the report names the stand-in.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_patchkit.trees.versions import RELEASE_ENV

if TYPE_CHECKING:
    from vllm_overlay.releases import Release

ATTENTION_METADATA_MODULES = (
    "vllm.v1.attention.backend",  # 0.14.0 on
    "vllm.v1.attention.backends.utils",  # 0.11.x - 0.13.x
)


class LayoutUnknown(ImportError):
    """This vLLM keeps a name where no known layout has it."""


def common_attention_metadata() -> type:
    """``CommonAttentionMetadata``, from the module this release defines it in."""
    name = "CommonAttentionMetadata"
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


def create_metadata_builders(group: Any, config: Any, device: Any) -> None:
    """``group.create_metadata_builders`` with the spec's own block size."""
    params = inspect.signature(group.create_metadata_builders).parameters
    if "kernel_block_size" in params:
        group.create_metadata_builders(config, device, kernel_block_size=None)
    else:
        group.create_metadata_builders(config, device)


def complete_config(config: Any, block_size: int) -> None:
    """Fill what a GPU platform would have set and older releases read."""
    if config.cache_config.block_size is None:
        # Some releases' VllmConfig leaves it to the platform at engine start
        # (0.17.0); some builders divide by it in their __init__.
        config.cache_config.block_size = block_size
    compilation = config.compilation_config
    if getattr(compilation, "max_cudagraph_capture_size", 0) is None:
        # vLLM's own default for it: min(max_num_seqs * 2, 512).
        max_num_seqs = config.scheduler_config.max_num_seqs
        compilation.max_cudagraph_capture_size = min(max_num_seqs * 2, 512)


def run_quietly_on_cpu() -> None:
    """Set up this process, before vLLM is imported, to run vLLM on CPU quietly.

    A CPU-only host is no accelerator platform: vLLM's CPU platform says so
    (no pinned memory), where the fallback claims pinned memory it lacks.
    """
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    logging.disable(logging.WARNING)


ROCM_HOST_ARCH = "gfx942"
"""The arch the stand-in reports: MI300X/MI325X, the ROCm GPUs of the
series' bug reports."""

_STAND_INS: list[str] = []


def stand_ins() -> list[str]:
    """What this process stood in for (for the report): empty when nothing."""
    return list(_STAND_INS)


def import_rocm_platform() -> bool:
    """Import ``vllm.platforms.rocm`` on a host without an AMD GPU.

    Only when ``amdsmi`` cannot be imported here: during the import, a
    stand-in module answers the GCN-arch query with :data:`ROCM_HOST_ARCH`;
    every other amdsmi call raises. It is removed from ``sys.modules`` right
    after, so vLLM's platform detection never sees it. The arch only gates
    per-GPU features (FP8 query input on gfx11, KV shuffling on gfx1250);
    the builders' handling of the shared offsets does not depend on it.
    True when it imported the module with the stand-in.
    """
    if "vllm.platforms.rocm" in sys.modules or importlib.util.find_spec("amdsmi"):
        return False
    sys.modules["amdsmi"] = _amdsmi_stand_in()
    try:
        importlib.import_module("vllm.platforms.rocm")
    finally:
        sys.modules.pop("amdsmi", None)
    _STAND_INS.append(
        f"amdsmi (absent here) stood in for while importing vllm.platforms.rocm: "
        f"GCN arch {ROCM_HOST_ARCH}"
    )
    return True


def _amdsmi_stand_in() -> types.ModuleType:
    module = types.ModuleType("amdsmi")

    class AmdSmiException(Exception):  # noqa: N818 - amdsmi's own name
        pass

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise AmdSmiException("no AMD GPU here: the harness's amdsmi stand-in")

    names = {
        "AmdSmiException": AmdSmiException,
        "AmdSmiMemoryType": types.SimpleNamespace(VRAM="VRAM"),
        "amdsmi_init": lambda *a, **k: None,
        "amdsmi_shut_down": lambda *a, **k: None,
        "amdsmi_get_processor_handles": lambda: ["stand-in"],
        "amdsmi_get_gpu_asic_info": lambda handle: {
            "target_graphics_version": ROCM_HOST_ARCH
        },
    }
    module.__dict__.update(names)
    # Every other name (``from amdsmi import ...`` asks by name) raises when called.
    module.__getattr__ = lambda name: unavailable  # type: ignore[method-assign]
    return module


def release_under_test() -> Release | None:
    """The release of the vLLM under test: the parent's reading of its tree
    (:data:`RELEASE_ENV`), else what the installed vLLM's ``_version.py`` or
    dist-info says. None: not a known release."""
    import vllm

    from vllm_overlay.releases import parse_release
    from vllm_patchkit.trees.versions import tree_release

    given = os.environ.get(RELEASE_ENV)
    if given is not None:
        return parse_release(given)
    return tree_release(Path(vllm.__file__).resolve().parents[1])[1]
