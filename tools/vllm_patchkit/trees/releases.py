"""Release trees: git checkouts of released vLLM source, built and cached.

GitHub is out of reach here, so the "upstream" a test or an offline user
works against is made from the source distributions on the package index:
one git repository per release, one commit tagged ``v<version>``, with fixed
author data so that every machine builds the same commit ids. Working copies
are cheap local clones; the cached tree itself is never modified.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from vllm_patchkit import progress
from vllm_patchkit.errors import InputError
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git, init_repo
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.trees.index import download, find_sdist
from vllm_patchkit.trees.run_cache import file_lock
from vllm_patchkit.trees.versions import require_release

# Fixed commit metadata: the same release gives the same commit id anywhere.
RELEASE_DATE = "2000-01-01T00:00:00+0000"


def check_version(version: str) -> str:
    """``version`` if it is a release with a source distribution's name (no
    local part); InputError (exit 2) otherwise, before the index is asked."""
    if "+" in version:
        raise InputError(f"{version!r} is a local build; name the vLLM release")
    require_release(version)
    return version


def locked(name: str) -> AbstractContextManager[None]:
    """Serialise cache writers (parallel tests, two demos at once)."""
    return file_lock(cache_dir() / "locks" / f"{name}.lock")


@contextmanager
def staged_dir(dest: Path, prefix: str) -> Iterator[Path]:
    """Build into a scratch directory beside ``dest``; move it into place only
    if the block finishes, so a cache entry is either complete or absent."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=prefix, dir=dest.parent))
    try:
        yield staging
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def sdist_path(version: str) -> Path:
    """The cached source distribution of vLLM ``version``, downloaded once."""
    check_version(version)
    dest = cache_dir() / "sdists" / f"vllm-{version}.tar.gz"
    with locked(f"sdist-{version}"):
        if not dest.is_file():
            with progress.phase(
                f"fetching the vLLM {version} source from the package index"
            ):
                download(find_sdist("vllm", version), dest)
    return dest


def release_tree(version: str) -> Path:
    """The cached git tree of vLLM ``version`` (read-only by convention):
    the released source, ``vllm/_version.py`` included."""
    return _cached_tree(version, checkout=False)


def checkout_tree(version: str) -> Path:
    """The cached tree of vLLM ``version`` as a git checkout of its tag has
    it (read-only by convention): vLLM's own ``.gitignore`` keeps
    ``vllm/_version.py`` (written by an install) out of git and so out of
    the tree; the release is known only by the tag ``v<version>``."""
    return _cached_tree(version, checkout=True)


def _cached_tree(version: str, *, checkout: bool) -> Path:
    check_version(version)
    shape = "-checkout" if checkout else ""
    name = f"vllm-{version}{shape}"
    dest = cache_dir() / "trees" / name
    with locked(f"tree-{version}{shape}"):
        if (dest / ".git").is_dir() and _tagged(dest, version):
            return dest
        archive = sdist_path(version)
        with (
            progress.phase(f"building the vLLM {version} tree ({name})"),
            staged_dir(dest, f".{name}-") as staging,
        ):
            _extract(archive, staging, f"vllm-{version}")
            git = init_repo(staging)
            if checkout:
                git.run("add", "-A")
            else:
                # -f: the tree is the released source, files vLLM's
                # .gitignore names (vllm/_version.py) included.
                git.run("add", "-f", "-A")
            dated = {
                "GIT_AUTHOR_DATE": RELEASE_DATE,
                "GIT_COMMITTER_DATE": RELEASE_DATE,
            }
            git.run(
                "commit", "--quiet", "--no-verify", "-m", f"vLLM {version}", env=dated
            )
            git.run("tag", f"v{version}")
            if checkout:
                # A checkout has only what git holds: ignored files go.
                git.run("clean", "--quiet", "-f", "-d", "-X")
            # Packed before it is published: a clone then starts with one
            # pack, as a user's does, not thousands of loose objects that
            # its first commit would gc in the background.
            git.run("gc", "--quiet")
    return dest


def _tagged(tree: Path, version: str) -> bool:
    proc = Git(tree).run("rev-parse", "--verify", "--quiet", f"v{version}", check=False)
    return proc.returncode == 0


def _extract(archive: Path, dest: Path, top: str, only: tuple[str, ...] = ()) -> None:
    """The sdist's files under ``top/`` into ``dest`` (``only``: just the
    paths that start with one of these)."""
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            parts = member.name.split("/", 1)
            if parts[0] != top or len(parts) == 1:
                continue
            if only and not parts[1].startswith(only):
                continue
            member.name = parts[1]
            members.append(member)
        tar.extractall(dest, members=members, filter="data")


def release_files(version: str, dest: Path, only: tuple[str, ...]) -> Path:
    """Some files of vLLM ``version``'s source (the paths starting with one
    of ``only``) extracted into ``dest``, no git tree built: enough for a
    check that reads a few files of every release in seconds."""
    _extract(sdist_path(version), dest, f"vllm-{version}", only)
    return dest


def release_sources(
    version: str, relatives: tuple[str, ...]
) -> dict[str, bytes | None]:
    """The files ``relatives`` (paths in the source tree) of vLLM ``version``'s
    sdist; None for one the release does not ship.

    A gzip'd sdist is read by decompressing it up to the member: about half
    a second per release, for a check that reads a module of every release.
    What was read is kept (``sdist-files/``) with the sdist's size and
    modification time, and read again only when the sdist changed or a file
    was never asked for.
    """
    sdist = sdist_path(version)
    stat = sdist.stat()
    stamp = [stat.st_size, stat.st_mtime_ns]
    kept_file = cache_dir() / "sdist-files" / f"vllm-{version}.json"
    with locked(f"sdist-files-{version}"):
        kept: dict[str, str | None] = {}
        try:
            entry = json.loads(kept_file.read_text())
            entry = entry if isinstance(entry, dict) else {}
            files = entry.get("files")
            if entry.get("sdist") == stamp and isinstance(files, dict):
                kept = {
                    k: v for k, v in files.items() if v is None or isinstance(v, str)
                }
        except (OSError, ValueError):
            pass  # absent or damaged: read from the sdist
        missing = [r for r in relatives if r not in kept]
        if missing:
            kept.update(dict.fromkeys(missing))
            wanted = {f"vllm-{version}/{r}": r for r in missing}
            with tarfile.open(sdist, "r|gz") as tar:
                for member in tar:
                    relative = wanted.pop(member.name, None)
                    handle = tar.extractfile(member) if relative else None
                    if relative and handle is not None:
                        kept[relative] = base64.b64encode(handle.read()).decode()
                    if not wanted:
                        break
            kept_file.parent.mkdir(parents=True, exist_ok=True)
            scratch = kept_file.with_suffix(f".{os.getpid()}.tmp")
            scratch.write_text(json.dumps({"sdist": stamp, "files": kept}))
            scratch.replace(kept_file)
    found: dict[str, bytes | None] = {}
    for relative in relatives:
        text = kept[relative]
        found[relative] = None if text is None else base64.b64decode(text)
    return found


def clone_release(version: str, dest: Path, *, checkout: bool = False) -> Git:
    """A fresh working clone at ``dest`` (on branch main) of the release
    tree, or with ``checkout`` of :func:`checkout_tree` (no ``_version.py``;
    the tag ``v<version>`` comes along)."""
    source = checkout_tree(version) if checkout else release_tree(version)
    if dest.exists() and any(dest.iterdir()):
        raise InputError(f"{dest} exists and is not empty")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with progress.phase(f"cloning the vLLM {version} tree into {dest}"):
        Git(dest.parent).run("clone", "--quiet", str(source), str(dest))
    return Git(dest, tuple(TOOL_IDENTITY.items()))
