"""What the matrix tests share: a cache of a test's own, a copy of the project."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.present.row_schema import FORMAT
from vllm_patchkit.trees.releases import release_tree


def own_matrix_cache(root: Path) -> dict[str, str]:
    """The environment for a cache directory of the test's own under
    ``root`` (no matrix cell or applied clone of another run) that shares
    the release trees, their locks, the downloads and what is read of them,
    and vLLM's own caches of the tree children (a model-inspection entry
    missing there costs a process that imports vLLM again)."""
    shared = Path(release_tree("0.28.0")).parents[1]
    cache = root / "cache"
    cache.mkdir()
    for name in ("trees", "sdists", "sdist-files", "extras", "locks", "vllm-cache"):
        if (shared / name).is_dir():
            (cache / name).symlink_to(shared / name)
    return {"VLLM_OVERLAY_CACHE": str(cache)}


def project_copy(dest: Path) -> Path:
    """A copy of the project's code and series at ``dest``, to change a
    decider in without touching the checkout."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("tools", "vllm_overlay", "patches", "pyproject.toml"):
        source = PROJECT_ROOT / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=ignore)
        else:
            shutil.copy2(source, dest / part)
    return dest


def row_file_data(
    rows: list[dict[str, Any]], releases: list[str], seconds: float
) -> dict[str, Any]:
    """A well-formed row file (``matrix --output-dir``'s) holding ``rows``
    of ``releases``, made by a run of ``seconds``."""
    return {
        "format": FORMAT,
        "digests": {
            "code": "0123456789abcdef",
            "environment": "fedcba9876543210",
            "versions": {"python": "3.12", "torch": "2.13.0+cpu", "git": "2.43"},
        },
        "steps": ["stock", "series", "overlay", "audit"],
        "releases": releases,
        "run": {"seconds": seconds, "jobs": 1},
        "rows": rows,
    }
