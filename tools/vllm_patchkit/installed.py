"""What is installed in this environment: vLLM's directory, a git tree
made from it, and whether an entry point is registered.

The wheel carries only ``vllm/``, with compiled extensions that a source
tree lacks. Copying its Python files (and linking the binaries) gives a tree
that imports exactly like the install, which patches can then be applied to
with git: a patched vLLM that is really the series, not a monkeypatch.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

from vllm_patchkit.errors import InputError
from vllm_patchkit.gitcmd import Git, init_repo

_BINARY_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".a", ".bin", ".cubin", ".hsaco")


def installed_vllm_dir() -> Path:
    """The installed ``vllm`` package directory, found without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("vLLM is not installed in this environment")
    return Path(next(iter(spec.submodule_search_locations)))


def entry_point_registered(group: str, name: str) -> bool:
    """Whether an installed distribution declares entry point ``name`` in
    ``group``, as ``importlib.metadata.entry_points`` finds it.

    Read from the ``entry_points.txt`` of the ``*.dist-info`` and
    ``*.egg-info`` directories on ``sys.path``, the first distribution of
    each name winning (in directory order), as importlib.metadata does;
    importing that module
    (email, zipfile, csv) would cost ``doctor`` a third of its start-up.
    """
    seen: set[str] = set()
    for entry in sys.path:
        try:
            children = list(os.scandir(entry or "."))
        except OSError:
            continue
        for child in children:
            stem, dot, suffix = child.name.rpartition(".")
            if not dot or suffix.lower() not in ("dist-info", "egg-info"):
                continue
            distribution = _normalized(stem.partition("-")[0])
            if distribution in seen:
                continue
            seen.add(distribution)
            if name in _entry_point_names(Path(child.path) / "entry_points.txt", group):
                return True
    return False


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _entry_point_names(path: Path, group: str) -> set[str]:
    """The names in ``[group]`` of one ``entry_points.txt`` (INI syntax)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    names, section = set(), None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == group and "=" in line:
            names.add(line.partition("=")[0].strip())
    return names


def copy_installed_vllm(dest: Path, package_dir: Path | None = None) -> Git:
    """Make ``dest`` a one-commit git tree holding a copy of installed vLLM."""
    source = package_dir or installed_vllm_dir()
    if dest.exists() and any(dest.iterdir()):
        raise InputError(f"{dest} exists and is not empty")

    def copy_or_link(src: str, dst: str) -> str:
        if src.endswith(_BINARY_SUFFIXES):
            os.symlink(src, dst)
            return dst
        return shutil.copy2(src, dst)

    shutil.copytree(
        source,
        dest / "vllm",
        copy_function=copy_or_link,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    git = init_repo(dest)
    git.run("add", "-A")
    git.run("commit", "--quiet", "--no-verify", "-m", f"installed vLLM from {source}")
    return git
