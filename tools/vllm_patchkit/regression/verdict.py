"""What the scenarios must show: the fix present, or the bug reproduced.

Both directions are spelled out so a test on stock code can assert that the
bug really happens (a suite that cannot fail proves nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_patchkit.regression.scenarios import VICTIM_SCENARIOS, Outcome

INDEXER_FILE = "vllm/models/minimax_m3/common/indexer.py"
INDEXER_ASSERT = "assert decode_query_len > 0"
CAPTURE_FACTS = (
    "device_same_tensor",
    "device_zeroed",
    "seq_lens_all_one",
    "metadata_uses_shared_buffers",
    "host_unchanged",
)
LOOP_GROUPS = ["gdn", "indexer", "rocm"]
HARNESS_ERROR = "harness error"


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def is_pr_crash(outcome: Outcome) -> bool:
    """The AssertionError of vLLM #51585, raised where the PR's trace says."""
    error = outcome.error or {}
    return (
        outcome.status == "raised"
        and error.get("type") == "AssertionError"
        and error.get("relpath") == INDEXER_FILE
        and error.get("source") == INDEXER_ASSERT
    )


def fixed_checks(outcomes: list[Outcome]) -> list[Check]:
    """One check per outcome; all pass if and only if the tree has the fix."""
    checks = []
    for outcome in outcomes:
        name = f"{outcome.scenario}[q={outcome.decode_query_len}]"
        if outcome.status == "unavailable":
            continue
        if outcome.status == "error":
            checks.append(Check(name, False, f"{HARNESS_ERROR}: {outcome.error}"))
        elif outcome.scenario == "capture_effects":
            wrong = [k for k in CAPTURE_FACTS if not outcome.facts.get(k)]
            detail = "ok" if not wrong else f"violated: {', '.join(wrong)}"
            if "host_unchanged" in wrong:
                detail += (
                    f" (host offsets after capture: {outcome.facts['host_after']})"
                )
            checks.append(Check(name, not wrong, detail))
        elif outcome.scenario == "minimax_indexer_after_rocm":
            if outcome.status == "raised":
                error = outcome.error or {}
                where = f"{error.get('relpath')}:{error.get('line')}"
                checks.append(
                    Check(
                        name,
                        False,
                        f"{error.get('type')} at {where}: {error.get('source')}",
                    )
                )
            else:
                got = outcome.facts.get("decode_query_len")
                ok = got == outcome.decode_query_len
                checks.append(Check(name, ok, f"indexer saw decode query length {got}"))
        elif outcome.scenario == "repeated_capture":
            facts = outcome.facts
            ok = all(facts["host_kept"]) and all(facts["device_zeroed"])
            detail = "ok" if ok else f"host offsets after each capture: {facts}"
            checks.append(Check(name, ok, detail))
        elif outcome.scenario.startswith("capture_loop_"):
            checks.append(Check(name, *_loop_verdict(outcome)))
        elif outcome.scenario in VICTIM_SCENARIOS:
            checks.append(Check(name, *_victim_verdict(outcome)))
    return checks


def describe_error(error: dict[str, Any] | None) -> str:
    error = error or {}
    where = f"{error.get('relpath')}:{error.get('line')}"
    text = error.get("source") or str(error.get("message", ""))[:120]
    return f"{error.get('type')} at {where}: {text}"


def _loop_verdict(outcome: Outcome) -> tuple[bool, str]:
    facts = outcome.facts
    if facts.get("raised"):
        return False, (
            f"{describe_error(facts['raised'])}; host offsets after: "
            f"{facts.get('host_offsets_after')}"
        )
    wrong = [
        k for k in ("host_offsets_kept", "device_offsets_zeroed") if not facts.get(k)
    ]
    if facts.get("groups_built") != LOOP_GROUPS:
        wrong.append(f"groups built {facts.get('groups_built')}")
    if facts.get("indexer_decode_query_len") != outcome.decode_query_len:
        wrong.append(f"indexer query length {facts.get('indexer_decode_query_len')}")
    if wrong:
        return False, (
            f"violated: {', '.join(wrong)} (host offsets after: "
            f"{facts.get('host_offsets_after')})"
        )
    return True, "ok"


def victim_failure(outcome: Outcome) -> str | None:
    """How the capture leaked into this victim; None if it did not."""
    if outcome.status == "raised":
        return describe_error(outcome.error)
    diverged = outcome.facts.get("diverged") or {}
    if diverged:
        shown = "; ".join(
            f"{k}: {exp} -> {got}" for k, (exp, got) in list(diverged.items())[:3]
        )
        more = f" (+{len(diverged) - 3} more)" if len(diverged) > 3 else ""
        return f"built other metadata: {shown}{more}"
    return None


def _victim_verdict(outcome: Outcome) -> tuple[bool, str]:
    failure = victim_failure(outcome)
    if failure is None:
        return True, "builds what it builds from the intended metadata"
    return False, failure


def bug_reproduced(outcomes: list[Outcome]) -> bool:
    """Stock affected code: host offsets zeroed and the PR's crash raised."""
    crashes = [o for o in outcomes if o.scenario == "minimax_indexer_after_rocm"]
    zeroed = [
        o
        for o in outcomes
        if o.scenario == "capture_effects" and not o.facts.get("host_unchanged")
    ]
    return bool(crashes) and all(is_pr_crash(o) for o in crashes) and bool(zeroed)
