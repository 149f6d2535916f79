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

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vllm_patchkit.audit.findings import Check

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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Effect:
    """What one writer's writes of one field do to the builders that follow it."""

    builder: str
    mode: str
    field: str
    operation_kind: str
    """``in place`` or ``reassignment``: they are protected differently."""
    query_len: int = 1
    victims: list[str] = field(default_factory=list)
    """``module.Class (mode, q=N)`` of each follower whose build changed."""
    aliases: dict[str, str] = field(default_factory=dict)
    """Capture-mode followers whose metadata only points at the written
    buffer (what changed is the buffer itself, which the runner refills
    before each replay): not victims, listed for the reader."""
    differences: dict[str, str] = field(default_factory=dict)
    """Victim -> what changed (fields of its metadata, or the exception)."""
    followers: int = 0
    """How many followers were compared."""
    not_judged: dict[str, str] = field(default_factory=dict)
    """Followers whose comparison could not be made, with why."""


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

    @property
    def ran(self) -> list[BuilderRun]:
        return [r for r in self.runs if r.status == "ran"]

    @property
    def could_not_run(self) -> list[BuilderRun]:
        return [r for r in self.runs if r.status in ("raised", "could not run")]

    def checks(self) -> list[Check]:
        """The pass as one check: it could not run (why), or it ran and
        passed unless a write it saw is harmful."""
        from vllm_patchkit.audit.effect import classify

        if self.error is not None:
            return [Check("dynamic pass", ran=False, why=self.error)]
        builders = len({r.builder for r in self.ran})
        harmful = [f for f in classify(self) if f.kind == "harmful"]
        return [
            Check(
                "dynamic pass",
                ran=True,
                passed=not harmful,
                why=f"{builders} builders ran; {len(self.writes)} shared writes "
                f"seen; {len(harmful)} harmful",
            )
        ]

    def builder_checks(self) -> list[Check]:
        """One check per builder and mode: ran, or could not run with why.

        A builder that needs CUDA or a ROCm-only package never runs on a CPU
        host; the static pass still reads it. Whether such a builder makes a
        whole audit "cannot judge" is the report's call, not this pass's.
        """
        by_key: dict[tuple[str, str | None], list[BuilderRun]] = {}
        for run in self.runs:
            by_key.setdefault((run.builder, run.mode), []).append(run)
        out = []
        for (builder, mode), runs in sorted(by_key.items(), key=str):
            name = f"dynamic: {builder}" + (f" ({mode})" if mode else "")
            ran = [r for r in runs if r.status == "ran"]
            if ran:
                out.append(Check(name, ran=True, passed=True))
            else:
                why = "; ".join(sorted({f"{r.status}: {r.reason}" for r in runs}))
                out.append(Check(name, ran=False, why=why))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "tree": self.tree,
            "returncode": self.returncode,
            "error": self.error,
            "writes": [w.to_json() for w in self.writes],
            "effects": [asdict(e) for e in self.effects],
            "runs": [asdict(r) for r in self.runs],
            "seconds": self.seconds,
            "runtime": self.runtime,
        }


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
    )


def tree_env(tree: Path | None) -> tuple[dict[str, str], dict[str, Any]]:
    """The environment that imports ``tree``'s vLLM, and what it provides.

    The tree runtime (the tree first on the path, then the release's missing
    pure-Python requirements) when this checkout has it; else the regression
    runner's plain environment (the tree first on the path, CPU only).
    """
    from vllm_patchkit.regression.runner import scenario_env

    if tree is None:
        return scenario_env(None), {}
    try:
        from vllm_patchkit import tree_runtime
    except ImportError:  # a checkout from before the tree runtime
        return scenario_env(tree), {}
    runtime = tree_runtime.runtime_for(tree)  # RuntimeUnavailable: exit 3
    return runtime.env(scenario_env(None)), runtime.to_json()


def run_dynamic(
    tree: Path | None, timeout: float = 1200, extra_path: list[str] | None = None
) -> DynamicResult:
    """The dynamic pass and its effects on ``tree`` (None: the installed vLLM).

    ``extra_path`` goes first on the child's path (a mutant's edited modules
    overlaid on an unchanged tree).
    """
    from vllm_patchkit.errors import PatchkitError

    name = str(tree) if tree is not None else "installed"
    try:
        env, runtime = tree_env(tree)
    except PatchkitError as exc:  # the tree runtime cannot be given
        return DynamicResult(name, -1, error=f"no runtime for the tree: {exc}")
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join([*extra_path, env.get("PYTHONPATH", "")])
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-audit-") as scratch:
        output = Path(scratch) / "dynamic.json"
        command = [
            sys.executable,
            "-m",
            "vllm_patchkit.audit.dynamic_child",
            "--output",
            str(output),
        ]
        if tree is not None:
            command.append(str(tree))
        try:
            proc = subprocess.run(
                command,
                cwd=scratch,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return DynamicResult(
                name, -1, error=f"the dynamic pass ran past {timeout:.0f} s"
            )
        data = json.loads(output.read_text()) if output.is_file() else None
    if data is None:
        tail = (proc.stdout + proc.stderr)[-2000:]
        return DynamicResult(
            name,
            proc.returncode,
            runtime=runtime,
            error=f"the dynamic pass gave no result (exit {proc.returncode}): {tail}",
        )
    result = from_json(data)
    result.returncode = proc.returncode
    result.runtime = runtime
    result.seconds["process"] = round(time.monotonic() - start, 2)
    return result
