"""One analysis of metadata writes: the overlay, the invariants and the audit
see the same write, aliases followed, and "fixed" only when proven.

The release tests take vLLM 0.29.0 (fixed) and put the host zeroing back
through a local alias, ``cpu = common_attn_metadata.query_start_loc_cpu;
cpu.zero_()``, in the ROCm capture and in AITER unified's own capture.
Before ``vllm_overlay.metadata_writes`` only the audit saw that write: the
overlay's classifier and the invariants said "cannot judge" without it.
"""

from __future__ import annotations

import ast
import shutil
import textwrap
from pathlib import Path

import pytest

from vllm_overlay.code import Shape, find_method
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    AITER_UNIFIED_ATTN,
    inspect_aiter_source,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    ROCM_ATTN,
    inspect_capture_source,
    inspect_capture_tree,
)
from vllm_overlay.metadata_writes import META, Walker
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.judge.audit.static import analyse_tree
from vllm_patchkit.trees.releases import release_tree

ALIAS = "cpu = common_attn_metadata.query_start_loc_cpu"
WRITE = "cpu.zero_()"
SEEN = "writes query_start_loc_cpu through cpu"
ROCM_ANCHOR = "common_attn_metadata.query_start_loc.zero_()"
AITER_ANCHOR = "attn_metadata.seq_lens.fill_(1)"


def put_after(file: Path, anchor: str, lines: list[str]) -> int:
    """Insert ``lines`` after the one line holding ``anchor``; the last
    inserted line's number."""
    text = file.read_text().splitlines(keepends=True)
    hits = [n for n, line in enumerate(text) if anchor in line]
    assert len(hits) == 1, (file, anchor, hits)
    indent = text[hits[0]][: len(text[hits[0]]) - len(text[hits[0]].lstrip())]
    text[hits[0] + 1 : hits[0] + 1] = [f"{indent}{line}\n" for line in lines]
    file.write_text("".join(text))
    return hits[0] + 1 + len(lines)


@pytest.fixture(scope="module")
def aliased(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """vLLM 0.29.0's attention package, the host offsets zeroed through an
    alias in both captures: (tree, line in rocm_attn.py, line in AITER's)."""
    tree = tmp_path_factory.mktemp("aliased")
    attention = Path("vllm/v1/attention")
    shutil.copytree(release_tree("0.29.0") / attention, tree / attention)
    rocm = put_after(tree / ROCM_ATTN, ROCM_ANCHOR, [ALIAS, WRITE])
    aiter = put_after(tree / AITER_UNIFIED_ATTN, AITER_ANCHOR, [ALIAS, WRITE])
    return tree, rocm, aiter


@pytest.mark.release_trees
def test_the_overlay_classifier_sees_the_aliased_write(
    aliased: tuple[Path, int, int],
) -> None:
    tree, line, _ = aliased
    code = inspect_capture_tree(tree)
    assert code.shape is Shape.UNKNOWN and not code.judged, code
    assert code.host_mutation_lines == (line,)
    assert f"line {line}: {SEEN}" in code.detail


@pytest.mark.release_trees
def test_the_aiter_proof_sees_the_aliased_write(
    aliased: tuple[Path, int, int],
) -> None:
    tree, _, line = aliased
    file = tree / AITER_UNIFIED_ATTN
    code = inspect_aiter_source(file.read_bytes(), file)
    assert code.shape is Shape.UNKNOWN, code
    assert f"line {line}: {SEEN}" in code.detail


@pytest.mark.release_trees
def test_the_invariants_see_the_aliased_write(
    aliased: tuple[Path, int, int],
) -> None:
    tree, rocm, aiter = aliased
    first = check_invariant("rocm-capture-zeroes-device-offsets-only", tree)
    assert not first.holds and f"line {rocm}: {SEEN}" in first.detail
    third = check_invariant("rocm-aiter-unified-capture-keeps-offsets", tree)
    assert not third.holds and f"line {aiter}: {SEEN}" in third.detail


@pytest.mark.release_trees
def test_the_audit_sees_the_aliased_write(aliased: tuple[Path, int, int]) -> None:
    tree, rocm, aiter = aliased
    writes = {
        (w.file, w.line, w.operation)
        for w in analyse_tree(tree).writes
        if w.field == "query_start_loc_cpu"
    }
    assert (ROCM_ATTN.as_posix(), rocm, "zero_") in writes
    assert (AITER_UNIFIED_ATTN.as_posix(), aiter, "zero_") in writes


CAPTURE = """
class RocmAttentionMetadataBuilder:
    def build_for_cudagraph_capture(self, common_attn_metadata):
        attn_metadata = self.build(0, common_attn_metadata)
        attn_metadata.seq_lens.fill_(1)
        common_attn_metadata.query_start_loc.zero_()
{body}
        return attn_metadata
"""


def shape_of(body: str) -> Shape:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return inspect_capture_source(CAPTURE.format(body=body), Path("rocm_attn.py")).shape


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(f"{ALIAS}\nn = cpu.tolist()", id="read-only-alias"),
        pytest.param(f"{ALIAS}\ncpu = cpu.clone()\n{WRITE}", id="clone-ends-it"),
        pytest.param(
            "meta = common_attn_metadata\nn = meta.query_start_loc_cpu[-1].item()",
            id="alias-of-the-metadata-read",
        ),
    ],
)
def test_an_alias_followed_to_its_end_is_proven_fixed(body: str) -> None:
    assert shape_of(body) is Shape.FIXED


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(f"{ALIAS}\nhelper(cpu)", id="handed-to-a-call"),
        pytest.param(f"{ALIAS}\nself.host = cpu", id="stored-on-self"),
        pytest.param(f"{ALIAS}\nboth = [cpu]\nboth[0].zero_()", id="in-a-list"),
        pytest.param(f"{ALIAS}\nreturn cpu", id="returned"),
        pytest.param(f"{ALIAS}\nf = lambda: cpu.zero_()", id="lambda"),
        pytest.param(
            "for row in common_attn_metadata.query_start_loc_cpu:\n    row.zero_()",
            id="iterated",
        ),
        pytest.param(f"{ALIAS}\nzero = cpu.zero_\nzero()", id="bound-method"),
        pytest.param(
            "a = b = None\nfor _ in range(2):\n    a = b\n"
            "    b = common_attn_metadata.query_start_loc_cpu\na.fill_(0)",
            id="alias-made-in-a-loop",
        ),
        pytest.param(f"{ALIAS} if flag else buffer\n{WRITE}", id="one-branch"),
    ],
)
def test_what_it_cannot_follow_is_never_fixed(body: str) -> None:
    assert shape_of(body) is Shape.UNKNOWN


def test_writes_say_how_they_are_spelled() -> None:
    slice_write = "common_attn_metadata.query_start_loc_cpu[1:] = 0"
    body = textwrap.indent(f"{ALIAS}\n{WRITE}\n{slice_write}", " " * 8)
    source = CAPTURE.format(body=body)
    lines = [line.strip() for line in source.splitlines()]
    method = find_method(
        ast.parse(source), "RocmAttentionMetadataBuilder.build_for_cudagraph_capture"
    )
    assert method is not None
    walker = Walker(
        method,
        {"common_attn_metadata": frozenset({META})},
        {"query_start_loc", "query_start_loc_cpu"},
    ).run()
    host = [
        (w.line, w.op, w.direct, w.through)
        for w in walker.writes
        if w.field == "query_start_loc_cpu"
    ]
    assert host == [
        (lines.index(WRITE) + 1, "zero_", False, "cpu"),
        (lines.index(slice_write) + 1, "slice assignment", True, None),
    ]
    device = [(w.line, w.zeroes) for w in walker.writes if w.field == "query_start_loc"]
    assert device == [(lines.index(ROCM_ANCHOR) + 1, True)]
    # The plain walk follows no call: handing the metadata on is a doubt.
    assert [d.why for d in walker.doubts] == [
        "passes shared state on: self.build(0, common_attn_metadata)"
    ]
