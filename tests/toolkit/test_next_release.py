"""A release nobody has seen yet: the series judged by its code, no file edited.

Built from vLLM 0.34.0, the newest release the project knows, as the next
release would reach a user: one more upstream commit, tagged ``v0.35.0``
(newer than every ``Affects:`` range and every release the records name),
checked out as users have it (no ``_version.py``, a commit of their own on
top). Two such releases: one where upstream still has StaticSink's bug (its
commit touches something else), one where upstream's commit is the fix
(0004's change to ``static_sink_attention.py``, committed as upstream would).
apply, check and doctor must give the right answer on both by reading the
code, whatever the ranges say.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json, user_commit
from vllm_overlay.fixes import by_name
from vllm_overlay.fixes.static_sink_seq_lens import STATIC_SINK
from vllm_patchkit.git.carry import NEAR_TAG
from vllm_patchkit.git.series import load_series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import clone_release

pytestmark = pytest.mark.release_trees

KNOWN = "0.34.0"
"""The newest release the project has seen; the next one is built on it."""
NEXT = "0.35.0"
PATCHES = Path(__file__).resolve().parents[2] / "patches"
SINK_FIX = by_name("static-sink-keeps-shared-seq-lens")
# 0006 is for the V1 runner only
FIX_PATCH, TEST_PATCH = (p.name for p in load_series().of_fix(SINK_FIX)[:2])
UPSTREAM = {
    "GIT_AUTHOR_NAME": "vLLM",
    "GIT_AUTHOR_EMAIL": "upstream@example.invalid",
    "GIT_COMMITTER_NAME": "vLLM",
    "GIT_COMMITTER_EMAIL": "upstream@example.invalid",
}

Tree = Callable[[str, Path, Callable[[Path], None]], Path]


def next_release(pooled_tree: Tree, dest: Path, *, fixed: bool) -> Path:
    """``v0.35.0``: 0.34.0 plus one upstream commit (the StaticSink fix, or
    an unrelated change), tagged, then a user's commit on top."""

    def build(at: Path) -> None:
        git = clone_release(KNOWN, at, checkout=True)
        if fixed:
            # Upstream's fix: 0004's change to the builder, no test, no
            # trailers, in a commit of its own shape (a line of its own
            # beside it: another patch-id, so not "applied" by git's word).
            git.run("apply", "--include", str(STATIC_SINK), str(PATCHES / FIX_PATCH))
            module = at / STATIC_SINK
            module.write_text(module.read_text() + "# Fixed upstream.\n")
            git.run("add", str(STATIC_SINK))
            message = "[Bugfix] Keep the shared seq_lens in StaticSinkAttentionBuilder"
        else:
            notes = at / "RELEASE_NOTES.md"
            notes.write_text(f"vLLM {NEXT}\n")
            git.run("add", notes.name)
            message = f"Release notes for {NEXT}"
        Git(at, tuple(UPSTREAM.items())).run(
            "commit", "--quiet", "--no-verify", "-m", message
        )
        git.run("tag", f"v{NEXT}")
        user_commit(git)
        assert not (at / "vllm" / "_version.py").exists()

    shape = "fixed" if fixed else "buggy"
    return pooled_tree(f"{NEXT}-{shape}", dest / f"vllm-{NEXT}-{shape}", build)


def statuses(tree: Path) -> dict[str, dict[str, str]]:
    proc = patchkit("check", str(tree), "--json")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return {p["name"][:4]: p for p in json.loads(proc.stdout)["patches"]}


def test_still_buggy_next_release_carries_the_fix_by_its_code(
    pooled_tree: Tree, tmp_path: Path
) -> None:
    """Upstream has not fixed StaticSink: 0004 and its test are carried (the
    open range and the code agree), #51585's test too; #51585's fix and
    #53821's are upstream's; apply puts the fix in."""
    tree = next_release(pooled_tree, tmp_path, fixed=False)

    code, doctor = patchkit_json("doctor", str(tree))
    assert code == 1, doctor
    sink = next(f for f in doctor["fixes"] if f["fix"] == SINK_FIX.pr)
    assert sink["affected"] is True, sink

    found = statuses(tree)
    assert {n: p["status"] for n, p in found.items()} == {
        "0001": "upstreamed",
        "0002": "applies",
        "0003": "upstreamed",
        "0004": "applies",
        "0005": "applies",
        "0006": "not-carried",  # no V1 runner reads the shortcut: by its code
    }, found
    assert "skipped" not in found["0004"]["detail"]
    assert "no V1 model runner reads" in found["0006"]["detail"]

    proc = patchkit("apply", str(tree))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("applied: applied 3 patch(es)"), proc.stdout
    assert f"  {FIX_PATCH}: applied (invariant holds)" in proc.stdout.splitlines()
    subjects = Git(tree).out("log", "--format=%s", "-3").splitlines()
    assert subjects[1] == (
        "[Bugfix] Keep the shared seq_lens in StaticSinkAttentionBuilder"
    ), subjects

    code, after = patchkit_json("doctor", str(tree))
    assert code == 0, after

    # The fix's PR holds the fix, then its test (checks run elsewhere).
    git = Git(tree)
    git.run("config", "user.name", "Fork Maintainer")
    git.run("config", "user.email", "fork@example.invalid")
    code, pr = patchkit_json(
        "pr", "--dry-run", "--signoff", "--no-test", "--no-precommit",
        "--fix", SINK_FIX.name, str(tree),
    )  # fmt: skip
    assert code == 0, pr
    assert [c["subject"] for c in pr["commits"]] == [
        "[Bugfix] Keep the shared seq_lens in StaticSinkAttentionBuilder",
        "[Bugfix] Test that static sink attention keeps the shared seq_lens",
    ], pr


def test_next_release_whose_upstream_fixed_it_needs_no_fix(
    pooled_tree: Tree, tmp_path: Path
) -> None:
    """Upstream's commit is the fix: 0004 is upstreamed there though its
    range is open (the code decides), doctor says no fix is needed, and
    apply carries only the regression tests."""
    tree = next_release(pooled_tree, tmp_path, fixed=True)

    code, doctor = patchkit_json("doctor", str(tree))
    assert code == 0, doctor
    sink = next(f for f in doctor["fixes"] if f["fix"] == SINK_FIX.pr)
    assert sink["affected"] is False, sink

    found = statuses(tree)
    assert found["0004"]["status"] == "upstreamed", found["0004"]
    assert found["0005"]["status"] == "applies", found["0005"]

    proc = patchkit("apply", str(tree))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("applied: applied 2 patch(es)"), proc.stdout
    changed = Git(tree).out("diff", "--name-only", "HEAD~2", "HEAD").splitlines()
    assert str(STATIC_SINK) not in changed, changed


def test_the_answer_does_not_flip_far_past_the_tag(
    pooled_tree: Tree, tmp_path: Path
) -> None:
    """Past :data:`NEAR_TAG` commits the tag can no longer vouch for the
    code; where the code can be read that changes nothing: every patch's
    state is the same as just past the tag."""
    tree = next_release(pooled_tree, tmp_path, fixed=False)
    near = {name: p["status"] for name, p in statuses(tree).items()}
    git = Git(tree)
    head = git.out("rev-parse", "HEAD")
    for number in range(NEAR_TAG + 1):
        head = git.out(
            "commit-tree", "HEAD^{tree}", "-p", head, "-m", f"fork commit {number}"
        )
    git.run("reset", "--quiet", "--hard", head)

    far = statuses(tree)
    assert {name: p["status"] for name, p in far.items()} == near
    assert "skipped" not in far["0004"]["detail"], far["0004"]


def test_a_closed_range_does_not_beat_buggy_code(
    pooled_tree: Tree, tmp_path: Path
) -> None:
    """0004 with the range the series had before 0.34.0 came out
    (``Affects: 0.14.0..0.33.0``) is still carried on the next release whose
    code is buggy, and the output says the code decided against the version."""
    tree = next_release(pooled_tree, tmp_path, fixed=False)
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES, patches)
    fix_file = patches / FIX_PATCH
    text = fix_file.read_text()
    assert text.count("\nAffects: 0.14.0..\n") == 1
    fix_file.write_text(
        text.replace("\nAffects: 0.14.0..\n", "\nAffects: 0.14.0..0.33.0\n")
    )

    proc = patchkit("--patches", str(patches), "check", str(tree), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = next(
        p for p in json.loads(proc.stdout)["patches"] if p["name"] == FIX_PATCH
    )
    assert report["status"] == "applies", report
    assert "the code decides, not the version" in report["carry"], report
    assert "Affects: 0.14.0..0.33.0" in report["carry"], report
