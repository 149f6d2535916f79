"""The overlay's log tells the truth, level by level, in fresh vLLM processes.

Registration runs on every platform; ``rocm_attn`` loads only on ROCm. So
registration logs at debug level only ("armed"); "installed" (info) comes
once vLLM's class carries the fix, and a warning only when vLLM loads code
the overlay left alone. A process that never imports ``rocm_attn`` (CUDA,
CPU) sees nothing above debug, whatever the installed code looks like.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.overlay.shadow_vllm import AITER_UNIFIED_ATTN, shadow_installed_vllm
from tests.overlay.test_plugin import VENDOR_RETURN, vendor_get_builder_cls

PROBE = Path(__file__).with_name("probe_logging.py")
AITER_FIX = "rocm-aiter-unified-capture-keeps-offsets"
HOST_LINE = "        common_attn_metadata.query_start_loc_cpu.zero_()\n"
DEVICE_LINE = "        common_attn_metadata.query_start_loc.zero_()\n"


def without(line: str):  # type: ignore[no-untyped-def]
    def edit(text: str) -> str:
        assert text.count(line) == 1
        return text.replace(line, "")

    return edit


def conflict_markers(text: str) -> str:
    """What ``git merge`` leaves when both sides changed an import line."""
    old = "from typing import ClassVar\n"
    assert text.count(old) == 1
    merged = (
        "<<<<<<< HEAD\nfrom typing import ClassVar, Final\n=======\n"
        "from typing import Any, ClassVar\n>>>>>>> vendor\n"
    )
    return text.replace(old, merged)


def line_of(file: Path, text: str) -> int:
    (line,) = [n for n, s in enumerate(file.read_text().splitlines(), 1) if text in s]
    return line


def guarded_host_zeroing(text: str) -> str:
    """A vendor guard around the host zeroing: the fix would empty the block."""
    assert text.count(HOST_LINE) == 1
    return text.replace(
        HOST_LINE, "        if not rocm_aiter_ops.is_enabled():\n    " + HOST_LINE
    )


EDITS = {
    "fixed": without(HOST_LINE),
    "guarded": guarded_host_zeroing,
    "unrecognised": without(DEVICE_LINE),
    "conflict": conflict_markers,
}


class Shadows:
    """Shadow trees of the installed vLLM by name (``EDITS``, and "aiter"),
    each made when a test first asks for it: a run of some of this module's
    tests pays for the ones they read."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._made: dict[str, Path] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self._made:
            tree = self._root / name
            if name == "aiter":
                shadow_installed_vllm(tree, vendor_get_builder_cls, AITER_UNIFIED_ATTN)
            else:
                shadow_installed_vllm(tree, EDITS[name])
            self._made[name] = tree
        return self._made[name]


@pytest.fixture(scope="module")
def shadows(tmp_path_factory: pytest.TempPathFactory) -> Shadows:
    return Shadows(tmp_path_factory.mktemp("shadows"))


def probe(
    tmp_path: Path,
    *,
    import_rocm_attn: bool,
    import_aiter: bool = False,
    tree: Path | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    full_env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONDONTWRITEBYTECODE": "1",
        **(env or {}),
    }
    full_env.pop("VLLM_PLUGINS", None)
    if tree is not None:
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(tree), os.environ.get("PYTHONPATH")) if p
        )
    output = tmp_path / "probe.json"
    args = [sys.executable, str(PROBE), str(output)]
    args += ["--import-rocm-attn"] if import_rocm_attn else []
    args += ["--import-aiter"] if import_aiter else []
    proc = subprocess.run(
        args,
        capture_output=True,
        text=True,
        env=full_env,
        cwd=tmp_path,
        timeout=600,
    )
    assert output.is_file(), proc.stdout + proc.stderr
    return json.loads(output.read_text())


def levels(report: dict[str, Any], phase: str) -> list[str]:
    return [r["level"] for r in report["records"] if r["phase"] == phase]


def test_affected_vllm_on_cuda_or_cpu_logs_only_debug_armed(tmp_path: Path) -> None:
    report = probe(tmp_path, import_rocm_attn=False)
    assert report["action"] == "installed" and report["status"] == "armed"
    assert set(levels(report, "register")) == {"DEBUG"}
    messages = [r["message"] for r in report["records"]]
    for fix in ("rocm-capture-keeps-host-offsets", AITER_FIX):
        assert report["fixes"][fix]["status"] == "armed"
        assert any(f"vllm-overlay: armed {fix} on vLLM 0.28.0" in m for m in messages)
    assert not any("vllm-overlay: installed" in m for m in messages)


def test_installed_is_logged_once_the_class_carries_the_fix(tmp_path: Path) -> None:
    report = probe(tmp_path, import_rocm_attn=True)
    assert report["status"] == "installed"
    assert set(levels(report, "register")) == {"DEBUG"}
    above_debug = [r for r in report["records"] if r["level"] != "DEBUG"]
    assert [r["level"] for r in above_debug] == ["INFO"], report["records"]
    assert "vllm-overlay: installed the #51585 capture fix" in above_debug[0]["message"]
    assert above_debug[0]["phase"] == "import"
    assert above_debug[0]["fix_on_class"]


@pytest.mark.parametrize(
    "import_rocm_attn", [False, pytest.param(True, marks=pytest.mark.slow)]
)
def test_fixed_code_never_logs_above_debug(
    tmp_path: Path, shadows: Shadows, import_rocm_attn: bool
) -> None:
    report = probe(tmp_path, import_rocm_attn=import_rocm_attn, tree=shadows["fixed"])
    assert report["action"] == "not-needed"
    assert report["records"] and {r["level"] for r in report["records"]} == {"DEBUG"}


@pytest.mark.slow
def test_disabled_overlay_logs_only_debug(tmp_path: Path) -> None:
    report = probe(tmp_path, import_rocm_attn=True, env={"VLLM_OVERLAY_DISABLE": "1"})
    assert report["action"] == "disabled"
    assert report["records"] and {r["level"] for r in report["records"]} == {"DEBUG"}


def test_unrecognised_code_warns_only_when_rocm_attn_loads(
    tmp_path: Path, shadows: Shadows
) -> None:
    quiet = probe(tmp_path, import_rocm_attn=False, tree=shadows["unrecognised"])
    assert quiet["action"] == "unrecognised"
    assert {r["level"] for r in quiet["records"]} == {"DEBUG"}
    loud = probe(tmp_path, import_rocm_attn=True, tree=shadows["unrecognised"])
    above_debug = [r for r in loud["records"] if r["level"] != "DEBUG"]
    assert [r["level"] for r in above_debug] == ["WARNING"], loud["records"]
    warning = above_debug[0]["message"]
    file = shadows["unrecognised"] / "vllm/v1/attention/backends/rocm_attn.py"
    method = line_of(file, "def build_for_cudagraph_capture")
    assert f"{file}:{method}" in warning and "left as it is" in warning
    assert not above_debug[0]["fix_on_class"]


def test_conflict_markers_are_never_patched(tmp_path: Path, shadows: Shadows) -> None:
    report = probe(tmp_path, import_rocm_attn=False, tree=shadows["conflict"])
    assert report["action"] == "unrecognised"
    assert not report["planned"]
    file = shadows["conflict"] / "vllm/v1/attention/backends/rocm_attn.py"
    line = line_of(file, "<<<<<<< HEAD")
    assert f"{file}:{line}: unparseable: SyntaxError at line {line}" in report["reason"]
    assert {r["level"] for r in report["records"]} == {"DEBUG"}


@pytest.mark.slow
def test_vendor_code_it_cannot_fix_is_left_alone_with_a_warning(
    tmp_path: Path, shadows: Shadows
) -> None:
    report = probe(tmp_path, import_rocm_attn=True, tree=shadows["guarded"])
    assert report["action"] == "unrecognised" and not report["planned"]
    assert set(levels(report, "register")) == {"DEBUG"}
    above_debug = [r for r in report["records"] if r["level"] != "DEBUG"]
    assert [r["level"] for r in above_debug] == ["WARNING"], report["records"]
    file = shadows["guarded"] / "vllm/v1/attention/backends/rocm_attn.py"
    line = line_of(file, "query_start_loc_cpu.zero_()")
    assert (
        f"{file}:{line}: removing the host zeroing would leave an empty block"
        in above_debug[0]["message"]
    )
    assert not above_debug[0]["fix_on_class"]


@pytest.mark.slow
def test_aiter_installed_is_logged_once_the_backend_hands_out_its_builder(
    tmp_path: Path,
) -> None:
    report = probe(tmp_path, import_rocm_attn=False, import_aiter=True)
    assert report["fixes"][AITER_FIX]["status"] == "installed"
    above_debug = [r for r in report["records"] if r["level"] != "DEBUG"]
    # vLLM's AITER module imports rocm_attn first: the #51585 fix, then this.
    assert [r["level"] for r in above_debug] == ["INFO", "INFO"], report["records"]
    assert "the #51585 capture fix" in above_debug[0]["message"]
    aiter = above_debug[1]
    assert (
        "vllm-overlay: installed the #53821 AITER unified capture fix"
        in (aiter["message"])
    )
    assert aiter["phase"] == "import-aiter" and aiter["aiter_fix_on_backend"]
    assert not above_debug[0]["aiter_fix_on_backend"]


@pytest.mark.slow
def test_unrecognised_aiter_code_warns_only_when_its_module_loads(
    tmp_path: Path, shadows: Shadows
) -> None:
    quiet = probe(tmp_path, import_rocm_attn=True, tree=shadows["aiter"])
    assert quiet["fixes"][AITER_FIX]["action"] == "unrecognised"
    above_debug = [r for r in quiet["records"] if r["level"] != "DEBUG"]
    assert [r["level"] for r in above_debug] == ["INFO"], quiet["records"]
    loud = probe(
        tmp_path, import_rocm_attn=True, import_aiter=True, tree=shadows["aiter"]
    )
    above_debug = [r for r in loud["records"] if r["level"] != "DEBUG"]
    assert [r["level"] for r in above_debug] == ["INFO", "WARNING"], loud["records"]
    warning = above_debug[1]
    file = shadows["aiter"] / AITER_UNIFIED_ATTN
    line = line_of(file, VENDOR_RETURN.strip()) - 2
    assert warning["phase"] == "import-aiter"
    assert f"{file}:{line}" in warning["message"]
    assert "left as it is" in warning["message"]
    assert not warning["aiter_fix_on_backend"]
