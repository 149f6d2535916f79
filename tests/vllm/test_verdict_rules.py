"""What a verdict may claim: every check counted, none that could not run a pass.

On real vLLM 0.28.0 code: the session's stock and patched reports, and
runs of the suite with the ROCm backend loaded from a rewritten copy (the
mutation worker's loader), so the code under test really raises.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_overlay.fixes import FIXES as REGISTRY
from vllm_patchkit.judge.mutation.mutants import Mutant
from vllm_patchkit.judge.regression import by_fix
from vllm_patchkit.judge.regression.by_fix import UnattributedScenarioError
from vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified import AITER_CAPTURE
from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets.mutants import (
    DEVICE_ZERO,
    ROCM,
    mutate,
)
from vllm_patchkit.judge.regression.by_fix.static_sink import (
    FACTS as FACTS_OF_STATIC_SINK,
)
from vllm_patchkit.judge.regression.by_fix.static_sink import (
    NOT_APPLICABLE,
    SINK_ONCE,
    SINK_TWICE,
)
from vllm_patchkit.judge.regression.records import DECODE_QUERY_LENS, Outcome
from vllm_patchkit.judge.regression.runner import TreeReport
from vllm_patchkit.judge.regression.verdict import (
    CANNOT_JUDGE,
    CORE_CHECKS,
    FACTS,
    NOT_FIXED,
    fix_of,
    fixed_checks,
    judge_fixes,
    tally,
)
from vllm_patchkit.trees.tree_process import TreeLauncher

REGRESSION = Path(__file__).parents[2] / "tools" / "vllm_patchkit" / "regression"
ROCM_ATTN = ROCM.relpath
NOT_RUN_ON_0_28 = {
    "rocm_then_kimi_k3_rocm_kda[q=3]": "not run at query length 3 on CPU",
    "rocm_then_triton_mla[q=3]": "cannot build from the intended metadata: "
    "AssertionError at vllm/model_executor/layers/attention/mla_attention.py",
    "rocm_then_deepseek_v32_indexer[q=3]": "cannot build from the intended "
    "metadata: RuntimeError at vllm/v1/attention/backends/mla/indexer.py",
}
"""Checks that cannot run on CPU with 0.28.0, and the start of each reason."""
START_UP_MODULES = (
    "vllm_patchkit.judge.regression",
    "vllm_patchkit.judge.regression.verdict",
    "vllm_patchkit.judge.regression.runner",
    "vllm_patchkit.judge.verify",
    "vllm_patchkit.present.reports",
    "vllm_patchkit.judge.demo",
    "vllm_patchkit.judge.matrix",
)


def _imports(path: Path) -> set[str]:
    """Modules of the regression package that ``path`` imports, anywhere."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "vllm_patchkit.judge.regression":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("vllm_patchkit.judge.regression."):
                found.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("vllm_patchkit.judge.regression."):
                    found.add(alias.name.rsplit(".", 1)[1])
    return found


def test_regression_package_has_no_import_cycle() -> None:
    """Function-level imports count: a lazy import still makes a cycle."""
    graph = {p.stem: _imports(p) for p in REGRESSION.glob("*.py")}
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> None:
        assert module not in visiting, " -> ".join([*visiting, module])
        if module in done or module not in graph:
            return
        visiting.append(module)
        for target in sorted(graph[module]):
            visit(target)
        visiting.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


@pytest.mark.parametrize("module", START_UP_MODULES)
def test_start_up_modules_import_neither_torch_nor_vllm(module: str) -> None:
    probe = (
        f"import sys, {module}; "
        "print([m for m in ('torch', 'vllm') if m in sys.modules])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == "[]", (module, proc.stdout)


def test_every_check_is_counted_and_what_could_not_run_is_named(
    scenario_reports: dict[str, TreeReport],
) -> None:
    for name, run in scenario_reports.items():
        report = run.report
        assert report is not None
        assert len(report["checks"]) == len(report["outcomes"]), name
        counts = report["counts"]
        assert counts == tally(report["checks"]).to_json()
        assert counts["ran"] + len(counts["not_run"]) == len(report["checks"])
        not_run = {item["name"]: item["why"] for item in counts["not_run"]}
        assert not_run.keys() == NOT_RUN_ON_0_28.keys(), (name, not_run)
        for check, why in NOT_RUN_ON_0_28.items():
            assert not_run[check].startswith(why), (name, check, not_run[check])
    patched = scenario_reports["patched"].report
    stock = scenario_reports["stock"].report
    assert patched and stock
    assert (patched["verdict"], patched["counts"]["failed"]) == ("fixed", 0)
    assert patched["counts"]["passed"] == len(patched["checks"]) - 3
    assert stock["verdict"] == "not-fixed" and stock["counts"]["failed"] > 0
    assert set(CORE_CHECKS) <= {c["name"] for c in patched["checks"]}


def _run_with_rocm_attn(
    tree: Path, source: str, scratch: Path, *scenarios: str
) -> tuple[int, dict]:
    """The suite on ``tree`` with ``rocm_attn`` loaded from ``source``."""
    module_file = scratch / ROCM_ATTN
    module_file.parent.mkdir(parents=True)
    module_file.write_text(source)
    output = scratch / "report.json"
    args = ["--output", str(output)]
    for name in scenarios:
        args += ["--scenario", name]
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_patchkit.judge.mutation.worker", str(module_file)]
        + ["--", *args],
        cwd=scratch,
        env=TreeLauncher.of(tree).env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert output.is_file(), proc.stdout + proc.stderr
    report = json.loads(output.read_text())
    assert report["module_file"] == str(module_file.resolve())
    return proc.returncode, report


def test_a_builder_that_raises_in_the_code_under_test_is_a_failure(
    patched_installed_tree: Path, tmp_path: Path
) -> None:
    """A typo in the fix: the capture raises AttributeError in rocm_attn.py.

    Cross-attention's builder derives from the ROCm one, so even its build
    from the intended metadata runs the broken capture: that is a failure,
    not a victim that "could not run"; and the direct probe's exception is
    the code under test failing, not a harness error.
    """
    fixed = (patched_installed_tree / ROCM_ATTN).read_text()
    typo = Mutant(
        "device_typo",
        "the device offsets misnamed",
        ((DEVICE_ZERO, ("common_attn_metadata.query_start_loc_gpu.zero_()",)),),
    )
    code, report = _run_with_rocm_attn(
        patched_installed_tree,
        mutate(fixed, typo),
        tmp_path,
        "capture_effects",
        "rocm_then_cross_attention",
    )
    assert (code, report["verdict"]) == (1, "not-fixed"), report["why"]
    checks = {c["name"]: c for c in report["checks"]}
    assert len(checks) == 4 and report["counts"]["not_run"] == []
    for check in checks.values():
        assert check["status"] == "failed", check
        assert f"AttributeError at {ROCM_ATTN}:" in check["detail"], check
    assert checks["rocm_then_cross_attention[q=1]"]["detail"].startswith(
        "cannot build from the intended metadata: "
    )


def test_without_the_core_checks_a_clean_run_cannot_judge(
    patched_installed_tree: Path, tmp_path: Path
) -> None:
    """Victims alone pass on the fixed code, but FIXED needs the core checks."""
    fixed = (patched_installed_tree / ROCM_ATTN).read_text()
    code, report = _run_with_rocm_attn(
        patched_installed_tree, fixed, tmp_path, "rocm_then_aiter_fa"
    )
    assert report["counts"]["passed"] == 2 and report["counts"]["failed"] == 0
    assert (code, report["verdict"], report["fixed"]) == (3, "cannot-judge", False)
    assert report["why"].startswith("core checks did not run: capture_effects[q=1]")


def test_a_pair_scenario_that_could_not_run_is_judged_under_its_own_fix() -> None:
    """#53821's core scenario, unavailable on a tree: its fix's verdict says
    why, and the check is not counted as #51585's."""
    why = "ROCM_AITER_UNIFIED_ATTN cannot be imported here"
    outcomes = [
        Outcome(AITER_CAPTURE, q, "unavailable", error={"message": why})
        for q in DECODE_QUERY_LENS
    ]
    checks = fixed_checks(outcomes)
    assert {c.fix for c in checks} == {"#53821"}
    verdict, reason = judge_fixes(checks)["#53821"]
    assert verdict is CANNOT_JUDGE and why in reason, reason


def test_a_fix_module_s_facts_judge_its_scenarios_under_its_fix() -> None:
    """StaticSink's scenarios: a false fact fails the check, naming the fact
    and the lengths the run recorded, under StaticSink alone."""
    facts = dict.fromkeys(FACTS[SINK_ONCE], True)
    twice = dict.fromkeys(FACTS[SINK_TWICE], True)
    wrong = {
        **facts,
        "shared_seq_lens_kept": False,
        "shared_seq_lens_after": [72, 49, 96, 0],
    }
    checks = fixed_checks(
        [Outcome(SINK_ONCE, q, "ok", wrong) for q in DECODE_QUERY_LENS]
        + [Outcome(SINK_TWICE, q, "ok", twice) for q in DECODE_QUERY_LENS]
    )
    assert {c.fix for c in checks} == {"StaticSink"}
    failed = [c for c in checks if c.status == "failed"]
    assert [c.name for c in failed] == [f"{SINK_ONCE}[q={q}]" for q in (1, 3)]
    assert "violated: shared_seq_lens_kept" in failed[0].detail
    assert "[72, 49, 96, 0]" in failed[0].detail
    verdicts = judge_fixes(checks)
    assert verdicts["StaticSink"][0] is NOT_FIXED
    assert verdicts["#51585"][0] is CANNOT_JUDGE  # none of its checks ran


def test_a_fix_whose_code_the_tree_lacks_is_neither_fixed_nor_not_fixed() -> None:
    outcomes = [
        Outcome(s, q, "unavailable", {"absent": True}, {"message": NOT_APPLICABLE})
        for s in FACTS_OF_STATIC_SINK
        for q in DECODE_QUERY_LENS
    ]
    checks = fixed_checks(outcomes)
    assert all((c.status, c.applies) == ("not run", False) for c in checks)
    verdict, why = judge_fixes(checks)["StaticSink"]
    assert verdict is CANNOT_JUDGE and why == "no core check applies to this tree"


def test_every_fix_module_is_found_and_its_facts_belong_to_a_registry_fix() -> None:
    """Every module or package of ``by_fix`` is found, by name, the three of
    the series among them; each fact's scenario is a registry fix's."""
    package = Path(by_fix.__file__).parent
    on_disk = sorted(
        path.stem
        for path in package.iterdir()
        if not path.name.startswith("_")
        and (path.suffix == ".py" or (path / "__init__.py").is_file())
    )
    found = [m.__name__.rsplit(".", 1)[1] for m in by_fix.MODULES]
    assert found == on_disk
    series = ["rocm_aiter_unified", "rocm_capture_host_offsets", "static_sink"]
    assert [name for name in found if name in series] == series
    declared = {s for fix in REGISTRY for s in by_fix.scenarios_of(fix.name)}
    assert FACTS.keys() <= declared
    for fix in REGISTRY:
        core, scenarios = by_fix.core_of(fix.name), by_fix.scenarios_of(fix.name)
        assert set(core) <= set(scenarios), fix.name


def test_every_scenario_is_one_fixs_and_no_fix_is_the_default() -> None:
    """Each scenario the suite runs is named by exactly one fix (its
    ``by_fix`` module's word); a scenario no fix names is an error, not the
    first fix's."""
    from vllm_patchkit.judge.regression.scenarios import SCENARIOS

    owners = {
        name: [f.pr for f in REGISTRY if name in by_fix.scenarios_of(f.name)]
        for name in SCENARIOS
    }
    assert {name: prs for name, prs in owners.items() if len(prs) != 1} == {}
    for name, (pr,) in owners.items():
        assert fix_of(name) == pr
    # Nothing the suite does not run is claimed either.
    claimed = {s for fix in REGISTRY for s in by_fix.scenarios_of(fix.name)}
    assert claimed <= SCENARIOS.keys()
    with pytest.raises(UnattributedScenarioError, match="no_fix_names_this"):
        fix_of("no_fix_names_this")
