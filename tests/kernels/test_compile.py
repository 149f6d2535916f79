"""The overlay kernel compiles for NVIDIA and AMD GPUs, checked without a GPU.

See ``compile_check``: the interpreter cannot catch what only the Triton
compiler rejects, and it ships everything needed to build a cubin or hsaco.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kernels.compile_check import UPSTREAM

pytestmark = pytest.mark.kernels

ROOT = Path(__file__).resolve().parents[2]
# ROCm is where the overlay runs; FP8 KV/output and every optional feature.
DEFAULT = ("gfx942-bf16-fp8-all-80",)
MATRIX = (
    "sm90-fp16-auto-plain-128",
    "sm90-bf16-fp8_e5m2-cachedkv-192",
    "sm90-fp16-fp8-all-96",
    "sm80-bf16-auto-cachedkv-112",  # no FP8 on sm_80
    "sm80-fp32-auto-plain-64",
    "gfx942-fp16-auto-cachedkv-112",
    "gfx942-bf16-fp8_e5m2-plain-192",
    "gfx90a-fp16-auto-all-128",
)


def shim_site(tmp: Path) -> Path:
    """vLLM's kernel module behind tools/gpu-check's shim (see compile_check)."""
    script = [sys.executable, str(ROOT / "tools" / "gpu-check")]
    carry, site = tmp / "carry", tmp / "site"
    for args in (["--prepare"], ["--shim", str(site)]):
        done = subprocess.run(
            [*script, *args, "--carry", str(carry)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    return site


def compile_variants(
    variants: tuple[str, ...], cache: Path, site: Path | None = None
) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(cache)  # a fresh cache: really compile
    env["PYTHONPATH"] = os.pathsep.join(map(str, filter(None, (site, ROOT))))
    done = subprocess.run(
        [sys.executable, "-m", "tests.kernels.compile_check", *variants],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    results = [json.loads(line) for line in done.stdout.splitlines() if line]
    assert [r["variant"] for r in results] == list(variants), done.stderr[-3000:]
    return results


def check(results: list[dict]) -> None:
    failed = [r for r in results if not r["ok"]]
    assert not failed, json.dumps(failed, indent=1)


def test_compiles_for_gfx942(tmp_path: Path) -> None:
    check(compile_variants(DEFAULT, tmp_path))


@pytest.mark.slow
def test_compile_matrix(tmp_path: Path) -> None:
    check(compile_variants(MATRIX, tmp_path))


@pytest.mark.slow
def test_upstream_compiles_for_sm90(tmp_path: Path) -> None:
    results = compile_variants(UPSTREAM, tmp_path / "cache", shim_site(tmp_path))
    check(results)
    assert [r["kernels"] for r in results] == [["_fwd_kernel"], ["_fwd_kernel_alibi"]]
