"""What each observed shared write does to the builders that run after it.

Measured in the dynamic child: for one writer (a builder, in one mode) and
one field it wrote, every other builder that ran cleanly in that mode (and
the writer's own class again: two KV-cache groups may share a backend) is
built twice from the same input, once after the writer ran on the shared
object and once after the writer ran with that field protected (its own
copy of the tensor, or its own copy of the metadata object for a
reassignment). A follower whose metadata (scalars and small tensors) or
whose success differs between the two is a victim. A follower that differs
is built a third time, protected again, so a builder that builds
differently from the same input is not judged, not counted as a victim.

Then :func:`classify` turns writes and effects into findings: ``harmful``
(a victim exists), ``intentional`` (a documented band-aid in
:data:`.bands.INTENTIONAL`, with its reason) or ``latent`` (no runnable follower
affected).
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from vllm_patchkit.judge.audit.bands import intentional
from vllm_patchkit.judge.audit.dynamic import DynamicResult, Effect, ObservedWrite
from vllm_patchkit.judge.audit.findings import Finding

PER_GROUP_FIELDS = frozenset(
    {"block_table_tensor", "slot_mapping", "encoder_seq_lens", "encoder_seq_lens_cpu"}
)
"""Set afresh on each KV-cache group's copy by the runner
(``GPUModelRunner._build_attention_metadata``): shared only by the attention
groups of one KV-cache group, not across KV-cache groups."""


# --- measured in the child (torch and vLLM importable there) ---------------


def _outcome(made: Any, mode: str, cm: Any, written: Any) -> tuple[Any, ...]:
    from vllm_patchkit.judge.audit.dynamic_builders import call
    from vllm_patchkit.judge.regression.harness import snapshot
    from vllm_patchkit.judge.regression.records import describe

    try:
        built = call(made, mode, cm)
    except Exception as exc:  # a victim's failure is the evidence
        return ("raised", describe(exc))
    return ("built", snapshot(built, written))


def _run_writer(writer: Any, mode: str, cm: Any) -> None:
    """Run the writer; if it raises, the writes it made before still count."""
    from vllm_patchkit.judge.audit.dynamic_builders import call

    with contextlib.suppress(Exception):
        call(writer, mode, cm)


def _pair(
    writer: Any,
    follower: Any,
    mode: str,
    field: str,
    kind: str,
    query_len: int,
    protect: bool,
) -> tuple[Any, ...]:
    """The follower's outcome after the writer ran (on a protected copy or not)."""
    from vllm_patchkit.judge.audit.dynamic_builders import fresh_metadata, group_copy

    base = fresh_metadata(query_len)
    if kind == "reassignment":
        # Attention groups of one KV-cache group get the very same object.
        target = group_copy(base, writer)
        written = copy.copy(target) if protect else target
        _run_writer(writer, mode, written)
        return _outcome(follower, mode, target, None)
    written = group_copy(base, writer)
    if protect:
        setattr(written, field, getattr(base, field).clone())
    _run_writer(writer, mode, written)
    return _outcome(follower, mode, group_copy(base, follower), getattr(base, field))


def _changed_keys(a: tuple[Any, ...], b: tuple[Any, ...]) -> list[str]:
    """Keys of two built snapshots that differ; [] when either raised."""
    if a[0] != "built" or b[0] != "built":
        return []
    return sorted(k for k in a[1].keys() | b[1].keys() if a[1].get(k) != b[1].get(k))


def measure(
    writer: Any,
    mode: str,
    field: str,
    kind: str,
    followers: list[Any],
    query_len: int = 1,
) -> Effect:
    """Compare every follower's build after the writer, protected and not.

    In capture mode a follower whose only differences are tensors sharing
    memory with the written field is not a victim: it merely points at the
    runner's buffer, which the runner fills again before each replay, while
    what it computed from the input is the same. In normal mode the forward
    pass reads those buffers after every builder ran, so any difference counts.
    """
    result = Effect(writer.label, mode, field, kind, query_len)
    for follower in followers:
        args = (writer, follower, mode, field, kind, query_len)
        protected = _pair(*args, protect=True)
        shared = _pair(*args, protect=False)
        name = f"{follower.label} ({mode}, q={query_len})"
        if shared == protected:
            continue
        if _pair(*args, protect=True) != protected:
            result.not_judged.append(name)
            continue
        changed = _changed_keys(protected, shared)
        if mode == "capture" and changed and all(k.endswith("@alias") for k in changed):
            continue
        result.victims.append(name)
    return result


def measure_all(
    writes: list[ObservedWrite],
    made: dict[str, Any],
    runnable: dict[str, list[Any]],
    query_len: int = 1,
) -> list[Effect]:
    """One effect per (writer, mode, field, in place or reassignment)."""
    groups = sorted({(w.builder, w.mode, w.field, w.kind) for w in writes})
    return [
        measure(made[builder], mode, field, kind, runnable.get(mode, []), query_len)
        for builder, mode, field, kind in groups
    ]


# --- read by the CLI side ----------------------------------------------------


def classify(result: DynamicResult) -> list[Finding]:
    """One finding per statement and field, merged over builders and modes."""
    effects = {
        (e.builder, e.mode, e.field, e.operation_kind, e.query_len): e
        for e in result.effects
    }
    findings: dict[tuple[str, int, str, str], Finding] = {}
    for w in result.writes:
        e = effects.get((w.builder, w.mode, w.field, w.kind, w.query_len))
        key = (w.file, w.line, w.field, w.operation)
        finding = findings.get(key)
        if finding is None:
            finding = findings[key] = Finding(
                w.file, w.line, w.field, w.method, w.operation, evidence=["dynamic"]
            )
        writers = f"{w.builder.rpartition('.')[2]} ({w.mode})"
        if writers not in finding.reason:
            finding.reason += ("; " if finding.reason else "written by ") + writers
        if e is not None:
            finding.victims += [v for v in e.victims if v not in finding.victims]
            unjudged = [v for v in e.not_judged if v not in finding.reason]
            if unjudged:
                finding.reason += (
                    f"; not judged against {', '.join(unjudged)} "
                    "(it builds differently from the same input)"
                )
    for finding in findings.values():
        band = intentional(finding)
        if band is not None:
            affected = finding.victims
            finding.victims = []
            finding.kind = "intentional"
            finding.reason = band.reason + (
                f" (on CPU it changes what {len(affected)} later builder(s) build: "
                f"{', '.join(affected)})"
                if affected
                else ""
            )
        elif finding.victims:
            finding.kind = "harmful"
        if finding.field in PER_GROUP_FIELDS:
            finding.reason += (
                "; the runner sets this field per KV-cache group, so the write "
                "reaches only the other attention groups of the writer's group"
            )
        elif finding.operation == "reassignment":
            finding.reason += (
                "; a reassignment reaches only builders handed the same object "
                "(the other attention groups of the writer's KV-cache group)"
            )
    return list(findings.values())
