"""Check every interpreted Triton memory access before it happens.

Under ``TRITON_INTERPRET=1`` Triton runs kernels in Python and performs each
memory access with raw host pointers: an out-of-bounds address silently reads
or corrupts the heap of the process. The checker wraps the interpreter's
memory entry points and raises :class:`MemoryViolation` before any access
that falls outside the storages of the tensors passed to the running launch.

Entry points covered (Triton 3.9): ``InterpreterBuilder.create_masked_load``
and ``create_masked_store``, which also serve plain loads and stores, atomic
loads and stores, and tensor-descriptor loads, stores, gathers and scatters
(the descriptor's own bounds mask is applied before ours); plus
``create_atomic_cas`` and ``create_atomic_rmw``, which reach memory directly.
Block pointers no longer exist in Triton 3.9 (``tl.make_block_ptr`` raises).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vllm_patchkit.judge.memcheck.regions import (
    Region,
    launch_regions,
    locate,
    nearest,
)


class MemoryViolation(RuntimeError):
    """An interpreted kernel was about to access memory it was not given."""

    def __init__(self, message: str, *, kernel: str, argument: str, offset: int):
        super().__init__(message)
        self.kernel = kernel
        self.argument = argument
        self.offset = offset


@dataclass
class Launch:
    kernel: str
    regions: tuple[Region, ...] = ()


@dataclass
class Stats:
    """What one activation of the checker saw."""

    launches: int = 0
    accesses: int = 0  # memory operations checked
    lanes: int = 0  # active (unmasked) addresses checked
    kernels: set[str] = field(default_factory=set)


_BASE = "memcheck_base"  # TensorHandle.attr key: the Region a pointer is based on
_launches: list[Launch] = []
_stats: list[Stats] = []
_saved: dict[tuple[type, str], Any] = {}


# The builder's memory entry points: (method, kind of access, position of the
# pointers, of the mask; None: the op has none).
_ACCESSES = (
    ("create_masked_load", "load", 0, 1),  # ptrs, mask, other, ...
    ("create_masked_store", "store", 0, 2),  # ptrs, value, mask, ...
    ("create_atomic_cas", "atomic_cas", 0, None),  # ptr, cmp, val, sem, scope
    ("create_atomic_rmw", "atomic_rmw", 1, 3),  # rmwOp, ptr, val, mask, ...
)

# Builder ops that move a pointer tensor around without changing its base.
_SHAPE_OPS = (
    "create_splat",
    "create_broadcast",
    "create_expand_dims",
    "create_reshape",
    "create_trans",
)


def _element_bytes(ptrs: Any) -> int:
    bits = ptrs.get_element_ty().primitive_bitwidth
    return max(1, bits // 8)


def _program_id() -> tuple[int, ...] | None:
    from triton.runtime.interpreter import interpreter_builder

    return getattr(interpreter_builder, "grid_idx", None)


def _violation(
    launch: Launch,
    kind: str,
    addresses: np.ndarray,
    bad: np.ndarray,
    nbytes: int,
    home: Region | None,
) -> MemoryViolation:
    lanes = np.argwhere(bad)
    first = tuple(int(i) for i in lanes[0])
    address = int(addresses[first])
    region = home or nearest(launch.regions, address)
    if region is None:
        where, name, offset = "outside every argument (there are none)", "?", address
    else:
        name, offset = region.name, address - region.start
        if offset < 0:
            where = f"{-offset} bytes before the start of '{name}'"
        elif offset < region.nbytes:
            where = f"across the end of '{name}'"
        else:
            where = f"{offset - region.nbytes} bytes after the end of '{name}'"
        where += f" (byte offset {offset:+d}; {region.describe()})"
        landed = nearest(launch.regions, address)
        if (
            landed is not None
            and landed is not region
            and landed.start <= address
            and address + nbytes <= landed.end
        ):
            where += f", inside '{landed.name}' instead"
    args = "\n".join(f"    {r.describe()}" for r in launch.regions)
    message = (
        f"out-of-bounds {kind} in Triton kernel '{launch.kernel}', program "
        f"{_program_id()}: {nbytes}-byte access at {address:#x} is {where}; "
        f"{len(lanes)} of {int(bad.size)} lanes out of bounds, first at lane "
        f"{first}.\n  storages of this launch's arguments:\n{args}"
    )
    return MemoryViolation(message, kernel=launch.kernel, argument=name, offset=offset)


def _base_of(ptr: Any) -> Region | None:
    """The argument a pointer was derived from: its tag, or where it points."""
    tagged = ptr.attr.get(_BASE)
    if tagged is not None or not _launches:
        return tagged
    regions = _launches[-1].regions
    first = np.asarray(ptr.data, dtype=np.uint64).ravel()[:1]
    slot = int(locate(regions, first, 1)[0]) if first.size else -1
    return regions[slot] if slot >= 0 else None


def _check(kind: str, ptrs: Any, mask: Any) -> None:
    """Raise if an active lane leaves the storage its pointer is based on.

    The base is the argument the pointer was derived from (tracked through
    ``tl`` pointer arithmetic). A lane that lands in another argument's
    storage is out of bounds too; when the base is unknown, a lane only has
    to fall in some argument's storage.
    """
    if not _launches:
        return
    launch = _launches[-1]
    addresses = np.atleast_1d(np.asarray(ptrs.data, dtype=np.uint64))
    if mask is None:
        active = np.ones(addresses.shape, dtype=bool)
    else:
        active = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
    nbytes = _element_bytes(ptrs)
    stats = _stats[-1]
    stats.accesses += 1
    lanes = addresses[active]
    stats.lanes += int(lanes.size)
    if lanes.size == 0:
        return
    base = ptrs.attr.get(_BASE)
    lo, hi = int(lanes.min()), int(lanes.max()) + nbytes
    allowed = (base,) if base is not None else launch.regions
    if any(r.start <= lo and hi <= r.end for r in allowed):
        return  # fast path: the whole access lies in one storage
    bad = np.zeros(addresses.shape, dtype=bool)
    bad[active] = locate(allowed, lanes, nbytes) < 0
    raise _violation(launch, kind, addresses, bad, nbytes, base)


def _root_violation(exc: BaseException) -> MemoryViolation | None:
    """The violation wrapped by the interpreter's InterpreterError chain."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, MemoryViolation):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _patch(owner: type, name: str, make: Any) -> None:
    original = owner.__dict__[name]
    _saved[(owner, name)] = original
    setattr(owner, name, make(original))


def _install() -> None:
    from triton.runtime import interpreter as interp

    builder, executor = interp.InterpreterBuilder, interp.GridExecutor

    # The trailing cache arguments differ between Triton versions (3.6:
    # cache_modifier, eviction_policy, sometimes by keyword; 3.9:
    # cache_policy): passed through as given.
    def checked(kind: str, ptrs_at: int, mask_at: int | None) -> Any:
        def make(orig: Any) -> Any:
            def access(self, *args, **named):
                mask = None if mask_at is None else args[mask_at]
                _check(kind, args[ptrs_at], mask)
                return orig(self, *args, **named)

            return access

        return make

    def addptr(orig: Any) -> Any:
        def create_addptr(self, ptr, offset):
            out = orig(self, ptr, offset)
            out.attr[_BASE] = _base_of(ptr)
            return out

        return create_addptr

    def keep_base(orig: Any) -> Any:
        def shape_op(self, *args):
            out = orig(self, *args)
            arg = next((a for a in args if hasattr(a, "attr")), None)
            if arg is not None and _BASE in arg.attr:
                out.attr[_BASE] = arg.attr[_BASE]
            return out

        return shape_op

    def init_args(orig: Any) -> Any:
        def _init_args_hst(self, args_dev, kwargs):
            args_hst, kwargs_hst = orig(self, args_dev, kwargs)
            if _launches:
                named = dict(zip(self.arg_names, args_hst, strict=False))
                named.update(kwargs_hst)
                _launches[-1].regions = launch_regions(named)
            return args_hst, kwargs_hst

        return _init_args_hst

    def call(orig: Any) -> Any:
        def __call__(self, *args, **kwargs):
            _launches.append(Launch(self.fn.__name__))
            _stats[-1].launches += 1
            _stats[-1].kernels.add(self.fn.__name__)
            try:
                return orig(self, *args, **kwargs)
            except Exception as exc:
                violation = _root_violation(exc)
                if violation is None or violation is exc:
                    raise
                raise violation from None
            finally:
                _launches.pop()

        return __call__

    for name, kind, ptrs_at, mask_at in _ACCESSES:
        _patch(builder, name, checked(kind, ptrs_at, mask_at))
    _patch(builder, "create_addptr", addptr)
    for name in _SHAPE_OPS:
        _patch(builder, name, keep_base)
    _patch(executor, "_init_args_hst", init_args)
    _patch(executor, "__call__", call)


def _uninstall() -> None:
    for (owner, name), original in _saved.items():
        setattr(owner, name, original)
    _saved.clear()


@contextlib.contextmanager
def memcheck() -> Iterator[Stats]:
    """Check every interpreted load and store inside the ``with`` block.

    Kernels must be defined with ``TRITON_INTERPRET=1`` in effect (set it
    before importing Triton or the modules that define kernels); compiled
    kernels bypass the interpreter and cannot be checked, so the checker
    refuses to run without it rather than pass vacuously.
    """
    import triton

    if not triton.knobs.runtime.interpret:  # kernels defined from now on
        raise RuntimeError(
            "memcheck needs the Triton interpreter: set TRITON_INTERPRET=1 "
            f"before importing triton (it is {os.environ.get('TRITON_INTERPRET')!r})"
        )
    if not _stats:
        _install()
    _stats.append(Stats())
    try:
        yield _stats[-1]
    finally:
        _stats.pop()
        if not _stats:
            _uninstall()
