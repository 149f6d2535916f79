"""A vendor build's own lines in the capture method survive the overlay.

AMD's fork carries the buggy method with changes of its own around it. Here
a copy of the installed vLLM 0.28.0 gets two vendor lines inside
``build_for_cudagraph_capture`` (an attribute set, and a logging call in a
nested block); vLLM's real ``load_general_plugins()`` in a fresh process
must leave both running, remove only the host zeroing, and fix MiniMax-M3.
The AITER unified backend's builder (#53821) inherits that method: the vendor
lines run there too, and its capture still keeps both offsets.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest

from tests.overlay.shadow_vllm import insert_before, shadow_installed_vllm
from tests.overlay.test_plugin import (
    AITER_FIX,
    assert_keeps_both_offsets,
    assert_zeroes_device_keeps_host,
    run_probe,
)

HOST_ZEROING = "common_attn_metadata.query_start_loc_cpu.zero_()"
VENDOR_LINES = (
    "        self._amd_marker = 1\n"
    "        if attn_metadata is not None:\n"
    '            logger.debug("vendor: capture metadata built")\n'
)


def add_vendor_lines(text: str) -> str:
    return insert_before(text, HOST_ZEROING, VENDOR_LINES)


@pytest.fixture(scope="module")
def vendor(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("vendor")
    tree = root / "tree"
    edited = shadow_installed_vllm(tree, add_vendor_lines)
    proc, report = run_probe(root, {}, pythonpath=tree)
    assert report is not None, proc.stdout + proc.stderr
    report["log"] = proc.stdout + proc.stderr
    report["edited"] = str(edited)
    report["source"] = edited.read_text()
    return report


def test_vendor_lines_run_in_the_fixed_method(vendor: dict[str, Any]) -> None:
    assert vendor["vllm_file"] == vendor["edited"]
    assert vendor["action"] == "installed", vendor["reason"]
    assert vendor["fix_on_vllm_class"] and vendor["applied_to_class"]
    assert vendor["vendor_marker"] == 1
    # Still compiled from the user's file, at the method's own line.
    assert vendor["method_file"] == vendor["edited"]
    module = ast.parse(vendor["source"])
    (builder,) = [
        n
        for n in module.body
        if isinstance(n, ast.ClassDef) and n.name == "RocmAttentionMetadataBuilder"
    ]
    (method,) = [
        n
        for n in builder.body
        if isinstance(n, ast.FunctionDef) and n.name == "build_for_cudagraph_capture"
    ]
    assert vendor["method_line"] == method.lineno


def test_the_fix_still_works_on_the_vendor_build(vendor: dict[str, Any]) -> None:
    assert vendor["suite_fixed"], vendor["log"]
    assert not vendor["suite_bug_reproduced"]
    assert vendor["rocm_attn_backend_keeps_host"]
    assert vendor["aiter_backend_keeps_host"]
    assert vendor["super_subclass_keeps_host"]
    assert vendor["problems"] == []


def test_the_log_names_the_one_removed_line(vendor: dict[str, Any]) -> None:
    line = vendor["source"].splitlines().index(f"        {HOST_ZEROING}") + 1
    installed = [
        entry
        for entry in vendor["log"].splitlines()
        if "vllm-overlay: installed the #51585" in entry
    ]
    assert len(installed) == 1, vendor["log"]
    assert f"{vendor['edited']}:{line} `{HOST_ZEROING}` removed" in installed[0]


def test_vendor_lines_run_for_both_backends(vendor: dict[str, Any]) -> None:
    assert vendor["fixes"][AITER_FIX]["status"] == "installed"
    assert vendor["aiter_fix_installed"]
    assert vendor["rocm_capture"]["vendor_marker"] == 1
    assert vendor["aiter_capture"]["vendor_marker"] == 1
    assert_keeps_both_offsets(vendor["aiter_capture"])
    assert_zeroes_device_keeps_host(vendor["rocm_capture"])
