"""0002's invariant: upstream carries the test only if a test checks behaviour.

Rebase and refresh drop 0002 when this invariant holds on upstream, so a
false "holds" loses the regression test. It must hold for 0002's own test
file and for a reasonably edited version of it, and for nothing that only
names the builder, the capture method and the host offsets.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.paths import PATCHES_DIR

NAME = "rocm-capture-regression-test-present"


def file_of_0002() -> str:
    """The test file 0002 adds, read from the patch itself."""
    patch = next(PATCHES_DIR.glob("0002-*.patch")).read_text().splitlines()
    start = next(i for i, line in enumerate(patch) if line.startswith("@@ "))
    added = []
    for line in patch[start + 1 :]:
        if not line.startswith("+"):
            break
        added.append(line[1:])
    return "\n".join(added) + "\n"


def holds(tmp_path: Path, source: str, name: str = "test_capture.py") -> bool:
    tests = tmp_path / "tests" / "v1" / "attention"
    tests.mkdir(parents=True, exist_ok=True)
    (tests / name).write_text(textwrap.dedent(source))
    return check_invariant(NAME, tmp_path).holds


def test_0002s_own_test_counts(tmp_path: Path) -> None:
    source = file_of_0002()
    assert "build_for_cudagraph_capture(metadata)" in source
    assert holds(tmp_path, source, "test_rocm_attn_cudagraph_capture.py")


EDITS = {
    "renamed file and tests, only the second test kept": lambda s: (
        s.split("# 1: plain decode")[0]
        + textwrap.dedent(
            """
        def test_other_groups_see_decode(vllm_config):
            metadata = uniform_decode_metadata(1)
            make_builder(vllm_config).build_for_cudagraph_capture(metadata)
            lens = metadata.query_start_loc_cpu.diff()
            assert lens.tolist() == [1] * NUM_REQS
        """
        )
    ),
    "builder from a fixture, assert_close on the attribute": lambda s: (
        s.replace(
            "def make_builder(vllm_config: VllmConfig)"
            " -> RocmAttentionMetadataBuilder:",
            "@pytest.fixture\ndef rocm_builder(vllm_config):",
        ).split("# 1: plain decode")[0]
        + textwrap.dedent(
            """
        def test_host_offsets_survive(rocm_builder):
            metadata = uniform_decode_metadata(3)
            expected = metadata.query_start_loc_cpu.clone()
            rocm_builder.build_for_cudagraph_capture(metadata)
            torch.testing.assert_close(metadata.query_start_loc_cpu, expected)
        """
        )
    ),
    "builder built inline, in a test class": lambda s: (
        s.replace("def test_capture_zeroes", "def _unused_a").replace(
            "def test_next_builder", "def _unused_b"
        )
        + textwrap.dedent(
            """

        class TestCapture:
            def test_offsets(self, vllm_config):
                spec = FullAttentionSpec(
                    block_size=16, num_kv_heads=2, head_size=16, dtype=torch.float16
                )
                builder = RocmAttentionMetadataBuilder(
                    spec, ["layer.0"], vllm_config, DEVICE
                )
                metadata = uniform_decode_metadata(1)
                with torch.inference_mode():
                    builder.build_for_cudagraph_capture(metadata)
                assert torch.equal(
                    metadata.query_start_loc_cpu, torch.arange(NUM_REQS + 1)
                )
        """
        )
    ),
}


@pytest.mark.parametrize("edit", list(EDITS), ids=list(EDITS))
def test_an_edited_upstream_version_counts(tmp_path: Path, edit: str) -> None:
    source = EDITS[edit](file_of_0002())
    # 0002's own test functions are gone or renamed: the edit is what counts.
    assert "def test_capture_zeroes_device_offsets_only" not in source
    assert holds(tmp_path, source, "test_rocm_capture_offsets.py")


HEADER = """\
import torch
from vllm.v1.attention.backends.rocm_attn import RocmAttentionMetadataBuilder


def make_builder(config) -> RocmAttentionMetadataBuilder:
    return RocmAttentionMetadataBuilder(None, ["layer.0"], config, "cpu")

"""

DECOYS = {
    "only mentions the names": '''
        """RocmAttentionMetadataBuilder.build_for_cudagraph_capture must keep
        query_start_loc_cpu (see #51585)."""


        def test_names():
            assert "query_start_loc_cpu" in "build_for_cudagraph_capture"
        ''',
    "asserts before the capture": """
        def test_before(config, metadata):
            assert metadata.query_start_loc_cpu.tolist() == [0, 1, 2]
            make_builder(config).build_for_cudagraph_capture(metadata)
        """,
    "reads after the capture but never asserts": """
        def test_reads(config, metadata):
            make_builder(config).build_for_cudagraph_capture(metadata)
            offsets = metadata.query_start_loc_cpu
            print(offsets.tolist())
            assert metadata.query_start_loc.sum() == 0
        """,
    "asserts on a copy taken before the capture": """
        def test_copy(config, metadata):
            before = metadata.query_start_loc_cpu.clone()
            make_builder(config).build_for_cudagraph_capture(metadata)
            assert before.tolist() == [0, 1, 2]
        """,
    "captures with another backend's builder": """
        from vllm.v1.attention.backends.flash_attn import FlashAttentionMetadataBuilder


        def test_flash(config, metadata):
            builder = FlashAttentionMetadataBuilder(None, [], config, "cpu")
            builder.build_for_cudagraph_capture(metadata)
            assert metadata.query_start_loc_cpu.tolist() == [0, 1, 2]
        """,
    "the assertion sits in a helper that is never called": """
        def test_helper(config, metadata):
            make_builder(config).build_for_cudagraph_capture(metadata)

            def check():
                assert metadata.query_start_loc_cpu.tolist() == [0, 1, 2]
        """,
    "not a test function": """
        def check_capture(config, metadata):
            make_builder(config).build_for_cudagraph_capture(metadata)
            assert metadata.query_start_loc_cpu.tolist() == [0, 1, 2]
        """,
}


@pytest.mark.parametrize("decoy", list(DECOYS), ids=list(DECOYS))
def test_decoys_do_not_count(tmp_path: Path, decoy: str) -> None:
    source = HEADER + textwrap.dedent(DECOYS[decoy])
    assert "RocmAttentionMetadataBuilder" in source
    assert "build_for_cudagraph_capture" in source
    assert "query_start_loc_cpu" in source
    assert not holds(tmp_path, source)


def test_the_control_for_the_decoys_counts(tmp_path: Path) -> None:
    """The decoys' header with a real check: the decoys fail for their flaw."""
    source = HEADER + textwrap.dedent(
        """
        def test_after(config, metadata):
            make_builder(config).build_for_cudagraph_capture(metadata)
            assert metadata.query_start_loc_cpu.tolist() == [0, 1, 2]
        """
    )
    assert holds(tmp_path, source)


def test_decoy_beside_0002_still_finds_0002(tmp_path: Path) -> None:
    holds(tmp_path, HEADER + textwrap.dedent(DECOYS["asserts before the capture"]))
    assert holds(tmp_path, file_of_0002(), "test_rocm_attn_cudagraph_capture.py")
