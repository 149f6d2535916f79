"""The regression harness on vLLM 0.34.0, whose API differs from the
releases the series was written on (Model Runner V2 only; the draft-input
kernel takes ``max_model_len`` as a tensor; MiniMax-M3 reads flat config
fields).

On a 0.34.0 checkout (tag, no ``_version.py``) StaticSink's scenarios run
on Model Runner V2 and fail by the bug's own symptom on stock code; with the
series' 0004 and 0005 put in by ``git am -3``, ``test`` calls every fix
fixed. A set-up step the harness cannot make on a tree is "cannot judge",
never the bug. One 0.34.0 tree serves the module (a clone per case).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.toolkit.cli_helpers import as_user, patchkit_json
from vllm_overlay.fixes import FIXES
from vllm_overlay.fixes.static_sink_seq_lens import FIX
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.judge.regression.by_fix.static_sink import DRAFT_UPDATE, FACTS
from vllm_patchkit.judge.regression.runner import run_scenarios
from vllm_patchkit.judge.regression.verdict import (
    CANNOT_JUDGE,
    FAILED,
    FIXED,
    HARNESS_ERROR,
    NOT_RUN,
    judge_fixes,
)
from vllm_patchkit.trees.releases import clone_release

pytestmark = pytest.mark.release_trees

RELEASE = "0.34.0"
PATCHES = Path(__file__).resolve().parents[2] / "patches"
SPECULATOR = "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py"
TENSOR_ARG = "max_model_len: torch.Tensor,"


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 0.34.0 checkout: the tag, no ``_version.py``, the V1 runner gone."""
    tree = tmp_path_factory.mktemp("v034") / "stock"
    clone_release(RELEASE, tree, checkout=True)
    assert not (tree / "vllm" / "_version.py").exists()
    assert not (tree / "vllm/v1/worker/gpu_model_runner.py").exists()
    return tree


def _static_sink_checks(tree: Path, scenarios: list[str]) -> dict[str, Any]:
    run = run_scenarios(tree, scenarios)
    assert run.report is not None, run.log[-3000:]
    return {c["name"]: c for c in run.report["checks"] if c["fix"] == FIX.pr}


def test_stock_0_34_fails_by_the_bug_on_model_runner_v2(stock: Path) -> None:
    checks = _static_sink_checks(stock, sorted(FACTS))

    assert len(checks) == 2 * len(FACTS), checks
    for check in checks.values():
        # The symptom, a fact about the lengths; not an exception.
        assert check["status"] == FAILED, check
        assert check["detail"].startswith("violated: "), check
    # Model Runner V2's draft kernel ran (its max_model_len a tensor, as
    # 0.34.0 declares it); the runner's lengths carry the sink.
    for q in (1, 3):
        detail = checks[f"{DRAFT_UPDATE}[q={q}]"]["detail"]
        assert "runner_seq_lens_only_advanced" in detail, detail
        assert "InterpreterError" not in detail, detail


def test_a_set_up_step_the_harness_cannot_make_is_cannot_judge(
    stock: Path, tmp_path: Path
) -> None:
    """A tree whose draft kernel declares ``max_model_len`` an int but loads
    it from memory: the harness builds the int the signature asks for, the
    kernel cannot run it, and the check says it could not judge (on stock
    0.34.0 it was "the bug reproduces" before the harness followed the
    signature)."""
    tree = tmp_path / "other-api"
    Git(tmp_path).run("clone", "--quiet", str(stock), str(tree))
    speculator = tree / SPECULATOR
    text = speculator.read_text()
    assert text.count(TENSOR_ARG) == 1
    speculator.write_text(text.replace(TENSOR_ARG, "max_model_len: int,"))

    run = run_scenarios(tree, [DRAFT_UPDATE])

    assert run.report is not None, run.log[-3000:]
    checks = run.report["checks"]
    assert [c["status"] for c in checks] == [NOT_RUN, NOT_RUN], checks
    for check in checks:
        assert check["detail"].startswith(
            f"{HARNESS_ERROR}: cannot judge: could not advance the runner's "
            "draft inputs (update_draft_inputs): "
        ), check
    assert run.report["bug_reproduced"] == []
    assert run.report["counts"]["failed"] == 0
    assert judge_fixes(checks)[FIX.pr][0] == CANNOT_JUDGE


def test_0_34_with_0004_and_0005_is_fixed_for_every_fix(
    release_clone: Callable[..., Path],
) -> None:
    """``vllm-patchkit apply`` on 0.34.0 is not this test's subject: the
    fix and its test go in as a contributor would put them by hand."""
    tree = release_clone(RELEASE, "tag")
    patches = [str(p) for p in sorted(PATCHES.glob("000[45]-*.patch"))]
    assert len(patches) == 2
    as_user(tree).run("am", "-3", "--quiet", *patches)

    code, result = patchkit_json("test", str(tree))

    assert (code, result["verdict"]) == (0, "fixed"), result["message"]
    after = result["after"]
    assert after["not_counted"] == {}, after["not_counted"]
    assert after["counts"]["failed"] == 0
    verdicts = judge_fixes(after["checks"])
    assert {fix.pr: verdicts[fix.pr][0] for fix in FIXES} == {
        fix.pr: FIXED for fix in FIXES
    }, verdicts
    sink = [c for c in after["checks"] if c["fix"] == FIX.pr]
    assert {c["status"] for c in sink} == {"passed"}, sink
    # 0005's three tests on Triton and ROCm Octave; FlashAttention's need a GPU.
    assert after["upstream_test"]["passed"] == 6, after["upstream_test"]
    assert after["upstream_test"]["failed"] == 0, after["upstream_test"]
