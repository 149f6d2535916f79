"""A venv with the GPU image's torch and Triton, for proving tools/gpu-check on a CPU.

The device machine runs its own python3 with torch 2.11 (CUDA 13) and
Triton 3.6, while the project venv pins torch 2.13 and Triton 3.9. This
venv holds the image's versions (``requirements/gpu-image.txt``), without
vLLM, so the dry run, the interpreter tier and the compile check can be run
under them here. ``python -m tests.kernels.image_venv`` builds it (about
4.7 GB, a few minutes the first time) or finds it current, and prints its
python. Location: ``$VLLM_OVERLAY_IMAGE_VENV``, by default
``~/.cache/vllm-overlay/venvs/gpu-image``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "requirements" / "gpu-image.txt"


def location() -> Path:
    default = Path.home() / ".cache" / "vllm-overlay" / "venvs" / "gpu-image"
    return Path(os.environ.get("VLLM_OVERLAY_IMAGE_VENV", default))


def _stamp(python: str) -> str:
    version = subprocess.run(
        [python, "-VV"], capture_output=True, text=True, check=True
    ).stdout
    return hashlib.sha256(PINS.read_bytes() + version.encode()).hexdigest()


def ready() -> Path | None:
    """The venv's python when it was built from the current pins, else None."""
    venv = location()
    python = venv / "bin" / "python"
    stamp = venv / ".gpu-image-stamp"
    if not (python.exists() and stamp.exists()):
        return None
    return python if stamp.read_text().strip() == _stamp(str(python)) else None


def build() -> Path:
    venv = location()
    base = getattr(sys, "_base_executable", sys.executable)
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
    (venv / ".gpu-image-stamp").unlink(missing_ok=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(PINS)], check=True
    )
    (venv / ".gpu-image-stamp").write_text(_stamp(str(python)) + "\n")
    return python


if __name__ == "__main__":
    print(ready() or build())
