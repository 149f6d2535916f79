"""Forks whose version says nothing: the series decided by the code (issue #27).

A fork carries a release's code under a history whose tags name a release
long gone (local-inference-lab/vllm: 0.22.0's code, ``git describe`` says
0.9.2), or renames the files the series patches (ROCm/vllm: no
``rocm_attn.py``). Built here from real release sources.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit
from tests.toolkit.series_expectations import (
    SERIES,
    carried,
    release_of,
    stock_status,
    stock_statuses,
)
from vllm_overlay.code import Shape
from vllm_overlay.fixes import FIXES
from vllm_overlay.fixes.static_sink_seq_lens import STATIC_SINK
from vllm_overlay.releases import parse_release
from vllm_patchkit.git.carry import (
    NEAR_TAG,
    TreeVersion,
    contradiction,
    decide,
    read_code,
)
from vllm_patchkit.git.series import Series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import RELEASE_DATE, clone_release, release_files

pytestmark = pytest.mark.release_trees

MATRIX = Path(__file__).resolve().parents[2] / "docs" / "matrix.json"
RELEASES = [row["version"] for row in json.loads(MATRIX.read_text())["rows"]]
"""Every release the project's matrix covers: 0.11.0 to 0.34.0."""


def _edges(releases: list[str]) -> frozenset[str]:
    """The releases on either side of a change in what the series carries
    (each patch's ``Affects:`` range), and the first and last: where a rule
    that disagrees with the code would show first."""
    carried = [
        tuple(p.carried_for(release_of(r)) for p in SERIES.patches) for r in releases
    ]
    edges = {releases[0], releases[-1]}
    for i in range(1, len(releases)):
        if carried[i] != carried[i - 1]:
            edges |= {releases[i - 1], releases[i]}
    return frozenset(edges)


EDGES = _edges(RELEASES)
"""Run by default; the releases between them are the extended tier's."""
CODE = tuple(
    dict.fromkeys(
        (
            "vllm/v1/attention/backends/",
            "vllm/v1/worker/gpu_model_runner.py",
            str(STATIC_SINK),
            *(fix.record.source_file for fix in FIXES),
        )
    )
)
"""What the code rules read (0001-0003: the ROCm backends and the runner;
0004-0005: the static-sink builder; and each fix's own file, so a fix added
to the registry is read from its file too)."""
AITER = "0003-Bugfix-ROCm-Preserve-AITER-unified-attention-metadat.patch"
SINK = "0004-Bugfix-Keep-the-shared-seq_lens-in-StaticSinkAttenti.patch"
SINK_TEST = "0005-Bugfix-Test-that-static-sink-attention-keeps-the-sha.patch"
OLD_TAG = "v0.9.2"
ROCM_BACKENDS = "vllm/v1/attention/backends/rocm"


def on_rocm_backend(patch_name: str) -> bool:
    """Whether the patch is of a fix of a ROCm attention backend, which
    reads rocm_attn.py (0001-0003)."""
    fix = SERIES.fix_of(patch_name)
    return fix is not None and fix.record.source_file.startswith(ROCM_BACKENDS)


def test_release_list_spans_0_11_0_to_0_34_0() -> None:
    assert RELEASES[0] == "0.11.0" and RELEASES[-1] == "0.34.0"
    assert len(RELEASES) == 34


@pytest.mark.parametrize(
    "version",
    [v if v in EDGES else pytest.param(v, marks=pytest.mark.slow) for v in RELEASES],
)
def test_version_rule_and_code_rule_agree_on_every_release(
    tmp_path: Path, series: Series, version: str
) -> None:
    """On a release's own code, each patch is carried by its Affects: range
    exactly when its fix's classifier finds the bug's shape (read from the
    sdist's files, nothing built or run)."""
    root = release_files(version, tmp_path, CODE)
    release = parse_release(version)
    assert release is not None
    # The code is what the release ships: its version can vouch for it.
    assert contradiction(root, release) is None
    untrusted = TreeVersion(version, release, False, "read by its code")
    for patch in series.patches:
        code = read_code(patch, root)
        assert code is not None, f"{patch.name} has no code rule"
        assert code.judged, code.detail
        by_code = code.shape is Shape.BUGGY
        assert by_code == patch.carried_for(release), (patch.name, code.detail)
        # Decided by the code alone, the verdict is the version's.
        carry = decide(patch, root, untrusted)
        assert carry.carried == by_code and not carry.overrides, carry


def fork_of(version: str, dest: Path, *, commits: int = NEAR_TAG + 20) -> Git:
    """A checkout of ``version``'s code as a fork has it: no ``_version.py``,
    no tag of its release, a history of ``commits`` commits whose root is
    tagged with an old release (``v0.9.2``)."""
    git = clone_release(version, dest, checkout=True)
    git.run("tag", "-d", f"v{version}")
    dated = {"GIT_AUTHOR_DATE": RELEASE_DATE, "GIT_COMMITTER_DATE": RELEASE_DATE}
    empty = git.run("mktree", input_text="").stdout.strip()
    parent = git.run("commit-tree", empty, "-m", "vLLM 0.9.2", env=dated).stdout
    git.run("tag", OLD_TAG, parent.strip())
    for number in range(commits):
        parent = git.run(
            "commit-tree",
            empty if number < commits - 1 else "HEAD^{tree}",
            "-p",
            parent.strip(),
            "-m",
            f"fork commit {number}",
            env=dated,
        ).stdout
    git.run("reset", "--quiet", "--hard", parent.strip())
    assert not (dest / "vllm" / "_version.py").exists()
    assert git.out("describe", "--tags", "--abbrev=0") == OLD_TAG
    return git


@pytest.mark.slow
def test_fork_of_0_22_applies_0001_0002_0004_0005_and_tests_fixed(
    tmp_path: Path, series: Series
) -> None:
    tree = tmp_path / "fork"
    fork_of("0.22.0", tree)

    check = patchkit("check", str(tree), "--json")
    # The fork's code is 0.22.0's: the code decides as 0.22.0's version would.
    states = [p["status"] for p in json.loads(check.stdout)["patches"]]
    assert states == stock_statuses("0.22.0"), check.stdout
    assert states[[p.name for p in series.patches].index(AITER)] == "not-carried"
    assert check.returncode == 0, check.stdout

    proc = patchkit("apply", str(tree))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    applied = f"applied: applied {len(carried('0.22.0'))} patch(es)"
    assert proc.stdout.startswith(applied), proc.stdout
    lines = proc.stdout.splitlines()
    assert f"  {series.patches[0].name}: applied (invariant holds)" in lines
    assert f"  {SINK}: applied (invariant holds)" in lines, proc.stdout
    aiter = next(line for line in lines if line.startswith(f"  {AITER}:"))
    assert "not-carried" in aiter
    assert "builds for capture only when capturing" in aiter, aiter
    # The code won against the tag, and the output says why.
    assert "carried by its code: the code decides, not the version" in proc.stdout
    assert "vLLM 0.9.2" in proc.stdout

    test = patchkit("test", str(tree), "--no-baseline")
    assert test.returncode == 0, test.stdout + test.stderr
    assert "FIXED" in test.stdout
    assert "this tree has no MiniMax-M3" in test.stdout or "not applicable" in (
        test.stdout
    )


def test_fork_without_rocm_attn_carries_nothing(tmp_path: Path) -> None:
    """ROCm/vllm's shape: rocm_attn.py renamed away. Every ROCm patch
    (0001-0003) is not-carried, each with its reason, while the static-sink
    fix and its test (0004, 0005), whose file the fork keeps, still apply;
    check exits 0."""
    tree = tmp_path / "fork"
    git = fork_of("0.22.0", tree, commits=3)
    git.run("rm", "--quiet", "vllm/v1/attention/backends/rocm_attn.py")
    git.run("commit", "--quiet", "--no-verify", "-m", "Rename the ROCm backend")

    proc = patchkit("check", str(tree), "--json")

    assert proc.returncode == 0, proc.stdout + proc.stderr
    patches = json.loads(proc.stdout)["patches"]
    states = {p["name"]: p["status"] for p in patches}
    rocm = [p for p in patches if on_rocm_backend(p["name"])]
    assert [p["name"][:4] for p in rocm] == ["0001", "0002", "0003"]
    for report in rocm:
        assert report["status"] == "not-carried", proc.stdout
        assert "target missing" in report["detail"], report
        assert "rocm_attn.py" in report["detail"], report
    others = [p for p in SERIES.patches if not on_rocm_backend(p.name)]
    assert [states[p.name] for p in others] == [
        stock_status(p, "0.22.0") for p in others
    ], proc.stdout
    assert (states[SINK], states[SINK_TEST]) == ("applies", "applies"), proc.stdout
    # Near its v0.9.2 tag, yet its code (the AITER unified backend, 0.11.1
    # on; the static-sink builder, 0.14.0 on) says the tag is not its
    # release: the code decides, and says so.
    sink = next(p for p in patches if p["name"] == SINK)
    assert sink["carry"].startswith("the code decides, not the version"), sink
    assert "the code contradicts it" in sink["carry"], sink
    assert "not what releases before 0.11.1 ship" in sink["carry"], sink


def test_apply_skip_is_recorded(tmp_path: Path, series: Series) -> None:
    tree = tmp_path / "vllm"
    git = clone_release("0.28.0", tree, checkout=True)
    head = git.head()

    proc = patchkit("apply", str(tree), "--skip", "0003", "--json")

    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["skipped"] == [AITER]
    states = {p["name"]: (p["status"], p["detail"]) for p in result["patches"]}
    assert states[AITER] == ("not-carried", "skipped by the user (--skip)")
    # Every other patch carried for 0.28.0 applied (0001, 0002, 0004, 0005
    # among them), in series order.
    subjects = git.out("log", "--format=%s", f"{head}..HEAD").splitlines()
    others = [p for p in carried("0.28.0") if p.name != AITER]
    assert subjects == [p.subject for p in reversed(others)], subjects
    assert AITER in [p.name for p in carried("0.28.0")]  # by hand: 0003 is carried
    assert {SINK, SINK_TEST} <= {p.name for p in others}
    assert not any("AITER" in subject for subject in subjects), subjects

    unknown = patchkit("apply", str(tree), "--skip", "0009")
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    assert "'0009' names no patch of the series" in unknown.stderr
