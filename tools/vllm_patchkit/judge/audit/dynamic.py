"""The audit's dynamic pass seen from the CLI: run the builders, read their writes.

The builders run in a child process (:mod:`.dynamic_child`) started with the
audited tree's runtime, so the tree's vLLM is the one imported. The child
runs every builder it can make on CPU, in both modes, over one shared
``CommonAttentionMetadata`` laid out as the model runner lays it out, records
each in-place write (and each reassignment) of a shared field with the
tree's file and line that made it, measures what each write does to the
builders that can run after it (:mod:`.effect`), and prints JSON. This module
starts the child and turns its JSON into typed results; it imports neither
torch nor vLLM, so the CLI stays quick to start.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vllm_patchkit.trees.child_json import run_json_child
from vllm_patchkit.trees.tree_process import TreeLauncher

MODES = ("build", "capture")
"""``build``: ``build(0, metadata)``; ``capture``: ``build_for_cudagraph_capture``."""


@dataclass(frozen=True)
class ObservedWrite:
    """One statement of the tree that wrote a shared metadata field during a run."""

    file: str
    """Relative to the tree root, e.g. ``vllm/v1/attention/backends/rocm_attn.py``."""
    line: int
    field: str
    method: str
    """``Class.method`` of the innermost frame of the tree that made the write."""
    operation: str
    """The in-place aten op (``zero_``, ``fill_``, ``copy_``...), ``slice
    assignment`` / ``index assignment`` when the statement subscripts, or
    ``reassignment`` (the field was bound to another object)."""
    builder: str
    """The builder whose run made it (``module.Class``)."""
    mode: str
    changed: bool
    """The field's contents differ after the run (False: same values written)."""
    source: str = ""
    query_len: int = 1
    """Decode query length of the batch (above 1: speculative decoding)."""

    @property
    def kind(self) -> str:
        """``in place`` or ``reassignment``: they are protected differently."""
        return "reassignment" if self.operation == "reassignment" else "in place"


@dataclass
class Effect:
    """What one writer's writes of one field do to the builders that follow it."""

    builder: str
    mode: str
    field: str
    operation_kind: str
    """:attr:`ObservedWrite.kind`."""
    query_len: int = 1
    victims: list[str] = field(default_factory=list)
    """``module.Class (mode, q=N)`` of each follower whose build changed."""
    not_judged: list[str] = field(default_factory=list)
    """Followers that build differently from the same input: no comparison."""


@dataclass
class BuilderRun:
    builder: str
    file: str
    line: int
    mode: str | None
    status: str
    """``ran``, ``raised`` (its own run failed on CPU), ``could not run``
    (not made: the reason says why) or ``abstract``."""
    reason: str = ""
    query_len: int | None = None


@dataclass
class DraftUpdate:
    """One builder's answer to Model Runner V2's in-place draft update
    (:mod:`.draft_update`): do its metadata's lengths follow the runner's?"""

    builder: str
    """``module.Class``, with `` over Backend`` for a factory-made builder
    made around another backend than its recipe's."""
    file: str
    line: int
    """The builder class's line (for a factory-made one, inside the factory)."""
    backend: str
    """The backend class whose builder it is, or that it wraps."""
    status: str
    """``follows``, ``stale`` (the finding) or ``could not run``."""
    detail: str = ""
    """What was seen: lengths before and after, or why it could not run."""
    field: str = "seq_lens"
    """The metadata's length attribute that went stale (``decode.seq_lens``...)."""
    method: str = ""
    """``Class.update_draft_decode_metadata``."""
    query_len: int = 1


@dataclass
class DynamicResult:
    tree: str
    returncode: int
    writes: list[ObservedWrite] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    runs: list[BuilderRun] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    runtime: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    """Set when the child gave no result: the pass could not run at all."""
    draft_updates: list[DraftUpdate] = field(default_factory=list)
    draft_api: bool | None = None
    """The tree's builders have ``update_draft_decode_metadata`` (None: the
    child did not say, e.g. it gave no result)."""

    @property
    def ran(self) -> list[BuilderRun]:
        return [r for r in self.runs if r.status == "ran"]

    @property
    def could_not_run(self) -> list[BuilderRun]:
        return [r for r in self.runs if r.status in ("raised", "could not run")]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def from_json(data: dict[str, Any]) -> DynamicResult:
    return DynamicResult(
        tree=data["tree"],
        returncode=data.get("returncode", 0),
        writes=[ObservedWrite(**w) for w in data.get("writes", [])],
        effects=[Effect(**e) for e in data.get("effects", [])],
        runs=[BuilderRun(**r) for r in data.get("runs", [])],
        seconds=data.get("seconds", {}),
        runtime=data.get("runtime", {}),
        error=data.get("error"),
        draft_updates=[DraftUpdate(**u) for u in data.get("draft_updates", [])],
        draft_api=data.get("draft_api"),
    )


def run_dynamic(tree: Path | None, timeout: float = 1200) -> DynamicResult:
    """The dynamic pass and its effects on ``tree`` (None: the installed vLLM).

    With the report cache on (a test session), a tree whose content was
    already audited this session gets that run's result.
    """
    from vllm_patchkit.errors import PatchkitError
    from vllm_patchkit.judge.regression import report_cache

    name = str(tree) if tree is not None else "installed"
    if tree is not None and not (tree / "vllm" / "__init__.py").is_file():
        # Else the child would import (and audit) the installed vLLM.
        return DynamicResult(name, -1, error=f"{tree} holds no vllm/ package")
    try:
        launcher = TreeLauncher.of(tree)
    except PatchkitError as exc:  # the tree runtime cannot be given
        return DynamicResult(name, -1, error=f"no runtime for the tree: {exc}")
    # Builders that launch a Triton kernel run it under Triton's interpreter
    # on CPU (with no device visible), as the project's kernel tests do.
    env = launcher.env(TRITON_INTERPRET=os.environ.get("TRITON_INTERPRET", "1"))
    runtime = launcher.runtime.to_json() if launcher.runtime else {}

    def produce() -> tuple[dict[str, Any], bool]:
        result = _run_child(tree, name, env, timeout)
        return result.to_json(), result.error is None

    result = from_json(report_cache.reuse("audit-dynamic", tree, [], env, produce))
    result.runtime = runtime
    return result


def _run_child(
    tree: Path | None, name: str, env: dict[str, str], timeout: float
) -> DynamicResult:
    audited = [] if tree is None else [str(tree)]
    start = time.monotonic()
    child = run_json_child(
        "vllm_patchkit.judge.audit.dynamic_child",
        lambda output: ["--output", str(output), *audited],
        env=env,
        timeout_s=timeout,
        scratch_prefix="vllm-patchkit-audit-",
        output_name="dynamic.json",
    )
    if child.returncode is None:
        return DynamicResult(
            name, -1, error=f"the dynamic pass ran past {timeout:.0f} s"
        )
    if child.data is None:
        tail = child.log[-2000:]
        return DynamicResult(
            name,
            child.returncode,
            error=f"the dynamic pass gave no result (exit {child.returncode}): {tail}",
        )
    result = from_json(child.data)
    result.returncode = child.returncode
    result.seconds["process"] = round(time.monotonic() - start, 2)
    return result
