"""The audit's pre-commit hook as pre-commit installs and runs it.

``pre-commit try-repo`` builds the hook's environment from this repository
the way a vLLM fork's ``.pre-commit-config.yaml`` would (``pip install .
./tools packaging --no-deps`` in its own clone, no torch, no vLLM) and runs it on a
checkout of stock vLLM 0.28.0, then on the same checkout after ``apply``.
The repository is taken as committed (HEAD and its tracked changes): commit
a change to ``.pre-commit-hooks.yaml`` before running this.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_patchkit.git.apply import Status, apply_series
from vllm_patchkit.git.series import load_series
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.trees.releases import clone_release

pytestmark = [pytest.mark.release_trees, pytest.mark.packaging]

HOOK = "vllm-metadata-writes"
ROCM = "vllm/v1/attention/backends/rocm_attn.py"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pre-commit's cache for this module: the hook is installed once."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("checkout") / "vllm"
    clone_release("0.28.0", tree, checkout=True)
    return tree


def try_repo(
    home: Path, checkout: Path, *files: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(PROJECT_ROOT), HOOK]
        + ["--files", *files],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
def test_the_hook_fails_on_stock_0_28_0_and_passes_after_apply(
    home: Path, checkout: Path
) -> None:
    lines = (checkout / ROCM).read_text().splitlines()
    (device,) = [
        n for n, line in enumerate(lines, 1)
        if "common_attn_metadata.query_start_loc.zero_()" in line
    ]  # fmt: skip

    stock = try_repo(home, checkout, ROCM)
    assert stock.returncode == 1, stock.stdout + stock.stderr
    assert (
        f"{ROCM}:{device}: harmful: zero_ of query_start_loc in "
        "RocmAttentionMetadataBuilder.build_for_cudagraph_capture: harmful for "
        "ROCM_AITER_UNIFIED_ATTN"
    ) in stock.stdout

    # A module that defines no builder, and a builder module without a
    # harmful write: nothing to fail on.
    for other in ("vllm/envs.py", "vllm/v1/attention/backends/flash_attn.py"):
        unrelated = try_repo(home, checkout, other)
        assert unrelated.returncode == 0, unrelated.stdout + unrelated.stderr

    result = apply_series(checkout, load_series())
    assert result.status == Status.APPLIED, result
    fixed = try_repo(home, checkout, ROCM)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "Passed" in fixed.stdout


def test_the_hook_runs_as_a_fork_configures_it(
    home: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The hook as a fork runs it: ``pre-commit run`` with this repository
    in the checkout's config (its cost, whole process, against
    ``pre-commit --version``, is benchmarks/metadata_writes_hook.py's)."""
    tree = tmp_path_factory.mktemp("configured") / "vllm"
    clone_release("0.28.0", tree, checkout=True)
    rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True
    ).stdout.strip()
    (tree / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {PROJECT_ROOT}\n    rev: {rev}\n"
        f"    hooks:\n      - id: {HOOK}\n"
    )
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    run = [sys.executable, "-m", "pre_commit", "run", HOOK, "--files", ROCM]
    proc = subprocess.run(run, cwd=tree, env=env, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{ROCM}:" in proc.stdout and ": harmful:" in proc.stdout, proc.stdout
