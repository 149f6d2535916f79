"""DCO sign-offs and upstream commit messages for the series' commits.

vLLM's DCO check wants every commit signed off by its author. Whoever
submits someone else's commit adds their own ``Signed-off-by`` too (DCO
clause (c)); the toolkit does that only when asked (``--signoff``), because
a sign-off is a legal statement, not formatting.

The series' commits also carry this project's bookkeeping trailers (DEP-3
``Origin``/``Forwarded``/..., ``Affects``, ``Invariant``); they mean nothing
upstream and are left out of the commits proposed there. So is the series'
placeholder identity (:data:`SERIES_PLACEHOLDER`, the patches' author and
sign-off): it is no person and certifies nothing, so a commit of its is
sent as the submitter's, certified by their own sign-off alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vllm_patchkit.gitcmd import Git

VENDOR_TRAILERS = frozenset(
    {"origin", "bug", "forwarded", "applied-upstream", "affects", "invariant"}
)
_SIGNOFF = re.compile(r"^Signed-off-by:\s*(.+?)\s*<([^>]+)>\s*$", re.IGNORECASE)
_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):\s")
_FIELD = "\x1f"
_RECORD = "\x1e"


@dataclass(frozen=True)
class Identity:
    name: str
    email: str

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"

    def same(self, other: Identity) -> bool:
        """The same person to DCO: git and the DCO check compare emails."""
        return self.email.lower() == other.email.lower()


SERIES_PLACEHOLDER = Identity("vllm-overlay developers", "dev@vllm-overlay.invalid")
"""The author and sign-off ``refresh`` gives the series' patches: no person,
so never sent upstream (an ``.invalid`` address cannot certify a DCO)."""


@dataclass
class SeriesCommit:
    sha: str
    subject: str
    message: str
    author: Identity
    signoffs: list[Identity] = field(default_factory=list)

    def signed_by(self, who: Identity) -> bool:
        return any(s.same(who) for s in self.signoffs)

    @property
    def placeholder(self) -> bool:
        """Authored by the series' placeholder: sent as the submitter's."""
        return self.author.same(SERIES_PLACEHOLDER)


def series_commits(git: Git, base: str) -> list[SeriesCommit]:
    """The commits from ``base`` (exclusive) to HEAD, oldest first."""
    fmt = _FIELD.join(["%H", "%an", "%ae", "%s", "%B"]) + _RECORD
    out = git.run(
        "log", "--reverse", "--first-parent", f"--format={fmt}", f"{base}..HEAD"
    ).stdout
    commits = []
    for record in out.split(_RECORD):
        record = record.strip("\n")
        if not record:
            continue
        sha, name, email, subject, message = record.split(_FIELD, 4)
        commits.append(
            SeriesCommit(
                sha=sha,
                subject=subject,
                message=message.rstrip() + "\n",
                author=Identity(name, email),
                signoffs=signoffs(message),
            )
        )
    return commits


def signoffs(message: str) -> list[Identity]:
    found = []
    for line in message.splitlines():
        match = _SIGNOFF.match(line.strip())
        if match:
            found.append(Identity(match.group(1), match.group(2)))
    return found


def configured_identity(git: Git) -> Identity | None:
    name = git.run("config", "user.name", check=False).stdout.strip()
    email = git.run("config", "user.email", check=False).stdout.strip()
    return Identity(name, email) if name and email else None


def missing_signoffs(commit: SeriesCommit, submitter: Identity | None) -> list[str]:
    """What DCO still needs on ``commit``: the author's, then the submitter's.
    A placeholder commit is sent as the submitter's: only theirs counts."""
    missing = []
    if not commit.placeholder and not commit.signed_by(commit.author):
        missing.append(f"author {commit.author}")
    if submitter is not None and not commit.signed_by(submitter):
        missing.append(f"submitter {submitter}")
    return missing


def upstream_message(message: str, add_signoff: Identity | None = None) -> str:
    """``message`` with upstream's trailers only (no vendor trailer, no
    placeholder sign-off), with ``add_signoff`` appended."""
    paragraphs, trailers = split_trailers(message)
    kept = [
        line
        for line in trailers
        if _trailer_key(line) not in VENDOR_TRAILERS and not _is_placeholder(line)
    ]
    if add_signoff is not None and not any(
        s.same(add_signoff) for s in signoffs("\n".join(kept))
    ):
        kept.append(f"Signed-off-by: {add_signoff}")
    if kept:
        paragraphs.append("\n".join(kept))
    return "\n\n".join(paragraphs) + "\n"


def split_trailers(message: str) -> tuple[list[str], list[str]]:
    """The message's paragraphs and its trailer lines: the last paragraph's,
    when every line of it is a ``Key: value`` trailer."""
    paragraphs = message.rstrip().split("\n\n")
    trailers = paragraphs[-1].splitlines() if len(paragraphs) > 1 else []
    if trailers and all(map(_trailer_key, trailers)):
        return paragraphs[:-1], trailers
    return paragraphs, []


def _is_placeholder(line: str) -> bool:
    return any(s.same(SERIES_PLACEHOLDER) for s in signoffs(line))


def _trailer_key(line: str) -> str | None:
    match = _TRAILER.match(line)
    return match.group(1).lower() if match else None
