"""A fourth fix is four files: its folder, patch, series line and by_fix module.

Issue #38's proof that no fix is special: a scratch fix
(``tests/data/fourth_fix/``) is written into a copy of the project, with
nothing else edited:

1. ``vllm_overlay/fixes/scratch_fourth_fix/__init__.py``: its record, how
   its code reads (the one :class:`~vllm_overlay.code.Code` type), how it
   installs, and its patch rule;
2. ``patches/0099-Scratch-mark-endpoint-plugins.patch``: made here by ``git
   format-patch`` from a commit on a 0.28.0 checkout;
3. ``patches/series``: the line naming it;
4. ``tools/vllm_patchkit/judge/regression/by_fix/scratch_fourth_fix.py``:
   its scenario and the fact a fixed tree shows, its mutation target and
   one mutant.

Each surface then runs as a real process of the copy, on real vLLM code
(the installed 0.28.0 and a 0.28.0 checkout shaped as users have it): the
plugin and its doctor, the toolkit's doctor, ``apply`` (the patch's
invariant, derived from the fix), the matrix's columns, the documentation's
fix table, ``pr`` and, in the extended tier (as the mutation tier itself),
the mutation tier's targets and mutants and ``test``'s verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.overlay.fourth_fix_files import NAME, PATCH, add_fourth_fix
from tests.toolkit.matrix_helpers import own_matrix_cache, project_copy
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.trees.releases import clone_release


@dataclass(frozen=True)
class Scratch:
    project: Path
    """The project's copy, with the fourth fix's four files."""
    env: dict[str, str]
    """A cache of the copy's own (the release trees shared)."""
    stock: Path
    """A 0.28.0 checkout as a user has it, untouched."""


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Scratch:
    if (PROJECT_ROOT / "vllm_overlay/fixes/scratch_fourth_fix").exists():
        pytest.skip(
            "cannot run here: this project already carries the scratch fix "
            "(a copy that fourth_fix_files wrote it into)"
        )
    root = tmp_path_factory.mktemp("fourth-fix")
    stock = root / "vllm-0.28.0"
    clone_release("0.28.0", stock, checkout=True)
    project = project_copy(root / "project")
    assert len(add_fourth_fix(project, stock)) == 4
    return Scratch(project, own_matrix_cache(root), stock)


def run_copy(
    scratch: Scratch, *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with the copy's packages first on the path."""
    full_env = {
        **os.environ,
        **scratch.env,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join(
            [str(scratch.project / "tools"), str(scratch.project)]
        ),
        "PYTHONDONTWRITEBYTECODE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    full_env.pop("VLLM_PLUGINS", None)
    if env is None or "VLLM_OVERLAY_DISABLE" not in env:
        full_env.pop("VLLM_OVERLAY_DISABLE", None)
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=scratch.project,
        timeout=900,
    )


def applied_checkout(scratch: Scratch, dest: Path) -> Path:
    """A clone of the stock checkout with the copy's whole series applied."""
    Git(dest.parent).run("clone", "-q", str(scratch.stock), str(dest))
    git = Git(dest)
    git.run("config", "user.name", "A User")
    git.run("config", "user.email", "user@example.invalid")
    proc = run_copy(scratch, "-m", "vllm_patchkit", "apply", dest)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{PATCH}: applied (invariant holds)" in proc.stdout, proc.stdout
    return dest


def test_the_plugin_and_its_doctor_judge_the_fourth_fix(scratch: Scratch) -> None:
    """Decided on the installed vLLM; the doctor's exit is over every fix."""
    quick = run_copy(scratch, "-m", "vllm_overlay", "--quick")
    assert quick.returncode == 0, quick.stdout + quick.stderr
    assert f"fix {NAME} (vllm-overlay patch 0099)" in quick.stdout
    interface = "vllm/plugins/endpoint_plugins/interface.py"
    assert f"{interface} lacks SCRATCH_FIXED" in quick.stdout
    off = run_copy(
        scratch, "-m", "vllm_overlay", "--quick", env={"VLLM_OVERLAY_DISABLE": NAME}
    )
    # Needed on 0.28.0 and switched off: that alone fails the doctor.
    assert off.returncode == 1, off.stdout


def test_the_toolkit_reaches_the_fourth_fix(scratch: Scratch, tmp_path: Path) -> None:
    """doctor, apply (the invariant), matrix, docs table and pr, each a
    process of the copy."""
    doctor = run_copy(scratch, "-m", "vllm_patchkit", "doctor", "--json", scratch.stock)
    assert doctor.returncode == 1, doctor.stderr
    report: dict[str, Any] = json.loads(doctor.stdout)
    fourth = next(f for f in report["fixes"] if f["fix"] == "Scratch")
    assert fourth["affected"] is True, fourth
    assert {"name": PATCH, "status": "applies"}.items() <= report["patches"][-1].items()

    patched = applied_checkout(scratch, tmp_path / "patched")
    after = run_copy(scratch, "-m", "vllm_patchkit", "doctor", "--json", patched)
    assert after.returncode == 0, after.stdout
    assert (
        next(f for f in json.loads(after.stdout)["fixes"] if f["fix"] == "Scratch")[
            "affected"
        ]
        is False
    )

    tables = run_copy(scratch, "-c", TABLES)
    assert tables.returncode == 0, tables.stderr
    found = json.loads(tables.stdout.strip().splitlines()[-1])
    assert found["matrix_fixes"]["Scratch"] is True
    assert "| StaticSink | Scratch | series |" in found["matrix_header"]
    (row,) = [line for line in found["fix_table"] if line.startswith("| Scratch |")]
    assert f"| 0099 | none yet | 0.26.0-0.28.0 | 0.29.0 | `{NAME}` |" in row
    # Fixed upstream in 0.29.0, it keeps nothing installed: StaticSink does.
    assert "Not yet: StaticSink is not fixed upstream" in found["removal"]

    pr = run_copy(
        scratch,
        "-m",
        "vllm_patchkit",
        "pr",
        "--dry-run",
        "--signoff",
        "--fix",
        NAME,
        "--no-test",
        "--no-precommit",
        "--json",
        patched,
    )
    assert pr.returncode == 0, pr.stdout + pr.stderr
    made = json.loads(pr.stdout)
    assert made["title"] == "[Bugfix] Scratch: mark endpoint plugins"
    body = made["body"]
    assert "A scratch patch for the fourth-fix test." in body
    for other in ("0001", "0004", "#51585", "#53821", "StaticSink"):
        assert other not in body, other


@pytest.mark.slow
def test_the_mutation_tier_lists_the_fourth_fixs_mutant(
    scratch: Scratch, tmp_path: Path
) -> None:
    """Its target and mutant join the tier's listing (``targets.py``
    untouched); its invariant calls the patched file fixed, the mutant's not."""
    patched = applied_checkout(scratch, tmp_path / "patched")
    proc = run_copy(scratch, "-c", MUTATION_LISTING, patched, tmp_path / "mutant")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    # In by_fix's order, between the series' own.
    assert found["targets"] == [
        ["aiter-unified", "vllm/v1/attention/backends/rocm_aiter_unified_attn.py"],
        ["rocm-attn", "vllm/v1/attention/backends/rocm_attn.py"],
        ["scratch-endpoint-plugins", "vllm/plugins/endpoint_plugins/interface.py"],
        [
            "static-sink",
            "vllm/model_executor/layers/attention/static_sink_attention.py",
        ],
    ]
    assert ["scratch_mark_dropped", "scratch-endpoint-plugins"] in found["mutants"]
    assert len(found["mutants"]) == 37 + 1
    assert (found["patched"], found["mutated"]) == ("fixed", "not-fixed")
    usage = run_copy(scratch, "-m", "vllm_patchkit.judge.mutation", "--help")
    assert usage.returncode == 0, usage.stderr
    assert "scratch_mark_dropped" in usage.stdout


MUTATION_LISTING = """
import json, sys
from pathlib import Path
from vllm_patchkit.judge.mutation.targets import ALL_MUTANTS, TARGETS

patched, mutant_dir = map(Path, sys.argv[1:])
(target,) = [t for t in TARGETS if t.key == "scratch-endpoint-plugins"]
(mutant,) = [m for m in ALL_MUTANTS if m.target is target]
mutated = mutant_dir / target.relpath
mutated.parent.mkdir(parents=True)
mutated.write_text(mutant.make((patched / target.relpath).read_text()))
print(json.dumps({
    "targets": [[t.key, str(t.relpath)] for t in TARGETS],
    "mutants": [[m.name, m.target.key] for m in ALL_MUTANTS],
    "patched": target.shape(patched),
    "mutated": target.shape(mutant_dir),
}))
"""


TABLES = """
import json
from vllm_patchkit import fix_reference
from vllm_patchkit.git.series import load_series
from vllm_patchkit.judge.matrix import build_matrix
from vllm_patchkit.present.matrix_table import table

(row,) = build_matrix(load_series(), ["0.28.0"], steps=())
found = fix_reference.facts()
print(json.dumps({
    "matrix_fixes": row.fixes,
    "matrix_header": table([row])[0],
    "fix_table": fix_reference.table(found),
    "removal": " ".join(fix_reference.removal(found)),
}))
"""


@pytest.mark.slow
def test_the_verdict_and_the_loaded_vllm_carry_the_fourth_fix(
    scratch: Scratch, tmp_path: Path
) -> None:
    """``test`` judges it by its own scenario, before and after; the plugin,
    through vLLM's loader, installs it when the module loads."""
    patched = applied_checkout(scratch, tmp_path / "patched")
    proc = run_copy(scratch, "-m", "vllm_patchkit", "test", patched)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    # Before (the base apply recorded) it fails, after it passes.
    for q in (1, 3):
        (row,) = [
            line for line in lines if line.startswith(f"scratch_fourth_fix[q={q}]")
        ]
        assert row.split()[1] == "FAIL" and row.split()[-1] == "PASS", row
    assert (
        "fix Scratch: FIXED: every check that ran passed, the core checks included"
        in lines
    )

    loaded = run_copy(scratch, "-m", "vllm_overlay", "--json")
    assert loaded.returncode == 0, loaded.stdout[-3000:]
    fix = next(f for f in json.loads(loaded.stdout)["fixes"] if f["name"] == NAME)
    assert (fix["status"], fix["on_vllm"]) == ("installed", True)
