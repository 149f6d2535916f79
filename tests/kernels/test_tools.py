"""The command-line entry points, run as a user would, in subprocesses."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_patchkit import cli
from vllm_patchkit.errors import InputError
from vllm_patchkit.judge.memcheck import runner

pytestmark = pytest.mark.kernels

ROOT = Path(__file__).resolve().parents[2]
PATCHKIT = Path(sys.executable).with_name("vllm-patchkit")

OOB_SCRIPT = """
import sys
import torch
import triton
import triton.language as tl

@triton.jit
def _shifted_copy(x, y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs + 1, mask=offs < n), mask=offs < n)

x, y = torch.arange(8.0), torch.zeros(8)
_shifted_copy[(1,)](x, y, int(sys.argv[1]), BLOCK=8)
print("copied", y.tolist())
sys.exit(int(sys.argv[2]))
"""


def clean_env() -> dict[str, str]:
    """The caller's environment without the interpreter switches."""
    drop = ("TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES")
    return {k: v for k, v in os.environ.items() if k not in drop}


def patchkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PATCHKIT), "memcheck", *args],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_memcheck_runner_in_process(tmp_path: Path) -> None:
    """The script runs as ``__main__``; its output and exit status come back."""
    script = tmp_path / "copy.py"
    script.write_text(OOB_SCRIPT)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        status = runner.run([str(script), "7", "3"])
    assert status == 3
    assert "copied [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 0.0]" in out.getvalue()


def test_memcheck_command(tmp_path: Path) -> None:
    """End to end: a fresh interpreter, env set by the command, exit status 1."""
    script = tmp_path / "copy.py"
    script.write_text(OOB_SCRIPT)
    bad = patchkit("--", str(script), "8", "0")
    assert bad.returncode == 1, bad.stderr
    assert "copied" not in bad.stdout  # stopped before the read
    assert (
        "memcheck: out-of-bounds load in Triton kernel '_shifted_copy', program "
        "(0, 0, 0): 4-byte access at"
    ) in bad.stderr
    assert "0 bytes after the end of 'x' (byte offset +32;" in bad.stderr


def test_memcheck_json_is_one_object_beside_the_scripts_output(
    tmp_path: Path,
) -> None:
    """``--json``: stdout is the one object (the script's print goes to
    stderr), with the verdict, the exit status and what was checked."""
    script = tmp_path / "copy.py"
    script.write_text(OOB_SCRIPT)
    bad = patchkit("--json", str(script), "8", "0")
    assert bad.returncode == 1, bad.stderr
    report = json.loads(bad.stdout)
    assert report["status"] == "violation" and report["exit_code"] == 1
    assert report["script"] == str(script) and report["args"] == ["8", "0"]
    assert "out-of-bounds load in Triton kernel '_shifted_copy'" in report["violation"]
    good = patchkit("--json", str(script), "7", "3")
    assert good.returncode == 3, good.stderr
    report = json.loads(good.stdout)
    assert report["status"] == "no-violation" and report["exit_code"] == 3
    assert report["kernels"] == ["_shifted_copy"] and report["launches"] == 1
    assert "copied [1.0" in good.stderr and "copied" not in good.stdout


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_memcheck_refuses_a_missing_script(
    tmp_path: Path, json_flag: list[str]
) -> None:
    """Exit 2 and one line, before a child starts (it exited 1 with the
    child's traceback)."""
    missing = tmp_path / "nonexistent.py"
    done = patchkit(*json_flag, str(missing))
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"vllm-patchkit: error: memcheck: {missing}: no such file\n"
    if json_flag:
        assert json.loads(done.stdout)["status"] == "refused"


def test_memcheck_command_needs_a_script(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["memcheck"]) == 2
    assert "no script given" in capsys.readouterr().err


def test_memcheck_without_a_script_raises_for_the_one_error_path() -> None:
    """The handler raises; ``cli.error_handler`` reports it (and picks the 2)."""
    args = cli.build_parser().parse_args(["memcheck", "--"])
    with pytest.raises(InputError, match="no script given"):
        args.handler(args)


@pytest.mark.slow
def test_memcheck_command_on_upstream_kernel(tmp_path: Path) -> None:
    """The motivating case: query offsets past the end of q, unpatched vLLM."""
    script = tmp_path / "upstream.py"
    script.write_text(
        "import torch\n"
        "from vllm.v1.attention.ops.prefix_prefill import context_attention_fwd\n"
        "from tests.kernels.inputs import Case, build\n"
        "inputs = build(Case(((4, 10), (4, 10))))\n"
        "inputs.call(context_attention_fwd, b_start_loc=torch.tensor("
        "[0, 4, 9], dtype=torch.int32))\n"
    )
    env = dict(clean_env(), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [str(PATCHKIT), "memcheck", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert "out-of-bounds load in Triton kernel '_fwd_kernel'" in done.stderr
    assert "0 bytes after the end of 'Q' (byte offset +8192;" in done.stderr


@pytest.mark.slow
def test_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "prefix_prefill_bench.py"),
            "--smoke",
            "--json",
            str(out),
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [r["name"] for r in rows] == ["smoke-mix", "smoke-gqa8"]
    for row in rows:
        for kernel in ("overlay", "upstream", "sdpa"):
            assert row[f"{kernel}_ms"] > 0
        assert row["max_abs_diff_vs_upstream"] <= 4e-3
    assert "vs upstream" in done.stdout


def test_kernel_module_imports_no_vllm() -> None:
    """The overlay plugin imports the kernel module; it must not pull in vLLM."""
    code = (
        "import sys\n"
        "import vllm_overlay.v1.attention.ops.prefix_prefill\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'vllm'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
