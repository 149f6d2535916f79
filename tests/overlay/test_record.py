"""The overlay's record of what it patches, as a user reads it.

``python -m vllm_overlay`` (text and ``--json``) and ``vllm-patchkit
doctor`` show, for each target: Why, How, the related upstream work, and the
plan for its removal. The record's target must name the callable the
overlay really patches in the installed vLLM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.toolkit.cli_helpers import patchkit, patchkit_json
from vllm_overlay.install import UPSTREAM_MODULE
from vllm_overlay.record import RECORD


def overlay_doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_overlay", "--quick", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        timeout=300,
    )


def test_each_target_says_why_how_related_and_removal() -> None:
    assert RECORD, "the overlay patches something"
    assert len({t.name for t in RECORD}) == len(RECORD)
    (capture,) = RECORD
    assert capture.module == UPSTREAM_MODULE
    assert capture.target == (
        "vllm.v1.attention.backends.rocm_attn:"
        "RocmAttentionMetadataBuilder.build_for_cudagraph_capture"
    )
    assert capture.affected == "0.11.1-0.28.0" and capture.inert_from == "0.29.0"
    related = " ".join(capture.related)
    assert "#51585" in related and "#25985" in related
    assert "0.29.0" in capture.removal
    assert capture.why and capture.how


def test_python_m_vllm_overlay_shows_the_record() -> None:
    proc = overlay_doctor("--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [t["target"] for t in report["record"]] == [t.target for t in RECORD]
    assert set(report["record"][0]) >= {"why", "how", "related", "removal"}
    assert report["removes"]["statement"] == (
        "common_attn_metadata.query_start_loc_cpu.zero_()"
    )
    text = overlay_doctor()
    assert "what the overlay patches:" in text.stdout
    assert f"target: {RECORD[0].target}" in text.stdout
    assert "removal: Inert from vLLM 0.29.0" in text.stdout


def test_vllm_patchkit_doctor_shows_the_record() -> None:
    code, report = patchkit_json("doctor")
    assert code == 0
    assert [t["target"] for t in report["overlay_record"]] == [t.target for t in RECORD]
    assert report["overlay_decision"].startswith("installed: ")
    text = patchkit("doctor")
    assert "what the overlay patches:" in text.stdout
    assert "related: vLLM PR #51585" in text.stdout


def test_json_after_loading_vllm_is_one_object_with_the_state() -> None:
    """Loading vLLM logs ("installed" at info level); with --json the log
    goes to stderr and stdout stays one JSON object."""
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_overlay", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_LOGGING_LEVEL": "INFO"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "installed" and report["fix_on_vllm_class"]
    assert "vllm-overlay: installed" in proc.stderr
