"""The nightly rebase workflow and its tools/ci scripts, with real tools.

* actionlint (with shellcheck on every ``run:`` script) passes the workflows
  and catches deliberately broken copies of them;
* every ``vllm-patchkit`` command line in the workflow and the scripts names a
  real subcommand and parses with the real argument parser;
* the scripts run for real on a local upstream chain of release trees:
  provision (clone, base from the series, apply), rebase with the upstreamed
  patch dropped and recorded in the PR title, body and commit message, the
  bot-branch commit and push, and the conflict report whose issue title is
  stable from night to night.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.toolkit.cli_helpers import USER, as_user, upstream_rewrites_the_zeroing
from vllm_patchkit.cli import build_parser
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PATCHES_DIR, PROJECT_ROOT
from vllm_patchkit.upstream import build_upstream

WORKFLOWS = PROJECT_ROOT / ".github" / "workflows"
WORKFLOW = WORKFLOWS / "rebase-upstream.yml"
CI = PROJECT_ROOT / "tools" / "ci"
BIN = Path(sys.executable).parent
ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"
FIX = "0001-Bugfix-ROCm-Preserve-CPU-query-offsets-during-CUDA-g.patch"


def tool(name: str) -> str:
    path = BIN / name
    if not path.is_file():
        pytest.fail(f"{name} is not in {BIN}: rerun tools/bootstrap.sh")
    return str(path)


def actionlint(*files: Path, cwd: Path = PROJECT_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [tool("actionlint"), "-no-color", "-shellcheck", tool("shellcheck"), *files],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def load_workflow(path: Path = WORKFLOW) -> dict[Any, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict)
    return doc


def triggers(doc: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the bare key `on` as True.
    return doc.get("on", doc.get(True))


def run_blocks() -> Iterator[tuple[str, str]]:
    for path in sorted(WORKFLOWS.glob("*.y*ml")):
        for job_id, job in load_workflow(path)["jobs"].items():
            for step in job.get("steps", []):
                if "run" in step:
                    yield f"{path.name}:{job_id}:{step.get('name')}", step["run"]


def shell_sources() -> Iterator[tuple[str, str]]:
    yield from run_blocks()
    for script in sorted(CI.glob("*.sh")):
        yield script.name, script.read_text()


def patchkit_invocations() -> list[tuple[str, list[str]]]:
    """(where, argv after `vllm-patchkit`) for every call in the shell code."""
    found = []
    for where, text in shell_sources():
        for line in text.replace("\\\n", " ").splitlines():
            if "vllm-patchkit" not in line or line.lstrip().startswith("#"):
                continue
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
            for index, token in enumerate(tokens):
                if token != "vllm-patchkit":
                    continue
                argv = []
                for arg in tokens[index + 1 :]:
                    if arg and set(arg) <= set("();<>|&"):
                        break
                    argv.append(arg)
                found.append((where, argv))
    return found


def subcommand(argv: list[str]) -> str:
    args = iter(argv)
    for arg in args:
        if arg == "--patches":
            next(args)
        elif not arg.startswith("-"):
            return arg
    raise AssertionError(f"no subcommand in {argv}")


def registered_subcommands() -> set[str]:
    parser = build_parser()
    for action in parser._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict):
            return set(choices)
    raise AssertionError("vllm-patchkit has no subcommands")


# --- actionlint -----------------------------------------------------------


def test_actionlint_passes_every_workflow() -> None:
    files = sorted(WORKFLOWS.glob("*.y*ml"))
    assert WORKFLOW in files
    proc = actionlint(*files)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""


def test_tools_ci_scripts_pass_shellcheck() -> None:
    scripts = sorted(CI.glob("*.sh"))
    assert scripts
    proc = subprocess.run(
        [tool("shellcheck"), "--severity=style", *map(str, scripts)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


BREAKAGES = {
    # shellcheck, through actionlint: an unquoted variable in a run: script.
    "unquoted-variable": (
        'vllm-patchkit test "$CHECKOUT"',
        "vllm-patchkit test $CHECKOUT",
        "shellcheck reported issue in this script: SC2086",
    ),
    # actionlint's expression checker: an input that does not exist.
    "undefined-input": ("inputs.ref ||", "inputs.reff ||", 'property "reff"'),
    # actionlint's schema: a permission scope that does not exist.
    "unknown-permission": (
        "      issues: write",
        "      issue: write",
        'unknown permission scope "issue"',
    ),
    # a step condition that refers to a step id that does not exist.
    "unknown-step": (
        "steps.refresh.outputs.changed",
        "steps.refreshed.outputs.changed",
        'property "refreshed" is not defined',
    ),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_actionlint_reports_a_broken_copy(tmp_path: Path, breakage: str) -> None:
    old, new, expected = BREAKAGES[breakage]
    text = WORKFLOW.read_text()
    assert old in text, f"the workflow no longer contains {old!r}"
    broken = tmp_path / ".github" / "workflows" / WORKFLOW.name
    broken.parent.mkdir(parents=True)
    broken.write_text(text.replace(old, new, 1))

    proc = actionlint(broken, cwd=tmp_path)

    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert expected in proc.stdout, proc.stdout


def test_pre_commit_runs_actionlint_on_workflows() -> None:
    config = yaml.safe_load((PROJECT_ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {h["id"]: h for repo in config["repos"] for h in repo["hooks"]}
    hook = hooks["actionlint"]
    assert hook["entry"] == "actionlint" and hook["language"] == "system"
    assert re.search(hook["files"], ".github/workflows/rebase-upstream.yml")
    assert not re.search(hook["files"], "tools/ci/rebase-series.sh")


# --- the workflow's shape ---------------------------------------------------


def test_workflow_triggers_permissions_and_limits() -> None:
    doc = load_workflow()
    on = triggers(doc)
    assert on["schedule"] and all("cron" in s for s in on["schedule"])
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["ref"]["default"] == "main"
    assert inputs["upstream_repository"]["default"] == "vllm-project/vllm"
    assert doc["permissions"] == {}
    assert doc["concurrency"]["cancel-in-progress"] is False
    (job,) = doc["jobs"].values()
    assert job["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
        "issues": "write",
    }
    assert 0 < job["timeout-minutes"] <= 120
    # The token reaches only the steps that talk to the server, never the
    # ones that run upstream code.
    assert "GH_TOKEN" not in job["env"]
    checkout = next(s for s in job["steps"] if "checkout" in s.get("uses", ""))
    assert checkout["with"]["persist-credentials"] is False
    with_token = [s for s in job["steps"] if "GH_TOKEN" in s.get("env", {})]
    assert with_token and all("gh " in s["run"] for s in with_token)
    assert not any("vllm-patchkit" in s["run"] for s in with_token)
    uploads = [s for s in job["steps"] if "upload-artifact" in s.get("uses", "")]
    assert len(uploads) == 1 and uploads[0]["if"] == "always()"


def test_run_blocks_take_untrusted_values_from_env_only() -> None:
    blocks = list(run_blocks())
    assert blocks
    for where, script in blocks:
        assert "${{" not in script, f"{where}: expression inside run:"


def test_workflow_names_no_host() -> None:
    text = WORKFLOW.read_text()
    assert not re.search(r"\w+://", text)
    assert not re.search(r"\b[\w-]+\.(com|org|net|io|dev)\b", text)
    # The upstream URL is built from the server the workflow runs on.
    assert '"$GITHUB_SERVER_URL/$UPSTREAM_REPO.git"' in text


def test_gates_run_before_anything_is_pushed() -> None:
    (job,) = load_workflow()["jobs"].values()
    runs = [s.get("run", "") for s in job["steps"]]

    def position(needle: str) -> int:
        hits = [i for i, run in enumerate(runs) if needle in run]
        assert hits, f"no step runs {needle!r}"
        return hits[0]

    push = position("commit-bot-branch.sh")
    for gate in (
        "tools/ci/rebase-series.sh",
        "vllm-patchkit precommit",
        "vllm-patchkit test",
        "vllm-patchkit pr",
        "vllm-patchkit refresh",
        "pre-commit run --all-files",
    ):
        assert position(gate) < push, gate


# --- vllm-patchkit command lines ------------------------------------------------


def test_every_patchkit_call_is_a_real_subcommand() -> None:
    calls = patchkit_invocations()
    used = {subcommand(argv) for _, argv in calls}
    assert {"apply", "rebase", "refresh", "precommit", "test", "pr"} <= used
    unknown = used - registered_subcommands()
    assert not unknown, f"not vllm-patchkit subcommands: {unknown}"
    parser = build_parser()
    for where, argv in calls:
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{where}: vllm-patchkit {shlex.join(argv)} does not parse")


# --- tools/ci on a local upstream chain ---------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Path:
    return build_upstream(["0.20.0", "0.28.0", "0.29.0"])


@pytest.fixture
def overlay(tmp_path: Path) -> Path:
    """A clone of this project's patches/ in a repository with a bare remote."""
    origin = tmp_path / "overlay-origin.git"
    repo = tmp_path / "overlay"
    Git(tmp_path).run("init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    Git(tmp_path).run("init", "--quiet", "--initial-branch=main", str(repo))
    shutil.copytree(PATCHES_DIR, repo / "patches")
    git = as_user(repo)
    git.run("add", "patches")
    git.run("commit", "--quiet", "-m", "The series")
    git.run("remote", "add", "origin", str(origin))
    git.run("push", "--quiet", "origin", "main")
    return repo


def ci(
    script: str, *args: str, patches: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(CI / script), *args],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "VLLM_PATCHKIT_PATCHES": str(patches),
            "UPSTREAM_REPO": "vllm-project/vllm",
            "RUN_URL": "run-42",
            **USER,
            **env,
        },
        timeout=900,
    )


def outputs(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


def provision(url: Path, checkout: Path, patches: Path, base: str = "") -> str:
    proc = ci("provision-upstream.sh", str(url), str(checkout), base, patches=patches)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.release_trees
def test_nightly_drop_is_recorded_committed_and_pushed(
    upstream: Path, overlay: Path, tmp_path: Path
) -> None:
    patches = overlay / "patches"
    checkout = tmp_path / "vllm"
    out = tmp_path / "report"

    # The base comes from the series file's "# Base: vLLM 0.28.0" comment.
    assert provision(upstream, checkout, patches) == "v0.28.0"
    git = Git(checkout)
    assert git.branch() == "vllm-overlay/series"
    assert git.out("rev-parse", "refs/vllm-patchkit/base") == git.out(
        "rev-parse", "v0.28.0^{commit}"
    )
    assert git.is_clean()

    proc = ci("rebase-series.sh", str(checkout), "v0.29.0", str(out), patches=patches)

    assert proc.returncode == 0, proc.stderr
    keys = outputs(proc.stdout)
    assert keys["status"] == "rebased" and int(keys["dropped"]) >= 1
    assert keys["branch"] == "bot/rebase-vllm-project-vllm-v0.29.0"
    statuses = {p["name"]: p["status"] for p in _json(out / "rebase.json")["patches"]}
    assert statuses[FIX] == "upstreamed"
    title = (out / "pr-title.txt").read_text()
    body = (out / "pr-body.md").read_text()
    message = (out / "commit-message.txt").read_text()
    assert "drop upstreamed" in title and FIX in title
    for text in (body, " ".join(message.split())):
        assert FIX in text
        assert "Applied-Upstream: 0.29.0, vllm-project/vllm#51585" in text
        assert "rocm-capture-zeroes-device-offsets-only" in text
    assert message.splitlines()[0].startswith(f"Drop upstreamed {FIX}")
    assert f"| `{FIX}` | upstreamed |" in body  # the rebase's own summary
    assert "`vllm-patchkit test`" in body and "run-42" in body

    refreshed = subprocess.run(
        [tool("vllm-patchkit"), "--patches", str(patches), "refresh", str(checkout)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refreshed.returncode == 0, refreshed.stderr
    assert not (patches / FIX).exists()

    pushed = ci(
        "commit-bot-branch.sh",
        str(overlay),
        keys["branch"],
        str(out / "commit-message.txt"),
        patches=patches,
    )

    assert pushed.returncode == 0, pushed.stderr
    origin = Git(tmp_path / "overlay-origin.git")
    head = origin.out("rev-parse", f"refs/heads/{keys['branch']}")
    assert head == pushed.stdout.strip()
    assert origin.out("rev-parse", f"{head}^") == origin.out("rev-parse", "main")
    logged = origin.out("log", "-1", "--format=%B", head)
    assert logged.startswith(message.strip())
    assert f"Signed-off-by: {USER['GIT_COMMITTER_NAME']}" in logged
    changed = origin.out("diff", "--name-status", "main", head).splitlines()
    assert f"D\tpatches/{FIX}" in changed
    assert all(line.split("\t")[1].startswith("patches/") for line in changed)

    # A second night with nothing new: no commit, nothing pushed.
    again = ci(
        "commit-bot-branch.sh",
        str(overlay),
        keys["branch"],
        str(out / "commit-message.txt"),
        patches=patches,
    )
    assert again.returncode == 1 and "unchanged" in again.stderr
    assert origin.out("rev-parse", f"refs/heads/{keys['branch']}") == head


@pytest.mark.release_trees
def test_base_ref_input_and_a_rebase_that_drops_nothing(
    upstream: Path, overlay: Path, tmp_path: Path
) -> None:
    patches = overlay / "patches"
    checkout = tmp_path / "vllm"
    out = tmp_path / "report"
    assert provision(upstream, checkout, patches, base="v0.20.0") == "v0.20.0"
    assert Git(checkout).out("rev-parse", "refs/vllm-patchkit/base") == Git(
        checkout
    ).out("rev-parse", "v0.20.0^{commit}")

    proc = ci("rebase-series.sh", str(checkout), "v0.28.0", str(out), patches=patches)

    assert proc.returncode == 0, proc.stderr
    keys = outputs(proc.stdout)
    assert keys["status"] == "rebased" and keys["dropped"] == "0"
    assert int(keys["applied"]) >= 1
    assert "drop" not in (out / "pr-title.txt").read_text()
    assert (
        (out / "commit-message.txt")
        .read_text()
        .startswith("Rebase the patch series onto vllm-project/vllm v0.28.0")
    )
    # Provisioning refuses to reuse a directory.
    again = ci("provision-upstream.sh", str(upstream), str(checkout), patches=patches)
    assert again.returncode == 2 and "already exists" in again.stderr


@pytest.mark.release_trees
def test_conflict_report_has_patch_files_hunks_and_a_stable_title(
    upstream: Path, overlay: Path, tmp_path: Path
) -> None:
    patches = overlay / "patches"
    work = tmp_path / "upstream-work"
    upstream_rewrites_the_zeroing(upstream, work, "rewrite")
    checkout = tmp_path / "vllm"
    provision(work, checkout, patches)
    head = Git(checkout).head()
    out = tmp_path / "report"

    refused = ci(
        "rebase-series.sh", str(checkout), "no-such-ref", str(out), patches=patches
    )
    assert refused.returncode == 2, refused.stderr
    assert outputs(refused.stdout)["status"] == "refused"

    proc = ci("rebase-series.sh", str(checkout), "rewrite", str(out), patches=patches)

    assert proc.returncode == 4, proc.stderr
    assert outputs(proc.stdout)["status"] == "conflict"
    assert Git(checkout).head() == head
    result = _json(out / "rebase.json")
    title = (out / "issue-title.txt").read_text().strip()
    assert title == (
        "Nightly rebase: the patch series conflicts with vllm-project/vllm rewrite"
    )
    assert result["onto"][:7] not in title  # same title every night
    body = (out / "issue-body.md").read_text()
    conflict = next(p for p in result["patches"] if p["status"] == "conflict")
    assert conflict["name"] == FIX
    row = next(line for line in body.splitlines() if line.startswith(f"| `{FIX}`"))
    assert f"`{ROCM_ATTN}`" in row
    assert conflict["hunks"] and all(f"`{h}`" in row for h in conflict["hunks"])
    assert "Nothing was pushed" in body and "run-42" in body


def test_scripts_refuse_refs_that_look_like_options(tmp_path: Path) -> None:
    """A dispatch input must not reach git as an option (--upload-pack=...)."""
    marker = tmp_path / "ran"
    evil = f"--upload-pack=touch {marker}"
    rebase = ci(
        "rebase-series.sh",
        str(tmp_path / "vllm"),
        evil,
        str(tmp_path / "out"),
        patches=PATCHES_DIR,
    )
    provision = ci(
        "provision-upstream.sh",
        str(tmp_path / "upstream"),
        str(tmp_path / "vllm"),
        evil,
        patches=PATCHES_DIR,
    )
    for proc in (rebase, provision):
        assert proc.returncode == 2, proc.stderr
        assert "not a valid ref name" in proc.stderr
    assert not marker.exists() and not (tmp_path / "vllm").exists()


def test_report_without_a_rebase_result(tmp_path: Path) -> None:
    """Exit 3 leaves no JSON: the report still says what happened."""
    out = tmp_path / "report"
    proc = subprocess.run(
        [
            sys.executable,
            str(CI / "rebase_report.py"),
            "--rebase-json",
            str(tmp_path / "missing.json"),
            "--repo",
            "vllm-project/vllm",
            "--ref",
            "main",
            "--exit-code",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert outputs(proc.stdout) == {
        "status": "error",
        "applied": "0",
        "dropped": "0",
        "branch": "bot/rebase-vllm-project-vllm-main",
    }
    assert "**error**" in (out / "issue-body.md").read_text()


def _json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data
