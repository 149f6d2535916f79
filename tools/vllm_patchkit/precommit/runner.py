"""Run ``pre-commit run`` in a throwaway clone and read each hook's verdict.

The user's checkout is never the working directory: vLLM's own hooks fix
files in place (``ruff --fix``, ``ruff format``, ``clang-format -i``) and
tools drop caches beside the code (``.ruff_cache``, ``.mypy_cache``). The run
happens in a shared clone at the checkout's HEAD with its uncommitted and
untracked files copied in, so a check sees exactly the user's files and
leaves them, and the git state, as they were. A fix a hook makes is reported
as a failure with its diff, as pre-commit does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from vllm_patchkit.errors import EnvironmentFailure
from vllm_patchkit.gitcmd import NO_HOOKS, Git
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.precommit.derive import (
    NO_FILES,
    PENDING,
    Plan,
    PrecommitRefused,
)

_RESULT = re.compile(
    r"\.{3,}(?P<postfix>\(no files to check\))?(?P<status>Passed|Failed|Skipped)$"
)
_ANY_RESULT = re.compile(r"^(?P<name>.+?)" + _RESULT.pattern)
_DURATION = re.compile(r"^- duration: ([0-9.]+)s$")
_DIFF_BANNER = "All changes made by hooks:"
_CRASH = ("An unexpected error has occurred", "An error has occurred")
_CONFIG_ERRORS = ("InvalidConfigError", "InvalidManifestError")
_MISSING_PACKAGE = (
    re.compile(r"Failed building wheel for (\S+)"),
    re.compile(r"satisfies the requirement (\S+)"),
    re.compile(r"No matching distribution found for (\S+)"),
    re.compile(r"No matching version found for (\S+)"),
    re.compile(r"'(\S+)' is not in this registry"),
)


class PrecommitEnvironmentError(EnvironmentFailure, RuntimeError):
    """pre-commit could not set up a hook (an install from the index failed)."""


@contextmanager
def scratch_clone(root: Path) -> Iterator[Path]:
    """A clone of ``root`` at HEAD plus its uncommitted and untracked files."""
    git = Git(root)
    head = git.commit_of("HEAD")
    if head is None:
        raise PrecommitRefused(f"{root}: the checkout has no commit")
    scratch = Path(tempfile.mkdtemp(prefix="vllm-patchkit-precommit-"))
    try:
        tree = scratch / root.name
        clone = ("clone", "--quiet", "--shared", "--no-checkout")
        Git(scratch).run(*NO_HOOKS, *clone, str(root), str(tree))
        Git(tree).run(*NO_HOOKS, "checkout", "--quiet", "--detach", head)
        _copy_changes(root, tree)
        yield tree
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _copy_changes(root: Path, tree: Path) -> None:
    # GIT_OPTIONAL_LOCKS=0: git status must not refresh the user's index.
    options = ("-z", "--untracked-files=all", "--no-renames", "--ignore-submodules")
    status = (
        Git(root)
        .run("status", "--porcelain=v1", *options, env={"GIT_OPTIONAL_LOCKS": "0"})
        .stdout
    )
    for record in filter(None, status.split("\0")):
        relative = record[3:]
        source, dest = root / relative, tree / relative
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        if source.is_symlink() or source.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest, follow_symlinks=False)
    if status:
        # Staged in the clone, so that pre-commit's diff shows only what the
        # hooks changed.
        Git(tree).run("add", "--all")


def precommit_command(
    config: Path, files: Sequence[str], *, verbose: bool = False
) -> list[str]:
    command = [sys.executable, "-m", "pre_commit", "run", "--config", str(config)]
    command += ["--color", "never", "--show-diff-on-failure"]
    if verbose:
        command.append("--verbose")
    return [*command, "--files", *files]


MYPY_CACHE = "mypy"
"""Under the toolkit's ``precommit/`` cache: mypy's cache for vLLM's hooks."""


def run_in(
    tree: Path, command: list[str], skip: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # The clone is thrown away, and with it the .mypy_cache mypy would keep
    # there: vLLM's mypy hooks took 17 s of CPU on the series' files at
    # each run, 4.8 s with the cache kept (mypy checks each entry by the
    # file's hash, so another clone's entries serve). The user's own
    # setting wins.
    env.setdefault("MYPY_CACHE_DIR", str(cache_dir() / "precommit" / MYPY_CACHE))
    if skip:
        env["SKIP"] = ",".join(filter(None, [env.get("SKIP", ""), *skip]))
    return subprocess.run(
        command,
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )


def read_results(plan: Plan, output: str, skip: Sequence[str]) -> int:
    """Fill in each planned hook's status from pre-commit's result lines.

    pre-commit prints one ``name....Status`` line per hook, in config order,
    and then that hook's output. Names repeat (vLLM's pip-compile hooks), so
    lines are matched to the plan in order, by name where it is known.
    Returns how many hooks reported.
    """
    reported = 0
    pending = iter(plan.run_order)
    expected = next(pending, None)
    current: int | None = None
    block: list[str] = []
    for line in output.splitlines():
        status = None if expected is None else _result(line, plan, expected)
        if status is not None and expected is not None:
            _finish(plan, current, block)
            current, block = expected, []
            _set_status(plan, expected, *status, skip)
            reported += 1
            expected = next(pending, None)
        elif line.startswith(_DIFF_BANNER):
            _finish(plan, current, block)
            current, block = None, []
        elif current is not None:
            block.append(line)
    _finish(plan, current, block)
    for index in plan.run_order:
        report = plan.hooks[index]
        if report.status == PENDING:
            report.status = "skipped"
            report.detail = "not run: pre-commit stopped before it (fail_fast)"
    return reported


def _result(line: str, plan: Plan, index: int) -> tuple[str, str] | None:
    name = plan.known_names.get(index)
    if name is None:
        match = _ANY_RESULT.match(line)
    else:
        match = _RESULT.fullmatch(line[len(name) :]) if line.startswith(name) else None
    return (match["status"], match["postfix"] or "") if match else None


def _set_status(
    plan: Plan, index: int, status: str, postfix: str, skip: Sequence[str]
) -> None:
    report = plan.hooks[index]
    report.status = status.lower()
    if status == "Skipped":
        report.detail = NO_FILES if postfix else "SKIP"
        if not postfix and {report.id, report.alias} & set(skip):
            report.detail = "--skip"


def _finish(plan: Plan, index: int | None, block: list[str]) -> None:
    if index is None:
        return
    report = plan.hooks[index]
    for line in block:
        match = _DURATION.match(line)
        if match:
            report.duration_s = float(match.group(1))
    if report.status == "failed":
        report.detail = "\n".join(block).strip()


def hook_diff(output: str) -> str:
    """The diff ``--show-diff-on-failure`` printed, or ''."""
    start = output.find(_DIFF_BANNER)
    if start < 0:
        return ""
    return output[start + len(_DIFF_BANNER) :].strip("\n")


def raise_crash(output: str, returncode: int, installs: dict[str, list[str]]) -> None:
    """Say why pre-commit failed before any hook ran (bad config, an install).

    ``installs`` maps each additional dependency to the hooks that need it.
    """
    start = min((i for i in map(output.find, _CRASH) if i >= 0), default=-1)
    if start < 0:
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise PrecommitEnvironmentError(
            f"pre-commit exited {returncode} before running any hook: {tail}"
        )
    crash = output[start:]
    if any(kind in crash for kind in _CONFIG_ERRORS):
        raise PrecommitRefused(f"pre-commit rejected the config: {crash.strip()}")
    lines = [line.strip() for line in crash.strip().splitlines()]
    first = next((x for x in lines if x.startswith(("ERROR:", "npm error"))), lines[0])
    first = re.sub(r" \(from versions: [^)]*\)", "", first)
    log = re.search(r"Check the log at (\S+)", crash)
    where = f"; pre-commit's log: {log.group(1)}" if log else ""
    named = [m.group(1) for p in _MISSING_PACKAGE for m in [p.search(crash)] if m]
    package = next(
        (d for d in installs for n in named if d.startswith(n)), None
    ) or next((d for d in installs if d in crash), None)
    if package is None:
        raise PrecommitEnvironmentError(f"pre-commit failed: {first}{where}")
    hooks = installs[package]
    raise PrecommitEnvironmentError(
        f"installing {package} for {', '.join(hooks)} failed: {first}{where}; "
        f"--skip {' --skip '.join(hooks)} leaves it out"
    )
