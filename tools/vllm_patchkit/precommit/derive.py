"""A checkout's pre-commit config -> an offline config and a plan per hook.

Known remote hook repositories become ``repo: local`` hooks installed from
the package index (see :mod:`.mirrors`); ``local`` and ``meta`` hooks are
copied as they are. Hooks that ``pre-commit run`` would not start anyway
(another stage, no matching file) are left out and reported, so that their
environments (vLLM's mypy hooks are the costly ones) are never installed.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from identify.identify import tags_from_path

from vllm_patchkit.errors import InputError
from vllm_patchkit.precommit.mirrors import Mirror, Resolved, find_mirror
from vllm_patchkit.precommit.revs import Pin

CONFIG_FILE = ".pre-commit-config.yaml"
RUN_STAGE = "pre-commit"
ALL_STAGES = (
    "commit-msg",
    "post-checkout",
    "post-commit",
    "post-merge",
    "post-rewrite",
    "pre-commit",
    "pre-merge-commit",
    "pre-push",
    "pre-rebase",
    "prepare-commit-msg",
    "manual",
)
_LEGACY_STAGES = {
    "commit": "pre-commit",
    "merge-commit": "pre-merge-commit",
    "push": "pre-push",
}
# Settings that belong to the mirror, not to the user's override.
_MIRROR_KEYS = {"language", "language_version", "additional_dependencies", "repo"}
NO_FILES = "no files to check"
PENDING = "pending"


class PrecommitRefused(InputError):
    """The checkout or its config cannot be used; nothing was run."""


@dataclass
class HookReport:
    """One hook of the user's config and what became of it."""

    id: str
    name: str
    repo: str
    rev: str | None = None
    status: str = PENDING
    """passed, failed or skipped (pending until pre-commit has run)."""
    detail: str = ""
    alias: str | None = None
    mirror: str | None = None
    """What the hook ran as offline (package, language), or None."""
    duration_s: float | None = None


@dataclass
class Plan:
    """The config to run and one report per hook of the user's config."""

    config: dict[str, Any]
    hooks: list[HookReport]
    run_order: list[int] = field(default_factory=list)
    """Indices into ``hooks``, in the order pre-commit reports them."""
    known_names: dict[int, str] = field(default_factory=dict)
    """The exact name pre-commit prints, where the plan knows it."""
    cannot_run: list[int] = field(default_factory=list)
    """Indices into ``hooks`` of hooks that would run but cannot: no
    release is known for the commit they are pinned to."""


def read_config(root: Path) -> dict[str, Any]:
    path = root / CONFIG_FILE
    if not path.is_file():
        raise PrecommitRefused(f"{root}: no {CONFIG_FILE}")
    try:
        config = yaml.safe_load(read_text(root))
    except yaml.YAMLError as exc:
        raise PrecommitRefused(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(config, dict) or not isinstance(config.get("repos"), list):
        raise PrecommitRefused(f"{path}: no 'repos' list")
    for entry in config["repos"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("hooks"), list):
            raise PrecommitRefused(f"{path}: a repos entry without a 'hooks' list")
        if not all(isinstance(h, dict) and "id" in h for h in entry["hooks"]):
            raise PrecommitRefused(f"{path}: a hook without an 'id'")
    return config


def read_text(root: Path) -> str:
    """The checkout's config as written: its comments say what a pinned
    commit is (:mod:`.revs`)."""
    return (root / CONFIG_FILE).read_text()


class FileMatcher:
    """pre-commit's file selection: global and per-hook regexes, then types."""

    def __init__(self, root: Path, files: Sequence[str], config: dict[str, Any]):
        include = re.compile(config.get("files") or "")
        exclude = re.compile(config.get("exclude") or "^$")
        self.files = [f for f in files if include.search(f) and not exclude.search(f)]
        self._tags = {f: tags_from_path(str(root / f)) for f in self.files}

    def matching(self, hook: dict[str, Any]) -> list[str]:
        include = re.compile(hook.get("files") or "")
        exclude = re.compile(hook.get("exclude") or "^$")
        types = set(hook.get("types") or ["file"])
        types_or = set(hook.get("types_or") or [])
        exclude_types = set(hook.get("exclude_types") or [])
        return [
            f
            for f in self.files
            if include.search(f)
            and not exclude.search(f)
            and types <= self._tags[f]
            and (not types_or or types_or & self._tags[f])
            and not exclude_types & self._tags[f]
        ]


def off_stage(hook: dict[str, Any], config: dict[str, Any]) -> str | None:
    """Why ``hook`` does not run at a commit's stage; None when it does."""
    chosen = hook.get("stages") or config.get("default_stages") or ALL_STAGES
    hook_stages = [_LEGACY_STAGES.get(s, s) for s in chosen]
    if RUN_STAGE in hook_stages:
        return None
    return f"runs at stage {', '.join(hook_stages)}, not {RUN_STAGE}"


def mirrored_hook(mirror: Mirror, user: dict[str, Any]) -> dict[str, Any] | None:
    """The local hook that stands for ``user`` (upstream definition, user's
    settings on top), before its install is known; None when unknown."""
    upstream = mirror.hooks.get(user["id"])
    if upstream is None:
        return None
    hook = upstream.as_config()
    hook.update({k: v for k, v in user.items() if k not in _MIRROR_KEYS})
    return hook


def install(hook: dict[str, Any], resolved: Resolved, user: dict[str, Any]) -> str:
    """Give ``hook`` the environment ``resolved`` names; returns its description."""
    hook["language"] = resolved.language
    hook["language_version"] = resolved.language_version
    hook["additional_dependencies"] = [
        *resolved.dependencies,
        *user.get("additional_dependencies", []),
    ]
    description = resolved.describe()
    asked = user.get("language_version")
    if asked not in (None, resolved.language_version):
        description += f"; language_version {asked} replaced by "
        description += resolved.language_version
    return description


def derive(
    config: dict[str, Any],
    root: Path,
    files: Sequence[str],
    pins: Sequence[Pin | None] = (),
) -> Plan:
    """The offline config for ``files`` of the checkout at ``root``.

    ``pins`` (:func:`.revs.read_pins` of the config's text) give each repos
    entry's ``# frozen:`` release; a commit rev without one cannot run.
    """
    matcher = FileMatcher(root, files, config)
    has_node = bool(shutil.which("node") and shutil.which("npm"))
    derived = {k: v for k, v in config.items() if k != "repos"}
    derived["repos"] = []
    plan = Plan(derived, [])
    for position, entry in enumerate(config["repos"]):
        url, rev = str(entry.get("repo")), entry.get("rev")
        kind = url if url in ("local", "meta") else "local"
        mirror = None if url in ("local", "meta") else find_mirror(url)
        pin = _pin(rev, pins[position] if position < len(pins) else None)
        resolved = mirror.for_pin(pin) if mirror else None
        kept: list[dict[str, Any]] = []
        for user in entry["hooks"]:
            report = _report(user, url, rev, user.get("name"))
            plan.hooks.append(report)
            hook: dict[str, Any] | None = user
            if url not in ("local", "meta"):
                hook = mirrored_hook(mirror, user) if mirror else None
                if hook is None:
                    what = f"{url}@{rev}"
                    if mirror:
                        what = f"hook {user['id']} of {what}"
                    _skip(report, f"no offline mirror for {what}")
                    continue
                report.name = hook["name"]
                if resolved is not None:
                    report.mirror = install(hook, resolved, user)
            if why := off_stage(hook, config):
                _skip(report, why)
                continue
            filtered = url != "meta" and not hook.get("always_run")
            if filtered and not matcher.matching(hook):
                _skip(report, NO_FILES)
                continue
            if mirror and resolved is None:
                # Checked after the stage and files: only a hook that would
                # run is one that could not.
                _skip(report, pin.cannot_run())
                plan.cannot_run.append(len(plan.hooks) - 1)
                continue
            if hook.get("language") == "node" and not has_node:
                _skip(report, "node and npm are not on PATH")
                continue
            if url != "meta":
                plan.known_names[len(plan.hooks) - 1] = report.name
            plan.run_order.append(len(plan.hooks) - 1)
            kept.append(hook)
        if kept:
            derived["repos"].append({"repo": kind, "hooks": kept})
    return plan


def _pin(rev: Any, read: Pin | None) -> Pin:
    """The pin read from the text where it is this rev's, else the bare rev."""
    text = "" if rev is None else str(rev)
    return read if read is not None and read.rev == text else Pin(text)


def _report(user: dict[str, Any], url: str, rev: Any, name: str | None) -> HookReport:
    """A pending report for one hook of the user's config."""
    return HookReport(
        id=user["id"],
        name=name or user["id"],
        repo=url,
        rev=None if rev is None else str(rev),
        alias=user.get("alias"),
    )


def online_plan(config: dict[str, Any]) -> Plan:
    """Reports for running the user's config as it is (no mirroring)."""
    plan = Plan(config, [])
    for entry in config["repos"]:
        url = str(entry.get("repo"))
        mirror = None if url in ("local", "meta") else find_mirror(url)
        for user in entry["hooks"]:
            upstream = mirror.hooks.get(user["id"]) if mirror else None
            merged = {**(upstream.as_config() if upstream else {}), **user}
            report = _report(user, url, entry.get("rev"), merged.get("name"))
            plan.hooks.append(report)
            if why := off_stage(merged, config):
                _skip(report, why)
                continue
            if url == "local":
                plan.known_names[len(plan.hooks) - 1] = report.name
            plan.run_order.append(len(plan.hooks) - 1)
    return plan


def _skip(report: HookReport, why: str) -> None:
    report.status = "skipped"
    report.detail = why
