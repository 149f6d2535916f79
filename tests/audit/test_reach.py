"""Whom #25985's device zeroing reaches (#53821), read from real release trees.

ROCm's capture builder zeroes the device ``query_start_loc`` on purpose, a
guard for ROCM_ATTN's prefix-prefill kernel. On 0.27.0-0.28.0
ROCM_AITER_UNIFIED_ATTN is handed that builder and the V1 runner replays a
FULL graph of a dummy batch on capture-built metadata, so AITER's kernel
reads the zeros: harmful for that backend. Where the runner builds for
capture only while capturing (0.12.0-0.26.0) the zeros reach only the
capture: intentional. Lines are read from the tree's own text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vllm_patchkit.git.apply import Status, apply_series
from vllm_patchkit.git.series import Series, load_series
from vllm_patchkit.judge.audit import Finding
from vllm_patchkit.judge.audit.files import judge_files
from vllm_patchkit.judge.audit.run import audit_tree
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.trees.releases import clone_release, release_files, release_tree

pytestmark = pytest.mark.release_trees

ROCM = "vllm/v1/attention/backends/rocm_attn.py"
AITER = "vllm/v1/attention/backends/rocm_aiter_unified_attn.py"
DEVICE_ZEROING = "common_attn_metadata.query_start_loc.zero_()"
HOST_ZEROING = "common_attn_metadata.query_start_loc_cpu.zero_()"
AITER_NAME = "ROCM_AITER_UNIFIED_ATTN"
SEGMENTED_NAME = "ROCM_SEGMENTED_ATTN"
HARMFUL_FOR = {
    **dict.fromkeys(("0.11.1", "0.11.2", "0.27.0", "0.27.1", "0.28.0"), [AITER_NAME]),
    **dict.fromkeys(("0.32.0", "0.33.0"), [SEGMENTED_NAME]),
}
"""Releases where another backend runs the device zeroing and reads it, and
whom it harms: AITER unified is handed ROCm's builder (docs/aiter-unified.md),
ROCm's segmented backend (0.32.0 on) subclasses it without its own capture;
and the V1 ``_dummy_run`` builds for capture outside capture."""


def line_of(tree: Path, file: str, text: str) -> int:
    hits = [
        n for n, line in enumerate((tree / file).read_text().splitlines(), 1)
        if text in line
    ]  # fmt: skip
    assert len(hits) == 1, (file, text, hits)
    return hits[0]


def device(findings: list[Finding], tree: Path) -> Finding:
    line = line_of(tree, ROCM, DEVICE_ZEROING)
    (found,) = [f for f in findings if (f.file, f.line) == (ROCM, line)]
    assert found.field == "query_start_loc" and found.operation == "zero_"
    return found


@pytest.fixture(scope="module")
def series() -> Series:
    return load_series()


def patched(tmp_path: Path, series: Series, wanted: list[str]) -> Path:
    """A clone of 0.28.0 with the ``wanted`` patches of the series applied."""
    tree = tmp_path / "vllm"
    clone_release("0.28.0", tree)
    skip = frozenset(p.name for p in series.patches) - series.names(wanted)
    result = apply_series(tree, series, skip=skip)
    assert result.status == Status.APPLIED, result
    return tree


def test_harmful_for_aiter_unified_on_stock_0_28_0() -> None:
    tree = release_tree("0.28.0")
    found = device(judge_files(tree, [ROCM]).findings, tree)

    assert found.kind == "harmful"
    assert found.victims == [AITER_NAME]
    # It names where AITER is handed the builder, where it reads the zeros,
    # and where the runner replays on capture-built metadata.
    assert "get_builder_cls hands out RocmAttentionMetadataBuilder" in found.reason
    assert f"RocmAiterUnifiedAttentionImpl reads ({AITER}:" in found.reason
    runner = "vllm/v1/worker/gpu_model_runner.py"
    cited = re.search(rf"\({re.escape(runner)}:(\d+)\)", found.reason)
    assert cited, found.reason
    lines = (tree / runner).read_text().splitlines()[int(cited[1]) - 1 :]
    assert lines[0].strip() == "is_graph_capturing"
    assert lines[1].strip() == "or cudagraph_runtime_mode == CUDAGraphMode.FULL"
    assert "made for ROCM_ATTN" in found.reason and "#25985" in found.reason


def test_the_backend_handed_the_builder_is_judged_when_it_changes() -> None:
    """A change to AITER's module alone (where #53821 was born) reads the
    builder it hands out."""
    tree = release_tree("0.28.0")
    found = device(judge_files(tree, [AITER]).findings, tree)
    assert (found.kind, found.victims) == ("harmful", [AITER_NAME])


@pytest.mark.slow
def test_0001_0002_leave_it_harmful_and_0003_ends_it(
    tmp_path: Path, series: Series
) -> None:
    two = patched(tmp_path / "two", series, ["0001", "0002"])
    report = audit_tree(two, dynamic=False)
    found = device(report.findings, two)
    assert (found.kind, found.victims) == ("harmful", [AITER_NAME])
    assert not [f for f in report.findings if f.field == "query_start_loc_cpu"]
    assert report.exit_code == 1
    assert any(
        c.name == f"effect of {ROCM}:{found.line} query_start_loc" and c.ran
        for c in report.checks
    )

    three = patched(tmp_path / "three", series, ["0001", "0002", "0003"])
    report = audit_tree(three, dynamic=False)
    found = device(report.findings, three)
    assert (found.kind, found.victims) == ("intentional", [])
    assert "#25985" in found.reason and AITER_NAME not in found.reason
    assert not [
        f for f in report.findings if f.kind == "harmful" and f.file in (ROCM, AITER)
    ]


def test_intentional_where_the_zeros_reach_only_the_capture() -> None:
    """0.25.0: AITER unified inherits ROCm's builder, but the V1 runner builds
    for capture only while capturing."""
    tree = release_tree("0.25.0")
    found = device(judge_files(tree, [ROCM]).findings, tree)
    assert (found.kind, found.victims) == ("intentional", [])
    assert f"also reaches {AITER_NAME}" in found.reason
    assert "reaches only the capture" in found.reason


def test_0_29_0_hands_aiter_its_own_builder() -> None:
    tree = release_tree("0.29.0")
    found = device(judge_files(tree, [ROCM, AITER]).findings, tree)
    assert (found.kind, found.victims) == ("intentional", [])
    assert "reaches" not in found.reason


def test_a_subclass_that_inherits_the_capture_is_reached_on_0_33_0() -> None:
    """ROCm's segmented backend (0.32.0 on) builds with a subclass of ROCm's
    builder that keeps its build_for_cudagraph_capture, and its kernel reads
    query_start_loc: the #53821 pattern again, by inheritance."""
    tree = release_tree("0.33.0")
    found = device(judge_files(tree, [ROCM]).findings, tree)
    assert (found.kind, found.victims) == ("harmful", [SEGMENTED_NAME])
    assert (
        "hands out RocmSegmentedAttentionMetadataBuilder, which inherits "
        "RocmAttentionMetadataBuilder.build_for_cudagraph_capture"
    ) in found.reason
    # AITER unified has its own capture there: not reached.
    assert AITER_NAME not in found.reason


def matrix_rows() -> dict[str, dict]:
    rows = json.loads((PROJECT_ROOT / "docs" / "matrix.json").read_text())["rows"]
    return {row["version"]: row for row in rows if row.get("audit")}


def check_release(version: str, row: dict, dest: Path) -> None:
    """The static pass over ROCm's and AITER's modules keeps every band-aid
    the matrix's audit found intentional, except #53821's where it applies,
    and makes nothing else harmful."""
    tree = release_files(version, dest, ("vllm/",))
    files = [f for f in (ROCM, AITER) if (tree / f).is_file()]
    found = {(f.file, f.line, f.field): f for f in judge_files(tree, files).findings}
    for old in row["audit"]["detail"]["findings"]:
        key = (old["file"], old["line"], old["field"])
        if old["kind"] != "intentional" or old["file"] not in files:
            continue
        new = found[key]
        if version in HARMFUL_FOR and key[2] == "query_start_loc":
            expected = HARMFUL_FOR[version]
            assert (new.kind, new.victims) == ("harmful", expected), version
        else:
            assert new.kind == "intentional", (version, key, new.reason)
    harmful = {k for k, f in found.items() if f.kind == "harmful"}
    expected = {
        k for k in harmful if version in HARMFUL_FOR and k[2] == "query_start_loc"
    }
    assert harmful == expected, version


def test_other_verdicts_stay_on_a_release_past_the_fix(tmp_path: Path) -> None:
    """0.32.0 (#51585 upstream, StaticSink's finding): every release is
    checked in the audit_sweep tier."""
    check_release("0.32.0", matrix_rows()["0.32.0"], tmp_path)


@pytest.mark.audit_sweep
def test_other_verdicts_stay_on_every_release(tmp_path: Path) -> None:
    for version, row in matrix_rows().items():
        check_release(version, row, tmp_path / version)
