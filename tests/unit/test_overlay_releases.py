"""The overlay's plan on the real code of every affected vLLM release.

Read from the released source distributions (cached): from 0.11.1 to 0.28.0
the method is one body (normalised AST), and removing the host zeroing from
it gives exactly 0.29.0's fixed method, comments aside. The AITER unified
backend (#53821) hands out the generic builder on each of those releases
(the overlay installs its builder there), its own builder on 0.29.0 and
later (nothing to do), and does not exist on 0.11.0.
"""

from __future__ import annotations

import ast
import copy
import functools
from pathlib import Path

import pytest

from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_aiter_unified_builder import (
    assess_file as assess_aiter_file,
)
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import AITER_UNIFIED_ATTN
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    ROCM_ATTN,
    classify_method,
    find_capture_method,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.install import plan_fix
from vllm_overlay.state import Action
from vllm_patchkit.trees.releases import release_sources

pytestmark = pytest.mark.release_trees

AFFECTED = [
    "0.11.1", "0.11.2", "0.12.0", "0.13.0", "0.14.0", "0.14.1", "0.16.0",
    "0.17.0", "0.17.1", "0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0",
    "0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0",
    "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0",
]  # fmt: skip
"""Every release on the package index in the affected range (see the matrix)."""
FILES = (ROCM_ATTN, AITER_UNIFIED_ATTN)


@functools.cache
def released_sources(version: str) -> dict[Path, bytes]:
    """The two modules these tests read, as released (those it ships)."""
    read = release_sources(version, tuple(str(f) for f in FILES))
    return {Path(r): text for r, text in read.items() if text is not None}


@functools.cache
def capture_method(version: str) -> tuple[ast.FunctionDef, Path]:
    """The method as released."""
    source = released_sources(version)[ROCM_ATTN]
    file = Path(f"vllm-{version}") / ROCM_ATTN
    method = find_capture_method(ast.parse(source))
    assert method is not None
    return method, file


@pytest.fixture(scope="module")
def fixed_upstream() -> str:
    method, file = capture_method("0.29.0")
    assert classify_method(method, file).shape is Shape.FIXED
    return ast.dump(method)


def test_the_affected_releases_share_one_method_body() -> None:
    bodies = {ast.dump(capture_method(v)[0]) for v in AFFECTED}
    assert len(bodies) == 1


@pytest.mark.parametrize("version", AFFECTED)
def test_the_plan_gives_the_upstream_fix(version: str, fixed_upstream: str) -> None:
    method, file = capture_method(version)
    plan = plan_fix(copy.deepcopy(method), classify_method(method, file))
    assert plan.removed_source == "common_attn_metadata.query_start_loc_cpu.zero_()"
    assert ast.dump(plan.fixed) == fixed_upstream


def test_before_and_after_the_range_nothing_is_planned() -> None:
    assert classify_method(*capture_method("0.11.0")).shape is Shape.NOT_FOR
    assert classify_method(*capture_method("0.29.0")).shape is Shape.FIXED


def release_file(version: str, relative: Path, dest: Path) -> Path | None:
    """``relative`` from the release's sdist, written under ``dest``."""
    source = released_sources(version).get(relative)
    if source is None:
        return None
    file = dest / version / relative
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(source)
    return file


@pytest.mark.parametrize("version", [*AFFECTED, "0.29.0", "0.32.0", "0.33.0"])
def test_the_aiter_fix_is_planned_exactly_on_the_affected_releases(
    version: str, tmp_path: Path
) -> None:
    aiter = release_file(version, AITER_UNIFIED_ATTN, tmp_path)
    rocm = release_file(version, ROCM_ATTN, tmp_path)
    assert aiter is not None and rocm is not None
    method, _ = capture_method(version)
    state = assess_aiter_file(aiter, classify_method(method, rocm), version)
    if version in AFFECTED:
        assert state.action is Action.INSTALLED, state.reason
        assert str(state.code.shape) == "buggy"
    else:
        assert state.action is Action.NOT_NEEDED, state.reason
        assert str(state.code.shape) == "fixed"


def test_no_aiter_module_before_the_range(tmp_path: Path) -> None:
    assert release_file("0.11.0", AITER_UNIFIED_ATTN, tmp_path) is None
