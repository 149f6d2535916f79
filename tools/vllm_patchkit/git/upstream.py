"""A local "upstream" vLLM repository built from released sources.

One commit per release, in the order given, each the child of the one
before and tagged ``v<version>``, so that rebasing across real upstream
drift (0.12.0 -> 0.20.0 -> 0.28.0 -> 0.29.0) works offline. The commits
reuse the trees of the cached release trees and carry fixed metadata, so
the same list of versions always gives the same commit ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from vllm_patchkit.errors import InputError
from vllm_patchkit.git.owned_dirs import check_owned, check_replaceable, record
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.trees.releases import (
    RELEASE_DATE,
    check_version,
    locked,
    release_tree,
    staged_dir,
)


def build_upstream(versions: list[str], dest: Path | None = None) -> Path:
    """A bare repository holding ``versions`` as a tagged chain of commits."""
    if not versions:
        raise InputError("give at least one vLLM release version")
    for version in versions:
        check_version(version)
    if len(set(versions)) != len(versions):
        raise InputError(f"a version is listed twice: {versions}")
    dest = dest or cache_dir() / "upstreams" / f"vllm-{'_'.join(versions)}.git"
    with locked("upstream-" + dest.name):
        chain = release_chain(versions)
        made = [link.commit for link in chain]
        if _holds_chain(dest, chain):
            # Tags in place are not enough: a repository with work the
            # toolkit did not make there is refused, never adopted.
            check_owned(dest, "--dest", made)
            return dest
        # A directory there that this tool did not make (a user's checkout)
        # is refused, never replaced.
        check_replaceable(dest, "--dest", made)
        with staged_dir(dest, ".upstream-") as staging:
            git = Git(staging, tuple(TOOL_IDENTITY.items()))
            git.run("init", "--quiet", "--bare", "--initial-branch=main")
            for link in chain:
                # After `--`: a cache directory named like an option stays a path.
                git.run(
                    "fetch",
                    "--quiet",
                    "--",
                    str(release_tree(link.version)),
                    f"refs/tags/v{link.version}",
                )
                written = git.run(
                    "hash-object", "-w", "-t", "commit", "--stdin", input_text=link.text
                ).stdout.strip()
                assert written == link.commit, (written, link.commit)
                git.run("tag", f"v{link.version}", link.commit)
            git.run("update-ref", "refs/heads/main", made[-1])
        record(dest, "--dest")
    return dest


@dataclass(frozen=True)
class Link:
    """One release's commit in the chain: its text and its id."""

    version: str
    text: str
    commit: str


def release_chain(versions: list[str]) -> list[Link]:
    """The commits :func:`build_upstream` makes for ``versions``, computed
    without writing anything: the release trees' tree ids, fixed identity
    and date (what ``git commit-tree`` writes with them)."""
    when = datetime.fromisoformat(RELEASE_DATE)
    stamp = f"{int(when.timestamp())} {when.strftime('%z')}"
    person = f"{TOOL_IDENTITY['GIT_AUTHOR_NAME']} <{TOOL_IDENTITY['GIT_AUTHOR_EMAIL']}>"
    chain: list[Link] = []
    for version in versions:
        source = Git(release_tree(version))
        tree = source.out("rev-parse", "--verify", f"refs/tags/v{version}^{{tree}}")
        parent = f"parent {chain[-1].commit}\n" if chain else ""
        text = (
            f"tree {tree}\n{parent}author {person} {stamp}\n"
            f"committer {person} {stamp}\n\nvLLM {version}\n"
        )
        hashed = source.run("hash-object", "-t", "commit", "--stdin", input_text=text)
        chain.append(Link(version, text, hashed.stdout.strip()))
    return chain


def _holds_chain(dest: Path, chain: list[Link]) -> bool:
    """``dest`` is a bare repository whose tags name ``chain``'s commits."""
    if not (dest / "HEAD").is_file() or dest.is_symlink():
        return False
    proc = Git(dest).run(
        "for-each-ref", "--format=%(refname) %(objectname)", "refs/tags", check=False
    )
    if proc.returncode != 0:
        return False
    tags = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    return all(tags.get(f"refs/tags/v{link.version}") == link.commit for link in chain)
