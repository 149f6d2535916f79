"""Release trees: git checkouts of released vLLM source, built and cached.

GitHub is out of reach here, so the "upstream" a test or an offline user
works against is made from the source distributions on the package index:
one git repository per release, one commit tagged ``v<version>``, with fixed
author data so that every machine builds the same commit ids. Working copies
are cheap local clones; the cached tree itself is never modified.
"""

from __future__ import annotations

import base64
import configparser
import json
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from vllm_patchkit import progress
from vllm_patchkit.errors import InputError
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git, init_repo
from vllm_patchkit.paths import cache_dir, write_atomic
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
                download(find_sdist(version), dest)
    return dest


def release_tree(version: str) -> Path:
    """The cached git tree of vLLM ``version`` (read-only by convention):
    the released source, ``vllm/_version.py`` included."""
    return _cached_tree(version, checkout=False)


def checkout_tree(version: str) -> Path:
    """The cached tree of vLLM ``version`` as a git checkout of its tag has
    it (read-only by convention): every file of the sdist but those its
    packaging wrote (:func:`packaging_generated`: ``vllm/_version.py`` above
    all), so the release is known only by the tag ``v<version>``."""
    return _cached_tree(version, checkout=True)


CHECKOUT_SHAPE = "tag-checkout"
"""The checkout trees' cache name (``vllm-0.34.0-tag-checkout``). The
``-checkout`` trees before it dropped what vLLM's ``.gitignore`` matches
although upstream tracks it (on 0.34.0
``vllm/model_executor/kernels/linear/mxfp4/rdna3_hip.py``, which the
regression victims import); a new name rebuilds each once and never reads
or removes an old entry another process may be reading."""


def packaging_generated(tree: Path) -> list[Path]:
    """What setuptools and setuptools-scm write into vLLM's sdist that
    upstream's git does not track: ``vllm/_version.py``, ``PKG-INFO``, the
    ``*.egg-info/`` directory and ``setup.cfg`` when it holds only the
    ``[egg_info]`` build tag (vLLM has no ``setup.cfg`` of its own).

    The rest of an sdist is upstream's: setuptools-scm's file finder takes
    the files git tracks (plus ``MANIFEST.in``'s, tracked too), so a file
    vLLM's ``.gitignore`` matches is there only because upstream tracks it.
    """
    found = [
        path
        for path in (tree / "vllm" / "_version.py", tree / "PKG-INFO")
        if path.is_file()
    ]
    found += sorted(p for p in tree.glob("*.egg-info") if p.is_dir())
    setup_cfg = tree / "setup.cfg"
    if setup_cfg.is_file() and _only_egg_info_tag(setup_cfg.read_text()):
        found.append(setup_cfg)
    return found


def _only_egg_info_tag(text: str) -> bool:
    """``text`` (a ``setup.cfg``) is just the ``[egg_info]`` section that
    setuptools' sdist writes (``tag_build``, ``tag_date``)."""
    parser = configparser.ConfigParser()
    try:
        parser.read_string(text)
    except configparser.Error:
        return False
    return parser.sections() == ["egg_info"] and set(parser["egg_info"]) <= {
        "tag_build",
        "tag_date",
    }


def _cached_tree(version: str, *, checkout: bool) -> Path:
    check_version(version)
    shape = f"-{CHECKOUT_SHAPE}" if checkout else ""
    name = f"vllm-{version}{shape}"
    dest = cache_dir() / "trees" / name
    with locked(f"tree-{version}{shape}"):
        if (dest / ".git").is_dir() and Git(dest).commit_of(f"v{version}"):
            return dest
        archive = sdist_path(version)
        with (
            progress.phase(f"building the vLLM {version} tree ({name})"),
            staged_dir(dest, f".{name}-") as staging,
        ):
            _extract(archive, staging, f"vllm-{version}")
            if checkout:
                for generated in packaging_generated(staging):
                    if generated.is_dir():
                        shutil.rmtree(generated)
                    else:
                        generated.unlink()
            git = init_repo(staging)
            # -f: every file left is upstream's or the release's, those
            # vLLM's .gitignore matches included (upstream tracks them).
            git.run("add", "-f", "-A")
            dated = {
                "GIT_AUTHOR_DATE": RELEASE_DATE,
                "GIT_COMMITTER_DATE": RELEASE_DATE,
            }
            git.run(
                "commit", "--quiet", "--no-verify", "-m", f"vLLM {version}", env=dated
            )
            git.run("tag", f"v{version}")
            # Packed before it is published: a clone then starts with one
            # pack, as a user's does, not thousands of loose objects that
            # its first commit would gc in the background.
            git.run("gc", "--quiet")
    return dest


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
            write_atomic(kept_file, json.dumps({"sdist": stamp, "files": kept}))
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
