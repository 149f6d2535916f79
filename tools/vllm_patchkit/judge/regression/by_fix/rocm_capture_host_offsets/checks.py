"""How #51585's scenarios are judged: the capture's effects, the PR's crash,
repeated captures, the runners' loops and each victim built after the ROCm
capture.

Torch-free: the verdict (:mod:`...verdict`) hands each outcome of this fix's
scenarios to :func:`check` once the rules every scenario shares (not run
here, harness error) have had their say.
"""

from __future__ import annotations

from vllm_patchkit.judge.regression.by_fix import rocm_capture_host_offsets as names
from vllm_patchkit.judge.regression.checks import (
    FAILED,
    NOT_RUN,
    Check,
    check_name,
    describe_error,
    status_of_result,
)
from vllm_patchkit.judge.regression.records import Outcome

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
VICTIM_PREFIX = "rocm_then_"
"""Victim scenarios are named ``rocm_then_<builder>`` (see :mod:`.victims`)."""
MINIMAX_ABSENT = (
    "not applicable: this tree has no MiniMax-M3 (vllm/models/minimax_m3, in "
    "releases from 0.24.0), so the PR's crash cannot happen here; "
    "capture_effects judges the host offsets"
)


def is_pr_crash(outcome: Outcome) -> bool:
    """The AssertionError of the PR's trace, raised where the trace says."""
    error = outcome.error or {}
    return (
        outcome.status == "raised"
        and error.get("type") == "AssertionError"
        and error.get("relpath") == INDEXER_FILE
        and error.get("source") == INDEXER_ASSERT
    )


def check(outcome: Outcome, fix: str) -> Check:
    """The check of one outcome of this fix's scenarios (``fix``: its label)."""
    name = check_name(outcome.scenario, outcome.decode_query_len)
    scenario = outcome.scenario
    if scenario.startswith(VICTIM_PREFIX):  # a victim says how it raised
        ok, detail = _victim_verdict(outcome)
        return Check(name, status_of_result(ok), detail, fix)
    if scenario == names.MINIMAX and outcome.status == "unavailable":
        return Check(name, NOT_RUN, MINIMAX_ABSENT, fix, applies=False)  # absent
    if scenario not in (*names.CORE, names.REPEATED, names.LOOP_V1, names.LOOP_V2):
        return Check(name, NOT_RUN, f"no verdict for scenario {scenario!r}", fix)
    if outcome.status == "raised":
        return Check(name, FAILED, describe_error(outcome.error), fix)
    if scenario == names.CAPTURE:
        wrong = [k for k in CAPTURE_FACTS if not outcome.facts.get(k)]
        detail = "ok" if not wrong else f"violated: {', '.join(wrong)}"
        if "host_unchanged" in wrong:
            detail += f" (host offsets after capture: {outcome.facts['host_after']})"
        return Check(name, status_of_result(not wrong), detail, fix)
    if scenario == names.MINIMAX:
        got = outcome.facts.get("decode_query_len")
        ok = got == outcome.decode_query_len
        detail = f"indexer saw decode query length {got}"
        return Check(name, status_of_result(ok), detail, fix)
    if scenario == names.REPEATED:
        facts = outcome.facts
        ok = all(facts["host_kept"]) and all(facts["device_zeroed"])
        detail = "ok" if ok else f"host offsets after each capture: {facts}"
        return Check(name, status_of_result(ok), detail, fix)
    ok, detail = _loop_verdict(outcome)
    return Check(name, status_of_result(ok), detail, fix)


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


def _victim_verdict(outcome: Outcome) -> tuple[bool, str]:
    """Whether the capture left this victim alone; if not, how it leaked."""
    if outcome.status == "raised":
        error = outcome.error or {}
        step = f"cannot {error['step']}: " if error.get("step") else ""
        return False, step + describe_error(outcome.error)
    diverged = outcome.facts.get("diverged") or {}
    if diverged:
        shown = "; ".join(
            f"{k}: {exp} -> {got}" for k, (exp, got) in list(diverged.items())[:3]
        )
        more = f" (+{len(diverged) - 3} more)" if len(diverged) > 3 else ""
        return False, f"built other metadata: {shown}{more}"
    return True, "builds what it builds from the intended metadata"
