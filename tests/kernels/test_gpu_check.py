"""tools/gpu-check, run as the device call runs it, on the CPU.

The dry run goes through every stage of the GPU run (the GPU tier's checks,
the capture-time cases under a memory checker, the benchmark) with the
Triton interpreter, and must report what the interpreter tier found. The
refusals must come before any stage starts. The ``gpu_image`` tier repeats
the dry run, the interpreter tier and the compile check under the GPU
image's torch 2.11 and Triton 3.6, in a venv of their own, without vLLM.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.kernels import image_venv
from tests.kernels.compile_check import UPSTREAM

pytestmark = pytest.mark.kernels

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gpu-check"
# The interpreter cannot judge these (bf16 arithmetic, FP8 rounding, graphs).
UNJUDGED_ON_CPU = ("bf16", "fp8-output", "graph-capture")
# A refusal answers after one probe process (importing torch), not minutes.
REFUSAL_SECONDS = 45


def clean_env(**extra: str) -> dict[str, str]:
    drop = ("TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "OUT")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, **extra}


def gpu_check(
    *args: str, python: str = sys.executable, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, str(SCRIPT), *args],
        cwd=ROOT,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def carry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM 0.28.0's kernel module, copied from the installed vLLM."""
    folder = tmp_path_factory.mktemp("carry")
    done = gpu_check("--prepare", "--carry", str(folder))
    assert done.returncode == 0, done.stderr
    return folder


def check_dry_run(done: subprocess.CompletedProcess[str], out: Path) -> dict:
    """What every dry run must show, whatever torch and Triton ran it."""
    report = out / "gpu-check.json"
    assert report.exists(), done.stderr[-3000:]
    doc = json.loads(report.read_text())
    assert done.returncode == 0, (doc.get("summary"), done.stderr[-2000:])
    markdown = (out / "gpu-check.md").read_text()
    assert done.stdout.endswith(markdown)  # the table is printed last
    assert doc["mode"] == "dry-run" and doc["summary"]["ok"]
    assert set(doc["stages"]) == {"gpu-tier", "sanitizer", "benchmark"}
    tier = {r["check"]: r for r in doc["stages"]["gpu-tier"]["results"]}
    assert len(tier) >= 36
    for name, result in tier.items():
        cannot = any(part in name for part in UNJUDGED_ON_CPU)
        assert result["status"] == ("unjudged" if cannot else "pass"), result
        assert f"| {name} | " in markdown
    sanitizer = doc["stages"]["sanitizer"]["results"]
    assert sanitizer[0]["scenario"] == "probe-one-past-the-end"
    by_kernel: dict[str, dict[str, Any]] = {"overlay": {}, "upstream": {}}
    for r in sanitizer:
        assert r["status"] == "pass", r
        if r["kernel"] in by_kernel:
            by_kernel[r["kernel"]][r["scenario"]] = r
    assert set(by_kernel["overlay"]) == set(by_kernel["upstream"])
    for r in by_kernel["overlay"].values():
        assert r["seen"] == {"stray": 0}
    strays = [r for r in by_kernel["upstream"].values() if r["expected"]]
    assert len(strays) == 9  # docs/kernels.md's findings table
    for r in strays:
        exp = r["expected"]
        assert (
            r["seen"]["first"]
            == f"{exp['kernel']} {exp['argument']} {exp['offset']:+d}"
        )
    rows = doc["stages"]["benchmark"]["rows"]
    assert [r["name"] for r in rows] == ["smoke-mix", "smoke-gqa8"]
    assert all(r["agree"] for r in rows)
    return doc


@pytest.mark.slow
def test_dry_run(carry: Path, tmp_path: Path) -> None:
    """The whole script on the CPU under the project's pinned torch and Triton."""
    import torch
    import triton

    done = gpu_check("--dry-run", "--carry", str(carry), "--out", str(tmp_path))
    doc = check_dry_run(done, tmp_path)
    env = doc["environment"]
    assert (env["torch"], env["triton"]) == (torch.__version__, triton.__version__)
    assert env["upstream"]["vllm"] == "0.28.0"


def refusal(done: subprocess.CompletedProcess[str], seconds: float, out: Path) -> str:
    assert done.returncode == 3, done.stderr  # an unfit environment
    assert seconds < REFUSAL_SECONDS, seconds
    assert "nothing was run" in done.stderr
    doc = json.loads((out / "gpu-check.json").read_text())
    assert doc["stages"] == {} and doc["environment"]["problems"]
    return done.stderr


def test_refuses_without_a_gpu(carry: Path, tmp_path: Path) -> None:
    """No GPU (hidden here even on a GPU machine): a clear error, in seconds."""
    start = time.monotonic()
    done = gpu_check(
        "--carry", str(carry), "--out", str(tmp_path),
        env=clean_env(CUDA_VISIBLE_DEVICES=""),
    )  # fmt: skip
    err = refusal(done, time.monotonic() - start, tmp_path)
    assert "error: no GPU: torch " in err
    assert "torch.cuda.is_available() is false" in err
    if shutil.which("compute-sanitizer") is None:  # every problem, at once
        assert "error: no compute-sanitizer (looked on PATH" in err


def test_refuses_an_unproven_triton(carry: Path, tmp_path: Path) -> None:
    """A Triton the script was not proven with is named and refused."""
    fake = tmp_path / "fake"
    (fake / "triton").mkdir(parents=True)
    (fake / "triton" / "__init__.py").write_text('__version__ = "3.1.0"\n')
    start = time.monotonic()
    env = clean_env(PYTHONPATH=f"{fake}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = gpu_check(
        "--dry-run", "--carry", str(carry), "--out", str(tmp_path / "out"), env=env
    )
    err = refusal(done, time.monotonic() - start, tmp_path / "out")
    assert (
        "error: Triton 3.1.0 is not one this script was proven with (3.6, 3.9)" in err
    )


def test_refuses_without_the_carried_kernel(tmp_path: Path) -> None:
    start = time.monotonic()
    empty = tmp_path / "carry"
    empty.mkdir()
    done = gpu_check("--dry-run", "--carry", str(empty), "--out", str(tmp_path))
    err = refusal(done, time.monotonic() - start, tmp_path)
    assert (
        f"error: no upstream kernel in {empty}: run `tools/gpu-check --prepare`" in err
    )


def test_prepare_takes_only_vllm_0_28_0s_file(carry: Path, tmp_path: Path) -> None:
    changed = tmp_path / "prefix_prefill.py"
    changed.write_text((carry / "upstream" / "prefix_prefill.py").read_text() + "#\n")
    target = tmp_path / "carry"
    done = gpu_check("--prepare", "--vllm-source", str(changed), "--carry", str(target))
    assert done.returncode == 2
    assert "is not vLLM 0.28.0's prefix_prefill.py" in done.stderr
    assert not target.exists()


def test_bad_arguments_are_2_an_unfit_environment_3(tmp_path: Path) -> None:
    """The toolkit's codes (tools/vllm_patchkit/errors.py): refused input is
    2, an environment that cannot run the check is 3."""
    no_out = gpu_check("--dry-run", "--carry", str(tmp_path))  # $OUT unset too
    assert no_out.returncode == 2, no_out.stderr
    assert "error: no --out DIR, and $OUT is unset" in no_out.stderr
    missing = gpu_check("--prepare", "--vllm-source", str(tmp_path / "absent.py"))
    assert missing.returncode == 2, missing.stderr
    no_kernel = gpu_check("--shim", str(tmp_path / "site"), "--carry", str(tmp_path))
    assert no_kernel.returncode == 3, no_kernel.stderr
    assert f"error: no upstream kernel in {tmp_path}: run --prepare" in no_kernel.stderr


# --- the GPU image's versions (a venv of their own) ------------------------------


@pytest.fixture(scope="module")
def image_python() -> str:
    python = image_venv.ready()
    if python is None:
        pytest.skip(
            f"no current venv at {image_venv.location()}: build it with "
            "`python -m tests.kernels.image_venv` (about 4.7 GB)"
        )
    return str(python)


@pytest.mark.gpu_image
def test_dry_run_under_the_image_versions(
    carry: Path, tmp_path: Path, image_python: str
) -> None:
    done = gpu_check(
        "--dry-run", "--carry", str(carry), "--out", str(tmp_path),
        python=image_python,
    )  # fmt: skip
    env = check_dry_run(done, tmp_path)["environment"]
    assert env["torch"].startswith("2.11.0") and env["triton"] == "3.6.0"


@pytest.mark.gpu_image
def test_interpreter_tier_under_the_image_versions(
    carry: Path, tmp_path: Path, image_python: str
) -> None:
    """The CPU kernel tier, with no vLLM: upstream's module through the shim."""
    assert (
        gpu_check("--shim", str(tmp_path / "site"), "--carry", str(carry)).returncode
        == 0
    )
    paths = [tmp_path / "site", ROOT, ROOT / "tools"]
    env = clean_env(PYTHONPATH=os.pathsep.join(map(str, paths)))
    tests = ["test_capture_safety.py", "test_differential.py", "test_memcheck.py"]
    done = subprocess.run(
        [image_python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "not slow",
         *(f"tests/kernels/{t}" for t in tests)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


@pytest.mark.gpu_image
def test_compiles_for_sm90_under_the_image_versions(
    carry: Path, tmp_path: Path, image_python: str
) -> None:
    """The H200's target, with the image's Triton (ptxas and all, no GPU):
    the overlay's kernel, and upstream's as its own host code launches it."""
    site = tmp_path / "site"
    assert gpu_check("--shim", str(site), "--carry", str(carry)).returncode == 0
    variants = ["sm90-bf16-fp8-all-80", "sm90-fp16-auto-cachedkv-128", *UPSTREAM]
    env = clean_env(
        PYTHONPATH=f"{site}{os.pathsep}{ROOT}", TRITON_CACHE_DIR=str(tmp_path / "c")
    )
    done = subprocess.run(
        [image_python, "-m", "tests.kernels.compile_check", *variants],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    results = [json.loads(line) for line in done.stdout.splitlines() if line]
    assert [r["variant"] for r in results] == variants, done.stderr[-3000:]
    assert all(r["ok"] and "cubin" in r["stages"] for r in results), results


# --- reading compute-sanitizer's stream (its report format as documented) ------


def _script() -> Any:
    loader = importlib.machinery.SourceFileLoader("gpu_check_script", str(SCRIPT))
    module = importlib.util.module_from_spec(
        importlib.util.spec_from_loader(loader.name, loader)
    )
    loader.exec_module(module)
    return module


STRAY = """\
========= Invalid __global__ read of size 4 bytes
=========     at _fwd_kernel+0x1a30
=========     by thread (0,0,0) in block (1,0,0)
=========     Address 0x7f1c2a002000 is out of bounds
=========     and is 0 bytes after the nearest allocation at 0x7f1c2a000000 of \
size 8192 bytes
========="""
EXPECTED = {"kernel": "_fwd_kernel", "argument": "Q", "offset": 8192}


def _stream(*scenarios: str, report_after: str | None = None, summary: int = 0) -> str:
    lines = ["========= COMPUTE-SANITIZER"]
    for name in scenarios:
        begin = {"scenario": name, "event": "begin", "expected": EXPECTED}
        lines.append(json.dumps(begin))
        lines.append(json.dumps({"scenario": name, "event": "end", "status": "done"}))
        if name == report_after:  # the front end prints after the child's line
            lines.append(STRAY)
    lines.append(f"========= ERROR SUMMARY: {summary} errors")
    return "\n".join(lines)


def test_a_late_report_belongs_to_a_lone_scenario() -> None:
    out = _stream("offsets-past-q", report_after="offsets-past-q", summary=1)
    [record] = _script().judge("upstream", ["offsets-past-q"], 0, out, "")
    assert record["status"] == "pass" and record["seen"]["stray"] == 1
    assert record["seen"]["first"].startswith("Invalid __global__ read of size 4")


def test_a_report_in_a_shared_run_asks_for_single_runs() -> None:
    out = _stream("a", "b", report_after="a", summary=1)
    assert _script().judge("overlay", ["a", "b"], 0, out, "") is None


def test_errors_the_parser_cannot_read_are_not_a_pass() -> None:
    out = _stream("a", summary=2)  # counted by the sanitizer, no report read
    [record] = _script().judge("overlay", ["a"], 0, out, "")
    assert record["status"] == "error"
    assert record["seen"]["unparsed_errors"] == 2


def test_a_clean_shared_run_passes_the_overlay() -> None:
    out = _stream("a", "b").replace(json.dumps(EXPECTED), "null")
    records = _script().judge("overlay", ["a", "b"], 0, out, "")
    assert [r["status"] for r in records] == ["pass", "pass"]


def test_a_stray_launch_that_ends_the_child_is_judged_by_its_report() -> None:
    """Memcheck ends the stray launch; the CUDA error after it is no verdict."""
    begin = {"scenario": "offsets-past-q", "event": "begin", "expected": EXPECTED}
    out = "\n".join([json.dumps(begin), STRAY, "========= ERROR SUMMARY: 2 errors"])
    err = "RuntimeError: CUDA error: unspecified launch failure"
    [record] = _script().judge("upstream", ["offsets-past-q"], 1, out, err)
    assert record["status"] == "error"  # 2 counted, 1 read: never a pass
    out = out.replace("2 errors", "1 error")
    [record] = _script().judge("upstream", ["offsets-past-q"], 1, out, err)
    assert record["status"] == "pass"
    assert record["then"] == err
