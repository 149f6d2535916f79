"""The AST invariant behind apply, upstreamed detection and the overlay."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    inspect_capture_source,
    inspect_capture_tree,
)
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.trees.installed import installed_vllm_dir

TEMPLATE = """
class RocmAttentionMetadataBuilder:
    def build_for_cudagraph_capture(self, common_attn_metadata):
        attn_metadata = self.build(0, common_attn_metadata)
        attn_metadata.seq_lens.fill_(1)
{body}
        return attn_metadata
"""


def shape_of(body: str) -> Shape:
    source = TEMPLATE.format(body=textwrap.indent(textwrap.dedent(body), " " * 8))
    return inspect_capture_source(source, Path("rocm_attn.py")).shape


@pytest.mark.parametrize(
    ("body", "shape"),
    [
        (
            """
            common_attn_metadata.query_start_loc.zero_()
            common_attn_metadata.query_start_loc_cpu.zero_()
            """,
            Shape.BUGGY,
        ),
        ("common_attn_metadata.query_start_loc.zero_()", Shape.FIXED),
        ("common_attn_metadata.query_start_loc.fill_(0)", Shape.FIXED),
        ("pass", Shape.NOT_FOR),
        ("common_attn_metadata.query_start_loc_cpu.zero_()", Shape.UNKNOWN),
        (
            """
            common_attn_metadata.query_start_loc.zero_()
            common_attn_metadata.query_start_loc_cpu.fill_(0)
            """,
            Shape.BUGGY,
        ),
        (
            """
            common_attn_metadata.query_start_loc.zero_()
            common_attn_metadata.query_start_loc_cpu[1:] = 0
            """,
            Shape.UNKNOWN,
        ),
        (
            """
            common_attn_metadata.query_start_loc = torch.zeros_like(
                common_attn_metadata.query_start_loc)
            """,
            Shape.UNKNOWN,
        ),
        ("common_attn_metadata.query_start_loc.clone().zero_()", Shape.NOT_FOR),
        ("common_attn_metadata.query_start_loc[1:].zero_()", Shape.NOT_FOR),
        (
            """
            common_attn_metadata.query_start_loc.zero_()
            common_attn_metadata.query_start_loc_cpu.copy_(x)
            """,
            Shape.UNKNOWN,
        ),
    ],
)
def test_shapes(body: str, shape: Shape) -> None:
    assert shape_of(body) is shape


def test_missing_method_and_file(tmp_path: Path) -> None:
    assert (
        inspect_capture_source("class Other: pass", Path("x.py")).shape is Shape.MISSING
    )
    assert inspect_capture_tree(tmp_path).shape is Shape.MISSING


def test_syntax_error_is_unparseable() -> None:
    code = inspect_capture_source("def (", Path("x.py"))
    assert code.shape is Shape.UNPARSEABLE and not code.judged
    assert code.detail.startswith("unparseable: SyntaxError at line 1")


def test_installed_vllm_is_the_buggy_release() -> None:
    """The pinned vLLM 0.28.0 in the venv carries the bug, with file and line."""
    code = inspect_capture_tree(installed_vllm_dir().parent)
    assert code.shape is Shape.BUGGY
    assert code.affected
    assert code.line is not None and code.host_mutation_lines
    assert "query_start_loc_cpu" in code.detail


def test_invariant_registry(tmp_path: Path) -> None:
    result = check_invariant("rocm-capture-zeroes-device-offsets-only", tmp_path)
    assert not result.holds
    with pytest.raises(KeyError, match="unknown invariant"):
        check_invariant("no-such-invariant", tmp_path)


REGRESSION_TEST = """\
from vllm.v1.attention.backends.rocm_attn import RocmAttentionMetadataBuilder


def test_host_offsets_kept(metadata, builder: RocmAttentionMetadataBuilder):
    builder.build_for_cudagraph_capture(metadata)
    assert metadata.query_start_loc_cpu.tolist() == [0, 1, 2]
"""


def _tree_with_test(tmp_path: Path, name: str, source: str) -> Path:
    tests = tmp_path / "tests" / "v1" / "attention"
    tests.mkdir(parents=True)
    (tests / name).write_text(source)
    return tmp_path


def test_regression_test_invariant_finds_a_renamed_edited_test(tmp_path: Path) -> None:
    tree = _tree_with_test(tmp_path, "test_capture_offsets.py", REGRESSION_TEST)
    result = check_invariant("rocm-capture-regression-test-present", tree)
    assert result.holds and result.line == 4
    assert result.file.name == "test_capture_offsets.py"


@pytest.mark.parametrize(
    "source",
    [
        # Another backend's capture test (vLLM 0.32.0's test_mm_prefix.py).
        REGRESSION_TEST.replace("RocmAttentionMetadataBuilder", "FlexBuilder"),
        # The ROCm builder, but the host offsets are never checked.
        REGRESSION_TEST.replace("query_start_loc_cpu", "query_start_loc"),
        # Not a test function.
        REGRESSION_TEST.replace("def test_host", "def check_host"),
        # Not Python.
        REGRESSION_TEST.replace("(metadata, builder", "(:"),
    ],
)
def test_regression_test_invariant_rejects_near_misses(
    tmp_path: Path, source: str
) -> None:
    tree = _tree_with_test(tmp_path, "test_capture_offsets.py", source)
    result = check_invariant("rocm-capture-regression-test-present", tree)
    assert not result.holds
    assert "no test in tests/v1/attention" in result.detail


# Issue "Right on the checkouts users have", item 6: the host zeroing written
# another way must never read as FIXED. A fixed method (0.29.0's) with the
# zeroing put back in some other spelling; `build` is in the class, as in
# every release.
FIXED_MODULE = """\
import torch
{before}

class RocmAttentionMetadataBuilder:
    def build_for_cudagraph_capture(self, common_attn_metadata):
        attn_metadata = self.build(0, common_attn_metadata)
        attn_metadata.seq_lens.fill_(1)
        common_attn_metadata.query_start_loc.zero_()
{body}
        return attn_metadata

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
{build}
        query_start_loc = common_attn_metadata.query_start_loc
        return Metadata(query_start_loc, common_attn_metadata.seq_lens)
{after}
"""
BUGGY_CAPTURE = """
    def build_for_cudagraph_capture(self, common_attn_metadata):
        attn_metadata = self.build(0, common_attn_metadata)
        common_attn_metadata.query_start_loc.zero_()
        common_attn_metadata.query_start_loc_cpu.zero_()
        return attn_metadata
"""


def fixed_module(
    body: str = "", before: str = "", build: str = "", after: str = ""
) -> str:
    return FIXED_MODULE.format(
        before=before,
        body=textwrap.indent(body, " " * 8),
        build=textwrap.indent(build, " " * 8),
        after=after,
    )


def test_the_fixed_module_itself_is_fixed() -> None:
    code = inspect_capture_source(fixed_module(), Path("rocm_attn.py"))
    assert code.shape is Shape.FIXED and code.judged


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            fixed_module(
                "host = common_attn_metadata.query_start_loc_cpu\nhost.zero_()"
            ),
            id="local-alias",
        ),
        pytest.param(
            fixed_module(
                "torch.Tensor.zero_(common_attn_metadata.query_start_loc_cpu)"
            ),
            id="torch.Tensor.zero_(x)",
        ),
        pytest.param(
            fixed_module("common_attn_metadata.query_start_loc_cpu.data.zero_()"),
            id=".data.zero_()",
        ),
        pytest.param(
            fixed_module(
                'getattr(common_attn_metadata, "query_start_loc_cpu").zero_()'
            ),
            id="getattr-constant",
        ),
        pytest.param(
            fixed_module(
                'getattr(common_attn_metadata, "query_" + "start_loc_cpu").zero_()'
            ),
            id="getattr-computed",
        ),
        pytest.param(
            fixed_module(
                "_zero_offsets(common_attn_metadata)",
                before="def _zero_offsets(m):\n    m.query_start_loc_cpu.zero_()\n",
            ),
            id="module-helper-with-the-metadata",
        ),
        pytest.param(
            fixed_module(
                "_zero(common_attn_metadata.query_start_loc_cpu)",
                before="def _zero(t):\n    t.zero_()\n",
            ),
            id="module-helper-with-the-tensor",
        ),
        pytest.param(
            fixed_module(
                "meta = common_attn_metadata\nmeta.query_start_loc_cpu.zero_()"
            ),
            id="alias-of-the-metadata",
        ),
        pytest.param(
            fixed_module("common_attn_metadata.query_start_loc_cpu.numpy()[:] = 0"),
            id="numpy-view",
        ),
        pytest.param(
            fixed_module(build="common_attn_metadata.query_start_loc_cpu.zero_()"),
            id="zeroed-in-build",
        ),
        pytest.param(
            fixed_module(
                after="\n\nRocmAttentionMetadataBuilder.build_for_cudagraph_capture"
                " = _capture\n"
            ),
            id="method-replaced-after-the-class",
        ),
        pytest.param(
            fixed_module(after="\n    build_for_cudagraph_capture = _capture\n"),
            id="method-rebound-in-the-class",
        ),
        pytest.param(
            fixed_module().replace(
                "    def build_for_cudagraph_capture",
                "    @zeroes_host_offsets\n    def build_for_cudagraph_capture",
            ),
            id="decorated",
        ),
    ],
)
def test_host_zeroing_written_another_way_cannot_be_judged(source: str) -> None:
    code = inspect_capture_source(source, Path("rocm_attn.py"))
    assert code.shape is Shape.UNKNOWN, code
    assert not code.judged and not code.affected
    assert "cannot judge" in code.detail or "unrecognised" in code.detail


def test_a_second_buggy_method_below_a_fixed_one_is_the_one_judged() -> None:
    """Python keeps the last definition: that is the method that runs."""
    source = fixed_module(after=BUGGY_CAPTURE)
    code = inspect_capture_source(source, Path("rocm_attn.py"))
    assert code.shape is Shape.BUGGY and code.affected
    lines = source.splitlines()
    defs = [n for n, line in enumerate(lines, 1) if "def build_for_cuda" in line]
    assert len(defs) == 2 and code.line == defs[-1]


def test_the_invariant_does_not_hold_for_an_aliased_host_zeroing(
    tmp_path: Path,
) -> None:
    file = tmp_path / "vllm/v1/attention/backends/rocm_attn.py"
    file.parent.mkdir(parents=True)
    file.write_text(
        fixed_module("host = common_attn_metadata.query_start_loc_cpu\nhost.zero_()")
    )
    result = check_invariant("rocm-capture-zeroes-device-offsets-only", tmp_path)
    assert not result.holds
    assert "line 9: common_attn_metadata.query_start_loc_cpu escapes" in result.detail


@pytest.mark.parametrize(
    "invariant",
    ["rocm-capture-regression-test-present", "static-sink-regression-test-present"],
)
def test_a_directory_named_like_a_test_is_no_test(
    tmp_path: Path, invariant: str
) -> None:
    """A user's directory ``tests/v1/attention/test_*.py`` is skipped, not
    read (it raised IsADirectoryError through apply and check)."""
    (tmp_path / "tests/v1/attention/test_mine.py").mkdir(parents=True)
    result = check_invariant(invariant, tmp_path)
    assert not result.holds and "no test in tests/v1/attention" in result.detail
