"""Seeded mutants: shared-state writes the #51585 suite was never told about.

Real files of vLLM 0.28.0 (the metadata class, the builder base, two
backends that never wrote shared state) are copied to a scratch tree, and
writes of the class are seeded into them: a zero_ in another backend's
build, a slice assignment through an alias, a reassignment, a write through
a NumPy view in a helper method, a copy_ in a module function, an out=.
The static pass must report exactly those, each at its file, line and
field, and nothing for a write made on a clone. Every seeded line carries a
marker comment; its line is found by the marker after all edits.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit
from vllm_overlay.code import find_method
from vllm_patchkit.judge.audit.static import StaticResult, analyse_tree
from vllm_patchkit.trees.releases import release_tree

pytestmark = pytest.mark.release_trees

BACKENDS = "vllm/v1/attention/backends"
FLASH = f"{BACKENDS}/flash_attn.py"
TRITON = f"{BACKENDS}/triton_attn.py"
COPIED = ("vllm/v1/attention/backend.py", f"{BACKENDS}/utils.py", FLASH, TRITON)
FLASH_BUILDER = "FlashAttentionMetadataBuilder"
TRITON_BUILDER = "TritonAttentionMetadataBuilder"

# (marker, file, field, Class.method, operation) of each seeded write.
SEEDED = {
    ("zero", FLASH, "seq_lens", f"{FLASH_BUILDER}.build", "zero_"),
    ("reassign", FLASH, "max_query_len", f"{FLASH_BUILDER}.build", "reassignment"),
    (
        "numpy",
        FLASH,
        "query_start_loc_cpu",
        f"{FLASH_BUILDER}._seeded_helper",
        "augmented assignment",
    ),
    (
        "alias",
        TRITON,
        "query_start_loc_cpu",
        f"{TRITON_BUILDER}.build",
        "slice assignment",
    ),
    ("copy", TRITON, "seq_lens", "_seeded_pad", "copy_"),
    ("out", TRITON, "query_start_loc", f"{TRITON_BUILDER}.build", "out="),
}


def _method(text: list[str], cls: str, method: str) -> ast.FunctionDef:
    """``cls.method``'s node in the module whose lines are ``text``."""
    found = find_method(ast.parse("".join(text)), f"{cls}.{method}")
    assert found is not None, f"no {cls}.{method}"
    return found


def insert_in_method(path: Path, cls: str, method: str, lines: list[str]) -> None:
    """Put ``lines`` first in ``cls.method``'s body, at its indentation."""
    text = path.read_text().splitlines(keepends=True)
    first = _method(text, cls, method).body[0]
    indent = " " * first.col_offset
    text[first.lineno - 1 : first.lineno - 1] = [f"{indent}{line}\n" for line in lines]
    path.write_text("".join(text))


def insert_method(path: Path, cls: str, before: str, lines: list[str]) -> None:
    """Add a method to ``cls``, just before its method ``before``."""
    text = path.read_text().splitlines(keepends=True)
    node = _method(text, cls, before)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    indent = " " * node.col_offset
    text[start - 1 : start - 1] = [f"{indent}{line}\n" for line in lines]
    path.write_text("".join(text))


def marked_line(path: Path, marker: str) -> int:
    lines = path.read_text().splitlines()
    hits = [n for n, line in enumerate(lines, 1) if line.endswith(f"# seeded:{marker}")]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(an unchanged copy, the same copy with the writes seeded)."""
    source = release_tree("0.28.0")
    made = []
    for name in ("clean", "mutant"):
        root = tmp_path_factory.mktemp(name)
        for rel in COPIED:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / rel, root / rel)
        made.append(root)
    clean, mutant = made
    flash, triton = mutant / FLASH, mutant / TRITON
    insert_in_method(
        flash,
        FLASH_BUILDER,
        "build",
        [
            "common_attn_metadata.seq_lens.zero_()  # seeded:zero",
            "common_attn_metadata.max_query_len = 1  # seeded:reassign",
            "self._seeded_helper(common_attn_metadata)",
        ],
    )
    insert_method(
        flash,
        FLASH_BUILDER,
        "build",
        [
            "def _seeded_helper(self, cm):",
            "    offsets = cm.query_start_loc_cpu[1:].numpy()",
            "    offsets[0] += 1  # seeded:numpy",
            "",
        ],
    )
    insert_in_method(
        triton,
        TRITON_BUILDER,
        "build",
        [
            "qsl_cpu = common_attn_metadata.query_start_loc_cpu",
            "qsl_cpu[1:] = qsl_cpu[1:] - 1  # seeded:alias",
            "safe = common_attn_metadata.seq_lens.clone()",
            "safe.fill_(0)  # a clone: not shared",
            "_seeded_pad(common_attn_metadata)",
            (
                "torch.cumsum(safe, dim=0, out=common_attn_metadata.query_start_loc)"
                "  # seeded:out"
            ),
        ],
    )
    with triton.open("a") as out:
        out.write(
            "\n\ndef _seeded_pad(metadata):\n"
            "    padded = metadata.seq_lens\n"
            "    padded.copy_(padded + 1)  # seeded:copy\n"
        )
    return clean, mutant


@pytest.fixture(scope="module")
def results(trees: tuple[Path, Path]) -> tuple[StaticResult, StaticResult]:
    clean, mutant = trees
    return analyse_tree(clean), analyse_tree(mutant)


def test_each_seeded_write_is_found_at_its_file_line_and_field(
    trees: tuple[Path, Path], results: tuple[StaticResult, StaticResult]
) -> None:
    _, mutant = trees
    clean_result, mutant_result = results
    before = {(w.file, w.field, w.method, w.operation) for w in clean_result.writes}
    new = {
        (w.file, w.line, w.field, w.method, w.operation)
        for w in mutant_result.writes
        if (w.file, w.field, w.method, w.operation) not in before
    }
    expected = {
        (file, marked_line(mutant / file, marker), field, method, operation)
        for marker, file, field, method, operation in SEEDED
    }

    assert new == expected


def test_the_unchanged_writes_are_still_found(
    results: tuple[StaticResult, StaticResult],
) -> None:
    clean_result, mutant_result = results
    # The copy holds the Triton backend's capture fill_ (the only write of
    # these files in 0.28.0); seeding must neither hide it nor invent others.
    assert {(w.file, w.field, w.operation) for w in clean_result.writes} == {
        (TRITON, "seq_lens", "fill_")
    }
    assert {(w.file, w.field, w.operation) for w in clean_result.writes} <= {
        (w.file, w.field, w.operation) for w in mutant_result.writes
    }


def test_the_cli_reports_the_seeded_writes(trees: tuple[Path, Path]) -> None:
    _, mutant = trees
    proc = patchkit("audit", str(mutant), "--static-only", "--json")
    report = json.loads(proc.stdout)

    # Nothing is harmful by guess: not run, so not judged (exit 3).
    assert proc.returncode == 3, proc.stderr
    assert report["verdict"] == "cannot judge"
    found = {(f["file"], f["line"], f["field"]) for f in report["findings"]}
    for marker, file, field, _method, _operation in SEEDED:
        assert (file, marked_line(mutant / file, marker), field) in found
    assert all(f["kind"] != "harmful" for f in report["findings"])
    assert "dynamic pass" in report["checks"]["could_not_run_names"]
