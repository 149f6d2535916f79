"""``vllm-patchkit apply`` and ``check`` on real release trees, through the CLI."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json, snapshot
from tests.toolkit.series_expectations import (
    applied_statuses,
    carried,
    stock_statuses,
)
from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_capture_host_offsets.code import inspect_capture_tree
from vllm_patchkit.git.series import Series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PATCHES_DIR

pytestmark = pytest.mark.release_trees

PATCH = "0001-Bugfix-ROCm-Preserve-CPU-query-offsets-during-CUDA-g.patch"
TEST_PATCH = "0002-Bugfix-ROCm-Test-that-CUDA-graph-capture-keeps-the-C.patch"


AITER_PATCH = "0003-Bugfix-ROCm-Preserve-AITER-unified-attention-metadat.patch"
SINK_PATCH = "0004-Bugfix-Keep-the-shared-seq_lens-in-StaticSinkAttenti.patch"
SINK_TEST_PATCH = "0005-Bugfix-Test-that-static-sink-attention-keeps-the-sha.patch"
SINK_OPT_OUT_PATCH = "0006-Bugfix-Keep-static-sink-groups-off-the-V1-runner-s-b.patch"
# What check says before apply, and apply after, follows each patch's
# Affects: (series_expectations); 0003 is carried for 0.27.0..0.28.0 only.
AITER_CARRIED = {"0.12.0": False, "0.20.0": False, "0.25.0": False, "0.28.0": True}


@pytest.mark.parametrize(
    "version",
    [
        v if v in ("0.12.0", "0.28.0") else pytest.param(v, marks=pytest.mark.slow)
        for v in sorted(AITER_CARRIED)
    ],
)
def test_apply_on_affected_releases(
    release_clone: Callable[[str], Path], version: str
) -> None:
    tree = release_clone(version)
    states = stock_statuses(version)
    code, checked = patchkit_json("check", str(tree))
    assert code == 0
    assert [p["status"] for p in checked["patches"]] == states
    aiter = next(p for p in checked["patches"] if p["name"] == AITER_PATCH)
    assert (aiter["status"] == "applies") is AITER_CARRIED[version]

    code, result = patchkit_json("apply", str(tree))

    assert code == 0, result
    assert result["status"] == "applied"
    after = applied_statuses(version)
    assert [p["status"] for p in result["patches"]] == after
    if "not-carried" in states:
        assert (
            f"not carried for vLLM {version} (skipped): {AITER_PATCH}"
            in (result["message"])
        )
    assert inspect_capture_tree(tree).shape is Shape.FIXED
    git = Git(tree)
    assert git.out("rev-parse", "refs/vllm-patchkit/base") == result["head_before"]
    subjects = git.out("log", "--format=%s", f"{result['head_before']}..HEAD")
    # One commit per carried patch, in series order, under its own subject.
    applied = carried(version)
    assert subjects.splitlines() == [p.subject for p in reversed(applied)], subjects
    assert "[Bugfix][ROCm] Preserve CPU query offsets during CUDA graph capture" in (
        subjects.splitlines()
    )  # 0001, by hand: carried on every release here

    before = snapshot(tree)
    code, again = patchkit_json("apply", str(tree))
    assert (code, again["status"]) == (0, "already-applied")
    assert snapshot(tree) == before
    code, checked = patchkit_json("check", str(tree))
    assert [p["status"] for p in checked["patches"]] == after
    text = patchkit("check", str(tree))
    assert text.returncode == 0
    assert ("not-carried (the series does not carry this patch" in text.stdout) == (
        "not-carried" in states
    )


@pytest.mark.parametrize(
    "version", ["0.29.0", pytest.param("0.32.0", marks=pytest.mark.slow)]
)
def test_fixed_releases_get_only_the_regression_test(
    release_clone: Callable[[str], Path], version: str
) -> None:
    """Upstream carries both ROCm fixes (0001, 0003) but not their test
    (0002), nor the static-sink fix, its test and its V1-runner opt-out
    (0004-0006)."""
    tree = release_clone(version)
    git = Git(tree)
    before = git.head()

    code, result = patchkit_json("apply", str(tree))

    assert code == 0, result
    statuses = {p["name"]: p["status"] for p in result["patches"]}
    assert list(statuses.values()) == applied_statuses(version)
    assert (statuses[PATCH], statuses[SINK_PATCH]) == ("upstreamed", "applied")
    assert PATCH in result["message"] and AITER_PATCH in result["message"]
    applied = carried(version)
    assert git.out("rev-list", "--count", f"{before}..HEAD") == str(len(applied))
    changed = git.out("diff", "--name-only", before, "HEAD").split()
    assert changed == sorted({name for p in applied for name in p.files})
    assert "tests/v1/attention/test_rocm_attn_cudagraph_capture.py" in changed
    after = snapshot(tree)
    code, again = patchkit_json("apply", str(tree))
    assert (code, again["status"]) == (0, "already-applied")
    assert snapshot(tree) == after
    code, checked = patchkit_json("check", str(tree))
    assert [p["status"] for p in checked["patches"]] == applied_statuses(version)


def test_a_fully_upstreamed_series_changes_nothing(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """Exit 5 when upstream carries every patch, here the two fixes."""
    patches = tmp_path / "patches"
    patches.mkdir()
    for name in (PATCH, AITER_PATCH):
        shutil.copy(PATCHES_DIR / name, patches)
    (patches / "series").write_text(f"{PATCH}\n{AITER_PATCH}\n")
    tree = release_clone("0.29.0")
    before = snapshot(tree)

    code, result = patchkit_json("--patches", str(patches), "apply", str(tree))

    assert (code, result["status"]) == (5, "upstreamed")
    assert "the whole series" in result["message"]
    assert snapshot(tree) == before


def _series_with_affects(tmp_path: Path, name: str, affects: str, *more: str) -> Path:
    """A copy of the series whose patch ``name`` (and each of ``more``) says
    ``Affects: affects``."""
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    for each in (name, *more):
        path = patches / each
        lines = path.read_text().split("\n")
        lines = [line for line in lines if not line.startswith("Affects: ")]
        at = next(i for i, line in enumerate(lines) if line.startswith("Invariant: "))
        lines.insert(at, f"Affects: {affects}")
        path.write_text("\n".join(lines))
    return patches


def test_upstreamed_and_not_carried_is_upstreamed(
    release_clone: Callable[[str], Path], series: Series
) -> None:
    """Exit 5 when upstream carries every patch the series carries for the
    tree; patches not carried there (here 0002, 0004, 0005 and 0006, which
    0.29.0's code still needs, skipped by the user: a range alone no longer
    leaves out code that is buggy) do not stand in the way."""
    tree = release_clone("0.29.0")
    before = snapshot(tree)
    skipped = (TEST_PATCH, SINK_PATCH, SINK_TEST_PATCH, SINK_OPT_OUT_PATCH)
    skips = [arg for name in skipped for arg in ("--skip", name[:4])]

    code, result = patchkit_json("apply", *skips, str(tree))

    assert (code, result["status"]) == (5, "upstreamed"), result
    states = {p["name"]: p["status"] for p in result["patches"]}
    assert states == {
        p.name: "not-carried" if p.name in skipped else "upstreamed"
        for p in series.patches
    }
    assert (states[PATCH], states[TEST_PATCH]) == ("upstreamed", "not-carried")
    assert "every patch the series carries for this release" in result["message"]
    assert snapshot(tree) == before


def test_a_release_the_series_carries_nothing_for(
    release_clone: Callable[[str], Path], series: Series
) -> None:
    """0.11.0 never zeroed the offsets and has no static-sink builder: no
    patch of the series is carried; exit 0, nothing changes; not exit 5,
    which would say upstream carries the fix."""
    tree = release_clone("0.11.0")
    before = snapshot(tree)

    code, checked = patchkit_json("check", str(tree))
    assert code == 0
    assert [p["status"] for p in checked["patches"]] == ["not-carried"] * len(
        series.patches
    )

    code, result = patchkit_json("apply", str(tree))

    assert (code, result["status"]) == (0, "not-carried"), result
    assert "nothing to apply" in result["message"]
    assert snapshot(tree) == before


def test_a_development_version_is_its_tag_s_release(
    release_clone: Callable[[str], Path],
) -> None:
    """An install's development version (``_version.py`` of a checkout past
    a tag) is the release of the tag under it: 0003 is not-carried on this
    0.25.0 checkout, whatever next release the version guesses."""
    tree = release_clone("0.25.0", "release")
    git = Git(tree)
    version_file = tree / "vllm/_version.py"
    text = version_file.read_text()
    assert "0.25.0" in text
    version_file.write_text(text.replace("0.25.0", "0.29.1.dev7+g0123abcd"))
    git.run("-c", "user.name=u", "-c", "user.email=u@x.invalid", "commit", "-qam", "x")

    code, checked = patchkit_json("check", str(tree))

    assert code == 0, checked
    assert [p["status"] for p in checked["patches"]] == stock_statuses("0.25.0")
    assert checked["patches"][2]["name"] == AITER_PATCH
    assert checked["patches"][2]["status"] == "not-carried"


def test_a_tree_of_unknown_release_is_decided_by_its_code(
    release_clone: Callable[[str], Path],
) -> None:
    """A checkout with neither ``_version.py`` nor a release tag (a fork
    with tags of its own) is decided by its code (issue #27): 0003 finds no
    runner that replays FULL graphs on capture-built metadata in 0.25.0's
    code, so it is not-carried, with that reason, and apply carries 0001,
    0002, 0004, 0005 and 0006 (it used to try 0003 and roll everything
    back)."""
    tree = release_clone("0.25.0")
    git = Git(tree)
    git.run("tag", "-d", "v0.25.0")
    git.run("tag", "fork-2026.1")
    assert not (tree / "vllm/_version.py").exists()

    code, checked = patchkit_json("check", str(tree))

    assert code == 0, checked
    assert [p["status"] for p in checked["patches"]] == stock_statuses("0.25.0")
    assert checked["patches"][2]["status"] == "not-carried"
    assert "by its code" in checked["patches"][2]["detail"]
    assert "only when capturing" in checked["patches"][2]["detail"]
    code, result = patchkit_json("apply", str(tree))
    assert (code, result["status"]) == (0, "applied"), result
    assert [p["status"] for p in result["patches"]] == applied_statuses("0.25.0")


@pytest.mark.parametrize("affects", ["0.27..0.28.0", "0.28.0..0.27.0", "0.27.0"])
def test_a_malformed_affects_trailer_is_exit_2(
    release_clone: Callable[[str], Path], tmp_path: Path, affects: str
) -> None:
    patches = _series_with_affects(tmp_path, AITER_PATCH, affects)
    tree = release_clone("0.28.0")
    before = snapshot(tree)

    for command in ("check", "apply"):
        proc = patchkit("--patches", str(patches), command, str(tree))
        assert proc.returncode == 2, proc.stderr
        assert AITER_PATCH in proc.stderr and "Affects" in proc.stderr
    assert snapshot(tree) == before


def test_check_reports_conflict_without_touching_anything(
    release_clone: Callable[[str], Path],
) -> None:
    tree = release_clone("0.28.0")
    git = Git(tree)
    target = tree / "vllm/v1/attention/backends/rocm_attn.py"
    text = target.read_text()
    target.write_text(
        text.replace(
            "        common_attn_metadata.query_start_loc_cpu.zero_()\n",
            "        common_attn_metadata.query_start_loc_cpu.fill_(0)  # host too\n",
        )
    )
    git.run("-c", "user.name=u", "-c", "user.email=u@x.invalid", "commit", "-qam", "x")
    before = snapshot(tree)

    code, checked = patchkit_json("check", str(tree))

    assert code == 1
    assert checked["patches"][0]["status"] == "conflict"
    assert snapshot(tree) == before


def test_text_output_and_help() -> None:
    for command in ("apply", "check", "rebase", "refresh", "upstream", "demo"):
        proc = patchkit(command, "--help")
        assert proc.returncode == 0
        assert "--json" in proc.stdout
    assert "exit codes" in patchkit("apply", "--help").stdout
