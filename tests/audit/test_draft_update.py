"""The audit's draft-update rule on real vLLM trees (issue 37, item 6).

Model Runner V2's fused drafting advances the runner's ``seq_lens`` in place
between draft steps and calls ``update_draft_decode_metadata`` on builders
whose ``supports_draft_decode_metadata_update`` is true. The series' first
0004 gave the static-sink builder lengths of its own and kept the flag
without refreshing them (the positive case); the 0004 at the series' head
refreshes them; stock 0.33.0 writes the runner's tensor (the shared-write
bug, still found) and so follows; 0.27.0 has no such API, so the rule does
not apply and is counted as not run.

One full audit per tree per session (each a minute or more of CPU, five on
a loaded machine); the test session's report cache shares the dynamic pass
with other tests of the same tree content. Every case is in the extended
``audit_sweep`` tier, like the dynamic pass's other extra trees: the
positive case (the first 0004), the new 0004, stock 0.33.0 and 0.27.0.
The default run keeps the same bug class by other means: the StaticSink
suite's draft-update checks on stock and fixed 0.33.0, which kill the
earlier 0004 (``tests/vllm/test_static_sink_scenarios.py``), and the
overlay's draft update (``tests/overlay/test_static_sink_plugin.py``); the
audit's rule itself runs only in this tier (CI's ``--all-tiers``).
Expectations on lines are read from each tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_patchkit.gitcmd import Git
from vllm_patchkit.judge.audit import AuditReport, audit_tree
from vllm_patchkit.judge.audit.findings import Finding
from vllm_patchkit.trees.releases import clone_release, release_tree

pytestmark = pytest.mark.release_trees

RULE = "draft-update-stale-lengths"
CHECK = "draft decode update"
SINK = "vllm/model_executor/layers/attention/static_sink_attention.py"
SINK_CLASS = "class StaticSinkAttentionBuilder(underlying_builder):  # type: ignore"
ROOT = Path(__file__).resolve().parents[2]
NEW_0004 = (
    ROOT / "patches/0004-Bugfix-Keep-the-shared-seq_lens-in-StaticSinkAttenti.patch"
)
OLD_0004 = (
    Path(__file__).resolve().parents[1]
    / "data/first-0004-static-sink-without-draft-refresh.patch"
)
"""The series' 0004 before main f97d0ab: the sink lengths in a buffer of the
builder's own, no refresh in ``update_draft_decode_metadata``."""


def line_of(tree: Path, relpath: str, statement: str) -> int:
    lines = (tree / relpath).read_text().splitlines()
    found = [n for n, text in enumerate(lines, 1) if text.strip() == statement]
    assert len(found) == 1, (relpath, statement, found)
    return found[0]


def rule_findings(report: AuditReport, file: str | None = None) -> list[Finding]:
    return [
        f
        for f in report.findings
        if f.operation == RULE and (file is None or f.file == file)
    ]


def draft_check(report: AuditReport) -> dict[str, str]:
    (check,) = [c.to_json() for c in report.checks if c.name == CHECK]
    return check


def _patched(factory: pytest.TempPathFactory, name: str, patch: Path) -> Path:
    tree = factory.mktemp(name) / "vllm-0.33.0"
    clone_release("0.33.0", tree)
    Git(tree).run("apply", str(patch))
    return tree


@pytest.fixture(scope="session")
def old_0004(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, AuditReport]:
    tree = _patched(tmp_path_factory, "old-0004", OLD_0004)
    return tree, audit_tree(tree)


@pytest.fixture(scope="session")
def new_0004(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, AuditReport]:
    tree = _patched(tmp_path_factory, "new-0004", NEW_0004)
    return tree, audit_tree(tree)


@pytest.fixture(scope="session")
def stock_0_33() -> tuple[Path, AuditReport]:
    tree = release_tree("0.33.0")
    return tree, audit_tree(tree)


@pytest.mark.audit_sweep
def test_old_0004_keeps_the_flag_with_stale_lengths(
    old_0004: tuple[Path, AuditReport],
) -> None:
    tree, report = old_0004

    (finding,) = rule_findings(report, SINK)

    assert finding.line == line_of(tree, SINK, SINK_CLASS)
    assert (finding.field, finding.method, finding.kind) == (
        "seq_lens",
        "StaticSinkAttentionBuilder.update_draft_decode_metadata",
        "harmful",
    )
    assert finding.evidence == ["dynamic"]
    # Over Triton, the backend the issue measured; the lengths the runner
    # advanced to, and the ones the metadata still shows.
    assert "TritonAttentionBackend" in finding.reason
    assert "runner seq_lens advanced in place to [12, 12, 12, 12]" in finding.reason
    assert "metadata.seq_lens still [27, 27, 27, 27]" in finding.reason
    assert "a rebuild gives [28, 28, 28, 28]" in finding.reason
    assert report.exit_code == 1
    assert draft_check(report)["status"] == "failed"


@pytest.mark.audit_sweep
def test_new_0004_refreshes_the_lengths(new_0004: tuple[Path, AuditReport]) -> None:
    _, report = new_0004

    assert rule_findings(report, SINK) == []
    check = draft_check(report)
    assert check["status"] in ("passed", "failed"), check  # it ran
    # Nothing of the static-sink file is harmful once 0004 is in.
    assert [f for f in report.findings if f.file == SINK and f.kind == "harmful"] == []


@pytest.mark.audit_sweep
def test_stock_0_33_follows_and_its_shared_write_is_still_found(
    stock_0_33: tuple[Path, AuditReport],
) -> None:
    """Stock's metadata.seq_lens is the runner's tensor (written in place
    with the sink: the shared-write bug), so it follows the advance."""
    tree, report = stock_0_33

    assert rule_findings(report, SINK) == []
    shared = {
        (f.line, f.field, f.operation, f.kind)
        for f in report.findings
        if f.file == SINK and f.operation != RULE
    }
    first = line_of(tree, SINK, "common_attn_metadata.seq_lens[:] = (")
    assert (first, "seq_lens", "slice assignment", "harmful") in shared
    assert {kind for *_, kind in shared} == {"harmful"}
    assert {field for _, field, *_ in shared} == {
        "seq_lens",
        "max_seq_len",
        "block_table_tensor",
    }


@pytest.mark.audit_sweep
def test_stock_0_33_flags_only_wrappers_that_freeze_their_lengths(
    stock_0_33: tuple[Path, AuditReport],
) -> None:
    """Triton, FlashAttention and every other plain builder run on CPU
    follow; of the factory-made builders made around them, the ones whose
    lengths are their own (chunked-local virtual batches, Whisper's
    pooled lengths) keep the inherited flag without a refresh."""
    _, report = stock_0_33

    flagged = {f.method.partition(".")[0] for f in rule_findings(report)}

    assert flagged == {
        "ChunkedLocalAttentionBuilder",
        "WhisperCausalAttentionWithBlockPoolingBuilder",
    }
    check = draft_check(report)
    assert check["status"] == "failed"


@pytest.mark.audit_sweep
def test_a_release_without_the_draft_api_counts_the_rule_as_not_run() -> None:
    report = audit_tree(release_tree("0.27.0"))

    check = draft_check(report)

    assert check["status"] == "could not run", check
    assert check["why"].startswith("does not apply: ")
    assert "update_draft_decode_metadata" in check["why"]
    assert rule_findings(report) == []
