"""A local "upstream" vLLM repository built from released sources.

One commit per release, in the order given, each the child of the one
before and tagged ``v<version>``, so that rebasing across real upstream
drift (0.12.0 -> 0.20.0 -> 0.28.0 -> 0.29.0) works offline. The commits
reuse the trees of the cached release trees and carry fixed metadata, so
the same list of versions always gives the same commit ids.
"""

from __future__ import annotations

from pathlib import Path

from vllm_patchkit.errors import InputError
from vllm_patchkit.git.owned_dirs import check_replaceable, mark
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.trees.releases import (
    RELEASE_DATE,
    check_version,
    locked,
    release_tree,
    staged_dir,
)


def default_upstream_path(versions: list[str]) -> Path:
    return cache_dir() / "upstreams" / ("vllm-" + "_".join(versions) + ".git")


def build_upstream(versions: list[str], dest: Path | None = None) -> Path:
    """A bare repository holding ``versions`` as a tagged chain of commits."""
    if not versions:
        raise InputError("give at least one vLLM release version")
    for version in versions:
        check_version(version)
    if len(set(versions)) != len(versions):
        raise InputError(f"a version is listed twice: {versions}")
    dest = dest or default_upstream_path(versions)
    with locked("upstream-" + dest.name):
        if (dest / "HEAD").is_file() and _has_tags(Git(dest), versions):
            return dest
        # A directory there that this tool did not make (a user's checkout)
        # is refused, never replaced.
        check_replaceable(dest, "--dest")
        with staged_dir(dest, ".upstream-") as staging:
            git = Git(staging, tuple(TOOL_IDENTITY.items()))
            git.run("init", "--quiet", "--bare", "--initial-branch=main")
            mark(staging)
            parent: str | None = None
            dated = {
                "GIT_AUTHOR_DATE": RELEASE_DATE,
                "GIT_COMMITTER_DATE": RELEASE_DATE,
            }
            for version in versions:
                tag = f"v{version}"
                # After `--`: a cache directory named like an option stays a path.
                git.run(
                    "fetch",
                    "--quiet",
                    "--",
                    str(release_tree(version)),
                    f"refs/tags/{tag}",
                )
                tree = git.out("rev-parse", "FETCH_HEAD^{tree}")
                args = ["commit-tree", tree, "-m", f"vLLM {version}"]
                if parent:
                    args += ["-p", parent]
                parent = git.run(*args, env=dated).stdout.strip()
                git.run("tag", tag, parent)
            assert parent is not None
            git.run("update-ref", "refs/heads/main", parent)
    return dest


def _has_tags(git: Git, versions: list[str]) -> bool:
    tags = set(git.out("tag", "--list").split())
    return all(f"v{v}" in tags for v in versions)
