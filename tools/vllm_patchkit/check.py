"""Read-only status of every patch of the series in a checkout.

Nothing in the checkout changes: "would it apply" is answered with
``git apply --cached`` against a scratch index file, patch after patch, so
later patches are checked on top of earlier ones.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from vllm_patchkit.apply import PatchReport, classify, open_checkout
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.series import Series


def check_series(path: Path, series: Series) -> list[PatchReport]:
    """applied, upstreamed, not-applied (applies cleanly) or would-conflict."""
    git = open_checkout(path)
    reports = classify(git, series)
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-check-") as scratch:
        index = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        git.run("read-tree", "HEAD", env=index)
        for patch, report in zip(series.patches, reports, strict=True):
            if report.status != "pending":
                continue
            report.status, report.detail = _try_apply(git, patch.path, index)
    return reports


def _try_apply(git: Git, patch: Path, index: dict[str, str]) -> tuple[str, str]:
    clean = git.run("apply", "--cached", str(patch), check=False, env=index)
    if clean.returncode == 0:
        return "not-applied", "applies cleanly"
    merged = git.run("apply", "--cached", "--3way", str(patch), check=False, env=index)
    if merged.returncode == 0:
        return "not-applied", "applies with a 3-way merge"
    errors = [
        line for line in (merged.stderr or clean.stderr).splitlines() if line.strip()
    ]
    return "would-conflict", "; ".join(errors[:3]) or "does not apply"
