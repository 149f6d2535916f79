"""Where ``pr`` keeps the body it prepared: one file per checkout and branch.

The branch is named after the fix, so every checkout preparing the same
fix's PR has the same one; a file per branch alone let one checkout's body
replace another's under the ``--body-file`` printed for the first. The
checkout's resolved path picks the directory (its name, to read, and a
digest of the path, to tell apart two checkouts of one name).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from vllm_patchkit.paths import cache_dir, write_atomic


def body_file(checkout: Path, branch: str) -> Path:
    """The body file of ``branch``'s PR prepared in ``checkout``."""
    resolved = checkout.resolve()
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:12]
    folder = f"{resolved.name}-{digest}" if resolved.name else digest
    return cache_dir() / "pr" / folder / (branch.replace("/", "-") + ".md")


def write_body(checkout: Path, branch: str, body: str) -> Path:
    """Keep ``body`` as :func:`body_file`, whole (a reader never sees half)."""
    target = body_file(checkout, branch)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, body)
    return target
