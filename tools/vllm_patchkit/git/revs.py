"""Check user-given refs, revisions and repositories before git sees them.

git reads any argument that starts with ``-`` as an option, wherever it
stands (``fetch --upload-pack=CMD`` runs CMD); a fetch reads ``A:B`` as
"write A into my ref B", and ``transport::address`` starts a remote helper
(``ext::`` runs a command). So every value a user passes that reaches git
as an argument goes through one of these checks first, and callers also put
it after ``--`` where the git command accepts one.
"""

from __future__ import annotations

import re

from vllm_patchkit.errors import InputError

OBJECT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # SHA-1 or SHA-256
# What a branch or tag name needs; a strict subset of git's ref grammar.
_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]*")
_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")


class ArgumentError(InputError):
    """A value that must not reach git as given (refused, exit 2)."""


def check_revision(value: str, what: str) -> str:
    """A revision for the local repository (``v0.28.0``, ``HEAD~2``, a sha).

    Revision syntax is left to git (it is passed to ``rev-parse --verify``,
    which reads exactly one revision), but nothing that reads as an option.
    """
    if not value or value[0] in "-+" or not value.isprintable():
        raise ArgumentError(f"{what} {value!r} is not a revision")
    return value


def check_ref_name(value: str, what: str) -> str:
    """A ref to fetch: a plain branch or tag name, ``HEAD`` or a commit id.

    No ``:`` (a fetch would write into a local ref), no leading ``+`` or
    ``-``, no ``..``, ``@{`` or ``//``.
    """
    if OBJECT_ID.fullmatch(value):
        return value
    if (
        not _REF.fullmatch(value)
        or ".." in value
        or "//" in value
        or value.endswith(("/", ".", ".lock"))
        or "/." in value
    ):
        raise ArgumentError(
            f"{what} {value!r} is not a branch, tag or commit id (letters, digits, "
            "'.', '_', '-' and '/'; no leading '-')"
        )
    return value


def check_repository(value: str, what: str) -> str:
    """A repository to fetch from: a path, a URL or a remote's name.

    Refused: anything that starts with ``-``, control characters, and the
    ``transport::address`` remote-helper syntax.
    """
    if (
        not value
        or value[0] == "-"
        or not value.isprintable()
        or value != value.strip()
        or _HELPER.match(value)
    ):
        raise ArgumentError(
            f"{what} {value!r} is not a repository path, URL or remote name"
        )
    return value
