"""One toolkit run at a time per checkout, rollback that is checked, and
recovery after a hard kill that never destroys later work.

Every run that changes a checkout holds an exclusive ``flock`` on a file in
the checkout's git directory (released by the kernel even on SIGKILL) and
writes a journal before touching anything: HEAD, the branch, and the
patch-ids and paths of what it is about to apply. Inside the guard SIGINT,
SIGTERM and SIGHUP stop the running git (and its hooks) and unwind at the
next git call; the rollback itself runs shielded from further signals.

A rollback is checked afterwards (HEAD, branch, no ``git am`` left, no
changed or left-over file of ours); one that did not complete keeps the
journal and raises :class:`RollbackFailedError` saying where the checkout
is. A journal found by a later run is acted on only when the checkout is in
a state the dead run could have left: on the journal's branch, at its HEAD
or with only the run's own ``git am`` commits on top, possibly with its own
``git am`` open, and no other change. Anything else is refused with the
journal named and the two ways on: ``--recover`` (go back to where that run
started, saving what is there now in the stash and under
``refs/vllm-patchkit/saved/``) or ``--discard-journal`` (keep the checkout
as it is).
"""

from __future__ import annotations

import enum
import fcntl
import json
import os
import re
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, Any

from vllm_patchkit.errors import Interrupted, RefusedError, RollbackFailedError
from vllm_patchkit.git.checkout import IN_PROGRESS, dirty_reason
from vllm_patchkit.git.revs import OBJECT_ID
from vllm_patchkit.gitcmd import (
    INTERRUPTS,
    Git,
    GitError,
    deferred_interrupts,
    shielded,
)

SAVED_REFS = "refs/vllm-patchkit/saved"


class BusyError(RefusedError, RuntimeError):
    """Another vllm-patchkit run holds this checkout."""


class JournalError(RefusedError):
    """A dead run's journal that cannot be acted on safely; nothing changed."""


class JournalAction(enum.StrEnum):
    """What to do with a journal a dead run left (apply --recover, ...)."""

    AUTO = "auto"
    """Recover only when the checkout is as the dead run could have left it."""
    RECOVER = "recover"
    """Go back to where it started; save what differs (stash, saved ref)."""
    DISCARD = "discard"
    """Delete the journal and leave the checkout as it is."""


@dataclass(frozen=True)
class Journal:
    head: str
    branch: str | None
    command: str
    pid: int
    patch_ids: tuple[str, ...] = ()
    """Of the patches the run applies, in order: its own commits have them."""
    paths: tuple[str, ...] = ()
    """The paths those patches touch: left-overs there are the run's."""


def read_journal(path: Path) -> Journal:
    """The journal at ``path``; JournalError naming it when malformed."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise JournalError(f"{path}: unreadable journal: {exc}") from None
    wanted = {f.name for f in fields(Journal)}
    required = {"head", "branch", "command", "pid"}
    if not isinstance(data, dict) or not required <= data.keys() <= wanted:
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise JournalError(
            f"{path}: malformed journal: keys {keys}, expected {sorted(wanted)}"
        )
    ok = (
        isinstance(data["head"], str)
        and OBJECT_ID.fullmatch(data["head"]) is not None
        and (data["branch"] is None or isinstance(data["branch"], str))
        and isinstance(data["command"], str)
        and isinstance(data["pid"], int)
        and all(
            isinstance(data.get(k, []), list)
            and all(isinstance(v, str) for v in data.get(k, []))
            for k in ("patch_ids", "paths")
        )
    )
    if not ok:
        raise JournalError(f"{path}: malformed journal: a value has the wrong type")
    lists = {key: tuple(data.get(key, ())) for key in ("patch_ids", "paths")}
    return Journal(**{**data, **lists})


class CheckoutGuard:
    """Lock, deal with a dead run's journal, journal, roll back."""

    def __init__(
        self, git: Git, command: str, journal_action: JournalAction = JournalAction.AUTO
    ) -> None:
        self.git = git
        self.command = command
        self.journal_action = journal_action
        self.directory = git.git_dir() / "vllm-patchkit"
        self.journal_file = self.directory / "journal.json"
        self._lock: IO[str] | None = None
        self._signals: Any = None
        self.journal: Journal | None = None
        self.recovered: str | None = None
        """What was done about a dead run's journal, for the user."""

    def __enter__(self) -> CheckoutGuard:
        self.directory.mkdir(exist_ok=True)
        handle = (self.directory / "lock").open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise BusyError(
                f"{self.git.root}: another vllm-patchkit run is working on this "
                "checkout; try again when it has finished"
            ) from None
        self._lock = handle
        self._signals = deferred_interrupts()
        self._signals.__enter__()
        try:
            self.recovered = self._handle_journal()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            self._finish(exc)
        finally:
            self._release()

    def _finish(self, exc: BaseException | None) -> None:
        signum = INTERRUPTS.signum  # received inside deferred_interrupts()
        if self.journal is None:
            if isinstance(exc, Interrupted):
                raise Interrupted(f"{exc}; nothing was changed") from None
            return
        if exc is None and signum is None:
            self._close()
            return
        if isinstance(exc, RollbackFailedError):
            return
        where = self.rollback()
        if isinstance(exc, Interrupted) or (exc is None and signum is not None):
            name = str(exc) if exc else "interrupted"
            raise Interrupted(f"{name}; the checkout was restored to {where}") from None
        if exc is not None:
            exc.add_note(f"the checkout was restored to {where}")

    def _release(self) -> None:
        if self._signals is not None:
            self._signals.__exit__(None, None, None)
            self._signals = None
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def begin(
        self,
        head: str,
        branch: str | None,
        patch_ids: list[str] | tuple[str, ...] = (),
        paths: list[str] | tuple[str, ...] = (),
    ) -> None:
        """Journal the state to return to, before the first change."""
        journal = Journal(
            head, branch, self.command, os.getpid(), tuple(patch_ids), tuple(paths)
        )
        partial = self.journal_file.with_suffix(".tmp")
        with shielded():
            partial.write_text(json.dumps(journal.__dict__))  # tuples as lists
            partial.replace(self.journal_file)
            self.journal = journal

    def rollback(self) -> str:
        """Put the checkout back as begin() found it; where that is
        (RollbackFailedError, the journal kept, when it did not get there)."""
        journal = self.journal
        assert journal is not None
        restore_journal(self.git, journal, self.journal_file)
        self._close()
        return _where(journal.head, journal.branch)

    def _close(self) -> None:
        with shielded():
            self.journal_file.unlink(missing_ok=True)
            self.journal = None

    def _handle_journal(self) -> str | None:
        if not self.journal_file.exists():
            return None
        root = self.git.root
        if self.journal_action is JournalAction.DISCARD:
            self.journal_file.unlink()
            return (
                f"the journal {self.journal_file} of an interrupted run was "
                "discarded; the checkout was left as it is"
            )
        try:
            old = read_journal(self.journal_file)
        except JournalError as exc:
            # Only the first way on: --recover needs a journal it can read.
            keep = journal_commands(root, self.journal_file).splitlines()[0]
            raise JournalError(f"{exc}; nothing was changed.\n{keep}") from None
        dead = f"an interrupted '{old.command}' run (pid {old.pid})"
        changes = changes_since(self.git, old)
        if changes and self.journal_action is JournalAction.AUTO:
            raise JournalError(
                f"{root}: refusing: {dead} left its journal {self.journal_file}, "
                f"and the checkout has changed since ({'; '.join(changes)}); "
                "nothing was changed.\n" + journal_commands(root, self.journal_file)
            )
        saved = save_current_state(self.git, old) if changes else []
        restore_journal(self.git, old, self.journal_file)
        with shielded():
            self.journal_file.unlink()
        return (
            f"{dead} was cleaned up: the checkout is back at "
            + _where(old.head, old.branch)
            + (f"; saved first: {', '.join(saved)}" if saved else "")
        )


def journal_commands(root: Path, journal_file: Path) -> str:
    return (
        f"  to keep the checkout as it is now:  vllm-patchkit apply "
        f"--discard-journal {root}   (or: rm {journal_file})\n"
        f"  to go back to where that run started, saving what is there now:  "
        f"vllm-patchkit apply --recover {root}"
    )


def _where(head: str, branch: str | None) -> str:
    return head[:12] + (f" on {branch}" if branch else " (detached)")


def _am_dir(git: Git) -> Path:
    return git.git_dir() / "rebase-apply"


def own_commits(git: Git, journal: Journal) -> int | None:
    """How many commits on top of the journal's HEAD are the run's own
    patches, in order; None when HEAD has others."""
    head = git.head()
    if head == journal.head:
        return 0
    ancestor = git.run("merge-base", "--is-ancestor", journal.head, head, check=False)
    if ancestor.returncode != 0 or not journal.patch_ids:
        return None
    commits = git.out("rev-list", "--reverse", f"{journal.head}..{head}").split()
    if len(commits) > len(journal.patch_ids):
        return None
    if git.out("rev-list", "--merges", f"{journal.head}..{head}"):
        return None
    log = git.commit_diffs("--reverse", f"{journal.head}..{head}")
    ids = [pid for pid, _ in git.patch_ids(log)]
    if ids != list(journal.patch_ids[: len(commits)]):
        return None
    return len(commits)


def changes_since(git: Git, journal: Journal) -> list[str]:
    """Why the checkout is not in a state the journal's run could have left;
    empty when it is."""
    changes = []
    branch = git.branch()
    if branch != journal.branch:
        changes.append(
            f"the run was on {journal.branch or 'a detached HEAD'}, the checkout "
            f"is now on {branch or 'a detached HEAD'}"
        )
    elif own_commits(git, journal) is None:
        changes.append(
            f"HEAD {git.head()[:12]} is not {journal.head[:12]} plus that run's "
            "own commits"
        )
    am_dir = _am_dir(git)
    if am_dir.exists():
        if not (am_dir / "applying").exists():
            changes.append("a git rebase is in progress")
        elif not set(_am_patch_ids(git, am_dir)) <= set(journal.patch_ids):
            changes.append("a git am of another patch is in progress")
    for name in IN_PROGRESS:  # rebase-apply: the am above
        if name != "rebase-apply" and (git.git_dir() / name).exists():
            changes.append(f"{name} is in progress")
    dirty = dirty_reason(git)
    return changes + [dirty] if dirty else changes


def _am_patch_ids(git: Git, am_dir: Path) -> list[str]:
    mails = sorted(p for p in am_dir.iterdir() if re.fullmatch(r"\d{4}", p.name))
    if not mails and (am_dir / "patch").is_file():
        mails = [am_dir / "patch"]
    text = "".join(p.read_text(errors="replace") for p in mails)
    if not text:
        return ["(no patch)"]
    return [pid for pid, _ in git.patch_ids(text)]


def save_current_state(git: Git, journal: Journal) -> list[str]:
    """Before a forced recovery: keep what differs from the journal's state."""
    saved = []
    with shielded():
        if _am_dir(git).exists():
            git.run("am", "--quit")
        if git.run("ls-files", "--unmerged").stdout:
            git.run("reset", "--quiet")  # unmerged entries cannot be stashed
        if git.status_porcelain():
            message = f"vllm-patchkit: saved before recovering to {journal.head[:12]}"
            git.run("stash", "push", "--include-untracked", "--message", message)
            saved.append("uncommitted changes in `git stash` (stash@{0})")
        if journal.branch is not None and git.branch() != journal.branch:
            git.run("switch", "--quiet", journal.branch)
        head = git.head()
        if head != journal.head and own_commits(git, journal) is None:
            ref = f"{SAVED_REFS}/{time.strftime('%Y%m%d-%H%M%S')}-{head[:8]}"
            git.run("update-ref", ref, head)
            saved.append(f"the branch's commit {head[:12]} as {ref}")
    return saved


def restore_journal(git: Git, journal: Journal, journal_file: Path | None) -> None:
    """Abort our ``git am``, put HEAD, branch, index and tree back, remove
    what the run left at its paths; check it; RollbackFailedError if not."""
    failures: list[str] = []
    with shielded():
        for step in _restore_steps(git, journal):
            try:
                step()
            except (GitError, OSError) as exc:
                failures.append(str(exc).strip().splitlines()[0])
        problems = _differences(git, journal)
    if problems:
        kept = (
            f"; the journal {journal_file} is kept: once the cause is fixed, "
            f"`vllm-patchkit apply --recover {git.root}` finishes the rollback"
            if journal_file
            else ""
        )
        cause = f" ({'; '.join(failures)})" if failures else ""
        raise RollbackFailedError(
            f"{git.root}: the rollback did not complete{cause}: "
            + "; ".join(problems)
            + kept
        )


def _restore_steps(git: Git, journal: Journal) -> list[Any]:
    def abort_am() -> None:
        if _am_dir(git).exists():
            git.run("am", "--abort")

    def branch() -> None:
        if journal.branch is not None and git.branch() != journal.branch:
            git.run("checkout", "--quiet", "--force", journal.branch)

    def reset() -> None:
        git.run("reset", "--hard", "--quiet", journal.head)

    def leftovers() -> None:
        for name in _leftovers(git, journal):
            path = git.root / name
            path.unlink()
            # Directories the run created for the file, once empty.
            for parent in path.parents:
                if parent == git.root or any(parent.iterdir()):
                    break
                parent.rmdir()

    return [abort_am, branch, reset, leftovers]


def _leftovers(git: Git, journal: Journal) -> list[str]:
    """Untracked, not ignored files at the run's paths (``path~HEAD`` too)."""
    if not journal.paths:
        return []
    others = git.run("ls-files", "--others", "--exclude-standard", "-z").stdout
    return [
        name
        for name in others.split("\0")
        if name and any(name == p or name.startswith(p + "~") for p in journal.paths)
    ]


def _differences(git: Git, journal: Journal) -> list[str]:
    """How the checkout differs from the journal's state, said plainly."""
    problems = []
    head, branch = git.head(), git.branch()
    if branch != journal.branch:
        problems.append(
            f"the checkout is on {branch or 'a detached HEAD'}, not {journal.branch}"
        )
    if head != journal.head:
        on_top = git.run(
            "log", "--format=%h %s", f"{journal.head}..{head}", check=False
        ).stdout.splitlines()
        if on_top:
            problems.append(
                f"HEAD is {head[:12]}, with {len(on_top)} commit(s) on top of "
                f"{journal.head[:12]}: " + ", ".join(on_top)
            )
        else:
            problems.append(f"HEAD is {head[:12]}, not {journal.head[:12]}")
    if _am_dir(git).exists():
        problems.append(f"a git am is still in progress ({_am_dir(git)})")
    changed = git.changed_paths(untracked=False)
    if changed:
        problems.append("uncommitted changes in " + ", ".join(changed[:5]))
    left = _leftovers(git, journal)
    if left:
        problems.append("files left behind: " + ", ".join(left[:5]))
    return problems
