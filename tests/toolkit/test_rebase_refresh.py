"""Rebase across real upstream drift and refresh, on a release upstream.

The upstream is built from released sources: v0.20.0 -> v0.28.0 -> v0.29.0,
one commit each. A fork carries the series on v0.20.0 and is rebased. The
series does not carry 0003 (#53821's backport) for 0.20.0, so the fork
starts with 0001 and 0002; a rebase onto 0.28.0 puts 0003 in from its file.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import checkout_state, lived_in
from tests.toolkit.cli_helpers import (
    as_user,
    patchkit,
    patchkit_json,
    snapshot,
    upstream_rewrites_the_zeroing,
)
from tests.toolkit.series_expectations import (
    NOT_CARRIED,
    SERIES,
    UPSTREAMED,
    applied_statuses,
    carried,
    patches_in,
)
from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_capture_host_offsets.code import inspect_capture_tree
from vllm_patchkit.git.upstream import build_upstream
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PATCHES_DIR

pytestmark = pytest.mark.release_trees

VERSIONS = ["0.20.0", "0.28.0", "0.29.0"]
ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"
TEST_FILE = "tests/v1/attention/test_rocm_attn_cudagraph_capture.py"
SINK_FILE = "vllm/model_executor/layers/attention/static_sink_attention.py"
SINK_TEST_FILE = "tests/v1/attention/test_static_sink_shared_state.py"


FIX, TEST, AITER, SINK, SINK_TEST, OPT_OUT = (
    name
    for number in ("0001", "0002", "0003", "0004", "0005", "0006")
    for name in SERIES.names([number])
)
"""0001-0003: the ROCm fixes and their test; 0004-0005: the static-sink fix
and its test, carried for 0.14.0 on and upstream in no release (#25); 0006:
its opt-out for the V1 runner (0.14.0-0.33.0). Named one by one: a patch
added to the series moves no name here."""


@pytest.fixture(scope="module")
def upstream() -> Path:
    return build_upstream(VERSIONS)


@pytest.fixture
def fork(
    tmp_path: Path,
    upstream: Path,
    pooled_tree: Callable[[str, Path, Callable[[Path], None]], Path],
) -> Path:
    """A user's clone of upstream at v0.20.0 with the series applied (all
    but 0003, which 0.20.0 does not carry); built once per process, put
    back as new for each test."""

    def build(tree: Path) -> None:
        Git(tree.parent).run(
            "clone", "--quiet", "--branch", "v0.20.0", str(upstream), str(tree)
        )
        git = as_user(tree)
        git.run("switch", "--quiet", "-c", "rocm-fixes")
        code, result = patchkit_json("apply", str(tree))
        assert (code, result["status"]) == (0, "applied")
        states = [p["status"] for p in result["patches"]]
        assert states == applied_statuses("0.20.0")
        assert states[2] == "not-carried"  # 0003, by hand

    return pooled_tree(f"fork-of-{upstream}", tmp_path / "fork", build)


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
    # 0003 comes from its file, at its place in the series (after 0002).
    names = [p["name"] for p in result["patches"]]
    assert names == [p.name for p in SERIES.patches]
    assert names.index(AITER) == names.index(TEST) + 1
    assert [p["status"] for p in result["patches"]] == applied_statuses("0.28.0")
    assert result["patches"][2]["status"] == "applied"  # 0003, by hand
    git = Git(fork)
    assert git.branch() == "rocm-fixes"
    applied = carried("0.28.0")
    assert git.out("rev-parse", f"HEAD~{len(applied)}") == result["onto"]
    subjects = git.out("log", "--format=%s", f"{result['onto']}..HEAD").splitlines()
    assert subjects == [p.subject for p in reversed(applied)]
    assert "AITER" in subjects[-3], subjects
    assert inspect_capture_tree(fork).shape is Shape.FIXED
    assert git.is_clean()


def test_rebase_onto_0_29_drops_the_upstreamed_fix_and_keeps_its_test(
    fork: Path, upstream: Path
) -> None:
    code, result = patchkit_json(
        "rebase", "--onto", "v0.29.0", "--upstream", str(upstream), str(fork)
    )
    assert code == 0, result
    assert [p["status"] for p in result["patches"]] == applied_statuses("0.29.0")
    upstreamed = patches_in(UPSTREAMED, "0.29.0")
    assert {FIX, AITER} <= set(upstreamed)  # by hand: #51585 and #53821
    assert f"dropped as upstreamed: {', '.join(upstreamed)}" in result["message"]
    git = Git(fork)
    applied = carried("0.29.0")
    assert git.out("rev-parse", f"HEAD~{len(applied)}") == result["onto"]
    changed = git.out("diff", "--name-only", result["onto"], "HEAD").splitlines()
    assert changed == sorted({name for p in applied for name in p.files})
    assert {TEST_FILE, SINK_FILE, SINK_TEST_FILE} <= set(changed)
    assert ROCM_ATTN not in changed
    assert inspect_capture_tree(fork).shape is Shape.FIXED


@pytest.mark.slow
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
    # Made on 0.28.0's tree (0004 and 0005 on 0.34.0's, 0006 on 0.33.0's),
    # the committed series is exactly what refresh exports from a fork
    # rebased onto 0.28.0, but for 0004's and 0006's index lines: the blob
    # ids of the static-sink file the releases ship.
    committed = {p.name: p.read_bytes() for p in PATCHES_DIR.iterdir()}
    assert after_first.keys() == committed.keys()
    elsewhere = (SINK, OPT_OUT)
    assert {n: b for n, b in after_first.items() if n not in elsewhere} == {
        n: b for n, b in committed.items() if n not in elsewhere
    }
    for name in elsewhere:
        differ = [
            pair
            for pair in zip(
                after_first[name].splitlines(),
                committed[name].splitlines(),
                strict=True,
            )
            if pair[0] != pair[1]
        ]
        assert len(differ) == 1, (name, differ)
        assert all(line.startswith(b"index ") for line in differ[0]), differ


@pytest.mark.slow
def test_refresh_after_drop_keeps_the_patches_older_releases_need(
    fork: Path, upstream: Path, tmp_path: Path
) -> None:
    code, _ = patchkit_json(
        "rebase", "--onto", "v0.29.0", "--upstream", str(upstream), str(fork)
    )
    assert code == 0
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    before = {p.name: p.read_bytes() for p in patches.iterdir()}
    code, result = patchkit_json("--patches", str(patches), "refresh", str(fork))
    assert code == 0
    # Upstream carries 0001 and 0003 on 0.29.0, so the fork has no commit of
    # them; 0.11.1-0.28.0 (0.27.0-0.28.0) still need them: their files and
    # lines stay, as do those of every patch with no commit there.
    upstreamed = patches_in(UPSTREAMED, "0.29.0")
    assert upstreamed[:2] == [FIX, AITER] and TEST not in upstreamed  # by hand
    assert result["removed"] == []
    no_commit = set(upstreamed + patches_in(NOT_CARRIED, "0.29.0"))
    assert result["kept"] == [p.name for p in SERIES.patches if p.name in no_commit]
    # The test patch is exported unchanged from its new base, and the code
    # of 0.29.0 (the newest release upstream's tags name) moves no range.
    assert (patches / TEST).read_bytes() == (PATCHES_DIR / TEST).read_bytes()
    # What has no commit here stays byte for byte, and so does the series
    # (0004 is exported with 0.29.0's blob ids in its index line).
    assert {n: (patches / n).read_bytes() for n in [*no_commit, "series"]} == {
        n: before[n] for n in [*no_commit, "series"]
    }
    assert result["ranges"]["release"] == "0.29.0"
    assert not [j for j in result["ranges"]["patches"] if j["changed"]]


def test_refresh_on_a_release_that_does_not_carry_0003_keeps_it(
    fork: Path, tmp_path: Path
) -> None:
    """A 0.20.0 fork has no 0003 commit by design: its file and line stay."""
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    before = {p.name: p.read_bytes() for p in patches.iterdir()}

    code, result = patchkit_json("--patches", str(patches), "refresh", str(fork))

    assert code == 0, result
    written = [p.name for p in carried("0.20.0")]
    assert {FIX, TEST, SINK, SINK_TEST} <= set(written) and AITER not in written
    assert [Path(p).name for p in result["written"]] == written
    assert AITER in result["kept"]  # by hand
    assert (
        result["kept"] == patches_in(NOT_CARRIED, "0.20.0") and result["removed"] == []
    )
    assert (patches / AITER).read_bytes() == before[AITER]
    assert (patches / "series").read_bytes() == before["series"]


def fork_of_0_28(upstream: Path, tmp_path: Path) -> tuple[Path, Git]:
    """A user's clone of upstream at v0.28.0 on a branch of their own."""
    tree = tmp_path / "fork28"
    Git(tmp_path).run(
        "clone", "--quiet", "--branch", "v0.28.0", str(upstream), str(tree)
    )
    git = as_user(tree)
    git.run("switch", "--quiet", "-c", "rocm-fixes")
    return tree, git


@pytest.mark.slow
def test_rebase_onto_a_release_that_does_not_carry_0003_leaves_it_out(
    upstream: Path, tmp_path: Path
) -> None:
    """A 0.28.0 fork with the series applied (0003's commit included),
    rebased onto 0.20.0: 0003's commit, and any other of a patch the series
    does not carry for 0.20.0, stays out of the branch, as apply would leave
    it out there, and the rebase goes through."""
    tree, git = fork_of_0_28(upstream, tmp_path)
    code, applied = patchkit_json("apply", str(tree))
    assert (code, applied["status"]) == (0, "applied")
    assert AITER in [p.name for p in carried("0.28.0")]  # its commit is here

    code, result = patchkit_json(
        "rebase", "--onto", "v0.20.0", "--upstream", str(upstream), str(tree)
    )

    assert code == 0, result
    assert [p["status"] for p in result["patches"]] == applied_statuses("0.20.0")
    assert "not carried for v0.20.0's release" in result["message"]
    assert AITER in result["message"]
    assert git.out("rev-parse", f"HEAD~{len(carried('0.20.0'))}") == result["onto"]
    assert AITER not in [p.name for p in carried("0.20.0")]
    subjects = git.out("log", "--format=%s", f"{result['onto']}..HEAD").splitlines()
    assert subjects == [p.subject for p in reversed(carried("0.20.0"))]
    assert git.is_clean()


@pytest.mark.slow
def test_on_a_target_of_no_known_release_every_series_commit_is_replayed(
    upstream: Path, tmp_path: Path
) -> None:
    """The same 0.28.0 fork rebased onto 0.20.0's code in a commit that no
    release tag reaches and no ``_version.py`` names (upstream's source
    imported without its history, as a vendoring fork has it): the
    target's release is unknown, so its ``Affects:`` ranges say nothing
    there, and 0003's commit is replayed
    (it applies on that code), not left out as on the tagged v0.20.0: a
    target that moved must not silently lose the user's fix."""
    tree, git = fork_of_0_28(upstream, tmp_path)
    code, applied = patchkit_json("apply", str(tree))
    assert (code, applied["status"]) == (0, "applied")
    # 0.20.0's source as a checkout has it (no _version.py), in one commit.
    index = {"GIT_INDEX_FILE": str(tmp_path / "import.index")}
    git.run("read-tree", "v0.20.0", env=index)
    git.run("update-index", "--force-remove", "vllm/_version.py", env=index)
    source = git.run("write-tree", env=index).stdout.strip()
    imported = git.out("commit-tree", source, "-m", "Import vLLM's source")

    code, result = patchkit_json("rebase", "--onto", imported, str(tree))

    assert code == 0, result
    report = next(p for p in result["patches"] if p["name"] == AITER)
    assert report["status"] == "applied", report
    assert "not carried" not in result["message"]
    subject = next(p.subject for p in SERIES.patches if p.name == AITER)
    log = git.out("log", "--format=%s", f"{imported}..HEAD").splitlines()
    assert subject in log, log
    assert git.is_clean()


@pytest.mark.slow
def test_an_edited_commit_of_a_patch_the_target_does_not_carry_is_replayed(
    upstream: Path, tmp_path: Path
) -> None:
    """0003's commit, amended by the fork's maintainer (a comment of theirs
    in the file it patches), rebased onto 0.20.0, which the series does not
    carry 0003 for: the edit is the user's work, so the commit is not left
    out as its unedited self would be; it is replayed (a conflict would stop
    the run with the branch as it was)."""
    tree, git = fork_of_0_28(upstream, tmp_path)
    after = [p.name for p in carried("0.28.0")]
    after = after[after.index(AITER) + 1 :]
    skips = [arg for name in after for arg in ("--skip", name)]
    code, applied = patchkit_json("apply", *skips, str(tree))
    assert (code, applied["status"]) == (0, "applied")
    aiter_file = tree / "vllm/v1/attention/backends/rocm_aiter_unified_attn.py"
    aiter_file.write_text(aiter_file.read_text() + "# our tuning notes\n")
    git.run("commit", "--quiet", "--amend", "--no-edit", "-a")
    before = checkout_state(tree)

    code, result = patchkit_json(
        "rebase", "--onto", "v0.20.0", "--upstream", str(upstream), str(tree)
    )

    # It applies there (0.20.0 has the file and the method), so it is kept,
    # the edit with it, and reported applied, not not-carried.
    assert code == 0, result
    report = next(p for p in result["patches"] if p["name"] == AITER)
    assert report["status"] == "applied", report
    assert "# our tuning notes" in aiter_file.read_text()
    subject = next(p.subject for p in SERIES.patches if p.name == AITER)
    log = git.out("log", "--format=%s", f"{result['onto']}..HEAD").splitlines()
    assert subject in log, log  # 0004 and 0005 go in from their files after it
    assert before != checkout_state(tree)  # the branch moved, as asked


def test_refresh_refuses_to_write_an_empty_series(
    upstream: Path, tmp_path: Path
) -> None:
    """A branch of 0.29.0 with no commits after the base: nothing is written.
    Upstream carries 0001 and 0003 there, not 0002, 0004 and 0005, so the
    refusal says the branch carries no patch, not that upstream has them."""
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
    assert "the branch carries no patch of the series" in proc.stderr
    assert "upstream carries" not in proc.stderr
    assert {p.name: p.read_bytes() for p in patches.iterdir()} == before


# --- Your own commits on top of the series (issue 12, case 3) ---------------


def own_commit(tree: Path, path: str, text: str | None, subject: str) -> str:
    """Commit a change of the fork's maintainer; None: an empty commit."""
    git = as_user(tree)
    if text is None:
        git.run("commit", "--quiet", "--allow-empty", "-m", subject)
    else:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
        git.run("add", "--", path)
        git.run("commit", "--quiet", "-m", subject)
    return git.head()


def patch_id(git: Git, commit: str) -> str:
    shown = git.run("show", "--format=", "--full-index", commit).stdout
    return git.run("patch-id", "--stable", input_text=shown).stdout.split()[0]


def test_rebase_replays_your_own_commits_in_order(fork: Path, upstream: Path) -> None:
    readme = (fork / "README.md").read_text()
    mine = [
        own_commit(fork, "tools/my_tool.py", "print('mine')\n", "Add my tool"),
        own_commit(fork, "README.md", readme + "\nMy fork.\n", "Say it is my fork"),
        own_commit(fork, "", None, "Mark the fork"),
    ]
    git = Git(fork)
    before = {c: git.out("show", "-s", "--format=%an <%ae> %ad%n%B", c) for c in mine}
    ids = {c: patch_id(git, c) for c in mine[:2]}

    code, result = patchkit_json(
        "rebase", "--onto", "v0.28.0", "--upstream", str(upstream), str(fork)
    )

    assert code == 0, result
    # 0003, not carried for 0.20.0, goes in from its file after 0002; the
    # static-sink pair (0004, 0005) is replayed after it.
    assert [p["status"] for p in result["patches"]] == applied_statuses("0.28.0")
    assert [c["status"] for c in result["commits"]] == ["applied"] * 3
    assert "and 3 of your commit(s)" in result["message"]
    subjects = git.out("log", "--format=%s", f"{result['onto']}..HEAD").splitlines()
    assert subjects[:3] == ["Mark the fork", "Say it is my fork", "Add my tool"]
    assert subjects[3:] == [p.subject for p in reversed(carried("0.28.0"))]
    rocm = [p.subject for p in SERIES.patches if p.name in (FIX, TEST, AITER)]
    assert all(s.startswith("[Bugfix][ROCm] ") for s in rocm)  # by hand
    assert set(rocm) <= set(subjects[3:])
    replayed = git.out("rev-list", "--reverse", "HEAD~3..HEAD").splitlines()
    for old, new in zip(mine, replayed, strict=True):
        # Same author, date and message; the same change.
        assert git.out("show", "-s", "--format=%an <%ae> %ad%n%B", new) == before[old]
    assert [patch_id(git, c) for c in replayed[:2]] == [ids[c] for c in mine[:2]]
    assert (fork / "tools/my_tool.py").read_text() == "print('mine')\n"
    assert (fork / "README.md").read_text().endswith("\nMy fork.\n")
    assert inspect_capture_tree(fork).shape is Shape.FIXED
    assert git.is_clean()


@pytest.mark.slow
def test_rebase_keeps_an_edited_series_commit_as_you_edited_it(
    fork: Path, upstream: Path
) -> None:
    """0002's commit amended in the fork: the amendment is replayed, not the
    patch file."""
    test = fork / TEST_FILE
    test.write_text(test.read_text() + "\n# Checked on our MI300X boxes too.\n")
    as_user(fork).run("commit", "--quiet", "--amend", "--no-edit", "-a")

    code, result = patchkit_json(
        "rebase", "--onto", "v0.28.0", "--upstream", str(upstream), str(fork)
    )

    assert code == 0, result
    assert [p["status"] for p in result["patches"]] == applied_statuses("0.28.0")
    assert result["commits"] == []
    assert test.read_text().endswith("# Checked on our MI300X boxes too.\n")
    count = Git(fork).out("rev-list", "--count", f"{result['onto']}..HEAD")
    assert count == str(len(carried("0.28.0")))


def test_a_conflict_in_your_commit_leaves_the_checkout_as_it_was(
    fork: Path, upstream: Path
) -> None:
    """Your commit rewrites setup.py, which upstream changed since 0.20.0."""
    lived_in(fork)
    mine = own_commit(fork, "setup.py", "print('my build')\n", "Use my build")
    before = checkout_state(fork)

    code, result = patchkit_json(
        "rebase", "--onto", "v0.28.0", "--upstream", str(upstream), str(fork)
    )

    assert code == 4, result
    assert result["status"] == "conflict"
    assert [p["status"] for p in result["patches"]] == applied_statuses("0.28.0")
    [commit] = result["commits"]
    assert commit["name"] == f"{mine[:12]} Use my build"
    assert (commit["status"], commit["files"]) == ("conflict", ["setup.py"])
    assert commit["hunks"] and commit["hunks"][0].startswith("setup.py:")
    assert "your commit" in result["message"] and "unchanged" in result["message"]
    assert checkout_state(fork) == before


def _merge_after_the_base(fork: Path) -> None:
    git = as_user(fork)
    git.run("switch", "--quiet", "-c", "side")
    own_commit(fork, "side.txt", "side\n", "Side work")
    git.run("switch", "--quiet", "rocm-fixes")
    own_commit(fork, "main.txt", "main\n", "Main work")
    git.run("merge", "--quiet", "--no-ff", "-m", "Merge side", "side")


def _no_base(fork: Path) -> None:
    own_commit(fork, "mine.txt", "mine\n", "My work")
    Git(fork).run("update-ref", "-d", "refs/vllm-patchkit/base")


def _base_not_below_head(fork: Path) -> None:
    own_commit(fork, "mine.txt", "mine\n", "My work")
    Git(fork).run("update-ref", "refs/vllm-patchkit/base", "v0.28.0")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_merge_after_the_base, "is a merge"),
        (_no_base, "no series base"),
        (_base_not_below_head, "is not below HEAD"),
    ],
    ids=["merge-after-base", "no-base", "base-not-below-head"],
)
def test_rebase_refuses_a_branch_it_cannot_replay(
    fork: Path, upstream: Path, make: Callable[[Path], None], said: str
) -> None:
    make(fork)
    lived_in(fork)
    before = checkout_state(fork)

    code, result = patchkit_json(
        "rebase", "--onto", "v0.28.0", "--upstream", str(upstream), str(fork)
    )

    assert (code, result["status"]) == (2, "refused"), result
    assert said in result["message"]
    assert checkout_state(fork) == before


# --- Values that reach git as arguments (issue 12, case 7) -----------------

INJECTIONS = {
    # As a user types it: argparse passes a value with a space as a value.
    "rebase --upstream option": lambda m, up: [
        "rebase",
        "--onto",
        "v0.28.0",
        "--upstream",
        f"--upload-pack=touch {m};",
    ],
    "rebase --upstream ext helper": lambda m, up: [
        "rebase",
        "--onto",
        "v0.28.0",
        "--upstream",
        f"ext::sh -c touch% {m}",
    ],
    "rebase --onto option, fetched": lambda m, up: [
        "rebase",
        f"--onto=--upload-pack=touch {m};",
        "--upstream",
        up,
    ],
    "rebase --onto option, local": lambda m, up: ["rebase", f"--onto=--output={m}"],
    "rebase --onto refspec into your branch": lambda m, up: [
        "rebase",
        "--onto",
        "v0.28.0:refs/heads/my-other-branch",
        "--upstream",
        up,
    ],
    "rebase --base option": lambda m, up: [
        "rebase",
        "--onto",
        "v0.28.0",
        "--upstream",
        up,
        f"--base=--output={m}",
    ],
    "refresh --base option": lambda m, up: ["refresh", f"--base=--output={m}"],
}


INJECTIONS_BY_DEFAULT = (
    "rebase --upstream ext helper",
    "rebase --onto refspec into your branch",
    "refresh --base option",
)
"""One of each way in (a remote, a refspec, a revision); the other cases of
the same ways run in the extended tier."""


@pytest.mark.parametrize(
    "case",
    [
        c if c in INJECTIONS_BY_DEFAULT else pytest.param(c, marks=pytest.mark.slow)
        for c in INJECTIONS
    ],
    ids=list(INJECTIONS),
)
def test_no_user_value_reaches_git_as_an_option(
    fork: Path, upstream: Path, tmp_path: Path, case: str
) -> None:
    marker = tmp_path / "marker"
    Git(fork).run("config", "protocol.ext.allow", "always")  # a careless config
    lived_in(fork)
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    before = checkout_state(fork), files_of(patches)

    args = INJECTIONS[case](str(marker), str(upstream))
    proc = patchkit("--patches", str(patches), *args, str(fork), cwd=tmp_path)

    assert not marker.exists()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert (checkout_state(fork), files_of(patches)) == before


@pytest.mark.parametrize("command", ["rebase --onto v0.28.0", "refresh"])
def test_a_path_that_looks_like_an_option_is_a_path(
    tmp_path: Path, command: str
) -> None:
    marker = tmp_path / "marker"
    proc = patchkit(
        *command.split(), "--", f"--upload-pack=touch {marker};", cwd=tmp_path
    )
    assert not marker.exists()
    assert proc.returncode == 2
    assert "no such directory" in proc.stderr + proc.stdout


def test_upstream_values_do_not_reach_git_as_options(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    versions = patchkit("upstream", f"--versions=--upload-pack=touch {marker};")
    assert versions.returncode == 2
    assert "is not a vLLM release such as 0.28.0" in versions.stderr
    # --dest is a directory to create, never a git argument.
    dest = patchkit(
        "upstream",
        "--versions",
        "0.28.0",
        "--dest",
        f"--upload-pack=touch {marker};",
        cwd=tmp_path,
    )
    assert dest.returncode == 0, dest.stderr
    assert Git(tmp_path / f"--upload-pack=touch {marker};").out("tag") == "v0.28.0"
    assert not marker.exists()


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# --- A rebase killed mid-replay (issue 12, case 17) ------------------------


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the rebase never replayed a commit"
        time.sleep(0.05)


def worktrees(git: Git) -> list[dict[str, str]]:
    entries = []
    for block in git.run("worktree", "list", "--porcelain").stdout.split("\n\n"):
        fields = dict(
            (line.split(" ", 1) + [""])[:2] for line in block.splitlines() if line
        )
        if fields:
            entries.append(fields)
    return entries


@pytest.mark.slow
def test_sigkill_mid_replay_is_cleaned_up_by_the_next_rebase(
    fork: Path, upstream: Path, tmp_path: Path
) -> None:
    git = as_user(fork)
    own_commit(fork, "mine.txt", "mine\n", "My work")
    # Your own worktrees, one of them prunable: the cleanup leaves both.
    git.run("worktree", "add", "--quiet", "--detach", str(tmp_path / "mine"), "HEAD")
    git.run("worktree", "add", "--quiet", "--detach", str(tmp_path / "gone"), "HEAD")
    shutil.rmtree(tmp_path / "gone")
    yours = worktrees(git)
    # A hook git runs as it replays a commit (post-commit for a cherry-pick,
    # applypatch-msg for git am) says so and waits: the run is killed while
    # it is mid-replay.
    started, release = tmp_path / "started", tmp_path / "release"
    for name in ("post-commit", "applypatch-msg"):
        hook = fork / ".git" / "hooks" / name
        hook.write_text(
            "#!/bin/sh\n"
            f"touch '{started}'\n"
            "n=0\n"
            f"while [ ! -e '{release}' ] && [ $n -lt 2400 ]; do\n"
            "  sleep 0.05; n=$((n + 1))\n"
            "done\n"
        )
        hook.chmod(0o755)
    rebase = ["rebase", "--onto", "v0.28.0", "--upstream", str(upstream), str(fork)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_patchkit", *rebase, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        start_new_session=True,
    )
    wait_for(started, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole job: patchkit, git, the hook
    proc.wait(timeout=60)
    release.touch()
    [left] = [w for w in worktrees(git) if w not in yours]  # as the kill left it
    scratch = Path(left["worktree"])
    assert scratch.is_dir()
    head = git.head()

    code, result = patchkit_json(*rebase)

    assert code == 0, result
    # Gone, and only it: your worktrees (the prunable one too) are as they were.
    assert worktrees(git) == [
        {**w, "HEAD": git.head()} if w["worktree"] == str(fork) else w for w in yours
    ]
    assert not scratch.exists()
    assert not (fork / ".git" / "vllm-patchkit" / "rebase").exists()
    assert any(
        "removed the temporary worktree of an interrupted rebase" in n
        and scratch.name in n
        for n in result["notes"]
    ), result["notes"]
    # Recognisably the tool's: under its folder of the git directory, locked
    # with a reason that names it.
    assert scratch.parent == fork / ".git" / "vllm-patchkit" / "rebase"
    assert "vllm-patchkit rebase" in left.get("locked", "")
    # The patches 0.28.0 carries and your commit.
    count = git.out("rev-list", "--count", f"{result['onto']}..HEAD")
    assert count == str(len(carried("0.28.0")) + 1)
    assert git.head() != head and git.is_clean()


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
{sink}  # the static-sink fix
{sink_test}
{opt_out}
\t# a tab-indented comment at the end
"""


def test_refresh_keeps_every_comment_where_it_was(
    fork: Path, upstream: Path, tmp_path: Path
) -> None:
    """Ordinary, indented and trailing comments and blank lines survive; the
    line of a patch that leaves goes with its comment. A patch leaves only
    when its whole range is upstream: here 0001 with its Affects: made
    ``0.29.0..``, the release that has it upstream, on 0.29.0."""
    fix = FIX
    names = {
        "fix": FIX,
        "test": TEST,
        "sink": SINK,
        "sink_test": SINK_TEST,
        "opt_out": OPT_OUT,
    }
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    (patches / "series").write_text(COMMENTED_SERIES.format(**names))
    text = (patches / fix).read_text()
    assert text.count("\nAffects: 0.11.1..0.28.0\n") == 1
    (patches / fix).write_text(
        text.replace("Affects: 0.11.1..0.28.0", "Affects: 0.29.0..")
    )
    code, _ = patchkit_json(
        "rebase", "--onto", "v0.29.0", "--upstream", str(upstream), str(fork)
    )
    assert code == 0

    code, result = patchkit_json("--patches", str(patches), "refresh", str(fork))

    assert code == 0, result
    assert result["removed"] == [fix]
    expected = COMMENTED_SERIES.format(**names).replace(f"{fix}   # the fix\n", "")
    assert (patches / "series").read_text() == expected
    # Nothing to drop: the file stays byte for byte.
    again = patchkit("--patches", str(patches), "refresh", str(fork))
    assert again.returncode == 0, again.stderr
    assert (patches / "series").read_text() == expected


# --- When upstream carries 0002 (issue 12, case 12) ------------------------

DECOY_TEST = """\
from vllm.v1.attention.backends.rocm_attn import RocmAttentionMetadataBuilder


def test_offsets_before_capture(metadata, builder: RocmAttentionMetadataBuilder):
    assert metadata.query_start_loc_cpu.tolist() == [0, 1, 2]
    builder.build_for_cudagraph_capture(metadata)
"""


def upstream_adds_a_test(upstream: Path, work: Path, name: str, text: str) -> None:
    """A clone of upstream at v0.29.0 whose HEAD adds one attention test."""
    Git(work.parent).run(
        "clone", "--quiet", "--branch", "v0.29.0", str(upstream), str(work)
    )
    git = as_user(work)
    git.run("switch", "--quiet", "-c", "next")
    (work / "tests/v1/attention" / name).write_text(text)
    git.run("add", "--", f"tests/v1/attention/{name}")
    git.run("commit", "--quiet", "-m", "[CI] Add an attention test")


@pytest.mark.slow
def test_a_test_that_only_names_the_offsets_does_not_drop_0002(
    fork: Path, upstream: Path, tmp_path: Path
) -> None:
    """Upstream's new test asserts before the capture: 0002 is still needed."""
    work = tmp_path / "upstream-work"
    upstream_adds_a_test(upstream, work, "test_rocm_offsets.py", DECOY_TEST)

    code, result = patchkit_json(
        "rebase", "--onto", "HEAD", "--upstream", str(work), str(fork)
    )

    assert code == 0, result
    assert [p["status"] for p in result["patches"]] == applied_statuses("0.29.0")
    assert result["patches"][1]["status"] == "applied"  # 0002, by hand
    assert (fork / TEST_FILE).is_file()


@pytest.mark.slow
def test_an_edited_upstream_copy_of_0002s_test_drops_it(
    fork: Path, upstream: Path, tmp_path: Path
) -> None:
    """Upstream took 0002's test under another name, with its tests renamed."""
    work = tmp_path / "upstream-work"
    text = (fork / TEST_FILE).read_text()
    edited = text.replace("def test_capture_zeroes", "def test_rocm_capture_zeroes")
    edited = edited.replace("def test_next_builder", "def test_rocm_next_builder")
    assert edited != text
    upstream_adds_a_test(upstream, work, "test_rocm_attn_capture.py", edited)

    code, result = patchkit_json(
        "rebase", "--onto", "HEAD", "--upstream", str(work), str(fork)
    )

    assert code == 0, result
    # 0004 and 0005, which upstream does not carry, stay on the branch.
    states = {p["name"]: p["status"] for p in result["patches"]}
    assert list(states.values()) == [
        "upstreamed" if name == TEST else status
        for name, status in zip(states, applied_statuses("0.29.0"), strict=True)
    ]
    assert (states[TEST], states[SINK]) == ("upstreamed", "applied")
    assert not (fork / TEST_FILE).exists()
    kept = [p for p in carried("0.29.0") if p.name != TEST]
    assert Git(fork).out("rev-parse", f"HEAD~{len(kept)}") == result["onto"]
