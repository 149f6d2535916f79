"""The static pass on real release trees: #51585's writes found, the fix seen.

Expected lines are read from the tree's own text (the statement that does
the write), never hard-coded, so a test checks that the pass points at the
right statement, not at a number copied from its own output.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from vllm_patchkit.judge.audit.run import audit_tree
from vllm_patchkit.judge.audit.static import StaticResult, analyse_tree
from vllm_patchkit.trees.releases import release_tree

pytestmark = pytest.mark.release_trees

ROCM = "vllm/v1/attention/backends/rocm_attn.py"
CAPTURE = "RocmAttentionMetadataBuilder.build_for_cudagraph_capture"


@pytest.fixture(scope="module")
def static_28() -> tuple[Path, StaticResult]:
    tree = release_tree("0.28.0")
    return tree, analyse_tree(tree)


@pytest.fixture(scope="module")
def static_29() -> tuple[Path, StaticResult]:
    tree = release_tree("0.29.0")
    return tree, analyse_tree(tree)


def line_of(tree: Path, file: str, text: str) -> int:
    lines = (tree / file).read_text().splitlines()
    hits = [n for n, line in enumerate(lines, 1) if text in line]
    assert len(hits) == 1, (file, text, hits)
    return hits[0]


def writes_at(
    result: StaticResult, file: str, field: str
) -> list[tuple[int, str, str]]:
    return [
        (w.line, w.method, w.operation)
        for w in result.writes
        if w.file == file and w.field == field
    ]


def test_finds_the_metadata_class_wherever_the_release_keeps_it(
    static_28: tuple[Path, StaticResult],
) -> None:
    tree, result = static_28
    declared = [
        p.relative_to(tree).as_posix()
        for p in (tree / "vllm").rglob("*.py")
        if "\nclass CommonAttentionMetadata" in p.read_text()
    ]
    assert [result.metadata_class] == declared
    assert {"query_start_loc", "query_start_loc_cpu", "seq_lens"} <= set(result.fields)
    assert "RocmAttentionMetadataBuilder" in result.builders


def test_finds_the_51585_host_zeroing_on_0_28_0(
    static_28: tuple[Path, StaticResult],
) -> None:
    tree, result = static_28
    host = line_of(tree, ROCM, "common_attn_metadata.query_start_loc_cpu.zero_()")
    device = line_of(tree, ROCM, "common_attn_metadata.query_start_loc.zero_()")

    assert writes_at(result, ROCM, "query_start_loc_cpu") == [(host, CAPTURE, "zero_")]
    assert writes_at(result, ROCM, "query_start_loc") == [(device, CAPTURE, "zero_")]


def test_follows_an_alias_through_the_metadata_build_returns(
    static_28: tuple[Path, StaticResult],
) -> None:
    # attn_metadata = self.build(0, common_attn_metadata) puts the shared
    # seq_lens in attn_metadata.seq_lens; fill_ on it writes the shared one.
    tree, result = static_28
    fill = line_of(tree, ROCM, "attn_metadata.seq_lens.fill_(1)")

    assert writes_at(result, ROCM, "seq_lens") == [(fill, CAPTURE, "fill_")]


def test_the_host_zeroing_is_gone_on_0_29_0(
    static_29: tuple[Path, StaticResult],
) -> None:
    tree, result = static_29
    device = line_of(tree, ROCM, "common_attn_metadata.query_start_loc.zero_()")

    assert writes_at(result, ROCM, "query_start_loc_cpu") == []
    assert writes_at(result, ROCM, "query_start_loc") == [(device, CAPTURE, "zero_")]
    assert not [w for w in result.writes if w.field == "query_start_loc_cpu"]


def test_a_module_past_the_size_bound_is_not_read_and_is_named(
    tmp_path: Path,
) -> None:
    """A 2.5 MB module of one-line builder classes (a write in the first) in
    a copy of 0.29.0's vllm/: not read, so no finding of it, and the audit
    names it as a check that could not run (it cannot judge, never passes)."""
    tree = tmp_path / "vllm-0.29.0-huge"
    # Hard links: the audit only reads, and the test writes a new file only.
    shutil.copytree(
        release_tree("0.29.0") / "vllm", tree / "vllm", copy_function=os.link
    )
    huge = "vllm/v1/attention/backends/huge_builders.py"
    head = (
        "from vllm.v1.attention.backends.utils import AttentionMetadataBuilder\n"
        "class HugeBuilder0(AttentionMetadataBuilder):\n"
        "    def build(self, common_prefix_len, common_attn_metadata):\n"
        "        common_attn_metadata.query_start_loc_cpu.zero_()\n"
    )
    body = "".join(
        f"class HugeBuilder{i}(HugeBuilder0): pass\n" for i in range(1, 80_000)
    )
    (tree / huge).write_text(head + body)
    assert (tree / huge).stat().st_size > 2_500_000

    start = time.monotonic()
    report = audit_tree(tree, dynamic=False)
    took = time.monotonic() - start
    assert not [f for f in report.findings if f.file == huge]
    (check,) = [c for c in report.could_not_run if huge in c.name]
    assert "past the 2 MB bound" in check.why and "not read" in check.why
    assert report.verdict == "cannot judge"
    assert took < 60, took
