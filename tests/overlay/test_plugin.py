"""The overlay through vLLM's real plugin machinery, on the pinned vLLM 0.28.0.

Each case is a fresh process that calls ``vllm.plugins.load_general_plugins()``
(which finds the overlay through its ``vllm.general_plugins`` entry point,
installed with the project) and then drives vLLM's real builders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.overlay.shadow_vllm import shadow_installed_vllm

PROBE = Path(__file__).with_name("probe_plugin.py")


def run_probe(
    tmp_path: Path, env: dict[str, str], pythonpath: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    output = tmp_path / "probe.json"
    full_env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONDONTWRITEBYTECODE": "1",
        "VLLM_LOGGING_LEVEL": "INFO",
        **env,
    }
    full_env.pop("VLLM_PLUGINS", None)
    if pythonpath is not None:
        # First on the path, ahead of (not instead of) the checkout under test.
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(pythonpath), os.environ.get("PYTHONPATH")) if p
        )
    proc = subprocess.run(
        [sys.executable, str(PROBE), str(output)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=tmp_path,
        timeout=600,
    )
    report = json.loads(output.read_text()) if output.is_file() else None
    return proc, report


@pytest.fixture(scope="module")
def enabled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    proc, report = run_probe(tmp_path_factory.mktemp("enabled"), {})
    assert report is not None, proc.stderr
    report["log"] = proc.stdout + proc.stderr
    return report


def test_plugin_fixes_the_minimax_crash(enabled: dict[str, Any]) -> None:
    assert enabled["action"] == "installed"
    assert enabled["suite_fixed"]
    assert not enabled["suite_bug_reproduced"]


def test_every_path_to_the_builder_is_fixed(enabled: dict[str, Any]) -> None:
    assert enabled["fix_on_vllm_class"] and enabled["applied_to_class"]
    assert enabled["rocm_attn_backend_keeps_host"]
    assert enabled["aiter_backend_keeps_host"]
    assert enabled["super_subclass_keeps_host"]
    assert enabled["problems"] == []


def test_registration_is_idempotent_and_says_what_it_did(
    enabled: dict[str, Any],
) -> None:
    assert enabled["pending_import_hooks"] <= 1
    assert enabled["hooks_after_import"] == 0
    info = [
        line
        for line in enabled["log"].splitlines()
        if "vllm-overlay: installed" in line
    ]
    assert len(info) == 1, enabled["log"]
    assert "vLLM 0.28.0" in info[0]


def test_disable_switch_leaves_the_bug(tmp_path: Path) -> None:
    proc, report = run_probe(tmp_path, {"VLLM_OVERLAY_DISABLE": "1"})
    assert report is not None, proc.stderr
    assert report["action"] == "disabled"
    assert not report["fix_on_vllm_class"]
    assert report["method_from_vllm_file"]
    assert report["suite_bug_reproduced"]
    assert not report["aiter_backend_keeps_host"]


@pytest.fixture(scope="module")
def unrecognised_vllm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the installed vLLM whose capture method zeroes only the host."""
    tree = tmp_path_factory.mktemp("unrecognised") / "tree"
    device_line = "        common_attn_metadata.query_start_loc.zero_()\n"

    def drop_device_zeroing(text: str) -> str:
        assert device_line in text
        return text.replace(device_line, "", 1)

    shadow_installed_vllm(tree, drop_device_zeroing)
    return tree


def test_unrecognised_code_is_left_alone_with_a_warning(
    tmp_path: Path, unrecognised_vllm: Path
) -> None:
    proc, report = run_probe(tmp_path, {}, pythonpath=unrecognised_vllm)
    assert report is not None, proc.stderr
    assert report["vllm_file"].startswith(str(unrecognised_vllm))
    assert report["action"] == "unrecognised"
    assert not report["fix_on_vllm_class"]
    assert report["method_from_vllm_file"]
    warnings = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if "WARNING" in line and "vllm-overlay: nothing done on vLLM 0.28.0" in line
    ]
    assert warnings, proc.stdout + proc.stderr
    assert "unknown" in warnings[0] and "rocm_attn.py" in warnings[0]


def test_strict_mode_raises_on_unrecognised_code(
    tmp_path: Path, unrecognised_vllm: Path
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(unrecognised_vllm), os.environ.get("PYTHONPATH")) if p
        ),
        "VLLM_OVERLAY_STRICT": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from vllm.plugins import load_general_plugins; load_general_plugins()",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode != 0
    assert "OverlayStrictError" in proc.stderr
    assert "unknown" in proc.stderr
