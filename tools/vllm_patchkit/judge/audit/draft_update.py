"""Model Runner V2's in-place draft update: do a builder's lengths follow the runner's?

Fused multi-step drafting builds the drafter's metadata once per batch, then
between draft steps adds 1 to the runner's ``seq_lens`` in place and calls
``update_draft_decode_metadata`` on every builder whose
``supports_draft_decode_metadata_update`` is true (the others are rebuilt).
A builder that keeps the flag but returns lengths of its own that the update
does not refresh attends with stale lengths from the second draft step on.
The check (docs/audit.md, "Draft decode update") builds, advances, updates,
and compares every ``seq_lens`` the metadata exposes with a rebuild after
the advance.

The child side (:func:`check_all`) imports torch and vLLM when called; the
CLI side (:func:`findings`, :func:`check`) reads the typed results.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vllm_patchkit.judge.audit.findings import Check, Finding

TYPE_CHECKING = False
if TYPE_CHECKING:  # the CLI side imports neither the child's nor dynamic.py
    from vllm_patchkit.judge.audit.dynamic import DraftUpdate, DynamicResult

RULE = "draft-update-stale-lengths"
"""The finding's operation: its name in the audit's output."""
FLAG = "supports_draft_decode_metadata_update"
UPDATE = "update_draft_decode_metadata"
CHECK = "draft decode update"
DRAFT_QUERY_LEN = 1
"""Each draft step after the first decodes one token per request."""
NO_API = (
    f"does not apply: this tree's metadata builders have no {UPDATE} "
    "(Model Runner V2's in-place draft update is not in this release), so "
    "the lengths contract cannot be checked here"
)


# --- run in the dynamic child --------------------------------------------------


def flagged(made: Any) -> bool:
    """The builder, as made, says the runner may update it in place."""
    return bool(getattr(made.builder, FLAG, False))


def exposed_lengths(metadata: Any, prefix: str = "") -> dict[str, Any]:
    """Every ``seq_lens`` tensor of ``metadata`` and of the metadata objects
    it nests one level down, by dotted path."""
    import torch

    out: dict[str, Any] = {}
    for name, value in _attributes(metadata):
        if name == "seq_lens" and isinstance(value, torch.Tensor):
            if value.dim() == 1 and not value.is_floating_point():
                out[prefix + name] = value
        elif (
            not prefix
            and dataclasses.is_dataclass(value)
            and not isinstance(value, type)
        ):
            out.update(exposed_lengths(value, f"{name}."))
    return out


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    if hasattr(obj, "__dict__"):
        return list(vars(obj).items())
    if dataclasses.is_dataclass(obj):
        return [(f.name, getattr(obj, f.name, None)) for f in dataclasses.fields(obj)]
    return []


def check_one(made: Any, backend: str) -> DraftUpdate:
    """Rebuild after the advance (what the runner does without the flag),
    then build, advance the runner's lengths in place, update, and compare."""
    import torch

    from vllm_patchkit.judge.audit import dynamic_builders
    from vllm_patchkit.judge.audit.dynamic import DraftUpdate
    from vllm_patchkit.judge.regression.records import describe

    def answer(status: str, detail: str, field: str = "seq_lens") -> DraftUpdate:
        return DraftUpdate(
            made.label,
            made.entry.file,
            made.entry.line,
            backend,
            status,
            detail,
            field,
            f"{made.cls.__name__}.{UPDATE}",
            DRAFT_QUERY_LEN,
        )

    try:
        rebuilt = {
            path: t.clone() for path, t in exposed_lengths(_build(made, 1)[1]).items()
        }
        runner, built = _build(made, 0)
    except Exception as exc:  # its own build fails on CPU
        return answer("could not run", f"build: {describe(exc)}")
    before = {path: t.clone() for path, t in exposed_lengths(built).items()}
    if not before:
        return answer("could not run", "its metadata exposes no seq_lens")
    _advance(runner)
    try:
        dynamic_builders.call(made, UPDATE, built)
    except Exception as exc:  # e.g. a CUDA-only refresh
        return answer("could not run", f"{UPDATE}: {describe(exc)}")
    after = exposed_lengths(built)  # re-read: an update may rebind the field
    for path, old in before.items():
        new, expected = after.get(path), rebuilt.get(path)
        if expected is None or (new is not None and torch.equal(new, expected)):
            continue
        seen = "is gone" if new is None else f"still {new.tolist()}"
        return answer(
            "stale",
            f"runner seq_lens advanced in place to {runner.tolist()}; after "
            f"{UPDATE}, metadata.{path} {seen} (built as {old.tolist()}; a "
            f"rebuild gives {expected.tolist()})",
            path,
        )
    moved = "; ".join(f"metadata.{p} -> {after[p].tolist()}" for p in before)
    return answer("follows", f"runner seq_lens -> {runner.tolist()}; {moved}")


def _build(made: Any, advanced_by: int) -> tuple[Any, Any]:
    """The runner's ``seq_lens`` (advanced ``advanced_by`` times first) and
    ``made``'s build over a group copy of fresh metadata holding it."""
    from vllm_patchkit.judge.audit import dynamic_builders

    base = dynamic_builders.fresh_metadata(DRAFT_QUERY_LEN)
    for _ in range(advanced_by):
        _advance(base.seq_lens)
    group = dynamic_builders.group_copy(base, made)
    return base.seq_lens, dynamic_builders.call(made, "build", group)


def _advance(runner: Any) -> None:
    """One draft step: +1 in place on the requests the runner advances
    (length above 0; CUDA-graph padding stays 0, as the runner's kernel keeps it)."""
    runner.add_((runner > 0).to(runner.dtype))


def check_all(made: list[Any], runnable: list[Any]) -> tuple[list[DraftUpdate], bool]:
    """The check on every flagged builder of ``runnable`` (made at the draft
    query length, normal build ran) and on the factory-made builders of
    ``made`` around each flagged plain backend; whether the tree has the API."""
    from vllm_patchkit.judge.audit import dynamic_builders
    from vllm_patchkit.judge.audit.dynamic import DraftUpdate

    if not any(hasattr(m.cls, UPDATE) for m in made):
        return [], False  # the tree's builders have no in-place draft update
    plain = [m for m in runnable if flagged(m) and not m.recipe.factory]
    # Plain attention backends (not MLA, not Mamba) are what the factories wrap.
    standard = [
        m for m in plain if (m.recipe.spec, m.recipe.model) == ("full", "llama")
    ]
    variants, not_made = dynamic_builders.wrapped_over(made, standard, DRAFT_QUERY_LEN)
    out = []
    # A builder without the flag is rebuilt by the runner: nothing to keep in step.
    for m in [
        *(m for m in runnable if flagged(m)),
        *(v for v in variants if flagged(v)),
    ]:
        backend = m.over or _backend_name(m)
        out.append(check_one(m, backend))
    for n in not_made:
        out.append(
            DraftUpdate(
                n.entry.qualname, n.entry.file, n.entry.line, "", n.status, n.reason
            )
        )
    return out, True


def _backend_name(made: Any) -> str:
    from vllm_patchkit.judge.audit.dynamic_builders import backend_of

    try:
        backend = backend_of(made)
    except Exception:  # noqa: BLE001 - the name is for the reader only
        backend = None
    return backend.__name__ if backend else made.cls.__name__


# --- read by the CLI side ------------------------------------------------------


def findings(result: DynamicResult) -> list[Finding]:
    """One harmful finding per builder class and stale length, naming every
    backend it was seen stale over (the figures are the first one's)."""
    stale: dict[tuple[str, int, str], list[DraftUpdate]] = {}
    for u in result.draft_updates:
        if u.status == "stale":
            stale.setdefault((u.file, u.line, u.field), []).append(u)
    out = []
    for (file, line, field), updates in stale.items():
        first = updates[0]
        over = ", ".join(u.backend for u in updates)
        out.append(
            Finding(
                file,
                line,
                field,
                first.method,
                RULE,
                "harmful",
                evidence=["dynamic"],
                reason=(
                    f"{first.method.partition('.')[0]} keeps {FLAG} true, so "
                    f"Model Runner V2's fused drafting updates its metadata in "
                    f"place instead of rebuilding it, but its lengths do not "
                    f"follow the runner's: from the second draft step on that "
                    f"group attends with stale lengths (seen stale over {over}): "
                    f"{first.detail}"
                ),
            )
        )
    return out


def check(result: DynamicResult | None) -> Check:
    """The rule as one check: what it ran on, or why it could not run."""
    if result is None:
        return Check(CHECK, False, why="the dynamic pass was not run")
    if result.error:
        return Check(CHECK, False, why="the dynamic pass could not run")
    if result.draft_api is False:
        return Check(CHECK, False, why=NO_API)
    checked = [u for u in result.draft_updates if u.status in ("follows", "stale")]
    stale = [u for u in checked if u.status == "stale"]
    unchecked = [u for u in result.draft_updates if u not in checked]
    counts = (
        f"{len(checked)} builder/backend pair(s) with {FLAG} checked, "
        f"{len(stale)} stale; "
        f"{len(unchecked)} could not be checked on CPU"
        + (": " + "; ".join(f"{u.builder}: {u.detail}" for u in unchecked[:4]))
        * bool(unchecked)
    )
    if not checked:
        return Check(CHECK, False, why=f"no flagged builder could be checked: {counts}")
    return Check(CHECK, True, not stale, counts)


def summary(result: DynamicResult) -> list[dict[str, str]]:
    """What the rule rested on, per builder and backend, for ``--json``."""
    return [
        {
            "builder": u.builder,
            "backend": u.backend,
            "status": u.status,
            "detail": u.detail,
        }
        for u in result.draft_updates
    ]
