"""Real installs of other vLLM releases, beside the project venv's own.

``pip install --no-deps --target`` puts a release's wheel in a cached
directory; putting that directory first on ``PYTHONPATH`` makes the venv
import that release, with the venv's dependencies (CPU torch 2.13.0, which
vLLM 0.27.0-0.32.0 all pin). pip uses its own configuration for the index.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from vllm_patchkit.paths import cache_dir
from vllm_patchkit.releases import check_version, locked, staged_dir


class InstallError(RuntimeError):
    """pip could not install the requested release."""


def installed_release(version: str) -> Path:
    """A directory holding vLLM ``version`` as pip installs it (cached)."""
    check_version(version)
    dest = cache_dir() / "installs" / f"vllm-{version}"
    with locked(f"install-{version}"):
        if (dest / "vllm" / "__init__.py").is_file():
            return dest
        with staged_dir(dest, f".vllm-{version}-") as staging:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--no-compile",
                    "--target",
                    str(staging),
                    f"vllm=={version}",
                ],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                errors = [
                    line
                    for line in proc.stderr.splitlines()
                    if not line.startswith("WARNING: Location")
                ]
                raise InstallError(
                    f"pip could not install vllm=={version}: " + "\n".join(errors[-10:])
                )
    return dest
