"""The toolkit benchmark runs and prints its figures (timing is not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vllm_patchkit.paths import PROJECT_ROOT

pytestmark = pytest.mark.release_trees


def test_apply_benchmark_reports_a_ratio() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "benchmarks" / "apply_vs_git_am.py"),
            "--repeat",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["git_am_s"] > 0 and result["patchkit_apply_s"] > 0
    assert result["ratio"] == pytest.approx(
        result["patchkit_apply_s"] / result["git_am_s"]
    )
    assert result["check_s"] > 0
