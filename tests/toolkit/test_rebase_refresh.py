"""Rebase across real upstream drift and refresh, on a release upstream.

The upstream is built from released sources: v0.20.0 -> v0.28.0 -> v0.29.0,
one commit each. A fork carries the series on v0.20.0 and is rebased.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import checkout_state
from tests.toolkit.cli_helpers import (
    as_user,
    patchkit,
    patchkit_json,
    snapshot,
    upstream_rewrites_the_zeroing,
)
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.invariants import Shape, inspect_capture_tree
from vllm_patchkit.paths import PATCHES_DIR
from vllm_patchkit.upstream import build_upstream

pytestmark = pytest.mark.release_trees

VERSIONS = ["0.20.0", "0.28.0", "0.29.0"]
ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"
TEST_FILE = "tests/v1/attention/test_rocm_attn_cudagraph_capture.py"


@pytest.fixture(scope="module")
def upstream() -> Path:
    return build_upstream(VERSIONS)


@pytest.fixture
def fork(tmp_path: Path, upstream: Path) -> Path:
    """A user's clone of upstream at v0.20.0 with the series applied."""
    tree = tmp_path / "fork"
    Git(tmp_path).run(
        "clone", "--quiet", "--branch", "v0.20.0", str(upstream), str(tree)
    )
    git = as_user(tree)
    git.run("switch", "--quiet", "-c", "rocm-fixes")
    code, result = patchkit_json("apply", str(tree))
    assert (code, result["status"]) == (0, "applied")
    return tree


def test_upstream_is_a_tagged_chain(upstream: Path) -> None:
    git = Git(upstream)
    assert git.out("rev-list", "--count", "v0.29.0") == "3"
    assert git.out("rev-parse", "v0.28.0^") == git.out("rev-parse", "v0.20.0")
    assert build_upstream(VERSIONS) == upstream  # cached


def test_rebase_onto_0_28_applies(fork: Path, upstream: Path) -> None:
    code, result = patchkit_json(
        "rebase", "--onto", "v0.28.0", "--upstream", str(upstream), str(fork)
    )
    assert code == 0, result
    assert result["status"] == "rebased"
    assert [p["status"] for p in result["patches"]] == ["applied", "applied"]
    git = Git(fork)
    assert git.branch() == "rocm-fixes"
    assert git.out("rev-parse", "HEAD~2") == result["onto"]
    subjects = git.out("log", "-2", "--format=%s").splitlines()
    assert len(subjects) == 2
    assert all(s.startswith("[Bugfix][ROCm] ") for s in subjects)
    assert inspect_capture_tree(fork).shape is Shape.FIXED
    assert git.is_clean()


def test_rebase_onto_0_29_drops_the_upstreamed_fix_and_keeps_its_test(
    fork: Path, upstream: Path
) -> None:
    code, result = patchkit_json(
        "rebase", "--onto", "v0.29.0", "--upstream", str(upstream), str(fork)
    )
    assert code == 0, result
    assert [p["status"] for p in result["patches"]] == ["upstreamed", "applied"]
    fix = result["patches"][0]["name"]
    assert f"dropped as upstreamed: {fix}" in result["message"]
    git = Git(fork)
    assert git.out("rev-parse", "HEAD^") == result["onto"]
    assert git.out("diff", "--name-only", "HEAD^", "HEAD") == TEST_FILE
    assert inspect_capture_tree(fork).shape is Shape.FIXED


def test_conflicting_upstream_leaves_the_fork_byte_identical(
    fork: Path, upstream: Path, tmp_path: Path
) -> None:
    """Upstream rewrote the zeroing lines another way: conflict, nothing moves."""
    work = tmp_path / "upstream-work"
    upstream_rewrites_the_zeroing(upstream, work, "rewrite")
    before = snapshot(fork)
    summary = tmp_path / "summary.md"

    code, result = patchkit_json(
        "rebase",
        "--onto",
        "HEAD",
        "--upstream",
        str(work),
        "--summary",
        str(summary),
        str(fork),
    )

    assert code == 4, result
    assert result["status"] == "conflict"
    patch = result["patches"][0]
    assert patch["status"] == "conflict"
    assert patch["files"] == [ROCM_ATTN]
    assert patch["hunks"] and patch["hunks"][0].startswith(ROCM_ATTN + ":")
    assert patch["name"] in result["message"]
    assert snapshot(fork) == before
    assert "| conflict |" in summary.read_text()


def test_refresh_reproduces_the_series_and_is_idempotent(
    fork: Path, upstream: Path, tmp_path: Path
) -> None:
    code, _ = patchkit_json(
        "rebase", "--onto", "v0.28.0", "--upstream", str(upstream), str(fork)
    )
    assert code == 0
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)

    first = patchkit("--patches", str(patches), "refresh", str(fork))
    assert first.returncode == 0, first.stderr
    after_first = {p.name: p.read_bytes() for p in patches.iterdir()}
    second = patchkit("--patches", str(patches), "refresh", "--json", str(fork))
    assert second.returncode == 0
    assert {p.name: p.read_bytes() for p in patches.iterdir()} == after_first
    # Made on 0.28.0's tree, the committed series is exactly what refresh
    # exports from a fork rebased onto 0.28.0.
    assert after_first == {p.name: p.read_bytes() for p in PATCHES_DIR.iterdir()}


def test_refresh_after_drop_removes_the_patch(
    fork: Path, upstream: Path, tmp_path: Path
) -> None:
    code, _ = patchkit_json(
        "rebase", "--onto", "v0.29.0", "--upstream", str(upstream), str(fork)
    )
    assert code == 0
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    fix, test = sorted(p.name for p in PATCHES_DIR.glob("*.patch"))
    code, result = patchkit_json("--patches", str(patches), "refresh", str(fork))
    assert code == 0
    assert [Path(p).name for p in result["removed"]] == [fix]
    assert sorted(p.name for p in patches.glob("*.patch")) == [test]
    # The test patch is exported unchanged from its new base.
    assert (patches / test).read_bytes() == (PATCHES_DIR / test).read_bytes()
    listed = [
        line
        for line in (patches / "series").read_text().splitlines()
        if not line.startswith("#")
    ]
    assert listed == [test]


def test_refresh_refuses_to_write_an_empty_series(
    upstream: Path, tmp_path: Path
) -> None:
    """Every patch upstream (no commits after the base): nothing is written."""
    tree = tmp_path / "fixed"
    Git(tmp_path).run(
        "clone", "--quiet", "--branch", "v0.29.0", str(upstream), str(tree)
    )
    as_user(tree).run("switch", "--quiet", "-c", "empty")
    Git(tree).run("update-ref", "refs/vllm-patchkit/base", "HEAD")
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    before = {p.name: p.read_bytes() for p in patches.iterdir()}

    proc = patchkit("--patches", str(patches), "refresh", str(tree))

    assert proc.returncode == 2
    assert "upstream carries every patch" in proc.stderr
    assert {p.name: p.read_bytes() for p in patches.iterdir()} == before


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# --- refresh writes only inside patches/ (issue 12, case 4) ----------------


def _outside_relative(patches: Path, victim: Path) -> None:
    _list_in_series(patches, f"../{victim.name}")


def _outside_absolute(patches: Path, victim: Path) -> None:
    _list_in_series(patches, str(victim))


def _symlink_out(patches: Path, victim: Path) -> None:
    """A listed patch file that is a link to a file elsewhere."""
    name = sorted(p.name for p in patches.glob("*.patch"))[0]
    victim.write_text((patches / name).read_text().replace("Date: ", "Date: Sun, "))
    (patches / name).unlink()
    (patches / name).symlink_to(victim)


def _list_in_series(patches: Path, line: str) -> None:
    series = patches / "series"
    series.write_text(series.read_text() + line + "\n")


@pytest.mark.parametrize(
    "make",
    [_outside_relative, _outside_absolute, _symlink_out],
    ids=lambda f: f.__name__,
)
def test_refresh_never_writes_or_deletes_outside_patches(
    fork: Path, tmp_path: Path, make: Callable[[Path, Path], None]
) -> None:
    patches = tmp_path / "work" / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    victim = tmp_path / "work" / "victim.patch"
    victim.write_text("precious\n")
    make(patches, victim)
    victim_bytes = victim.read_bytes()
    before = checkout_state(fork), files_of(patches)

    proc = patchkit("--patches", str(patches), "refresh", str(fork))

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert victim.read_bytes() == victim_bytes
    assert (checkout_state(fork), files_of(patches)) == before


COMMENTED_SERIES = """\
# vllm-overlay patch series
  # an indented comment before the patches

{fix}   # the fix
    # an indented comment between them
{test}
\t# a tab-indented comment at the end
"""


def test_refresh_keeps_every_comment_where_it_was(
    fork: Path, upstream: Path, tmp_path: Path
) -> None:
    """Ordinary, indented and trailing comments and blank lines survive; the
    line of a dropped patch (0001 on 0.29.0) goes with its comment."""
    fix, test = sorted(p.name for p in PATCHES_DIR.glob("*.patch"))
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    (patches / "series").write_text(COMMENTED_SERIES.format(fix=fix, test=test))
    code, _ = patchkit_json(
        "rebase", "--onto", "v0.29.0", "--upstream", str(upstream), str(fork)
    )
    assert code == 0

    code, result = patchkit_json("--patches", str(patches), "refresh", str(fork))

    assert code == 0, result
    assert result["removed"] == [fix]
    expected = COMMENTED_SERIES.format(fix=fix, test=test).replace(
        f"{fix}   # the fix\n", ""
    )
    assert (patches / "series").read_text() == expected
    # Nothing to drop: the file stays byte for byte.
    again = patchkit("--patches", str(patches), "refresh", str(fork))
    assert again.returncode == 0, again.stderr
    assert (patches / "series").read_text() == expected
