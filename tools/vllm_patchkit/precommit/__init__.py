"""Run a vLLM checkout's own pre-commit hooks on the files the series touches.

vLLM's ``.pre-commit-config.yaml`` names remote hook repositories that an
offline machine cannot clone. :func:`run_precommit` writes a derived config
(outside the checkout) in which each known remote hook is the same tool at
the same version installed from the package index (:mod:`.mirrors`; a rev
pinned to a commit by the release its ``# frozen:`` comment names,
:mod:`.revs`), and
runs ``pre-commit run --files`` with it in a throwaway clone of the checkout
(:mod:`.runner`), so the checkout itself is only read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vllm_patchkit import progress
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import cache_dir, write_atomic
from vllm_patchkit.precommit.derive import (
    CONFIG_FILE,
    HookReport,
    Plan,
    PrecommitRefused,
    derive,
    online_plan,
    read_config,
    read_text,
)
from vllm_patchkit.precommit.revs import read_pins
from vllm_patchkit.precommit.runner import (
    PrecommitEnvironmentError,
    hook_diff,
    precommit_command,
    raise_crash,
    read_results,
    run_in,
    scratch_clone,
)


@dataclass
class PrecommitResult:
    path: Path
    passed: bool
    """No hook failed (every hook passed or was skipped)."""
    hooks: list[HookReport]
    """One report per hook of the checkout's config, in config order."""
    command: list[str]
    """The pre-commit command line that ran (empty when no hook had to run)."""
    output: str
    """pre-commit's output (stdout and stderr)."""
    config: Path
    """The config pre-commit ran with: the derived one, or the checkout's."""
    files: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Requested files that do not exist in the checkout (not checked)."""
    online: bool = False
    skip: list[str] = field(default_factory=list)
    returncode: int | None = None

    def count(self, status: str) -> int:
        """How many hooks ended ``status`` (passed, failed or skipped)."""
        return sum(hook.status == status for hook in self.hooks)

    @property
    def diff(self) -> str:
        """What fixing hooks changed (in the scratch clone, not in ``path``)."""
        return hook_diff(self.output)


def derive_config(root: Path, files: Sequence[str]) -> tuple[Plan, Path]:
    """The offline plan for ``files`` of ``root`` and where its config went."""
    plan = derive(read_config(root), root, files, read_pins(read_text(root)))
    return plan, _write_config(root, plan)


def run_precommit(
    path: Path,
    files: Sequence[str],
    *,
    online: bool = False,
    skip: Sequence[str] = (),
    verbose: bool = False,
) -> PrecommitResult:
    """Run the checkout's hooks on ``files`` (paths relative to ``path``).

    ``online`` runs the checkout's config as it is (pre-commit clones the
    remote repositories); ``skip`` lists hook ids or aliases for pre-commit's
    ``SKIP``; ``verbose`` adds each hook's duration. Raises PrecommitRefused
    (bad input, nothing run) or PrecommitEnvironmentError (an install failed).
    """
    root = _checkout_root(path)
    wanted = list(dict.fromkeys(files))
    present = [f for f in wanted if (root / f).is_file() or (root / f).is_symlink()]
    missing = [f for f in wanted if f not in present]
    if not present:
        raise PrecommitRefused(f"{root}: none of the files exist: {', '.join(wanted)}")
    if online:
        plan, config = online_plan(read_config(root)), root / CONFIG_FILE
    else:
        plan, config = derive_config(root, present)
        _refuse_to_pass_unrun(plan, skip)
    command: list[str] = []
    output, returncode = "", None
    if plan.run_order:
        command = precommit_command(config, present, verbose=verbose)
        hooks = len(plan.run_order)
        with (
            progress.phase(f"pre-commit: {hooks} hook(s) on {len(present)} file(s)"),
            scratch_clone(root) as tree,
        ):
            proc = run_in(tree, command, skip)
        # Paths in the scratch clone are the checkout's paths to the user.
        output, returncode = proc.stdout.replace(str(tree), str(root)), proc.returncode
        if not read_results(plan, output, skip) and returncode:
            raise_crash(output, returncode, _installs(plan))
    failed = any(h.status == "failed" for h in plan.hooks)
    if returncode and not failed:
        # pre-commit failed, yet no hook line said so (a crash mid-run, a
        # line not understood): the gate must not pass.
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise PrecommitEnvironmentError(
            f"pre-commit exited {returncode} but no hook reported a failure: {tail}"
        )
    return PrecommitResult(
        path=root,
        passed=not failed,
        hooks=plan.hooks,
        command=command,
        output=output,
        config=config,
        files=present,
        missing=missing,
        online=online,
        skip=list(skip),
        returncode=returncode,
    )


def _refuse_to_pass_unrun(plan: Plan, skip: Sequence[str]) -> None:
    """A hook that would run but cannot is no pass: exit 3 unless skipped."""
    unrun: dict[str, list[str]] = {}
    for index in plan.cannot_run:
        report = plan.hooks[index]
        if {report.id, report.alias} & set(skip):
            report.detail = "--skip"
        else:
            unrun.setdefault(report.detail, []).append(report.alias or report.id)
    if unrun:
        why = "; ".join(f"{', '.join(ids)}: {d}" for d, ids in unrun.items())
        ids = [hook for group in unrun.values() for hook in group]
        raise PrecommitEnvironmentError(
            f"{why} (a '# frozen: <tag>' comment on the rev line names one); "
            f"--skip {' --skip '.join(ids)} leaves it out"
        )


def _checkout_root(path: Path) -> Path:
    root = path.resolve()
    if not root.is_dir():
        raise PrecommitRefused(f"{path}: not a directory")
    top = Git(root).toplevel()
    if top is None:
        raise PrecommitRefused(f"{path}: not a git checkout")
    if top.resolve() != root:
        raise PrecommitRefused(f"{path}: not the top of its git checkout ({top})")
    return root


def _write_config(root: Path, plan: Plan) -> Path:
    """Write the derived config under the cache, named by its content."""
    header = (
        f"# Derived by vllm-patchkit precommit from {root / CONFIG_FILE}:\n"
        "# remote hooks mirrored as local hooks installed from the package index.\n"
    )
    text = header + yaml.safe_dump(plan.config, sort_keys=False, width=1000)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    dest = cache_dir() / "precommit" / f"config-{digest}.yaml"
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(dest, text)
    return dest


def _installs(plan: Plan) -> dict[str, list[str]]:
    """Each additional dependency of the hooks to run -> those hooks' ids."""
    installs: dict[str, list[str]] = {}
    for entry in plan.config.get("repos", []):
        for hook in entry.get("hooks", []):
            for dependency in hook.get("additional_dependencies", []):
                ids = installs.setdefault(str(dependency), [])
                ids += [] if hook["id"] in ids else [hook["id"]]
    return installs
