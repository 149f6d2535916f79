"""What is installed in this environment: vLLM's directory, and a git tree
made from it.

The wheel carries only ``vllm/``, with compiled extensions that a source
tree lacks. Copying its Python files (and linking the binaries) gives a tree
that imports exactly like the install, which patches can then be applied to
with git: a patched vLLM that is really the series, not a monkeypatch.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
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


def copy_installed_vllm(dest: Path) -> Git:
    """Make ``dest`` a one-commit git tree holding a copy of installed vLLM."""
    source = installed_vllm_dir()
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
