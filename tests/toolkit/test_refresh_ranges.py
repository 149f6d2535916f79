"""refresh and rebase keep every patch an older release needs; ranges follow the code.

On vLLM 0.34.0 (issue 48) the series carries 0002, 0004 and 0005; 0001 and
0003 have no commit there (upstream took both in 0.29.0), yet 0.11.1-0.28.0
and 0.27.0-0.28.0 still need them. One 0.34.0 checkout per process
(``release_clone``, put back as new after each test): the series goes on
with ``git am -3`` as ``apply`` does; a release nobody has seen yet is
0.34.0 plus a commit tagged ``v0.35.0``, made in the same clone: upstream
taking 0004's change as a plain commit of its own.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import as_user, patchkit_json
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PATCHES_DIR

pytestmark = pytest.mark.release_trees

SERIES_NUMBERS = ("0001", "0002", "0003", "0004", "0005", "0006")
FIX, TEST, AITER, SINK, SINK_TEST, OPT_OUT = (
    next(p.name for p in PATCHES_DIR.glob(f"{n}-*.patch")) for n in SERIES_NUMBERS
)
ON_0_34 = (TEST, SINK, SINK_TEST)
"""What 0.34.0's code carries, by hand (docs DESIGN §8: StaticSink is still
buggy there; #51585 and #53821 are upstream since 0.29.0)."""


UPSTREAM = {
    f"GIT_{who}_{what}": value
    for who in ("AUTHOR", "COMMITTER")
    for what, value in (("NAME", "Upstream"), ("EMAIL", "upstream@example.invalid"))
}


def series_copy(tmp_path: Path, sink_affects: str) -> Path:
    """The real series in a directory of the test's own, 0004's ``Affects:``
    set to ``sink_affects`` (what the maintainers last wrote, whatever the
    committed trailer says today)."""
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    sink = patches / SINK
    lines = sink.read_bytes().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith(b"Affects: ")]
    assert len(at) == 1, at
    lines[at[0]] = f"Affects: {sink_affects}\n".encode()
    sink.write_bytes(b"".join(lines))
    return patches


def carry(tree: Path, patches: Path, names: tuple[str, ...], base: str) -> Git:
    """A user's branch at ``base`` with ``names`` applied as ``apply`` does
    (``git am -3``), the base recorded where rebase and refresh read it."""
    git = as_user(tree)
    git.run("switch", "--quiet", "-c", "fixes", base)
    for name in names:
        git.run("am", "-3", "--keep-non-patch", "--keep-cr", str(patches / name))
    git.run("update-ref", "refs/vllm-patchkit/base", base)
    return git


def upstream_fixes_static_sink(tree: Path, patches: Path) -> None:
    """``v0.35.0``: 0.34.0 plus 0004's change, committed as upstream would
    (its own message, no trailers), on a branch of its own."""
    git = Git(tree, tuple(UPSTREAM.items()))
    git.run("switch", "--quiet", "-c", "upstream-main", "v0.34.0")
    git.run("apply", "--index", str(patches / SINK))
    git.run(
        "commit", "--quiet", "-m", "[Bugfix] StaticSink: keep the runner's seq_lens"
    )
    git.run("tag", "v0.35.0")


def files(patches: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in patches.iterdir()}


def changed_lines(before: bytes, after: bytes) -> tuple[list[bytes], list[bytes]]:
    """The lines only ``before`` has and those only ``after`` has."""
    old, new = before.splitlines(), after.splitlines()
    return [line for line in old if line not in new], [
        line for line in new if line not in old
    ]


def test_refresh_on_0_34_keeps_the_patches_older_releases_need(
    release_clone: Callable[..., Path], tmp_path: Path
) -> None:
    """0001 and 0003 have no commit on 0.34.0: their files stay byte for
    byte, and every line of ``series`` where it was."""
    tree = release_clone("0.34.0", shape="tag")
    patches = series_copy(tmp_path, "0.14.0..")
    before = files(patches)
    carry(tree, patches, ON_0_34, "v0.34.0")

    code, result = patchkit_json("--patches", str(patches), "refresh", str(tree))

    assert code == 0, result
    assert result["removed"] == []
    # 0006 too: 0.34.0 has no V1 runner, the releases before it do.
    assert result["kept"] == [FIX, AITER, OPT_OUT]
    assert "0.11.1..0.28.0" in result["why_kept"][FIX]
    assert "0.14.0..0.33.0" in result["why_kept"][OPT_OUT]
    assert [Path(p).name for p in result["written"]] == list(ON_0_34)
    assert files(patches) == before  # nothing changed: series, order, bytes
    assert result["ranges"]["release"] == "0.34.0"
    assert not [j for j in result["ranges"]["patches"] if j["changed"]]


def test_refresh_opens_the_range_of_a_fix_still_buggy_on_a_newer_release(
    release_clone: Callable[..., Path], tmp_path: Path
) -> None:
    """0004 written when 0.33.0 was the newest (``Affects: 0.14.0..0.33.0``);
    0.34.0's code is still buggy, and no release fixes it: the range opens,
    and only that line of the file changes."""
    tree = release_clone("0.34.0", shape="tag")
    patches = series_copy(tmp_path, "0.14.0..0.33.0")
    before = files(patches)
    carry(tree, patches, ON_0_34, "v0.34.0")

    code, result = patchkit_json("--patches", str(patches), "refresh", str(tree))

    assert code == 0, result
    (judged,) = [j for j in result["ranges"]["patches"] if j["changed"]]
    assert (judged["name"], judged["shape"]) == (SINK, "buggy")
    assert (judged["affects"], judged["new_affects"]) == ("0.14.0..0.33.0", "0.14.0..")
    assert judged["applied_upstream"] is None
    after = files(patches)
    assert changed_lines(before[SINK], after[SINK]) == (
        [b"Affects: 0.14.0..0.33.0"],
        [b"Affects: 0.14.0.."],
    )
    assert {n: b for n, b in after.items() if n != SINK} == {
        n: b for n, b in before.items() if n != SINK
    }
    again, result = patchkit_json("--patches", str(patches), "refresh", str(tree))
    assert again == 0 and result["changed"] == []
    assert files(patches) == after


def test_rebase_onto_a_release_that_fixed_it_closes_the_range(
    release_clone: Callable[..., Path], tmp_path: Path
) -> None:
    """The nightly job's steps on a release nobody has seen yet: upstream
    took 0004's change in ``v0.35.0``. rebase leaves 0004 out of the branch
    and says the series keeps it; refresh then keeps its file and closes
    its range at 0.34.0 with ``Applied-Upstream: 0.35.0``, nothing else in
    it touched; 0001 and 0003 stay as they were."""
    tree = release_clone("0.34.0", shape="tag")
    patches = series_copy(tmp_path, "0.14.0..")
    before = files(patches)
    upstream_fixes_static_sink(tree, patches)
    git = carry(tree, patches, ON_0_34, "v0.34.0")

    code, rebased = patchkit_json(
        "--patches", str(patches), "rebase", "--onto", "v0.35.0", str(tree)
    )

    assert code == 0, rebased
    states = {p["name"]: p["status"] for p in rebased["patches"]}
    assert states == {
        FIX: "upstreamed",
        TEST: "applied",
        AITER: "upstreamed",
        SINK: "upstreamed",
        SINK_TEST: "applied",
        OPT_OUT: "not-carried",  # no V1 runner on 0.35.0
    }
    assert rebased["kept"] == [FIX, AITER, SINK]  # upstream's, kept
    sink = next(p for p in rebased["patches"] if p["name"] == SINK)
    assert "kept in the series" in sink["detail"]
    (judged,) = [j for j in rebased["ranges"]["patches"] if j["changed"]]
    assert (judged["name"], judged["new_affects"]) == (SINK, "0.14.0..0.34.0")
    assert judged["applied_upstream"] == "0.35.0"
    assert git.out("rev-list", "--count", "v0.35.0..HEAD") == "2"

    code, result = patchkit_json("--patches", str(patches), "refresh", str(tree))

    assert code == 0, result
    assert result["removed"] == []
    assert result["kept"] == [FIX, AITER, SINK, OPT_OUT]
    assert result["ranges"]["patches"] == rebased["ranges"]["patches"]
    after = files(patches)
    assert changed_lines(before[SINK], after[SINK]) == (
        [b"Affects: 0.14.0.."],
        [b"Applied-Upstream: 0.35.0", b"Affects: 0.14.0..0.34.0"],
    )
    message = after[SINK].split(b"\n---\n")[0].splitlines()
    at = message.index(b"Applied-Upstream: 0.35.0")  # right before Affects:
    assert message[at - 1 : at + 2] == [
        b"Forwarded: no",
        b"Applied-Upstream: 0.35.0",
        b"Affects: 0.14.0..0.34.0",
    ]
    assert {n: b for n, b in after.items() if n != SINK} == {
        n: b for n, b in before.items() if n != SINK
    }
    # Recorded: the next run on the same tree changes nothing.
    again, result = patchkit_json("--patches", str(patches), "refresh", str(tree))
    assert again == 0 and result["changed"] == []
    assert not [j for j in result["ranges"]["patches"] if j["changed"]]
