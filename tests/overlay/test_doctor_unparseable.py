"""A rocm_attn.py that does not parse is never judged fixed (issue #12, item 9).

Real release trees with a real ``git merge`` stopped on a conflict in
``rocm_attn.py``: the toolkit's doctor says "cannot judge" for each fix that
file decides (exit 3, or 1 where another fix is needed), no patch is called
upstreamed, and the overlay would leave the file alone.
Before, a conflict outside the builder class read as "not affected (fixed)"
with exit 0, and one inside the method as "not-for".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json
from tests.toolkit.series_expectations import SERIES_FIXES, doctor_exit
from vllm_overlay.code import Shape
from vllm_overlay.fixes import FIXES, RECORD, assess_tree, by_name
from vllm_overlay.fixes.base import Fix
from vllm_overlay.fixes.rocm_capture_host_offsets import assess_file
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    ROCM_ATTN,
    inspect_capture_tree,
)
from vllm_overlay.state import Action
from vllm_patchkit.git.series import load_series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import clone_release

pytestmark = pytest.mark.release_trees

CAPTURE = "rocm-capture-keeps-host-offsets"
IMPORT_LINE = "from typing import ClassVar\n"
HOST_LINE = "        common_attn_metadata.query_start_loc_cpu.zero_()\n"


def edit(tree: Path, old: str, new: str) -> None:
    file = tree / ROCM_ATTN
    text = file.read_text()
    assert text.count(old) == 1, old
    file.write_text(text.replace(old, new))


def conflicting_merge(
    version: str,
    dest: Path,
    ours: Callable[[Path], None],
    theirs: Callable[[Path], None],
) -> Path:
    """A clone of the release whose ``git merge theirs`` stopped on rocm_attn.py."""
    git: Git = clone_release(version, dest)
    git.run("checkout", "--quiet", "-b", "theirs")
    theirs(dest)
    git.run("commit", "--quiet", "--no-verify", "-am", "theirs")
    git.run("checkout", "--quiet", "main")
    ours(dest)
    git.run("commit", "--quiet", "--no-verify", "-am", "ours")
    merge = git.run("merge", "theirs", check=False)
    assert merge.returncode != 0
    assert "<<<<<<<" in (dest / ROCM_ATTN).read_text()
    return dest


CASES = {
    # 0.29.0 carries the fix; both sides changed an import line.
    "outside-the-class": (
        "0.29.0",
        lambda t: edit(t, IMPORT_LINE, "from typing import ClassVar, Final\n"),
        lambda t: edit(t, IMPORT_LINE, "from typing import Any, ClassVar\n"),
    ),
    # 0.28.0: one side drops the host zeroing (the fix), the other edits it.
    "inside-the-method": (
        "0.28.0",
        lambda t: edit(
            t, HOST_LINE, HOST_LINE.replace("zero_()", "fill_(0)  # vendor")
        ),
        lambda t: edit(t, HOST_LINE, ""),
    ),
    # 0.12.0, the same conflict: no fix the file does not decide is needed
    # there (StaticSink is from 0.14.0), so the doctor cannot judge (exit 3).
    "inside-the-method-0.12": (
        "0.12.0",
        lambda t: edit(
            t, HOST_LINE, HOST_LINE.replace("zero_()", "fill_(0)  # vendor")
        ),
        lambda t: edit(t, HOST_LINE, ""),
    ),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def merged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    version, ours, theirs = CASES[request.param]
    dest = tmp_path_factory.mktemp(request.param) / "tree"
    return version, conflicting_merge(version, dest, ours, theirs)


def conflict_line(tree: Path) -> int:
    lines = (tree / ROCM_ATTN).read_text().splitlines()
    return lines.index("<<<<<<< HEAD") + 1


def test_the_classifier_says_unparseable_and_where(merged) -> None:  # type: ignore[no-untyped-def]
    _, tree = merged
    code = inspect_capture_tree(tree)
    line = conflict_line(tree)
    assert code.shape is Shape.UNPARSEABLE and not code.judged
    assert code.line == line
    assert code.detail.startswith(f"unparseable: SyntaxError at line {line}")


def reads_rocm_attn(fix: Fix) -> bool:
    """Whether the fix's code is read from rocm_attn.py, or decided by a fix
    whose code is."""
    return fix.record.source_file == str(ROCM_ATTN) or any(
        reads_rocm_attn(by_name(need)) for need in fix.needs
    )


def test_doctor_never_calls_it_fixed(merged) -> None:  # type: ignore[no-untyped-def]
    version, tree = merged
    # Each fix that reads the unparseable file, or needs one that does
    # (0001-0003's), cannot be judged; no patch of theirs is upstreamed.
    unread = [fix for fix in FIXES if reads_rocm_attn(fix)]
    judged_by_it = {p.name for fix in unread for p in load_series().of_fix(fix)}
    assert {name[:4] for name in judged_by_it} >= {"0001", "0002", "0003"}
    code, report = patchkit_json("doctor", str(tree))
    # Exit 3 unless a fix the file does not decide is needed on the release
    # (StaticSink on 0.28.0 and 0.29.0): then that fix's "not fixed" (1).
    expected = doctor_exit(version, [fix.pr for fix in unread])
    capture = SERIES_FIXES[CAPTURE]
    assert code == expected, report
    assert report["vllm_version"] == version
    assert report["judged"] is False and report["protected"] is False
    assert report["affected"] is (True if expected == 1 else None)
    reason = f"unparseable: SyntaxError at line {conflict_line(tree)}"
    by_pr = {entry["fix"]: entry for entry in report["fixes"]}
    # The fix reading the file cannot be judged; one that needs it cannot
    # either, unless its own code is upstream's fix (#53821 on 0.29.0).
    for fix in unread:
        entry = by_pr[fix.pr]
        if entry["shape"] == "fixed" and fix.pr != capture:
            assert entry["affected"] is False, entry
            continue
        assert entry["affected"] is None, entry
        assert entry["shape"] == "unparseable", entry
        assert "left as it is" in entry["overlay_decision"], entry
    assert by_pr[capture]["detail"].startswith(reason)
    if expected == 3:
        assert report["fix"] == capture and report["shape"] == "unparseable"
        assert report["reason"].startswith(reason)
    else:  # the needed fix decides, with its own code
        assert report["fix"] not in [fix.pr for fix in unread]
        assert report["shape"] == "buggy", report
    upstreamed = [
        p["name"]
        for p in report["patches"]
        if p["name"] in judged_by_it and p["status"] == "upstreamed"
    ]
    assert upstreamed == []

    assert report["overlay_would_activate"] is False
    assert [t["name"] for t in report["overlay_record"]] == [t.name for t in RECORD]
    text = patchkit("doctor", str(tree))
    assert text.returncode == expected
    assert f"{capture}: cannot judge (unparseable)" in text.stdout
    assert f"{capture}: no" not in text.stdout


def test_the_overlay_would_not_patch_it(merged) -> None:  # type: ignore[no-untyped-def]
    version, tree = merged
    state = assess_file(tree / ROCM_ATTN, version)
    assert state.action is Action.UNRECOGNISED and state.plan is None
    assert f"{tree / ROCM_ATTN}:{conflict_line(tree)}: unparseable" in state.reason
    # The AITER fix extends that method: never installed on top of it. 0.29.0
    # needs none (the backend's own builder does not call the generic one).
    states = {state.name: state for state in assess_tree(tree, version)}
    aiter = states["rocm-aiter-unified-capture-keeps-offsets"]
    if version == "0.29.0":
        assert aiter.action is Action.NOT_NEEDED
    else:
        assert aiter.action is Action.UNRECOGNISED and aiter.plan is None
        assert "not a known shape (unparseable)" in aiter.reason
