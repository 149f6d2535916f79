"""The traceback log of an unexpected failure, written where nobody else can aim it.

The cache directory may be shared or writable by others, so the log is
created the way a private temporary file is: a name nobody can guess (a
random part, not only the time and pid), exclusive creation that follows
no symlink, mode 0600, inside a ``logs/`` directory opened without
following a symlink. A planted link at the log's path, or a ``logs/``
that is a link, is never written through: the traceback goes to stderr
instead, with the reason.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from pathlib import Path

_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def write_traceback(exc: BaseException) -> Path | None:
    """The traceback of ``exc`` in a new private file
    ``logs/error-STAMP-RANDOM.log`` of the cache directory; on stderr instead
    (None), with the reason, when that cannot be written."""
    import traceback

    from vllm_patchkit.paths import cache_dir

    text = "".join(traceback.format_exception(exc))
    try:
        return _write_log(
            cache_dir() / "logs", f"vllm-patchkit {' '.join(sys.argv[1:])}\n{text}"
        )
    except OSError as err:
        print(text, file=sys.stderr, end="")
        print(f"vllm-patchkit: traceback not logged: {err}", file=sys.stderr)
        return None


def _write_log(directory: Path, text: str) -> Path:
    directory.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
    if directory.is_symlink():
        raise OSError(f"{directory} is a symbolic link; not writing through it")
    try:
        dir_fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:  # ELOOP: swapped for a link since the check
        raise OSError(f"{directory} is not a plain directory ({exc})") from exc
    try:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = f"error-{stamp}-{secrets.token_hex(8)}.log"
        fd = os.open(name, _FILE_FLAGS, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "w", encoding="utf-8") as log:
        log.write(text)
    return directory / name
