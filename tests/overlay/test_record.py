"""The overlay's record of what it patches, as a user reads it.

``python -m vllm_overlay`` (text and ``--json``) and ``vllm-patchkit
doctor`` show, for each target: Why, How, the related upstream work, and the
plan for its removal. The record's target must name the callable the
overlay really patches in the installed vLLM.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json
from tests.toolkit.series_expectations import SERIES_FIXES
from vllm_overlay.diagnosis import Finding
from vllm_overlay.doctor import fix_report
from vllm_overlay.fixes import FIXES, RECORD
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import AITER_MODULE
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    GENERIC_MODULE as UPSTREAM_MODULE,
)
from vllm_overlay.state import Action

CAPTURE, AITER, SINK = SERIES_FIXES
TARGETS = {target.name: target for target in RECORD}


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
    assert len(TARGETS) == len(RECORD)
    assert [t.name for t in RECORD if t.name in SERIES_FIXES] == list(SERIES_FIXES)
    capture, aiter, sink = TARGETS[CAPTURE], TARGETS[AITER], TARGETS[SINK]
    assert capture.module == UPSTREAM_MODULE
    assert capture.target == (
        "vllm.v1.attention.backends.rocm_attn:"
        "RocmAttentionMetadataBuilder.build_for_cudagraph_capture"
    )
    assert capture.affected == "0.11.1..0.28.0" and capture.inert_from == "0.29.0"
    related = " ".join(capture.related)
    assert "#51585" in related and "#25985" in related
    assert "0.29.0" in capture.removal
    assert capture.why and capture.how
    assert aiter.module == AITER_MODULE
    assert aiter.target == (
        "vllm.v1.attention.backends.rocm_aiter_unified_attn:"
        "RocmAiterUnifiedAttentionBackend.get_builder_cls"
    )
    assert aiter.affected == "0.11.1..0.28.0" and aiter.inert_from == "0.29.0"
    assert aiter.related[0].startswith("vLLM PR #53821")
    assert "Inert from vLLM 0.29.0" in aiter.removal
    assert aiter.why and aiter.how
    assert sink.target == (
        "vllm.model_executor.layers.attention.static_sink_attention:"
        "StaticSinkAttentionBuilder.build"
    )
    # Not fixed upstream in any release: the record says so, not a version,
    # and its range has no end.
    assert sink.affected == "0.14.0.." and sink.inert_from == "none yet"
    assert sink.unfixed and sink.affects("0.34.0") and sink.affects("9.0.0")
    assert sink.affected_text == "0.14.0 and later (no release fixes it yet)"
    assert "patch 0004" in sink.related[0] and sink.why and sink.how


def test_python_m_vllm_overlay_shows_the_record() -> None:
    proc = overlay_doctor("--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [t["target"] for t in report["record"]] == [t.target for t in RECORD]
    assert set(report["record"][0]) >= {"why", "how", "related", "removal"}
    # Each fix on its own: installed 0.28.0 needs all three.
    fixes = {entry["name"]: entry for entry in report["fixes"]}
    assert list(fixes) == [t.name for t in RECORD]
    capture, aiter, sink = fixes[CAPTURE], fixes[AITER], fixes[SINK]
    assert capture["removes"]["statement"] == (
        "common_attn_metadata.query_start_loc_cpu.zero_()"
    )
    assert capture["shape"] == "buggy" and capture["would_do"] == "installed"
    assert capture["related"] == ["vLLM PR #51585", "vLLM issue #25985"]
    assert aiter["shape"] == "buggy" and aiter["would_do"] == "installed"
    assert aiter["affected"] and aiter["removes"] is None
    assert aiter["related"][0] == "vLLM PR #53821"
    assert aiter["file"].endswith("rocm_aiter_unified_attn.py") and aiter["line"]
    assert sink["shape"] == "buggy" and sink["would_do"] == "installed"
    assert sink["file"].endswith("static_sink_attention.py") and sink["line"]
    text = overlay_doctor()
    assert "what the overlay patches:" in text.stdout
    for target in RECORD:
        assert f"target: {target.target}" in text.stdout
        assert f"fix {target.name} (" in text.stdout
    assert "removal: Inert from vLLM 0.29.0" in text.stdout
    assert "affected: yes (buggy)" in text.stdout


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
    assert report["affected"] is True and report["not_protected"] == []
    assert "vllm-overlay: installed" in proc.stderr
    for entry in report["fixes"]:
        assert entry["status"] == "installed" and entry["on_vllm"], entry
    assert "the #53821 AITER unified capture fix" in proc.stderr


@pytest.mark.slow
def test_a_disabled_fix_is_reported_on_its_own() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_overlay", "--json"],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "CUDA_VISIBLE_DEVICES": "",
            "VLLM_OVERLAY_DISABLE": AITER,
        },
        timeout=600,
    )
    report = json.loads(proc.stdout)
    fixes = {entry["name"]: entry for entry in report["fixes"]}
    capture, aiter = fixes[CAPTURE], fixes[AITER]
    assert capture["status"] == "installed" and capture["on_vllm"]
    assert aiter["disabled"] and aiter["status"] == "disabled"
    assert aiter["affected"] and not aiter["active"]
    # Affected and not protected: the doctor says so by its exit status.
    assert proc.returncode == 1
    assert report["disabled_fixes"] == [AITER]


def _doctor_with_disable(value: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_overlay", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_OVERLAY_DISABLE": value},
        timeout=600,
    )


def _disabled_lines(text: str) -> tuple[str, list[str]]:
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("disabled ("))
    return header, [line.strip() for line in lines if line.startswith("  disabled:")]


def test_an_unknown_name_in_disable_is_warned_about_naming_the_fixes() -> None:
    """A typo in VLLM_OVERLAY_DISABLE disables nothing: vLLM's start-up (the
    plugin) and the doctor both say so, naming the fixes there are."""
    proc = _doctor_with_disable("rocm-capture-fix")

    header, fixes = _disabled_lines(proc.stdout)
    assert fixes == ["disabled: no"] * len(RECORD)
    assert header.startswith("disabled (VLLM_OVERLAY_DISABLE): no")
    assert "rocm-capture-fix" in header
    # vLLM's log handler writes where stdout was when vLLM was imported.
    output = proc.stdout + proc.stderr
    warning = next(line for line in output.splitlines() if "names no fix" in line)
    assert "WARNING" in warning and "rocm-capture-fix" in warning
    assert all(target.name in warning for target in RECORD)


def test_the_doctor_header_agrees_with_each_fix() -> None:
    """The header says "all" only when every fix says it is disabled."""
    for value in ("1", "all", RECORD[0].name, "rocm-capture-fix"):
        proc = _doctor_with_disable(value, "--quick")
        header, fixes = _disabled_lines(proc.stdout)
        word = header.split(": ", 1)[1]
        if word == "all":
            assert fixes == ["disabled: yes"] * len(RECORD), (value, fixes)
        else:
            assert "disabled: no" in fixes, (value, header, fixes)
    report = json.loads(_doctor_with_disable("all", "--quick", "--json").stdout)
    assert report["disabled"] and all(fix["disabled"] for fix in report["fixes"])


def test_quick_and_full_agree_with_every_fix_off() -> None:
    """``VLLM_OVERLAY_DISABLE=1`` on the installed vLLM: every fix its
    release needs is off, so ``--quick`` exits 1 as the full check does, and
    both name the same fixes as not protected (one judgement)."""
    version = importlib.metadata.version("vllm")
    needed = [fix.name for fix in FIXES if fix.record.affects(version)]
    assert needed, f"vLLM {version} needs no fix: this test proves nothing there"
    runs = {
        mode: _doctor_with_disable("1", *args, "--json")
        for mode, args in (("quick", ("--quick",)), ("full", ()))
    }
    for mode, proc in runs.items():
        assert proc.returncode == 1, f"{mode}: {proc.stdout}{proc.stderr}"
        report = json.loads(proc.stdout)
        assert report["not_protected"] == needed, (mode, report["not_protected"])
        assert report["affected"] is True


def test_a_missing_target_is_cannot_judge_unless_the_release_predates_it() -> None:
    """A fix whose module the installed vLLM lacks: "cannot judge" (a fork
    may have moved the code), unless the release is older than every
    release the fix's record says is affected."""
    for fix in FIXES:
        first = fix.record.affected.partition("..")[0]
        older = _older_than(first)
        for version, expected in ((first, None), (older, False), ("dev", None)):
            state = fix.state(Action.ABSENT, version, f"no {fix.module}")
            entry = fix_report(Finding.of(state, version, False), state, disabled=False)
            assert entry["affected"] is expected, (fix.name, version, entry)
            assert entry["judged"] is (expected is not None)


def _older_than(release: str) -> str:
    """A release string just before ``release`` (``0.14.0`` -> ``0.13.99``)."""
    major, minor, _ = (int(part) for part in release.split("."))
    return f"{major}.{minor - 1}.99"
