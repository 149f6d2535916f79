"""A runtime for any vLLM tree: the tree, then its missing pure-Python packages.

A release's torch pin is a packaging constraint, not a runtime one: this
venv's torch runs releases from 0.11.0 on, once they find the few
pure-Python packages they need and the venv lacks (``gguf`` for 0.14.0).
This module takes the tree's requirements (:mod:`requirement_files`: plain
names only, read as untrusted input), keeps those whose distribution this
venv does not have, and installs them with pip (its own configuration for
the index, ``--no-deps``, pure-Python wheels only, from an empty directory)
into a cache directory shared by every tree with the same set. Nothing the
venv has is replaced or re-versioned: torch and the packages built against
one torch are never installed, and a package that provides a top-level
module the venv already has (a ``torch/``, an ``enum/``) is not kept. What
cannot be provided is listed in ``missing`` with the reason; the run goes
ahead and a check that needs it reports why it could not run.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from vllm_patchkit import progress
from vllm_patchkit.errors import PatchkitError
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.trees.releases import locked, staged_dir
from vllm_patchkit.trees.requirement_files import (
    Requirement,
    is_plain,
    metadata_requirements,
    tree_requirements,
)
from vllm_patchkit.trees.versions import tree_release

TORCH_BOUND = frozenset(
    canonicalize_name(n)
    for n in (
        "torch",
        "torchvision",
        "torchaudio",
        "torchcodec",
        "triton",
        "xformers",
        "flashinfer-python",
        "intel-openmp",
        "intel-extension-for-pytorch",
    )
)
"""Built against one torch (or torch itself): this runtime keeps the venv's."""

MANIFEST = "runtime.json"
_DETERMINISTIC = ("No matching distribution found", "Could not find a version")
_CLOSURE_ROUNDS = 6
_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
_LAYOUT = 3
"""Bumped when what a cache entry holds changes (2: unusable packages
dropped; 3: packages that shadow a venv module dropped)."""


class RuntimeUnavailable(PatchkitError):
    """No runtime can be given to the tree here; the message says why (exit 3)."""


@dataclass(frozen=True)
class TreeRuntime:
    """How a tree runs beside this venv: which torch, which extras, what lacks."""

    tree: Path
    version: str | None
    """The tree's release (``0.12.0``); None for a development tree (main)."""
    torch: str
    """The torch that runs it: this venv's."""
    pinned_torch: str | None
    """The torch the release's requirement files pin, when they pin one."""
    extras_dir: Path | None
    extras: tuple[str, ...]
    """``name==version`` of each package installed in ``extras_dir``."""
    missing: tuple[str, ...]
    """``requirement: why`` for each requirement that could not be provided."""

    def pythonpath(self) -> list[str]:
        """The tree first, then its extras (none when it needs none)."""
        paths = [str(self.tree)]
        if self.extras_dir is not None and self.extras:
            paths.append(str(self.extras_dir))
        return paths

    def to_json(self) -> dict[str, Any]:
        return {
            "torch": self.torch,
            "pinned_torch": self.pinned_torch,
            "extras": list(self.extras),
            "extras_dir": str(self.extras_dir) if self.extras_dir else None,
            "missing": list(self.missing),
        }


MADE: Counter[Path] = Counter()
"""How many runtimes this process made per tree: a judged tree's is made
once, by its :class:`~vllm_patchkit.trees.tree_process.TreeLauncher`, and
handed down."""


def runtime_for(tree: Path) -> TreeRuntime:
    """The runtime that runs ``tree`` here, its extras installed once and cached."""
    tree = tree.resolve()
    MADE[tree] += 1
    if not tree.is_dir():
        raise RuntimeUnavailable(f"{tree}: no such directory")
    torch = venv_version("torch")
    if torch is None:
        raise RuntimeUnavailable(
            f"this Python ({sys.executable}) has no torch to run {tree} with"
        )
    version, release = tree_release(tree)
    requirements, unreadable = tree_requirements(tree)
    pinned = pinned_version("torch", requirements)
    have = venv_distributions()
    wanted: dict[str, Requirement] = {}
    missing = list(unreadable)
    for req in requirements:
        name = canonicalize_name(req.name)
        if name in have or name in wanted or name == "vllm":
            continue
        if name in TORCH_BOUND:
            missing.append(
                f"{req}: built against a torch of its own; "
                f"the runtime keeps torch {torch}"
            )
        else:
            wanted[name] = req
    extras_dir, extras, failed = _provide(list(wanted.values()))
    return TreeRuntime(
        tree=tree,
        version=version if release is not None else None,
        torch=torch,
        pinned_torch=pinned,
        extras_dir=extras_dir,
        extras=extras,
        missing=tuple(missing + failed),
    )


def pinned_version(name: str, requirements: list[Requirement]) -> str | None:
    """The version ``requirements`` pin ``name`` to (``==``), if they do."""
    for req in requirements:
        if canonicalize_name(req.name) == name:
            for spec in req.specifier:
                if spec.operator in ("==", "==="):
                    return spec.version
    return None


def venv_version(name: str) -> str | None:
    """The installed version of distribution ``name`` here, if any."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@cache
def venv_distributions() -> frozenset[str]:
    """The canonical names of the distributions this Python can import."""
    return frozenset(
        canonicalize_name(d.metadata["Name"])
        for d in metadata.distributions()
        if d.metadata["Name"]
    )


def _provide(
    wanted: list[Requirement],
) -> tuple[Path | None, tuple[str, ...], list[str]]:
    """Install ``wanted`` (and what they need that the venv lacks) into the
    cache entry for that set: ``(dir, installed, failures)``."""
    if not wanted:
        return None, (), []
    specs = sorted(str(req) for req in wanted)
    digest = hashlib.sha256(json.dumps([_LAYOUT, _PYTHON, specs]).encode())
    key = digest.hexdigest()[:16]
    dest = cache_dir() / "extras" / key
    with locked(f"extras-{key}"):
        try:
            manifest = json.loads((dest / MANIFEST).read_text())
        except (OSError, ValueError):
            manifest = {}  # absent or damaged: installed again
        if manifest.get("complete"):
            return dest, tuple(manifest["extras"]), list(manifest["failed"])
        with (
            progress.phase(
                f"installing the tree's missing requirements ({', '.join(specs)})"
            ),
            staged_dir(dest, f".extras-{key}-") as staging,
        ):
            failed, complete = _install_closure(wanted, staging)
            extras = _installed(staging)
            (staging / MANIFEST).write_text(
                json.dumps(
                    {
                        "requirements": specs,
                        "extras": extras,
                        "failed": failed,
                        "complete": complete,
                    },
                    indent=2,
                )
            )
    return dest, tuple(extras), failed


def _install_closure(wanted: list[Requirement], target: Path) -> tuple[list[str], bool]:
    """Install ``wanted``, then whatever they require that neither the venv
    nor ``target`` has; ``(failures, every failure was the index's answer)``."""
    failed: list[str] = []
    unprovided: set[str] = set()
    complete = True
    tried: set[str] = set()
    batch = wanted
    for _ in range(_CLOSURE_ROUNDS):
        batch = [r for r in batch if canonicalize_name(r.name) not in tried]
        if not batch:
            break
        tried.update(canonicalize_name(r.name) for r in batch)
        for req, why in _pip_install(batch, target):
            answered = any(text in why for text in _DETERMINISTIC)
            complete = complete and answered
            if answered:
                why = "no pure-Python wheel on the configured index"
            failed.append(f"{req}: {why}")
            unprovided.add(canonicalize_name(req.name))
        batch = _unmet(target)
    for name, said in _drop_shadowing(target):
        failed.append(said)
        unprovided.add(name)
    failed += _drop_unusable(target, unprovided)
    return failed, complete


def _drop_unusable(target: Path, unprovided: set[str]) -> list[str]:
    """Remove the packages that need one of ``unprovided`` (directly or
    through another removed one): installed but not importable, they would
    turn a release's ``except ImportError`` fallback into a crash."""
    dropped: list[str] = []
    changed = True
    while changed:
        changed = False
        for info in sorted(target.glob("*.dist-info")):
            requirements = metadata_requirements(info / "METADATA")
            needs = sorted(
                {canonicalize_name(r.name) for r in requirements} & unprovided
            )
            if not needs:
                continue
            name, said = _drop(
                target, info, f"needs {', '.join(needs)}, which cannot be provided"
            )
            dropped.append(said)
            unprovided.add(name)
            changed = True
    return dropped


def _drop_shadowing(target: Path) -> list[tuple[str, str]]:
    """Remove the packages that provide a top-level module this venv already
    has: first on the tree's path, they would replace the venv's (a
    ``torch/`` in place of its torch) while the report names the venv's.
    Each one's name and what :func:`_drop` says."""
    dropped: list[tuple[str, str]] = []
    for info in sorted(target.glob("*.dist-info")):
        dist = metadata.PathDistribution(info)
        shadowed = sorted(m for m in _top_level(dist) if _venv_has(m))
        if not shadowed:
            continue
        why = f"provides {', '.join(shadowed)}, which this venv already has"
        dropped.append(_drop(target, info, why))
    return dropped


def _drop(target: Path, info: Path, why: str) -> tuple[str, str]:
    """Remove the distribution ``info`` describes from ``target``: its name,
    and a line saying what went and why."""
    dist = metadata.PathDistribution(info)
    name = canonicalize_name(dist.metadata["Name"] or info.name)
    version = dist.version
    _remove(target, dist)
    shutil.rmtree(info, ignore_errors=True)
    return name, f"{name}=={version}: {why} (not kept in the extras)"


def _top_level(dist: metadata.Distribution) -> set[str]:
    """The top-level names ``dist`` puts on the path (from its RECORD)."""
    names = set()
    for file in dist.files or []:
        parts = file.parts
        first = parts[0] if parts else ""
        if first in ("", "..", "bin", "__pycache__") or first.endswith(
            (".dist-info", ".data")
        ):
            continue
        names.add(first.split(".")[0] if len(parts) == 1 else first)
    return names


def _venv_has(module: str) -> bool:
    """``module`` imports in this venv without the extras (or the current
    directory)."""
    if module in sys.builtin_module_names or module in sys.stdlib_module_names:
        return True
    return importlib.machinery.PathFinder.find_spec(module, venv_path()) is not None


@cache
def venv_path() -> list[str]:
    """Where this interpreter imports from, less the current directory (a
    child started elsewhere does not have it)."""
    here = os.getcwd()
    return [p for p in sys.path if p and os.path.abspath(p) != here]


def _remove(target: Path, dist: metadata.Distribution) -> None:
    """Delete the files pip installed for ``dist``, then emptied directories."""
    parents: set[Path] = set()
    for file in dist.files or []:
        path = Path(os.path.normpath(dist.locate_file(file)))
        if path.is_relative_to(target):
            path.unlink(missing_ok=True)
            parents.update(p for p in path.parents if p.is_relative_to(target))
    for directory in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        if directory != target and directory.is_dir():
            shutil.rmtree(directory / "__pycache__", ignore_errors=True)
            if not any(directory.iterdir()):
                directory.rmdir()


def _unmet(target: Path) -> list[Requirement]:
    """Requirements of the packages in ``target`` that nothing provides yet."""
    present = venv_distributions() | {
        canonicalize_name(name.split("==")[0]) for name in _installed(target)
    }
    unmet: dict[str, Requirement] = {}
    for dist_info in target.glob("*.dist-info"):
        for req in metadata_requirements(dist_info / "METADATA"):
            name = canonicalize_name(req.name)
            if name not in present and name not in TORCH_BOUND and is_plain(req):
                unmet.setdefault(name, req)
    return list(unmet.values())


def _pip_install(
    batch: list[Requirement], target: Path
) -> list[tuple[Requirement, str]]:
    """Install ``batch`` in one pip run; on failure, one by one to say which
    failed and why. Returns ``(requirement, why)`` for each failure."""
    error = _pip(batch, target)
    if error is None:
        return []
    if len(batch) == 1:
        return [(batch[0], error)]
    return [(req, why) for req in batch if (why := _pip([req], target))]


def _pip(batch: list[Requirement], target: Path) -> str | None:
    """None when pip installed ``batch`` into ``target``; else pip's error."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--no-compile",
        "--upgrade",
        # Pure-Python wheels only: the tags of a wheel that runs anywhere.
        "--only-binary=:all:",
        "--implementation",
        "py",
        "--abi",
        "none",
        "--platform",
        "any",
        "--python-version",
        _PYTHON,
        "--target",
        str(target.resolve()),
        "--",
        *(str(req) for req in batch),
    ]
    try:
        # From an empty directory: pip installs a name that is a file there.
        with tempfile.TemporaryDirectory(prefix="vllm-patchkit-pip-") as empty:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=600, cwd=empty
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"pip did not run: {exc}"
    if proc.returncode == 0:
        return None
    errors = [
        line.removeprefix("ERROR: ").strip()
        for line in proc.stderr.splitlines()
        if line.startswith("ERROR:")
    ]
    return (
        "; ".join(errors[-2:])
        or (proc.stderr.strip().splitlines() or ["no output"])[-1]
        + f" (pip exit {proc.returncode})"
    )


def _installed(target: Path) -> list[str]:
    """``name==version`` of each distribution pip put in ``target``."""
    dists = metadata.distributions(path=[str(target)])
    return sorted(
        {f"{d.metadata['Name']}=={d.version}" for d in dists if d.metadata["Name"]}
    )
