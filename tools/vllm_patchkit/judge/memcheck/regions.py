"""The memory a Triton launch may touch: the storages of its tensor arguments.

A kernel only ever receives base pointers, so the extents it may legally
address are those of the storages behind the tensors it was passed. Views
that share a storage (``k = q`` placeholders, slices of one buffer) share one
region, named after every argument that points into it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Region:
    """Bytes ``[start, end)`` of one storage, and the arguments that use it."""

    names: tuple[str, ...]
    start: int
    end: int
    dtype: torch.dtype

    @property
    def name(self) -> str:
        return "/".join(self.names)

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        elems = self.nbytes // max(1, self.dtype.itemsize)
        return (
            f"'{self.name}' [{self.start:#x}, {self.end:#x}): "
            f"{self.nbytes} bytes, {elems} x {str(self.dtype).removeprefix('torch.')}"
        )


def _tensors(name: str, value: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """Tensors inside one kernel argument (plain, wrapped, tuple, descriptor)."""
    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            yield from _tensors(f"{name}[{i}]", item)
    elif isinstance(getattr(value, "base", None), torch.Tensor):
        # triton's TensorWrapper (tl.reinterpret) or a TensorDescriptor.
        wrapper = type(value).__name__ == "TensorWrapper"
        yield (name if wrapper else f"{name}.base"), value.base


def launch_regions(arguments: Mapping[str, Any]) -> tuple[Region, ...]:
    """One region per storage reachable from the arguments, sorted by address."""
    merged: dict[int, Region] = {}
    for arg_name, value in arguments.items():
        for name, tensor in _tensors(arg_name, value):
            storage = tensor.untyped_storage()
            start = storage.data_ptr()
            if storage.nbytes() == 0:
                continue
            prev = merged.get(start)
            names = (*prev.names, name) if prev else (name,)
            merged[start] = Region(names, start, start + storage.nbytes(), tensor.dtype)
    return tuple(sorted(merged.values(), key=lambda r: r.start))


def nearest(regions: Iterable[Region], address: int) -> Region | None:
    """The region closest to ``address`` (containing it, or at least distance)."""

    def distance(region: Region) -> int:
        if address < region.start:
            return region.start - address
        return max(0, address - region.end + 1)

    return min(regions, key=distance, default=None)


def locate(
    regions: tuple[Region, ...], addresses: np.ndarray, nbytes: int
) -> np.ndarray:
    """Index of the region holding each access of ``nbytes``, or -1 if none."""
    if not regions:
        return np.full(addresses.shape, -1, dtype=np.int64)
    starts = np.array([r.start for r in regions], dtype=np.uint64)
    ends = np.array([r.end for r in regions], dtype=np.uint64)
    addr = addresses.astype(np.uint64, copy=False)
    slot = np.searchsorted(starts, addr, side="right").astype(np.int64) - 1
    safe = np.maximum(slot, 0)
    inside = (slot >= 0) & (addr + np.uint64(nbytes) <= ends[safe])
    return np.where(inside, slot, -1)
