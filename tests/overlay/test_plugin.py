"""The overlay through vLLM's real plugin machinery, on the pinned vLLM 0.28.0.

Each case is a fresh process that calls ``vllm.plugins.load_general_plugins()``
(which finds the overlay through its ``vllm.general_plugins`` entry point,
installed with the project) and then drives vLLM's real builders, each taken
from its backend's ``get_builder_cls()`` as the model runner takes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.overlay.shadow_vllm import (
    AITER_UNIFIED_ATTN,
    insert_before,
    shadow_installed_vllm,
)
from vllm_overlay.fixes import FIXES

PROBE = Path(__file__).with_name("probe_plugin.py")
ROCM_MODULES = {
    "vllm.v1.attention.backends.rocm_aiter_unified_attn",
    "vllm.v1.attention.backends.rocm_attn",
}
SERIES_MODULES = ROCM_MODULES | {
    "vllm.model_executor.layers.attention.static_sink_attention"
}
"""The modules of the series' three fixes: the ROCm two, and StaticSink's."""
CAPTURE_FIX = "rocm-capture-keeps-host-offsets"
AITER_FIX = "rocm-aiter-unified-capture-keeps-offsets"
OFFSETS = [0, 1, 2, 3, 4]
"""Query offsets of the probe's uniform decode batch (4 requests, 1 token)."""


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


def assert_keeps_both_offsets(capture: dict[str, Any]) -> None:
    """0.29.0's AITER builder: both tensors the same objects, same values."""
    assert capture["device_same_tensor"] and capture["host_same_tensor"]
    assert capture["device_before"] == OFFSETS == capture["device_after"]
    assert capture["host_before"] == OFFSETS == capture["host_after"]
    assert capture["seq_lens_after"] == [1, 1, 1, 1]
    assert capture["metadata_reads_device_offsets"]


def assert_zeroes_device_keeps_host(capture: dict[str, Any]) -> None:
    """#51585's ROCM_ATTN: device offsets zeroed in place, host ones kept."""
    assert capture["device_same_tensor"] and capture["host_same_tensor"]
    assert capture["device_before"] == OFFSETS
    assert capture["device_after"] == [0, 0, 0, 0, 0]
    assert capture["host_after"] == OFFSETS
    assert capture["seq_lens_after"] == [1, 1, 1, 1]


def test_each_backend_gets_its_capture_behaviour(enabled: dict[str, Any]) -> None:
    aiter = enabled["fixes"][AITER_FIX]
    assert aiter["action"] == "installed" and aiter["status"] == "installed"
    assert aiter["problems"] == []
    assert enabled["aiter_fix_installed"]
    assert enabled["aiter_capture"]["builder"] == (
        "vllm_overlay.fixes.rocm_aiter_unified_builder.install.RocmAiterUnifiedAttentionMetadataBuilder"
    )
    assert enabled["aiter_builder_is_generic_subclass"]
    assert_keeps_both_offsets(enabled["aiter_capture"])
    assert enabled["rocm_capture"]["builder"] == (
        "vllm.v1.attention.backends.rocm_attn.RocmAttentionMetadataBuilder"
    )
    assert_zeroes_device_keeps_host(enabled["rocm_capture"])


def test_registration_is_idempotent_and_says_what_it_did(
    enabled: dict[str, Any],
) -> None:
    """One hook per fix the venv's 0.28.0 needs (its record says so), after
    two loads of vLLM's plugins and a third register(); once vLLM imported
    both ROCm modules their hooks are gone (StaticSink's module is imported
    only if something of vLLM's pulls it). Each ROCm fix says "installed"
    once, as its module loads; StaticSink's says it only when a builder of
    its class is made, which the probe does not do."""
    armed = sorted(fix.module for fix in FIXES if fix.record.affects("0.28.0"))
    assert enabled["pending_import_hooks"] == armed
    assert set(armed) >= SERIES_MODULES
    assert set(enabled["hooks_after_import"]) <= set(armed) - ROCM_MODULES
    info = [
        line
        for line in enabled["log"].splitlines()
        if "vllm-overlay: installed" in line
    ]
    capture = "installed the #51585 capture fix on vLLM 0.28.0"
    aiter = "installed the #53821 AITER unified capture fix on vLLM 0.28.0"
    sink = "installed the StaticSink seq_lens fix"
    said = {
        text: [i for i, line in enumerate(info) if text in line]
        for text in (capture, aiter, sink)
    }
    assert [len(lines) for lines in said.values()] == [1, 1, 0], enabled["log"]
    assert said[capture] < said[aiter]
    assert f"{enabled['aiter_file']}:98 " in info[said[aiter][0]]


def test_disable_switch_leaves_the_bug(tmp_path: Path) -> None:
    proc, report = run_probe(tmp_path, {"VLLM_OVERLAY_DISABLE": "1"})
    assert report is not None, proc.stderr
    assert report["action"] == "disabled"
    assert not report["fix_on_vllm_class"]
    assert report["method_from_vllm_file"]
    assert report["suite_bug_reproduced"]
    assert not report["aiter_backend_keeps_host"]
    # The AITER backend's bug too: its capture zeroes the offsets it replays.
    assert report["fixes"][AITER_FIX]["action"] == "disabled"
    assert not report["aiter_fix_installed"]
    aiter = report["aiter_capture"]
    assert aiter["builder"] == (
        "vllm.v1.attention.backends.rocm_attn.RocmAttentionMetadataBuilder"
    )
    assert aiter["device_same_tensor"] and aiter["device_before"] == OFFSETS
    assert aiter["device_after"] == [0, 0, 0, 0, 0]


def test_disabling_one_fix_by_name_keeps_the_other(tmp_path: Path) -> None:
    proc, report = run_probe(tmp_path, {"VLLM_OVERLAY_DISABLE": AITER_FIX})
    assert report is not None, proc.stderr
    assert report["fixes"][CAPTURE_FIX]["status"] == "installed"
    assert report["fixes"][AITER_FIX]["action"] == "disabled"
    assert report["fix_on_vllm_class"] and not report["aiter_fix_installed"]
    assert_zeroes_device_keeps_host(report["aiter_capture"])
    assert_zeroes_device_keeps_host(report["rocm_capture"])


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
    # The AITER fix extends that method: it is left alone too, and says why.
    assert report["fixes"][AITER_FIX]["action"] == "unrecognised"
    assert not report["aiter_fix_installed"]
    aiter_warnings = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if "WARNING" in line and "for ROCM_AITER_UNIFIED_ATTN (#53821)" in line
    ]
    assert len(aiter_warnings) == 1, proc.stdout + proc.stderr
    assert "the builder's capture is not a known shape (unknown)" in (aiter_warnings[0])


def test_strict_mode_raises_on_unrecognised_code(
    tmp_path: Path, unrecognised_vllm: Path
) -> None:
    proc = _load_plugins_strictly(unrecognised_vllm, tmp_path)
    assert proc.returncode != 0
    assert "OverlayStrictError" in proc.stderr
    assert "unknown" in proc.stderr


VENDOR_RETURN = "        return RocmAttentionMetadataBuilder\n"


def vendor_get_builder_cls(text: str) -> str:
    """A vendor line before the AITER backend's ``return``: not the known shape."""
    return insert_before(
        text,
        VENDOR_RETURN.strip(),
        '        logger.debug("vendor: AITER unified builder")\n',
    )


@pytest.fixture(scope="module")
def unrecognised_aiter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("unrecognised-aiter") / "tree"
    shadow_installed_vllm(tree, vendor_get_builder_cls, AITER_UNIFIED_ATTN)
    return tree


@pytest.mark.slow
def test_unrecognised_aiter_code_is_left_alone_while_51585_installs(
    tmp_path: Path, unrecognised_aiter: Path
) -> None:
    proc, report = run_probe(tmp_path, {}, pythonpath=unrecognised_aiter)
    assert report is not None, proc.stderr
    file = unrecognised_aiter / AITER_UNIFIED_ATTN
    assert report["aiter_file"] == str(file)
    assert report["fixes"][CAPTURE_FIX]["status"] == "installed"
    assert report["fix_on_vllm_class"]
    aiter = report["fixes"][AITER_FIX]
    assert aiter["action"] == "unrecognised"
    assert not report["aiter_fix_installed"]
    # Left exactly as it is: the generic builder, which zeroes the device
    # offsets (now without the host ones: the #51585 fix is on it).
    assert_zeroes_device_keeps_host(report["aiter_capture"])
    line = file.read_text().splitlines().index(VENDOR_RETURN.rstrip("\n")) - 1
    warnings = [
        entry
        for entry in (proc.stdout + proc.stderr).splitlines()
        if "WARNING" in entry and "vllm-overlay: nothing done" in entry
    ]
    assert len(warnings) == 1, proc.stdout + proc.stderr
    assert "for ROCM_AITER_UNIFIED_ATTN (#53821) on vLLM 0.28.0" in warnings[0]
    # The method's line (the decorator's line is before it) and why.
    assert f"{file}:{line}" in warnings[0]
    assert "the body is not one `return <name>`" in warnings[0]


@pytest.mark.slow
def test_strict_mode_raises_on_unrecognised_aiter_code(
    tmp_path: Path, unrecognised_aiter: Path
) -> None:
    proc = _load_plugins_strictly(unrecognised_aiter, tmp_path)
    assert proc.returncode != 0
    assert "OverlayStrictError" in proc.stderr
    assert f"{AITER_FIX}: nothing done on vLLM 0.28.0" in proc.stderr


def _load_plugins_strictly(shadow: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """vLLM's own plugin loading in strict mode, with ``shadow`` first on the path."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(shadow), os.environ.get("PYTHONPATH")) if p
        ),
        "VLLM_OVERLAY_STRICT": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from vllm.plugins import load_general_plugins; load_general_plugins()",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )
