"""The replay of a series is git's own, step by step, or it says None.

Patches are made by ``git format-patch`` in a scratch repository (the real
series' shape: two patches on one file, a new file, a file without a final
newline, a hunk moved by lines added above it) and applied there by ``git
apply --cached`` one at a time; each step of the replay must be git's
content. What the replay does not read (a rename, a mode change, a file the
work tree changed) gives None.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from vllm_patchkit.git.code_readings import blob_id
from vllm_patchkit.git.replay import apply_hunks, file_changes, replay
from vllm_patchkit.git.series import Patch, parse_patch

LINES = "".join(f"line {n}\n" for n in range(1, 41))


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env
    ).stdout


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Test")
    git(repo, "config", "user.email", "test@example.invalid")
    (repo / "pkg").mkdir()
    (repo / "pkg/a.py").write_text(LINES)
    (repo / "pkg/tail.py").write_text("first\nlast without newline")
    commit(repo, "base")
    git(repo, "tag", "base")
    return repo


def make_series(repo: Path, edits: list[dict[str, str | None]]) -> list[Patch]:
    """One commit per edit (path -> new content; None: deleted), made into
    patches by git format-patch, and the work tree back at the base."""
    for n, edit in enumerate(edits):
        for name, text in edit.items():
            if text is None:
                (repo / name).unlink()
            else:
                (repo / name).parent.mkdir(parents=True, exist_ok=True)
                (repo / name).write_text(text)
        commit(repo, f"edit {n}")
    out = repo.parent / "patches"
    names = git(repo, "format-patch", "-o", str(out), "base").split()
    git(repo, "checkout", "-q", "base")
    return [parse_patch(Path(name)) for name in names]


def head_blobs(repo: Path) -> dict[str, str]:
    listing = git(repo, "ls-tree", "-r", "HEAD")
    return {
        line.split("\t")[1]: line.split()[2] for line in listing.splitlines() if line
    }


def git_steps(repo: Path, patches: list[Patch]) -> list[dict[str, bytes | None]]:
    """Each patch's files after it, by git apply --cached on a scratch index."""
    env = {"GIT_INDEX_FILE": str(repo.parent / "index"), "PATH": "/usr/bin:/bin"}
    git(repo, "read-tree", "HEAD", env=env)
    steps = []
    for patch in patches:
        git(repo, "apply", "--cached", str(patch.path), env=env)
        step: dict[str, bytes | None] = {}
        for name in patch.files:
            shown = subprocess.run(
                ["git", "show", f":{name}"], cwd=repo, capture_output=True, env=env
            )
            step[name] = shown.stdout if shown.returncode == 0 else None
        steps.append(step)
    return steps


def test_each_step_is_git_s_own(repo: Path) -> None:
    patches = make_series(
        repo,
        [
            {"pkg/a.py": LINES.replace("line 20\n", "line twenty\n")},
            {"pkg/new.py": "fresh\n", "pkg/tail.py": "first\nlast, now ended\n"},
            {
                "pkg/a.py": "".join(f"new {n}\n" for n in range(5))
                + LINES.replace("line 20\n", "line twenty\n").replace(
                    "line 30\n", "line thirty\n"
                )
            },
            {"pkg/new.py": None},
        ],
    )
    replayed = replay(patches, head_blobs(repo), repo)
    assert replayed == git_steps(repo, patches)
    assert replayed is not None and replayed[3] == {"pkg/new.py": None}
    assert replayed[1]["pkg/tail.py"] == b"first\nlast, now ended\n"


def test_a_hunk_moved_by_lines_above_it_is_found_where_git_finds_it(
    repo: Path,
) -> None:
    """A patch made on a file that has since gained lines at its top applies
    at an offset: the replay puts it where git does."""
    [patch] = make_series(repo, [{"pkg/a.py": LINES.replace("line 25\n", "x\n")}])
    [change] = file_changes(patch.path.read_bytes()) or []
    grown = "top\n" * 7 + LINES
    after = apply_hunks(grown.encode(), change.hunks)
    assert after == ("top\n" * 7 + LINES.replace("line 25\n", "x\n")).encode()
    assert apply_hunks(b"unrelated\n", change.hunks) is None


def test_what_it_does_not_read_is_git_s(repo: Path) -> None:
    patches = make_series(repo, [{"pkg/a.py": LINES + "one more\n"}])
    (repo / "pkg/a.py").write_text(LINES + "a user's edit\n")  # dirty
    assert replay(patches, head_blobs(repo), repo) is None
    (repo / "pkg/a.py").unlink()
    os.mkfifo(repo / "pkg/a.py")  # read, it would wait for a writer forever
    assert replay(patches, head_blobs(repo), repo) is None
    (repo / "pkg/a.py").unlink()
    git(repo, "checkout", "-q", "--", "pkg/a.py")
    assert blob_id((repo / "pkg/a.py").read_bytes()) == head_blobs(repo)["pkg/a.py"]
    assert replay(patches, head_blobs(repo), repo) is not None

    git(repo, "mv", "pkg/tail.py", "pkg/moved.py")
    commit(repo, "rename")
    git(repo, "tag", "-f", "renamed")
    git(repo, "checkout", "-q", "base")
    moved = git(repo, "format-patch", "-M", "-q", "--stdout", "base..renamed")
    assert file_changes(moved.encode()) is None
    (repo / "pkg/a.py").chmod(0o755)
    commit(repo, "mode")
    mode = git(repo, "format-patch", "-q", "--stdout", "-1")
    assert file_changes(mode.encode()) is None
