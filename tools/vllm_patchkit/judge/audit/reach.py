"""Whom a band-aid reaches: the backends that run it, and whether they read it.

A write in :data:`~.bands.INTENTIONAL` is intentional for the backend it was
made for (the backends defined beside it). It is harmful for another backend
whose ``get_builder_cls`` hands out the band's builder (or a subclass that
inherits the method) when that backend's attention implementation reads
what the build returns from the written field, and the model runner runs a
forward on metadata built for capture outside the capture itself (the V1
runner's ``_dummy_run``, 0.27.0-0.28.0). Where the runner builds for capture
only while capturing, the graph records the kernels without running them:
the band stays intentional. Read from the source with ``ast``; nothing is
imported.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from vllm_overlay.metadata_writes import Taints, dotted
from vllm_patchkit.judge.audit.bands import Band
from vllm_patchkit.judge.audit.source import ClassRef, SourceIndex

RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
RUNNER_CLASS = "GPUModelRunner"
DUMMY_RUN = "_dummy_run"
CAPTURE_FLAGS = frozenset({"is_graph_capturing"})
"""Names the runner gives "a graph is being captured right now"."""
MAX_ROUNDS = 4
"""Subclass levels followed from a class to the classes built on it."""

ReturnsOf = Callable[[ClassRef, str], Taints]
"""What ``cls.method(common_attn_metadata)`` returns (the static pass's walk)."""


@dataclass(frozen=True)
class Recipient:
    """A backend other than the band's own that runs the band and reads it."""

    backend: str  # the name it registers under (get_name()), else its class
    how: str
    reads: str

    def describe(self) -> str:
        return f"{self.backend} ({self.how}; {self.reads})"


@dataclass(frozen=True)
class Replay:
    """Where the runner executes a forward on metadata built for capture."""

    file: str
    line: int
    how: str


@dataclass(frozen=True)
class Reach:
    band: Band
    recipients: tuple[Recipient, ...]
    replay: Replay | None
    own: tuple[str, ...] = ()
    """The backends the band was made for (defined beside it)."""

    @property
    def harmful(self) -> bool:
        return bool(self.recipients) and self.replay is not None

    @property
    def victims(self) -> list[str]:
        return [r.backend for r in self.recipients] if self.harmful else []

    def reason(self) -> str:
        """Why the band is harmful for its recipients, or why it stays intentional."""
        others = "; ".join(r.describe() for r in self.recipients)
        if self.harmful and self.replay is not None:
            return (
                f"made for {', '.join(self.own) or self.band.file}, but "
                f"reaches {others}, and {self.replay.how} "
                f"({self.replay.file}:{self.replay.line}): that backend's "
                f"forward then reads {self.band.guards}"
            )
        if self.recipients:
            return (
                f"also reaches {others}, but the runner builds for capture only "
                "while capturing: the written buffer reaches only the capture"
            )
        return ""


def band_reach(index: SourceIndex, band: Band, returns_of: ReturnsOf) -> Reach:
    """The backends besides the band's own that run it and read its field."""
    owner = _band_class(index, band)
    if owner is None:
        return Reach(band, (), None)
    method = band.method.rpartition(".")[2]
    holders = _holders(index, owner, method)
    recipients, own = [], []
    for backend, builder in _backends(index, holders):
        if backend.module.path == band.file:
            own.append(_backend_name(index, backend))  # made for it
            continue
        reads = _reader(index, backend, builder, band.field, returns_of)
        if reads is None:
            continue
        how = f"its get_builder_cls hands out {builder.name}" + (
            f", which inherits {band.method}" if builder.node is not owner.node else ""
        )
        recipients.append(Recipient(_backend_name(index, backend), how, reads))
    return Reach(band, tuple(recipients), capture_replay(index), tuple(own))


def capture_replay(index: SourceIndex) -> Replay | None:
    """Where the V1 runner's ``_dummy_run`` builds for capture while not
    capturing (a dummy batch that then replays a FULL graph or runs eagerly
    reads what the capture build wrote); None when it builds for capture only
    while capturing."""
    module = index.module(RUNNER_MODULE)
    if module is None or RUNNER_CLASS not in module.classes:
        return None
    found = index.find_method(ClassRef(module, module.classes[RUNNER_CLASS]), DUMMY_RUN)
    if found is None:
        return None
    for node in ast.walk(found[1]):
        if not isinstance(node, ast.Call):
            continue
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "build_for_cudagraph_capture"
        ):
            return Replay(
                module.path,
                node.lineno,
                f"{DUMMY_RUN} calls build_for_cudagraph_capture for every dummy "
                "batch that builds attention metadata, FULL replays included",
            )
        for keyword in node.keywords:
            if keyword.arg == "for_cudagraph_capture" and not _capture_only(
                keyword.value
            ):
                return Replay(
                    module.path,
                    keyword.value.lineno,
                    f"{DUMMY_RUN} builds for capture when "
                    f"`{ast.unparse(keyword.value)}`, so a FULL dummy batch "
                    "that replays the graph runs on the capture build's writes",
                )
    return None


def _capture_only(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return not node.value
    return isinstance(node, ast.Name) and node.id in CAPTURE_FLAGS


def _band_class(index: SourceIndex, band: Band) -> ClassRef | None:
    name = next((n for n, p in index.paths.items() if p == band.file), None)
    module = index.module(name) if name else None
    cls = band.method.partition(".")[0]
    if module is None or cls not in module.classes:
        return None
    return ClassRef(module, module.classes[cls])


def _holders(index: SourceIndex, owner: ClassRef, method: str) -> list[ClassRef]:
    """The band's class and every class that inherits its method unchanged."""
    found = {id(owner.node): owner}
    for _ in range(MAX_ROUNDS):
        before = len(found)
        for module in index.mentioning({c.name for c in found.values()}):
            for node in module.classes.values():
                cls = ClassRef(module, node)
                hit = index.find_method(cls, method)
                if hit is not None and hit[0].node is owner.node:
                    found.setdefault(id(node), cls)
        if len(found) == before:
            break
    return list(found.values())


def _backends(
    index: SourceIndex, holders: list[ClassRef]
) -> list[tuple[ClassRef, ClassRef]]:
    """(backend, the holder it hands out), for every backend class whose
    get_builder_cls, its own or inherited, returns a holder."""
    nodes = {id(h.node) for h in holders}
    names = {h.name for h in holders}
    found: dict[int, tuple[ClassRef, ClassRef]] = {}
    for _ in range(MAX_ROUNDS):
        before = len(found)
        for module in index.mentioning(names):
            if "get_builder_cls" not in index.texts[module.name]:
                continue
            for node in module.classes.values():
                cls = ClassRef(module, node)
                hit = index.find_method(cls, "get_builder_cls")
                if hit is None:
                    continue
                builder = returned_class(index, hit[0], hit[1])
                if builder is not None and id(builder.node) in nodes:
                    found.setdefault(id(node), (cls, builder))
                    names.add(node.name)  # its subclasses inherit it
        if len(found) == before:
            break
    return list(found.values())


def returned_class(
    index: SourceIndex, owner: ClassRef, func: ast.FunctionDef
) -> ClassRef | None:
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and node.value is not None:
            name = dotted(node.value)
            if name is not None:
                found = index.resolve_class(owner.module, name.rpartition(".")[2])
                if found is not None:
                    return found
    return None


def _backend_name(index: SourceIndex, backend: ClassRef) -> str:
    hit = index.find_method(backend, "get_name")
    if hit is not None:
        for node in ast.walk(hit[1]):
            value = node.value if isinstance(node, ast.Return) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
    return backend.name


def _reader(
    index: SourceIndex,
    backend: ClassRef,
    builder: ClassRef,
    field: str,
    returns_of: ReturnsOf,
) -> str | None:
    """Where the backend's attention implementation reads ``field`` from the
    metadata its builder returns; None when nothing there reads it."""
    keys = {
        t[1] for t in returns_of(builder, "build") if t[0] == "attr" and t[2] == field
    }
    hit = index.find_method(backend, "get_impl_cls")
    impl = returned_class(index, hit[0], hit[1]) if hit is not None else None
    if not keys or impl is None:
        return None
    for cls in index.mro(impl):
        for node in ast.walk(cls.node):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in keys
                and isinstance(node.ctx, ast.Load)
            ):
                return (
                    f"{builder.name}.build hands it on as metadata.{node.attr}, "
                    f"which {impl.name} reads ({cls.module.path}:{node.lineno})"
                )
    return None
