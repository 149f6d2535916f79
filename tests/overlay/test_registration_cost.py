"""The registration benchmark runs, and registration imports nothing heavy.

Timing is printed by the benchmark, not asserted here; what is asserted is
the property that keeps it cheap: ``register()`` imports only the overlay's
own small modules (no Triton, no vLLM attention code).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.toolkit.series_expectations import SERIES_FIXES
from vllm_overlay.fixes import FIXES
from vllm_patchkit.paths import PROJECT_ROOT


def test_benchmark_reports_figures_and_imports_only_the_overlay() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "benchmarks" / "plugin_registration.py"),
            "--repeat",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_LOGGING_LEVEL": "ERROR"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert result["vllm_version"] == "0.28.0"
    assert result["overlay_register_ms"]["median"] > 0
    assert result["baseline_load_general_plugins_ms"]["median"] > 0
    assert result["ratio_median"] > 0
    assert result["heavy_imports"] == []
    assert all(
        m.startswith("vllm_overlay") for m in result["modules_imported_by_register"]
    )
    # Every fix decided, nothing imported; armed on the venv's 0.28.0: each
    # fix whose record says 0.28.0 is affected, the series' three among them.
    assert list(result["fixes"]) == [fix.name for fix in FIXES]
    armed = [name for name, action in result["fixes"].items() if action == "installed"]
    assert armed == [fix.name for fix in FIXES if fix.record.affects("0.28.0")]
    assert {name: result["fixes"][name] for name in SERIES_FIXES} == dict.fromkeys(
        SERIES_FIXES, "installed"
    )
