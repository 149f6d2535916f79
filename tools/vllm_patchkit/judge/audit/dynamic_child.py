"""The dynamic pass inside the audited tree's runtime: run builders, record writes.

``python -m vllm_patchkit.judge.audit.dynamic_child [TREE] --output FILE`` (the
environment imports TREE's vLLM:
:class:`vllm_patchkit.trees.tree_process.TreeLauncher`).

Every builder :mod:`.dynamic_builders` can make runs in both modes over a
shallow copy of fresh decode metadata, as the runner hands one to each
KV-cache group. A write to a shared field is seen three ways: an aten op
that writes a shared tensor's memory (:class:`WriteRecorder`), a rebinding
of a field (:func:`track_setattr`), and a change of contents no op showed (a
write through a NumPy view of a host tensor, as vLLM often writes them),
found again by line tracing (:func:`locate`). At the draft query length it
also runs :mod:`.draft_update`.

Every field counts: the attention groups of one KV-cache group get the very
same object, so even the fields the runner sets per KV-cache group are
shared by them; :mod:`.effect` says so in such a finding's reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import linecache
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from vllm_patchkit.errors import EXIT_ERROR
from vllm_patchkit.judge.audit import draft_update, dynamic_builders, effect
from vllm_patchkit.judge.audit.dynamic import (
    MODES,
    BuilderRun,
    DraftUpdate,
    DynamicResult,
    ObservedWrite,
)
from vllm_patchkit.judge.regression import survey
from vllm_patchkit.judge.regression.records import DECODE_QUERY_LENS, describe
from vllm_patchkit.paths import below
from vllm_patchkit.trees.child_json import exit_with

_INTERPRETER = os.path.join("triton", "runtime", "interpreter.py")
_SUBSCRIPT_ASSIGN = re.compile(r"\]\s*(\+|-|\*|/|//|%|&|\||\^)?=[^=]")


class Tree:
    """Where the imported vLLM lives, for attributing frames to its files."""

    def __init__(self) -> None:
        import vllm

        self.package = os.path.realpath(os.path.dirname(vllm.__file__))
        self.root = os.path.dirname(self.package)
        self._inside: dict[str, str | None] = {}

    def relpath(self, filename: str) -> str | None:
        """``vllm/...`` for a file of the tree, None for any other."""
        if filename not in self._inside:
            real = os.path.realpath(filename)
            inside = below(real, self.package)
            self._inside[filename] = (
                os.path.relpath(real, self.root) if inside else None
            )
        return self._inside[filename]

    def interpreted(self, frame: Any) -> bool:
        """Is this op Triton's interpreter copying a kernel's arguments back?

        On CPU the interpreter copies every tensor argument back after a
        kernel ran, read-only ones too: not a write the GPU would make. A
        kernel that really changes a shared tensor still shows, by content.
        """
        while frame is not None:
            if self.relpath(frame.f_code.co_filename) is not None:
                return False
            if frame.f_code.co_filename.endswith(_INTERPRETER):
                return True
            frame = frame.f_back
        return False

    def innermost(self, frame: Any) -> tuple[str, int, str, str] | None:
        """(file, line, Class.method, source) of the innermost tree frame."""
        while frame is not None:
            rel = self.relpath(frame.f_code.co_filename)
            if rel is not None:
                source = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
                # A class made in a factory: "Class.method", not the factory's
                # "<locals>" path.
                method = frame.f_code.co_qualname.rpartition(".<locals>.")[2]
                return rel, frame.f_lineno, method, source.strip()
            frame = frame.f_back
        return None


def shared_tensors(metadata: Any) -> dict[str, torch.Tensor]:
    """The tensors every group's copy of ``metadata`` shares, by field name."""
    values = {
        f.name: getattr(metadata, f.name, None) for f in dataclasses.fields(metadata)
    }
    return {name: v for name, v in values.items() if isinstance(v, torch.Tensor)}


def _extent(t: torch.Tensor) -> tuple[int, int, int]:
    """(storage address, first byte, byte past the last) that ``t`` can touch."""
    size = t.element_size()
    start = t.storage_offset()
    span = sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride(), strict=True))
    base = t.untyped_storage().data_ptr()
    if t.numel() == 0:
        return base, 0, 0
    return base, start * size, (start + span + 1) * size


class WriteRecorder(TorchDispatchMode):
    """Notes each aten op that writes memory of a shared tensor."""

    def __init__(self, tree: Tree, shared: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.tree = tree
        self.shared = {name: _extent(t) for name, t in shared.items()}
        self.writes: list[tuple[str, str, tuple[str, int, str, str] | None]] = []

    def _fields(self, t: torch.Tensor) -> list[str]:
        if t.device.type == "meta":
            return []
        base, lo, hi = _extent(t)
        return [
            name
            for name, (b, s, e) in self.shared.items()
            if b == base and lo < e and s < hi
        ]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        for index, arg in enumerate(func._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            if arg.kwarg_only or index >= len(args):
                value = kwargs.get(arg.name)
            else:
                value = args[index]
            values = value if isinstance(value, list | tuple) else [value]
            for tensor in values:
                if not isinstance(tensor, torch.Tensor):
                    continue
                fields = self._fields(tensor)
                if fields and self.tree.interpreted(sys._getframe(1)):
                    continue
                for name in fields:
                    where = self.tree.innermost(sys._getframe(1))
                    op = func._schema.name.split("::")[-1]
                    self.writes.append((name, op, where))
        return func(*args, **kwargs)


@contextmanager
def track_setattr(
    metadata: Any, tree: Tree, names: set[str]
) -> Iterator[list[tuple[str, Any]]]:
    """Record each binding of a field of ``metadata`` while inside."""
    sets: list[tuple[str, Any]] = []
    base = type(metadata)

    class Tracked(base):  # type: ignore[misc, valid-type]
        def __setattr__(self, name: str, value: Any) -> None:
            if name in names:
                where = tree.innermost(sys._getframe(1))
                # The metadata's own lazy caches are not a builder's write.
                if where is None or not where[2].startswith(base.__name__ + "."):
                    sets.append((name, where))
            super().__setattr__(name, value)

    Tracked.__name__, Tracked.__qualname__ = base.__name__, base.__qualname__
    metadata.__class__ = Tracked
    try:
        yield sets
    finally:
        metadata.__class__ = base


def _operation(op: str, source: str) -> str:
    if _SUBSCRIPT_ASSIGN.search(source):
        return "slice assignment" if ":" in source.split("=")[0] else "index assignment"
    return op


def locate(
    tree: Tree, made: dynamic_builders.Made, mode: str, query_len: int, name: str
) -> tuple[str, int, str, str] | None:
    """The tree's line after which field ``name`` first changed, by line tracing.

    For writes no aten op showed (NumPy views). The builder runs again from
    fresh metadata; before each line of the tree runs, the field is compared
    with its first contents, so the first mismatch blames the line that ran
    just before it.
    """
    base = dynamic_builders.fresh_metadata(query_len)
    cm = dynamic_builders.group_copy(base, made)
    tensor = getattr(base, name)
    first = tensor.clone()
    last: list[tuple[str, int, str, str] | None] = [None]
    found: list[tuple[str, int, str, str] | None] = [None]

    def local(frame: Any, event: str, arg: Any) -> Any:
        if found[0] is None and event in ("line", "return"):
            if not torch.equal(tensor, first):
                found[0] = last[0]
            elif event == "line":
                last[0] = tree.innermost(frame)
        return local

    def global_(frame: Any, event: str, arg: Any) -> Any:
        if tree.relpath(frame.f_code.co_filename) is None:
            return None
        return local

    previous = sys.gettrace()
    sys.settrace(global_)
    try:
        dynamic_builders.call(made, mode, cm)
    except Exception:  # noqa: BLE001 - the write may come before the raise
        pass
    finally:
        sys.settrace(previous)
    return found[0]


def observe(
    tree: Tree, made: dynamic_builders.Made, mode: str, query_len: int
) -> tuple[list[ObservedWrite], str | None]:
    """Run ``made`` once in ``mode``; its writes to shared fields, and its error."""
    base = dynamic_builders.fresh_metadata(query_len)
    cm = dynamic_builders.group_copy(base, made)
    shared = shared_tensors(base)
    before = {name: t.clone() for name, t in shared.items()}
    names = {f.name for f in dataclasses.fields(cm)}
    bound = {name: id(getattr(cm, name, None)) for name in names}
    recorder = WriteRecorder(tree, shared)
    error = None
    with track_setattr(cm, tree, names) as sets:
        try:
            with recorder:
                dynamic_builders.call(made, mode, cm)
        except Exception as exc:  # the builder's own failure on CPU
            error = describe(exc)
    changed = {n for n, t in shared.items() if not torch.equal(t, before[n])}
    out: dict[tuple[Any, ...], ObservedWrite] = {}
    method_name = "build_for_cudagraph_capture" if mode == "capture" else "build"
    entry = f"{made.cls.__name__}.{method_name}"

    def observed(
        name: str, where: Any, operation: str | None, changed_it: bool
    ) -> ObservedWrite:
        """The write of ``name`` at ``where`` (the builder's method when the
        line is unknown); ``operation`` None: the reassignment."""
        file, line, method, source = where or (made.entry.file, 0, entry, "")
        return ObservedWrite(
            file,
            line,
            name,
            method,
            "reassignment" if operation is None else _operation(operation, source),
            made.label,
            mode,
            changed_it,
            source,
            query_len,
        )

    def key(write: ObservedWrite) -> tuple[Any, ...]:
        return (write.file, write.line, write.field, write.operation)

    for name, op, where in recorder.writes:
        write = observed(name, where, op, name in changed)
        out.setdefault(key(write), write)
    seen_fields = {w.field for w in out.values()}
    for name in sorted(changed - seen_fields):
        where = locate(tree, made, mode, query_len, name)
        write = observed(name, where, "write without a torch op", True)
        out[key(write)] = write
    for name, where in sets:
        if id(getattr(cm, name, None)) == bound[name]:
            continue
        write = observed(name, where, None, True)
        out.setdefault(key(write), write)
    return list(out.values()), error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_patchkit.judge.audit.dynamic_child"
    )
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    seconds: dict[str, float] = {}
    start = time.monotonic()
    tree = Tree()
    root = Path(tree.root)
    if args.tree is not None and root != args.tree.resolve():
        # Never audit another vLLM than the one asked for (a tree with no
        # vllm/ package would silently import the installed one).
        print(
            f"imported vLLM from {tree.package}, not from {args.tree}", file=sys.stderr
        )
        return EXIT_ERROR
    entries = survey.builder_classes(root)
    seconds["discover"] = round(time.monotonic() - start, 2)
    runs: list[BuilderRun] = []
    writes: list[ObservedWrite] = []
    effects = []
    draft_updates: list[DraftUpdate] = []
    draft_api: bool | None = None
    # The regression suite's batches: some builders read the host offsets
    # only with draft tokens.
    for query_len in DECODE_QUERY_LENS:
        start = time.monotonic()
        made, not_made = dynamic_builders.make_all(entries, query_len)
        seconds[f"make q={query_len}"] = round(time.monotonic() - start, 2)
        runs += [
            BuilderRun(
                n.entry.qualname,
                n.entry.file,
                n.entry.line,
                None,
                n.status,
                n.reason,
                query_len,
            )
            for n in not_made
        ]
        found_here: list[ObservedWrite] = []
        runnable: dict[str, list[dynamic_builders.Made]] = {m: [] for m in MODES}
        start = time.monotonic()
        for m in made:
            for mode in MODES:
                found, error = observe(tree, m, mode, query_len)
                found_here += found
                runs.append(
                    BuilderRun(
                        m.label,
                        m.entry.file,
                        m.entry.line,
                        mode,
                        "raised" if error else "ran",
                        error or "",
                        query_len,
                    )
                )
                if error is None:
                    runnable[mode].append(m)
        seconds[f"observe q={query_len}"] = round(time.monotonic() - start, 2)
        start = time.monotonic()
        by_label = {m.label: m for m in made}
        effects += effect.measure_all(found_here, by_label, runnable, query_len)
        seconds[f"effect q={query_len}"] = round(time.monotonic() - start, 2)
        writes += found_here
        if query_len == draft_update.DRAFT_QUERY_LEN:
            start = time.monotonic()
            draft_updates, draft_api = draft_update.check_all(made, runnable["build"])
            seconds["draft update"] = round(time.monotonic() - start, 2)
    result = DynamicResult(
        str(args.tree) if args.tree else "installed",
        0,
        writes,
        effects,
        runs,
        seconds,
        draft_updates=draft_updates,
        draft_api=draft_api,
    )
    args.output.write_text(json.dumps(result.to_json(), indent=1))
    return 0


if __name__ == "__main__":
    exit_with(main)
