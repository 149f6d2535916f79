"""The fix registry: a fix is one module of ``vllm_overlay/fixes`` plus its patches.

The proof of #23's "one module plus its patches": a scratch third fix,
written into a copy of the project with nothing else edited but the series
listing its patch, reaches the plugin (decided with the decision it needs,
armed, installed on import), the overlay's doctor, the verdict's per-fix
judgement and the matrix's columns, each run as a real process of the copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.toolkit.matrix_helpers import own_matrix_cache, project_copy
from vllm_overlay.fixes import FIXES, by_name, fix_of_patch
from vllm_patchkit.git.series import load_series

SCRATCH_FIX = '''
"""A scratch third fix (tests/overlay/test_fix_registry.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.fixes.base import Fix
from vllm_overlay.import_hook import after_import
from vllm_overlay.installed import vllm_version
from vllm_overlay.record import PatchTarget
from vllm_overlay.state import Action, InstallState

RECORD = PatchTarget(
    name="scratch-third-fix",
    module="colorsys",
    qualname="rgb_to_hsv",
    source_file="vllm/scratch_third_fix.py",
    why="a scratch fix for the registry's test",
    how="marks the module when it loads",
    related=("vLLM PR #99999: scratch",),
    affected="0.11.1-0.28.0",
    inert_from="0.29.0",
    removal="with the test",
)


@dataclass(frozen=True)
class ScratchCode:
    shape: str
    file: Path
    line: int | None
    detail: str
    affected: bool = True
    judged: bool = True


def assess(before):
    seen = ", ".join(f"{name}: {state.action}" for name, state in before.items())
    return InstallState(
        Action.INSTALLED, vllm_version(), f"scratch after {seen}", name=RECORD.name
    )


def assess_tree(root, version, before):
    code = ScratchCode("scratch", root / RECORD.source_file, None, "scratch code")
    return InstallState(Action.INSTALLED, version, "scratch", code, name=RECORD.name)


def arm(state):
    def mark(module):
        module.SCRATCH_FIXED = True
        state.applied_to_class = True

    after_import(RECORD.module, mark)


FIX = Fix(
    order=40,
    record=RECORD,
    pr="#99999",
    patches=("0099-scratch-third-fix.patch",),
    assess=assess,
    assess_tree=assess_tree,
    arm=arm,
    installed_on=lambda module: getattr(module, "SCRATCH_FIXED", False),
    needs=("rocm-capture-keeps-host-offsets",),
    scenarios=("scratch_scenario",),
    core_scenarios=("scratch_scenario",),
)
'''

SCRATCH_PATCH = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: vllm-overlay developers <dev@vllm-overlay.invalid>
Date: Mon, 30 Nov 2026 00:00:00 +0000
Subject: [PATCH] Scratch third fix

A scratch patch for the registry's test.

Origin: vendor, vllm-overlay
Forwarded: no
Affects: 0.11.1..0.28.0
---
 vllm/scratch_third_fix.py | 1 +
 1 file changed, 1 insertion(+)
 create mode 100644 vllm/scratch_third_fix.py

diff --git a/vllm/scratch_third_fix.py b/vllm/scratch_third_fix.py
new file mode 100644
index 0000000..3a8f1b1
--- /dev/null
+++ b/vllm/scratch_third_fix.py
@@ -0,0 +1 @@
+SCRATCH = True
--
2.43.0
"""

PROBE = """
import json
from vllm_overlay import plugin
from vllm_patchkit.judge.matrix import build_matrix
from vllm_patchkit.present.matrix_table import table
from vllm_patchkit.judge.regression.verdict import judge_fixes
from vllm_patchkit.git.series import load_series

plugin.register()
states = plugin.current_states()
checks = [
    {"name": f"scratch_scenario[q={q}]", "status": "passed", "detail": ""}
    for q in (1, 3)
]
(row,) = build_matrix(load_series(), ["0.28.0"], steps=())
print(json.dumps({
    "plugin": {n: [str(s.action), s.reason] for n, s in states.items()},
    "verdicts": judge_fixes(checks),
    "matrix_fixes": row.fixes,
    "table": table([row])[:3],
}))
"""


def scratch_project(tmp_path: Path) -> Path:
    """A copy of the project with a third fix: one module, one patch."""
    project = project_copy(tmp_path / "project")
    (project / "vllm_overlay/fixes/scratch_third_fix.py").write_text(SCRATCH_FIX)
    (project / "patches/0099-scratch-third-fix.patch").write_text(SCRATCH_PATCH)
    series = project / "patches/series"
    series.write_text(series.read_text() + "0099-scratch-third-fix.patch\n")
    return project


def run_copy(project: Path, env: dict[str, str], *args: str) -> str:
    full_env = {
        **os.environ,
        **env,
        "PYTHONPATH": os.pathsep.join([str(project / "tools"), str(project)]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    full_env.pop("VLLM_PLUGINS", None)
    full_env.pop("VLLM_OVERLAY_DISABLE", None)
    proc = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=project,
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout


def test_a_third_fix_is_one_module_and_its_patch(tmp_path: Path) -> None:
    project = scratch_project(tmp_path)
    env = own_matrix_cache(tmp_path)
    found: dict[str, Any] = json.loads(
        run_copy(project, env, "-c", PROBE).strip().splitlines()[-1]
    )
    # The plugin decided it after the fix it needs, with that decision.
    plugin = found["plugin"]
    assert list(plugin) == [
        "rocm-capture-keeps-host-offsets",
        "rocm-aiter-unified-capture-keeps-offsets",
        "static-sink-keeps-shared-seq-lens",
        "scratch-third-fix",
    ]
    assert plugin["scratch-third-fix"] == [
        "installed",
        "scratch after rocm-capture-keeps-host-offsets: installed",
    ]
    # The verdict judges it by its own scenarios.
    assert found["verdicts"]["#99999"][0] == "fixed"
    assert found["verdicts"]["#51585"][0] == "cannot-judge"
    # The matrix reads it from the tree and gives it a column.
    assert found["matrix_fixes"] == {
        "#51585": True,
        "#53821": True,
        "StaticSink": True,
        "#99999": True,
    }
    header, _, row = found["table"]
    assert "| #51585 | #53821 | StaticSink | #99999 | series |" in header
    assert row.split(" | ")[1:5] == ["**yes**"] * 4
    # The overlay's doctor, through vLLM's own plugin loader: armed, then
    # installed when its module loads.
    report = json.loads(run_copy(project, {}, "-m", "vllm_overlay", "--json"))
    scratch = report["fixes"][-1]
    assert scratch["name"] == "scratch-third-fix"
    assert (scratch["status"], scratch["on_vllm"]) == ("installed", True)
    assert report["record"][-1]["name"] == "scratch-third-fix"


def test_the_registry_names_each_fix_once_with_its_patches() -> None:
    """Every fix's patches are in the series; each patch is one fix's."""
    names = [patch.name for patch in load_series().patches]
    assert [fix.name for fix in FIXES] == [
        "rocm-capture-keeps-host-offsets",
        "rocm-aiter-unified-capture-keeps-offsets",
        "static-sink-keeps-shared-seq-lens",
    ]
    assert [fix.pr for fix in FIXES] == ["#51585", "#53821", "StaticSink"]
    for fix in FIXES:
        assert fix.patches and set(fix.patches) <= set(names), fix.name
        assert all(fix_of_patch(name) is fix for name in fix.patches)
        assert all(by_name(need) in FIXES[: FIXES.index(fix)] for need in fix.needs)
    assert by_name("rocm-aiter-unified-capture-keeps-offsets").needs == (
        "rocm-capture-keeps-host-offsets",
    )
