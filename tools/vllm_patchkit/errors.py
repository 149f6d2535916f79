"""Exit codes, and the errors that carry them: one path from a failure to a code.

A failure the toolkit means to report is a :class:`PatchkitError` whose class
says the exit code and the JSON status word (``cli.error_handler`` maps them).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2
EXIT_ERROR = 3
EXIT_CONFLICT = 4
EXIT_UPSTREAMED = 5
EXIT_INTERRUPTED = 130

EXIT_BY_STATUS = {
    "applied": EXIT_OK,
    "already-applied": EXIT_OK,
    "not-carried": EXIT_OK,
    "rebased": EXIT_OK,
    "ready": EXIT_OK,
    "submitted": EXIT_OK,
    "checks-failed": EXIT_FAILED,
    "fix-missing": EXIT_FAILED,
    "refused": EXIT_REFUSED,
    "error": EXIT_ERROR,
    "conflict": EXIT_CONFLICT,
    "upstreamed": EXIT_UPSTREAMED,
}
"""The exit code of each status word a command's result reports (apply,
rebase, pr)."""


class PatchkitError(Exception):
    """A failure with a known exit code; the message says what state is left."""

    code = EXIT_ERROR
    status = "error"


class RefusedError(PatchkitError):
    """Refused before anything was changed (bad input, dirty or busy checkout)."""

    code = EXIT_REFUSED
    status = "refused"


class InputError(RefusedError, ValueError):
    """Input a command cannot use (a path, a revision, a version range, a
    missing base); refused before anything was changed. A ValueError too, so
    that library callers that catch bad values keep catching it."""


class EnvironmentFailure(PatchkitError):
    """The environment failed the run (git, a hook, the disk, permissions)."""


class RollbackFailedError(EnvironmentFailure):
    """A rollback did not complete; the message says where the checkout is."""


class Interrupted(PatchkitError):
    """SIGINT, SIGTERM or SIGHUP; the message says whether anything changed."""

    code = EXIT_INTERRUPTED
    status = "interrupted"
