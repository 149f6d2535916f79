"""Helpers for driving ``vllm-patchkit`` as a user would: a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from vllm_patchkit.gitcmd import Git


def patchkit(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_patchkit", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        timeout=900,
    )


def patchkit_json(*args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    proc = patchkit(*args, "--json", cwd=cwd)
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def snapshot(root: Path) -> dict[str, Any]:
    """HEAD, branch, index, work tree (tracked and untracked) and refs."""
    git = Git(root)
    files = {}
    for path in sorted(root.rglob("*")):
        if ".git" in path.relative_to(root).parts or not path.is_file():
            continue
        files[str(path.relative_to(root))] = path.read_bytes()
    return {
        "head": git.head(),
        "branch": git.branch(),
        "status": git.status_porcelain(),
        "index": git.run("ls-files", "--stage").stdout,
        "refs": git.run("for-each-ref", "--format=%(refname) %(objectname)").stdout,
        "files": files,
    }


USER = {
    "GIT_AUTHOR_NAME": "Fork Maintainer",
    "GIT_AUTHOR_EMAIL": "fork@example.invalid",
    "GIT_COMMITTER_NAME": "Fork Maintainer",
    "GIT_COMMITTER_EMAIL": "fork@example.invalid",
}


def as_user(root: Path) -> Git:
    return Git(root, tuple(USER.items()))


ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"


def upstream_rewrites_the_zeroing(upstream: Path, work: Path, branch: str) -> Git:
    """A clone of ``upstream`` at v0.28.0 whose ``branch`` rewrites the two
    zeroing lines another way (a loop), so 0001 conflicts on top of it."""
    Git(work.parent).run(
        "clone", "--quiet", "--branch", "v0.28.0", str(upstream), str(work)
    )
    git = as_user(work)
    git.run("switch", "--quiet", "-C", branch)
    source = work / ROCM_ATTN
    text = source.read_text()
    rewritten = text.replace(
        "        common_attn_metadata.query_start_loc.zero_()\n"
        "        common_attn_metadata.query_start_loc_cpu.zero_()\n",
        "        for offsets in (\n"
        "            common_attn_metadata.query_start_loc,\n"
        "            common_attn_metadata.query_start_loc_cpu,\n"
        "        ):\n"
        "            offsets.zero_()\n",
    )
    assert rewritten != text
    source.write_text(rewritten)
    git.run("commit", "--quiet", "-am", "[Misc] zero offsets in a loop")
    return git
