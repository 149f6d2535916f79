"""Where the project's own files and its caches live.

The toolkit runs two ways: from a vllm-overlay checkout (editable install,
or ``PYTHONPATH``) and from an installed wheel. A checkout's ``patches/`` is
the series a contributor edits; a wheel carries a read-only copy of the
series it was built from, as package data under ``vllm_patchkit/data/``.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent

PROJECT_ROOT = PACKAGE_DIR.parents[1]
"""The vllm-overlay checkout this package runs from (meaningful in a checkout)."""

PACKAGED_PATCHES_DIR = PACKAGE_DIR / "data" / "patches"
"""The series shipped inside the wheel (absent in a checkout)."""


def _in_checkout() -> bool:
    """True when this package is ``tools/vllm_patchkit`` of a project checkout."""
    return (PROJECT_ROOT / "patches" / "series").is_file() and (
        PROJECT_ROOT / "tools" / "vllm_patchkit"
    ).resolve() == PACKAGE_DIR


PATCHES_DIR = (
    PROJECT_ROOT / "patches"
    if _in_checkout() or not PACKAGED_PATCHES_DIR.is_dir()
    else PACKAGED_PATCHES_DIR
)
"""The default series: the checkout's ``patches/``, else the wheel's copy."""


def writable_series(directory: Path) -> Path:
    """``directory``, unless it is the installed wheel's read-only copy.

    Commands that rewrite the series (``refresh``) must not write into
    site-packages, where pip would later remove or overwrite the change.
    """
    if directory.resolve() == PACKAGED_PATCHES_DIR.resolve():
        from vllm_patchkit.errors import InputError

        raise InputError(
            f"{directory} is the series installed with vllm-patchkit; give "
            "--patches DIR (the patches/ of a vllm-overlay checkout) to write it"
        )
    return directory


def cache_dir() -> Path:
    """Downloads and release trees, shared by every checkout of the project.

    ``VLLM_OVERLAY_CACHE`` overrides; otherwise the XDG cache directory.
    """
    override = os.environ.get("VLLM_OVERLAY_CACHE")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg) / "vllm-overlay"


def relative_to_checkout(text: str) -> str:
    """``text`` with this checkout's path left out, so what it names reads
    the same from any clone on any machine."""
    return text.replace(f"{PROJECT_ROOT}/", "")


SHARED_MEMORY = Path("/dev/shm")


def memory_scratch() -> str | None:
    """Where a short-lived scratch of many small entries goes: Linux's
    shared-memory tmpfs, unless ``TMPDIR`` names a place (None: tempfile's
    default). ``check``'s trial tree is a few hundred symbolic links, made
    and removed on every run; on a disk file system that was a third of its
    CPU time (the journal), on tmpfs a tenth of that. It holds under a
    megabyte, within the smallest container's ``/dev/shm``."""
    if os.environ.get("TMPDIR") or not os.access(SHARED_MEMORY, os.W_OK | os.X_OK):
        return None
    return str(SHARED_MEMORY)


def below(path: str, directory: str) -> bool:
    """``path`` lies strictly below ``directory``: both absolute and
    normalised (the caller resolves links where it must), compared as
    strings, because the callers judge thousands of paths per process."""
    return path.startswith(directory.rstrip(os.sep) + os.sep)


def write_atomic(path: Path, data: str | bytes, *, prefix: str = ".") -> None:
    """Write ``data`` to ``path`` whole or not at all: into a scratch file
    beside it (mode 0600, whatever the umask: a cache entry others could
    write is not read), then renamed over it, so a reader side by side never
    sees half a file and a failure leaves no scratch file behind."""
    import tempfile

    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as out:
            out.write(data)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
