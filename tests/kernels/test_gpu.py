"""GPU tier: bf16, FP8 KV cache and output, CUDA graph capture, compiled kernels.

Skipped, never faked, where ``torch.cuda.is_available()`` is false. The
checks run in one subprocess with the Triton interpreter off (see
``gpu_check``); each becomes one test here. This needs vLLM installed; on
the lent GPU machine, which has none, ``tools/gpu-check`` runs the same
checks (docs/kernels.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.kernels import gpu_check
from tests.kernels.devices import HAS_GPU

pytestmark = [
    pytest.mark.kernels,
    pytest.mark.gpu,
    pytest.mark.skipif(not HAS_GPU, reason="torch.cuda.is_available() is false"),
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "tests.kernels.gpu_check", "--device", "cuda"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    found = [json.loads(line) for line in done.stdout.splitlines() if line]
    assert found, done.stderr[-3000:]
    return {r["check"]: r for r in found}


@pytest.mark.parametrize("name", list(gpu_check.CHECKS))
def test_on_gpu(name: str, results: dict[str, dict[str, Any]]) -> None:
    result = results[name]
    assert result["status"] == "pass", json.dumps(result, indent=1)
