"""The overlay's doctor and the toolkit's judge the installed vLLM one way.

Both present :mod:`vllm_overlay.diagnosis`: for each fix, whether the vLLM
needs it and whether it is protected, and the vLLM's word (the deciding
fix's). Here each runs as a process on the installed 0.28.0, in the
environments that change the answer (a fix switched off, the overlay left
out of ``VLLM_PLUGINS``), and their words are compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.toolkit.cli_helpers import patchkit_json
from tests.toolkit.series_expectations import SERIES_FIXES

CAPTURE, AITER, SINK = SERIES_FIXES


def overlay_doctor() -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_overlay", "--quick", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        timeout=300,
    )
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize(
    ("env", "protected"),
    [
        ({}, True),
        ({"VLLM_OVERLAY_DISABLE": AITER}, False),
        ({"VLLM_PLUGINS": "some_other_plugin"}, False),
    ],
    ids=["on", "one-fix-off", "not-in-vllm-plugins"],
)
def test_both_doctors_give_each_fix_and_the_vllm_one_word(
    env: dict[str, str], protected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("VLLM_OVERLAY_DISABLE", "VLLM_PLUGINS"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    overlay_code, overlay = overlay_doctor()
    toolkit_code, toolkit = patchkit_json("doctor")
    # 0.28.0 needs every fix; each doctor says so, fix by fix.
    assert [f["affected"] for f in overlay["fixes"]] == [True] * len(SERIES_FIXES)
    assert [f["affected"] for f in toolkit["fixes"]] == [True] * len(SERIES_FIXES)
    words = [(f["affected"], f["protected"]) for f in overlay["fixes"]]
    assert words == [(f["affected"], f["protected"]) for f in toolkit["fixes"]]
    assert overlay["affected"] == toolkit["affected"]
    assert toolkit["protected"] is protected
    assert (overlay["not_protected"] == []) is protected
    assert (overlay_code == 0) is protected and (toolkit_code == 0) is protected
    if env.get("VLLM_OVERLAY_DISABLE"):
        assert overlay["not_protected"] == [AITER]
        assert toolkit["fix"] == SERIES_FIXES[AITER]
