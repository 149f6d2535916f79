"""The nightly rebase workflow and its tools/ci scripts, with real tools.

* actionlint (with shellcheck on every ``run:`` script) passes the workflows
  and catches deliberately broken copies of them;
* every ``vllm-patchkit`` command line in the workflow and the scripts names a
  real subcommand and parses with the real argument parser;
* the two jobs keep the write token away from upstream code: the job that
  runs it has a read-only token, the job that pushes runs no venv, no
  vllm-patchkit and nothing from the artifact;
* the scripts run for real on a local upstream chain of release trees:
  provision (clone, base from the series, apply), rebase with the upstreamed
  patch dropped from the branch and recorded in the PR title, body and
  commit message, the refresh keeping it for older releases and the texts
  saying so, the base check of the refreshed series, the artifact's patches
  installed in a fresh clone, the bot-branch commit and push, a second
  identical night that pushes nothing, and the issue (conflict or failed
  check) whose title is stable from night to night.
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
from tests.toolkit.matrix_helpers import own_matrix_cache
from tests.toolkit.series_expectations import UPSTREAMED, patches_in
from vllm_patchkit.cli import build_parser
from vllm_patchkit.git.upstream import build_upstream
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PATCHES_DIR, PROJECT_ROOT

WORKFLOWS = PROJECT_ROOT / ".github" / "workflows"
WORKFLOW = WORKFLOWS / "rebase-upstream.yml"
CI = PROJECT_ROOT / "tools" / "ci"
NIGHTLY = CI / "nightly-rebase"
BIN = Path(sys.executable).parent
ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"
FIX = "0001-Bugfix-ROCm-Preserve-CPU-query-offsets-during-CUDA-g.patch"
AITER_FIX = "0003-Bugfix-ROCm-Preserve-AITER-unified-attention-metadat.patch"


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


def ci_scripts() -> list[Path]:
    """tools/ci's shell scripts: the *.sh ones and the nightly job's."""
    return [*sorted(CI.glob("*.sh")), NIGHTLY]


def shell_sources() -> Iterator[tuple[str, str]]:
    yield from run_blocks()
    for script in ci_scripts():
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
                if token != "vllm-patchkit" or tokens[index - 1 : index] == ["-v"]:
                    continue  # not it, or a lookup (`command -v`), not a call
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


EVERY_WORKFLOW = {"rebase-upstream.yml", "matrix.yml", "release.yml", "ci.yml"}


def test_actionlint_passes_every_workflow() -> None:
    files = sorted(WORKFLOWS.glob("*.y*ml"))
    assert {f.name for f in files} >= EVERY_WORKFLOW
    proc = actionlint(*files)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""


def test_tools_ci_scripts_pass_shellcheck() -> None:
    scripts = ci_scripts()
    assert len(scripts) > 1
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
        '"$UPSTREAM_REF" "$OUT"',
        '"$UPSTREAM_REF" $OUT',
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
        "steps.nightly.outputs.changed",
        "steps.nightlyy.outputs.changed",
        'property "nightlyy" is not defined',
    ),
    # the publish job reading an output the rebase job does not declare.
    "unknown-job-output": (
        "needs.rebase.outputs.action ==",
        "needs.rebase.outputs.actions ==",
        'property "actions" is not defined',
    ),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_actionlint_reports_a_broken_copy(tmp_path: Path, breakage: str) -> None:
    assert_actionlint_catches(WORKFLOW, BREAKAGES[breakage], tmp_path)


OTHER_BREAKAGES = {
    # The publish job's one permission, misspelt.
    "release-unknown-permission": (
        "release.yml",
        ("      id-token: write", "      id-tokens: write", '"id-tokens"'),
    ),
    # The release job reading an output the build job does not declare.
    "release-unknown-job-output": (
        "release.yml",
        (
            "needs.build.outputs.version }}",
            "needs.build.outputs.versions }}",
            'property "versions" is not defined',
        ),
    ),
    # shellcheck in the release's tag step: an unquoted variable.
    "release-unquoted-variable": (
        "release.yml",
        ('check-tag "$GITHUB_REF_NAME"', "check-tag $GITHUB_REF_NAME", "SC2086"),
    ),
    # CI saving the cache under a key of a step that does not exist.
    "ci-unknown-step": (
        "ci.yml",
        (
            "steps.venv-cache.outputs.cache-primary-key",
            "steps.venv-cachee.outputs.cache-primary-key",
            'property "venv-cachee" is not defined',
        ),
    ),
}


@pytest.mark.parametrize("breakage", sorted(OTHER_BREAKAGES))
def test_actionlint_reports_a_broken_release_or_ci(
    tmp_path: Path, breakage: str
) -> None:
    name, change = OTHER_BREAKAGES[breakage]
    assert_actionlint_catches(WORKFLOWS / name, change, tmp_path)


def assert_actionlint_catches(
    workflow: Path, breakage: tuple[str, str, str], tmp_path: Path
) -> None:
    """A copy of ``workflow`` with one line broken fails actionlint, saying
    what the breakage expects."""
    old, new, expected = breakage
    text = workflow.read_text()
    assert old in text, f"{workflow.name} no longer contains {old!r}"
    broken = tmp_path / ".github" / "workflows" / workflow.name
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


def jobs() -> tuple[dict[str, Any], dict[str, Any]]:
    doc = load_workflow()
    assert set(doc["jobs"]) == {"rebase", "publish"}
    return doc["jobs"]["rebase"], doc["jobs"]["publish"]


def step_texts(job: dict[str, Any]) -> list[str]:
    """Each step as text: what it uses, runs and is given."""
    return [yaml.safe_dump(step) for step in job["steps"]]


def test_workflow_triggers_permissions_and_limits() -> None:
    doc = load_workflow()
    on = triggers(doc)
    assert on["schedule"] and all("cron" in s for s in on["schedule"])
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["ref"]["default"] == "main"
    assert inputs["upstream_repository"]["default"] == "vllm-project/vllm"
    assert doc["permissions"] == {}
    assert doc["concurrency"]["cancel-in-progress"] is False
    rebase, publish = jobs()
    assert 0 < rebase["timeout-minutes"] <= 120
    assert 0 < publish["timeout-minutes"] <= 30
    for job in (rebase, publish):
        checkout = next(s for s in job["steps"] if "checkout" in s.get("uses", ""))
        assert checkout["with"]["persist-credentials"] is False
    uploads = [s for s in rebase["steps"] if "upload-artifact" in s.get("uses", "")]
    assert len(uploads) == 1 and uploads[0]["if"] == "always()"


def test_upstream_code_runs_only_in_the_read_only_job() -> None:
    rebase, publish = jobs()
    # Job 1 runs upstream code: a read-only token, never handed to a step.
    assert rebase["permissions"] == {"contents": "read"}
    texts = step_texts(rebase)
    assert not any("GH_TOKEN" in t or "github.token" in t for t in texts)
    assert not any(re.search(r"\bgh ", s.get("run", "")) for s in rebase["steps"])
    assert set(rebase["outputs"]) >= {"action", "exit", "status", "changed", "branch"}

    # Job 2 holds the write token and waits for job 1's decision.
    assert publish["needs"] == "rebase"
    assert "needs.rebase.outputs.action" in publish["if"]
    assert publish["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
        "issues": "write",
    }
    uses = {s["uses"].split("@")[0] for s in publish["steps"] if "uses" in s}
    assert uses == {"actions/checkout", "actions/download-artifact"}
    runs = "\n".join(s.get("run", "") for s in publish["steps"])
    for banned in (
        "vllm-patchkit",
        "bootstrap",
        ".venv",
        "python",
        "pre-commit",
        "GITHUB_PATH",
        "source ",
    ):
        assert banned not in runs, banned
    # The artifact is data: each use of a file from it is one of these.
    allowed = (
        r'echo "REPORT=\$RUNNER_TEMP/rebase-report"',
        r'tools/ci/install-series\.sh "\$REPORT/patches" patches',
        r'tools/ci/commit-bot-branch\.sh \. "\$BRANCH" "\$REPORT/commit-message\.txt"',
        r'head -n 1 "\$REPORT/(pr|issue)-title\.txt"',
        r'--body-file "\$REPORT/(pr|issue)-body\.md"',
    )
    for line in runs.splitlines():
        rest = line
        for pattern in allowed:
            rest = re.sub(pattern, "", rest)
        assert "REPORT" not in rest, f"the artifact used another way: {line}"
    # The token only where gh talks to the server.
    with_token = [s for s in publish["steps"] if "GH_TOKEN" in s.get("env", {})]
    assert with_token and all("gh " in s["run"] for s in with_token)
    assert "GH_TOKEN" not in publish["env"]
    # A run cannot poison the venv cache: it is saved before upstream code
    # runs, and only job 1 restores it.
    names = [s.get("uses", "") + s.get("run", "") for s in rebase["steps"]]
    saved = next(i for i, n in enumerate(names) if "actions/cache/save" in n)
    first_upstream = next(
        i for i, n in enumerate(names) if "tools/ci/nightly-rebase" in n
    )
    assert saved < first_upstream
    assert not any("actions/cache@" in n for n in names)
    assert "cache" not in "\n".join(step_texts(publish))


def test_run_blocks_take_untrusted_values_from_env_only() -> None:
    blocks = list(run_blocks())
    assert {where.split(":")[0] for where, _ in blocks} >= EVERY_WORKFLOW
    for where, script in blocks:
        assert "${{" not in script, f"{where}: expression inside run:"


def test_workflow_names_no_host() -> None:
    text = WORKFLOW.read_text()
    assert not re.search(r"\w+://", text)
    assert not re.search(r"\b[\w-]+\.(com|org|net|io|dev)\b", text)
    # The upstream URL is built from the server the workflow runs on.
    assert '"$GITHUB_SERVER_URL/$UPSTREAM_REPO.git"' in text


def test_gates_run_before_anything_is_pushed() -> None:
    """Job 1 is one call of tools/ci/nightly-rebase, whose steps run in the
    order that keeps the checks before the refresh and the decision."""
    rebase, publish = jobs()
    runs = [s.get("run", "") for s in rebase["steps"]]
    calls = [run for run in runs if "tools/ci/nightly-rebase" in run]
    assert len(calls) == 1 and '>>"$GITHUB_OUTPUT"' in calls[0]
    nightly = next(s for s in rebase["steps"] if "nightly-rebase" in s.get("run", ""))
    assert rebase["outputs"]["action"] == "${{ steps.nightly.outputs.action }}"
    assert nightly["id"] == "nightly"
    script = NIGHTLY.read_text()
    code = "\n".join(
        line for line in script.splitlines() if not line.lstrip().startswith("#")
    )

    def position(needle: str) -> int:
        assert needle in code, f"nightly-rebase does not run {needle!r}"
        return code.index(needle)

    order = [
        position(gate)
        for gate in (
            '"$here/provision-upstream.sh"',
            '"$here/rebase-series.sh"',
            'run-gate.sh" precommit',
            'run-gate.sh" test',
            'run-gate.sh" signoff',
            '"$here/gate_report.py"',
            'vllm-patchkit --patches "$patches" refresh',
            "pre-commit run --all-files",
            '"$here/check-series-base.sh"',
            'action="pr"',
        )
    ]
    assert order == sorted(order)
    # A failed check is reported, and the refresh (so the PR) waits for all.
    assert code.count("run-gate.sh") == 3
    assert len(re.findall(r"\|\|\s+true", code)) == 3
    assert "if [[ $rebase_exit -eq 0 && -z $failed ]]; then" in code
    # Every step reads and refreshes the scratch copy, never patches/.
    assert "export VLLM_PATCHKIT_PATCHES=$overlay/patches" in code
    assert code.count('--patches "$patches"') == 3
    # Everything that pushes or files is in job 2, after job 1's decision.
    publishing = "\n".join(s.get("run", "") for s in publish["steps"])
    for write in ("commit-bot-branch.sh", "gh pr create", "gh issue create"):
        assert write in publishing and write not in "\n".join(runs)
    close = next(s for s in publish["steps"] if "gh pr close" in s.get("run", ""))
    assert close["if"] == "env.ACTION == 'unchanged'"
    assert "--comment" in close["run"]


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
@pytest.mark.slow
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
    # What merging means, in plain words.
    assert statuses[AITER_FIX] == "upstreamed"  # #53821 is in 0.29.0 too
    # Every patch upstream took by 0.29.0 (its Applied-Upstream:), 0001 and
    # 0003 first.
    dropped = patches_in(UPSTREAMED, "0.29.0")
    assert dropped[:2] == [FIX, AITER_FIX]
    stops = ", ".join(f"`{name}`" for name in dropped)
    assert f"This repository stops carrying {stops} in" in body
    assert "the commit before this PR" in body
    assert "`vllm_overlay` package is not changed" in body
    assert "still fixes installed affected releases" in " ".join(message.split())

    series_before = tmp_path / "series-before"
    shutil.copytree(patches, series_before)
    refreshed = subprocess.run(
        [tool("vllm-patchkit"), "--patches", str(patches), "refresh", str(checkout)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refreshed.returncode == 0, refreshed.stderr
    # Nothing leaves the series: upstream carries 0001 and 0003 from 0.29.0,
    # and the older releases of their Affects: ranges still need them.
    assert FIX in series_names(patches / "series") and (patches / FIX).exists()
    assert (patches / AITER_FIX).exists()
    assert "# Base: vLLM 0.28.0" in (patches / "series").read_text()

    # The PR texts again after the refresh, as nightly-rebase writes them:
    # kept, not dropped.
    again = subprocess.run(
        [sys.executable, str(CI / "rebase_report.py"),
         "--rebase-json", str(out / "rebase.json"), "--summary",
         str(out / "rebase-summary.md"), "--repo", "vllm-project/vllm", "--ref",
         "v0.29.0", "--exit-code", "0", "--run-url", "run-42", "--patches",
         str(series_before), "--refreshed", str(patches), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "drop upstreamed" not in (out / "pr-title.txt").read_text()
    body = (out / "pr-body.md").read_text()
    kept = body.split("### Upstreamed, kept for older releases")[1].split("###")[0]
    assert f"`{FIX}`" in kept and f"`{AITER_FIX}`" in kept
    assert "This repository stops carrying" not in body
    message = (out / "commit-message.txt").read_text()

    # The refreshed series still applies at the Base line's release; the
    # check leaves the checkout as it was.
    before = (git.head(), git.branch(), git.out("rev-parse", "refs/vllm-patchkit/base"))
    based = ci(
        "check-series-base.sh", str(checkout), "v0.28.0", str(out), patches=patches
    )
    assert based.returncode == 0, based.stderr
    assert outputs(based.stdout) == {"base_applies": "true"}
    assert (
        git.head(),
        git.branch(),
        git.out("rev-parse", "refs/vllm-patchkit/base"),
    ) == before
    assert git.out("worktree", "list").count("\n") == 0
    assert "base-check" not in git.out("branch", "--list")
    body = (out / "pr-body.md").read_text()
    assert "### Base" in body and "still applies at `v0.28.0`" in body
    assert not (out / "pr-title.txt").read_text().startswith("[Base")

    # The artifact: the refreshed patches/ as the rebase job copies it.
    artifact = out / "patches"
    artifact.mkdir()
    for path in patches.iterdir():
        if path.name == "series" or path.name.endswith(".patch"):
            shutil.copy(path, artifact / path.name)

    # Night 1, the publish job: a fresh clone of main, the artifact installed
    # as data, the bot branch pushed.
    origin = Git(tmp_path / "overlay-origin.git")
    night1 = publish_clone(tmp_path, "night1")
    installed = ci(
        "install-series.sh", str(artifact), str(night1 / "patches"), patches=patches
    )
    assert installed.returncode == 0, installed.stderr
    assert (night1 / "patches" / FIX).exists()
    pushed = ci(
        "commit-bot-branch.sh",
        str(night1),
        keys["branch"],
        str(out / "commit-message.txt"),
        patches=patches,
    )

    assert pushed.returncode == 0, pushed.stderr
    head = origin.out("rev-parse", f"refs/heads/{keys['branch']}")
    assert head == pushed.stdout.strip()
    assert origin.out("rev-parse", f"{head}^") == origin.out("rev-parse", "main")
    logged = origin.out("log", "-1", "--format=%B", head)
    assert logged.startswith(message.strip())
    assert f"Signed-off-by: {USER['GIT_COMMITTER_NAME']}" in logged
    changed = origin.out("diff", "--name-status", "main", head).splitlines()
    assert changed and all(line.startswith("M\tpatches/") for line in changed)

    # Night 2, the same result: a fresh clone of main (whose patches/ still
    # differs from the bot branch's), the same artifact. Nothing is
    # committed, nothing pushed.
    night2 = publish_clone(tmp_path, "night2")
    assert (night2 / "patches" / FIX).exists()
    again = publish_night(night2, artifact, keys["branch"], out, patches)
    assert again.returncode == 1, again.stderr
    assert "unchanged" in again.stderr
    assert origin.out("rev-parse", f"refs/heads/{keys['branch']}") == head
    night2_git = Git(night2)
    assert night2_git.branch() == "main"
    assert night2_git.head() == origin.out("rev-parse", "main")
    assert keys["branch"] not in night2_git.out("branch", "--list")

    # Night 3, main has moved on: the same patches go on top of the new main.
    mover = as_user(publish_clone(tmp_path, "mover"))
    (mover.root / "NOTES").write_text("moved\n")
    mover.run("add", "NOTES")
    mover.run("commit", "--quiet", "-m", "Move main")
    mover.run("push", "--quiet", "origin", "main")
    night3 = publish_clone(tmp_path, "night3")
    third = publish_night(night3, artifact, keys["branch"], out, patches)
    assert third.returncode == 0, third.stderr
    moved = origin.out("rev-parse", f"refs/heads/{keys['branch']}")
    assert moved != head and moved == third.stdout.strip()
    assert origin.out("rev-parse", f"{moved}^") == origin.out("rev-parse", "main")
    assert origin.out("rev-parse", f"{moved}:patches") == origin.out(
        "rev-parse", f"{head}:patches"
    )


def publish_night(
    clone: Path, artifact: Path, branch: str, out: Path, patches: Path
) -> subprocess.CompletedProcess[str]:
    """The publish job's git part: install the artifact, commit and push."""
    installed = ci(
        "install-series.sh", str(artifact), str(clone / "patches"), patches=patches
    )
    assert installed.returncode == 0, installed.stderr
    return ci(
        "commit-bot-branch.sh",
        str(clone),
        branch,
        str(out / "commit-message.txt"),
        patches=patches,
    )


def publish_clone(tmp_path: Path, name: str) -> Path:
    """What the publish job starts from: a fresh clone of main."""
    clone = tmp_path / name
    Git(tmp_path).run(
        "clone", "--quiet", str(tmp_path / "overlay-origin.git"), str(clone)
    )
    return clone


@pytest.mark.slow
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
@pytest.mark.slow
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
    assert title == "Nightly rebase onto vllm-project/vllm rewrite fails"
    assert result["onto"][:7] not in title  # same title every night
    body = (out / "issue-body.md").read_text()
    conflict = next(p for p in result["patches"] if p["status"] == "conflict")
    assert conflict["name"] == FIX
    row = next(line for line in body.splitlines() if line.startswith(f"| `{FIX}`"))
    assert f"`{ROCM_ATTN}`" in row
    assert conflict["hunks"] and all(f"`{h}`" in row for h in conflict["hunks"])
    assert "Nothing was pushed" in body and "run-42" in body


@pytest.mark.slow
@pytest.mark.release_trees
def test_base_check_flags_a_series_that_no_longer_applies_at_its_base(
    upstream: Path, overlay: Path, tmp_path: Path
) -> None:
    """The PR says so, names the new base, and the checkout is left alone."""
    patches = overlay / "patches"
    work = tmp_path / "upstream-work"
    upstream_rewrites_the_zeroing(upstream, work, "rewrite")
    checkout = tmp_path / "vllm"
    provision(work, checkout, patches)
    git = Git(checkout)
    before = (git.head(), git.branch(), git.out("rev-parse", "refs/vllm-patchkit/base"))
    out = tmp_path / "report"
    out.mkdir()
    (out / "pr-title.txt").write_text("Rebase the patch series\n")
    (out / "pr-body.md").write_text("The body.\n")
    (out / "commit-message.txt").write_text("Rebase\n\nThe message.\n")

    # 0001 conflicts on the rewritten zeroing: as a base, it would fail.
    proc = ci(
        "check-series-base.sh",
        str(checkout),
        "origin/rewrite",
        str(out),
        patches=patches,
        UPSTREAM_REF="main",
    )

    assert proc.returncode == 0, proc.stderr
    assert outputs(proc.stdout) == {"base_applies": "false"}
    assert "::warning::" in proc.stdout
    title = (out / "pr-title.txt").read_text()
    assert title == "[Base line out of date] Rebase the patch series\n"
    body = (out / "pr-body.md").read_text()
    assert body.startswith("> [!WARNING]")
    assert "no longer applies at `origin/rewrite`" in body
    assert f"vllm-project/vllm `main` at `{before[2]}`" in body
    assert "<details>" in body and FIX in body  # what apply said
    assert body.endswith("The body.\n")
    message = (out / "commit-message.txt").read_text()
    assert "no longer applies at origin/rewrite" in message and before[2] in message
    assert (
        git.head(),
        git.branch(),
        git.out("rev-parse", "refs/vllm-patchkit/base"),
    ) == before
    assert git.is_clean() and "base-check" not in git.out("branch", "--list")

    missing = ci(
        "check-series-base.sh",
        str(checkout),
        "v0.28.0",
        str(tmp_path / "none"),
        patches=patches,
    )
    assert missing.returncode == 2 and "missing" in missing.stderr


def test_gate_failures_become_one_issue_that_tells_3_from_1(tmp_path: Path) -> None:
    out = tmp_path / "report"
    not_a_tree = tmp_path / "not-vllm"
    not_a_tree.mkdir()
    gates = {
        # The real tool, refusing its input.
        "precommit": [tool("vllm-patchkit"), "precommit", str(not_a_tree)],
        # `test` when this vLLM cannot be imported here (exit 3), with
        # output that has its own code fence.
        "test": ["bash", "-c", "echo '```'; echo 'torch too old'; exit 3"],
        "signoff": ["true"],
    }
    codes = {}
    for name, command in gates.items():
        proc = ci("run-gate.sh", name, str(out), *command, patches=PATCHES_DIR)
        codes[name] = proc.returncode
        assert (out / "gates" / f"{name}.log").read_text() == proc.stdout.split(
            "::error::"
        )[0]
    assert codes["test"] == 3 and codes["signoff"] == 0 and codes["precommit"] != 0
    assert (out / "gates.tsv").read_text().splitlines() == [
        f"precommit\t{codes['precommit']}",
        "test\t3",
        "signoff\t0",
    ]
    (out / "rebase.json").write_text(json.dumps({"onto": "abc123"}))

    proc = gate_report(out, "--rebase-json", str(out / "rebase.json"))

    assert proc.returncode == 0, proc.stderr
    # Neither check ran: a refusal (2) and a cannot-judge (3).
    assert outputs(proc.stdout) == {
        "failed": "precommit,test",
        "could_not_run": "precommit,test",
    }
    # The same title as a conflict's: one issue per upstream repo and ref.
    title = (out / "issue-title.txt").read_text().strip()
    assert title == "Nightly rebase onto vllm-project/vllm main fails"
    body = (out / "issue-body.md").read_text()
    assert "`abc123`" in body and "Nothing was pushed" in body
    opening = body.splitlines()[0]
    assert "`test` could not run (exit 3)" in opening and "failed" not in opening
    assert "No check found a problem in the series" in body
    assert "### `test` could not run (exit 3)" in body
    assert "could not run or judge" in body
    assert "runtime:" in body and "torch too old" in body
    assert "````text\n```\ntorch too old\n````" in body
    assert f"### `precommit` could not run (exit {codes['precommit']})" in body
    assert "**1** means the check ran and found a real problem" in body
    assert "the fix is missing or wrong" in body
    assert "Passed: `signoff`" in body and "run-42" in body

    # `test` exit 1: the fix is missing or wrong.
    ok = tmp_path / "ok"
    assert ci("run-gate.sh", "test", str(ok), "false", patches=PATCHES_DIR).returncode
    assert outputs(gate_report(ok).stdout) == {"failed": "test", "could_not_run": ""}
    found = (ok / "issue-body.md").read_text()
    assert "the fix is missing or wrong** on this upstream" in found
    assert (
        "`test` failed (exit 1): a fix is missing or wrong on this release"
        in (found.splitlines()[0])
    )
    assert "### `test` failed (exit 1)" in found
    assert "No check found a problem" not in found

    # Every check passed: no issue texts.
    passed = tmp_path / "passed"
    assert (
        ci("run-gate.sh", "test", str(passed), "true", patches=PATCHES_DIR).returncode
        == 0
    )
    assert outputs(gate_report(passed).stdout) == {"failed": "", "could_not_run": ""}
    assert not (passed / "issue-body.md").exists()

    bad = ci("run-gate.sh", "Bad/Name", str(out), "true", patches=PATCHES_DIR)
    assert bad.returncode == 2 and "not a check name" in bad.stderr


def gate_report(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(CI / "gate_report.py"),
            "--out",
            str(out),
            "--repo",
            "vllm-project/vllm",
            "--ref",
            "main",
            "--run-url",
            "run-42",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


INSTALL_REFUSALS = {
    "other-file": lambda d: (d / "evil.sh").write_text("echo pwned\n"),
    "patch-like": lambda d: (d / "0003-x.patch.sh").write_text(""),
    "subdirectory": lambda d: (d / "0003-dir.patch").mkdir(),
    "symlink": lambda d: (d / "0003-link.patch").symlink_to("/etc/passwd"),
    "series-names-a-path": lambda d: (d / "series").write_text("../0001-x.patch\n"),
    "series-names-a-missing-patch": lambda d: (d / "series").write_text(
        "# Base: vLLM 0.28.0\n0009-missing.patch\n"
    ),
}


def artifact_and_destination(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "artifact" / "patches"
    source.mkdir(parents=True)
    (source / "series").write_text("# Base: vLLM 0.28.0\n0002-b.patch\n")
    (source / "0002-b.patch").write_text("new 0002\n")
    dest = tmp_path / "repo" / "patches"
    dest.mkdir(parents=True)
    (dest / "series").write_text("0001-a.patch\n0002-b.patch\n")
    (dest / "0001-a.patch").write_text("old 0001\n")
    (dest / "0002-b.patch").write_text("old 0002\n")
    (dest / "README").write_text("kept\n")
    return source, dest


def test_install_series_copies_the_artifact_as_data(tmp_path: Path) -> None:
    source, dest = artifact_and_destination(tmp_path)

    proc = ci("install-series.sh", str(source), str(dest), patches=PATCHES_DIR)

    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in dest.iterdir()) == [
        "0002-b.patch",
        "README",
        "series",
    ]
    assert (dest / "0002-b.patch").read_text() == "new 0002\n"
    assert (dest / "series").read_text() == (source / "series").read_text()


@pytest.mark.parametrize("refusal", sorted(INSTALL_REFUSALS))
def test_install_series_refuses_anything_else(tmp_path: Path, refusal: str) -> None:
    source, dest = artifact_and_destination(tmp_path)
    before = {p.name: p.read_text() for p in dest.iterdir()}
    INSTALL_REFUSALS[refusal](source)

    proc = ci("install-series.sh", str(source), str(dest), patches=PATCHES_DIR)

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nothing installed" in proc.stderr
    assert {p.name: p.read_text() for p in dest.iterdir()} == before


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


@pytest.mark.release_trees
# The gate's whole run (extended tier); by default its parts run apart:
# run-gate.sh in test_gate_failures_become_one_issue_that_tells_3_from_1,
# `test` on a release in its tree runtime in tests/vllm/test_tree_runtime.py.
@pytest.mark.slow
def test_gate_judges_main_with_the_tree_runtime(tmp_path: Path) -> None:
    """The nightly ``test`` step on upstream main, with the newest source
    release standing in for it: a checkout with no ``vllm/_version.py``
    (what a git clone of main is) with the series on it, as the rebase step
    leaves it (0.33.0 still needs StaticSink's 0004), judged through
    run-gate.sh with the workflow's own command line, must run the suite on
    this venv's torch and pass, and the gate report must find nothing
    failed."""
    from importlib import metadata

    from vllm_patchkit.trees.releases import clone_release

    newest = "0.33.0"
    checkout = tmp_path / "main"
    git = clone_release(newest, checkout)
    git.run("rm", "--quiet", "vllm/_version.py")
    git.run("commit", "--quiet", "-m", "stand-in for upstream main")
    applied = subprocess.run(
        [tool("vllm-patchkit"), "apply", str(checkout)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    out = tmp_path / "report"
    command = next(
        " ".join(line.split())
        for line in NIGHTLY.read_text().replace("\\\n", " ").splitlines()
        if 'run-gate.sh" test ' in line
    )
    assert command == (
        '"$here/run-gate.sh" test "$out" vllm-patchkit --patches "$patches" '
        'test "$checkout" || true'
    )
    proc = ci(
        "run-gate.sh",
        "test",
        str(out),
        tool("vllm-patchkit"),
        "--patches",
        str(PATCHES_DIR),
        "test",
        str(checkout),
        patches=PATCHES_DIR,
    )
    log = (out / "gates" / "test.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    assert (out / "gates.tsv").read_text() == "test\t0\n"
    # Judged as a development tree: every fix counts, none is "not carried".
    assert "not carried" not in log and "verdict: FIXED" in log
    torch = metadata.version("torch")
    assert f"runtime: torch {torch} (the release pins torch 2.14.0" in log
    assert outputs(gate_report(out).stdout) == {"failed": "", "could_not_run": ""}


# --- tools/ci/nightly-rebase: the rebase job as one script -------------------

# The bot's git identity as the workflow configures it (`git config --global`),
# for git and for `pr`, which reads the submitter from git's config.
BOT = {
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "user.name",
    "GIT_CONFIG_VALUE_0": USER["GIT_COMMITTER_NAME"],
    "GIT_CONFIG_KEY_1": "user.email",
    "GIT_CONFIG_VALUE_1": USER["GIT_COMMITTER_EMAIL"],
}


def series_copy(tmp_path: Path) -> Path:
    """A copy of patches/ for a run to read (the run must leave it alone)."""
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    return patches


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def series_names(series: Path) -> list[str]:
    lines = series.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and line[0] != "#"]


STATIC_SINK_FIX = "0004-Bugfix-Keep-the-shared-seq_lens-in-StaticSinkAttenti.patch"


def with_range(patches: Path, name: str, affects: str) -> None:
    """Rewrite the ``Affects:`` trailer of patch ``name`` in ``patches``."""
    path = patches / name
    text, count = re.subn(
        r"^Affects: .*$", f"Affects: {affects}", path.read_text(), flags=re.M
    )
    assert count == 1, name
    path.write_text(text)


def test_pr_texts_after_the_refresh_name_what_merging_changes(
    tmp_path: Path,
) -> None:
    """rebase_report.py --refreshed: a patch upstream carries that the
    refresh keeps (older releases need it) is "kept", not "dropped"; one
    the refresh removed is dropped; a rewritten range is named, old and new."""
    before = series_copy(tmp_path)
    with_range(before, STATIC_SINK_FIX, "0.14.0..0.33.0")
    after = tmp_path / "refreshed"
    shutil.copytree(before, after)
    with_range(after, STATIC_SINK_FIX, "0.14.0..")
    (after / AITER_FIX).unlink()
    series = (after / "series").read_text().replace(AITER_FIX + "\n", "")
    (after / "series").write_text(series)
    statuses = {FIX: "upstreamed", AITER_FIX: "upstreamed", STATIC_SINK_FIX: "applied"}
    result = {
        "status": "rebased",
        "onto": "abc123",
        "patches": [{"name": n, "status": s} for n, s in statuses.items()],
    }
    (tmp_path / "rebase.json").write_text(json.dumps(result))
    out = tmp_path / "report"

    proc = subprocess.run(
        [sys.executable, str(CI / "rebase_report.py"),
         "--rebase-json", str(tmp_path / "rebase.json"), "--repo",
         "vllm-project/vllm", "--ref", "v0.34.0", "--exit-code", "0",
         "--patches", str(before), "--refreshed", str(after), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert proc.returncode == 0, proc.stderr
    assert outputs(proc.stdout)["dropped"] == "1"
    title = (out / "pr-title.txt").read_text()
    assert f"drop upstreamed {AITER_FIX}; new release ranges of 0004" in title
    assert FIX not in title
    body = (out / "pr-body.md").read_text()
    kept = body.split("### Upstreamed, kept for older releases")[1]
    assert kept.split("###")[0].count("\n- ") == 1 and f"`{FIX}`" in kept
    dropped = body.split("### Dropped as upstreamed")[1].split("###")[0]
    assert AITER_FIX in dropped and FIX not in dropped
    assert f"This repository stops carrying `{AITER_FIX}` in" in body
    line = f"- `{STATIC_SINK_FIX}`: `Affects: 0.14.0..0.33.0` -> `Affects: 0.14.0..`"
    assert line in body
    message = " ".join((out / "commit-message.txt").read_text().split())
    assert f"{STATIC_SINK_FIX}: Affects: 0.14.0..0.33.0 -> Affects: 0.14.0.." in (
        message
    )


def nightly(
    url: Path, ref: str, out: Path, patches: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    return ci("nightly-rebase", str(url), ref, str(out), patches=patches, **BOT, **env)


def test_nightly_refuses_bad_input_before_cloning(tmp_path: Path) -> None:
    """A ref or URL that reads as an option, and an OUT with an earlier run's
    files in it (their checks would count), are refused: exit 2, no action."""
    marker = tmp_path / "ran"
    used = tmp_path / "used"
    used.mkdir()
    (used / "gates.tsv").write_text("test\t0\n")
    cases = {
        "ref": (str(tmp_path / "upstream"), f"--upload-pack=touch {marker}", "new"),
        "url": (f"--upload-pack=touch {marker}", "v0.28.0", "new2"),
        "out": (str(tmp_path / "upstream"), "v0.28.0", "used"),
    }
    for what, (url, ref, out) in cases.items():
        proc = ci("nightly-rebase", url, ref, str(tmp_path / out), patches=PATCHES_DIR)
        assert proc.returncode == 2, (what, proc.stderr)
        assert proc.stdout == "", what  # no key: the workflow decides nothing
        assert "::error::" in proc.stderr, what
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["used"]
    assert (used / "gates.tsv").read_text() == "test\t0\n"


@pytest.fixture(scope="module")
def upstream_0_28() -> Path:
    return build_upstream(["0.28.0"])


@pytest.mark.release_trees
def test_nightly_conflict_is_an_issue_that_names_it(
    upstream_0_28: Path, tmp_path: Path
) -> None:
    """The script's decision on a conflict, cheaply (provision and rebase
    only: no check runs after a conflict): action=issue, the cause, the
    patch and its hunks in the issue; the series it read left as it was."""
    work = tmp_path / "upstream-work"
    upstream_rewrites_the_zeroing(upstream_0_28, work, "rewrite")
    patches = series_copy(tmp_path)
    before = snapshot(patches)
    out = tmp_path / "report"

    proc = nightly(work, "rewrite", out, patches, NIGHTLY_WORK=str(tmp_path / "w"))

    assert proc.returncode == 0, proc.stderr
    keys = outputs(proc.stdout)
    assert all(re.fullmatch(r"[a-z_]+=.*", line) for line in proc.stdout.splitlines())
    assert keys["action"] == "issue" and keys["cause"] == "conflict"
    assert keys["exit"] == "4" and keys["status"] == "conflict"
    assert keys["base"] == "v0.28.0"
    assert keys["branch"] == "bot/rebase-vllm-project-vllm-rewrite"
    assert "changed" not in keys and "failed" not in keys  # no check ran
    assert "::error::the series conflicts with" in proc.stderr
    title = (out / "issue-title.txt").read_text()
    assert title == "Nightly rebase onto vllm-project/vllm rewrite fails\n"
    body = (out / "issue-body.md").read_text()
    assert "stopped: **conflict**" in body
    row = next(line for line in body.splitlines() if line.startswith(f"| `{FIX}`"))
    assert f"`{ROCM_ATTN}:" in row  # the conflicting hunk
    assert not (out / "patches").exists() and not (out / "gates.tsv").exists()
    assert snapshot(patches) == before
    assert (tmp_path / "w" / "vllm" / ".git").is_dir()  # NIGHTLY_WORK is kept


@pytest.mark.release_trees
def test_signoff_check_runs_every_fixs_pr_and_names_what_is_missing(
    upstream_0_28: Path, tmp_path: Path
) -> None:
    """On 0.28.0 the series carries several fixes: one `pr` for all of them
    is refused ("pass --fix NAME"), which says nothing about sign-offs. The
    check runs each fix's PR; a commit that lost its author's sign-off is
    named, with its fix, in the issue."""
    checkout = tmp_path / "vllm"
    provision(upstream_0_28, checkout, PATCHES_DIR)
    whole = subprocess.run(
        [tool("vllm-patchkit"), "pr", str(checkout), "--dry-run", "--signoff",
         "--no-test", "--no-precommit"],
        capture_output=True, text=True, env={**os.environ, **BOT}, timeout=300,
    )  # fmt: skip
    assert whole.returncode == 2 and "pass --fix NAME" in whole.stdout

    proc = ci("check-signoffs.sh", str(checkout), patches=PATCHES_DIR, **BOT)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("signoff ")]
    fixes = [line.split(":")[0].removeprefix("signoff of ") for line in lines]
    assert len(fixes) >= 2 and "rocm-capture-keeps-host-offsets" in fixes
    assert all(": exit 0: ready: " in line for line in lines), lines

    # The last commit (StaticSink's test, 0005) by another author, unsigned.
    git = Git(checkout, tuple(BOT.items()))
    message = git.out("log", "-1", "--format=%B")
    unsigned = "\n".join(
        line for line in message.splitlines() if not line.startswith("Signed-off-by")
    )
    other = "Other Author <other@example.invalid>"
    git.run("commit", "--quiet", "--amend", f"--author={other}", "-m", unsigned)
    out = tmp_path / "report"
    gate = ci(
        "run-gate.sh", "signoff", str(out), str(CI / "check-signoffs.sh"),
        str(checkout), patches=PATCHES_DIR, **BOT,
    )  # fmt: skip

    assert gate.returncode == 2, gate.stdout
    said = [line for line in gate.stdout.splitlines() if line.startswith("signoff ")]
    refused = [line for line in said if ": exit 2: " in line]
    assert len(refused) == 1 and refused[0].startswith(
        "signoff of static-sink-keeps-shared-seq-lens: exit 2: refused: "
    )
    assert f"lacks its author's sign-off ({other})" in refused[0]
    assert all(": exit 0: ready: " in line for line in said if line not in refused)
    report = gate_report(out)
    assert outputs(report.stdout) == {"failed": "signoff", "could_not_run": ""}
    body = (out / "issue-body.md").read_text()
    assert "`signoff` failed (exit 2): a fix's pull request is not ready" in body
    assert "### `signoff` failed (exit 2)" in body
    assert "What each fix's pull request dry run said:" in body
    assert f"lacks its author's sign-off ({other})" in body
    assert "pass --fix NAME" not in body


@pytest.mark.release_trees
# Provision, rebase, vLLM's pre-commit and the regression suite on 0.34.0,
# every fix's sign-off, refresh, base check: minutes (a whole journey).
@pytest.mark.slow
def test_nightly_onto_a_new_release_proposes_the_whole_series(tmp_path: Path) -> None:
    """Issue 48's night: upstream with v0.28.0 and v0.34.0, REF v0.34.0, and
    the series as it was before 0.34.0 came out (0004's range closed at
    0.33.0). Every check passes, action=pr, and OUT/patches keeps 0001-0006
    (older releases still need 0001 and 0003, which 0.34.0 carries, and
    0006, which 0.34.0's runner does not need) with
    0004's range covering 0.34.0, whose code is still buggy; the PR says so.
    The series the run read is left as it was."""
    from vllm_patchkit.git.series import parse_patch
    from vllm_patchkit.trees.versions import require_release

    upstream = build_upstream(["0.28.0", "0.34.0"])
    patches = series_copy(tmp_path)
    with_range(patches, STATIC_SINK_FIX, "0.14.0..0.33.0")
    before = snapshot(patches)
    out = tmp_path / "report"

    proc = nightly(upstream, "v0.34.0", out, patches)

    assert proc.returncode == 0, proc.stderr[-6000:]
    keys = outputs(proc.stdout)
    assert keys["action"] == "pr", (keys, proc.stderr[-6000:])
    assert keys["exit"] == "0" and keys["status"] == "rebased"
    assert keys["failed"] == "" and keys["changed"] == "true"
    assert "base_applies" in keys and "cause" not in keys
    gates = (out / "gates.tsv").read_text().splitlines()
    assert gates == ["precommit\t0", "test\t0", "signoff\t0"]
    proposed = out / "patches"
    names = series_names(proposed / "series")
    assert [name[:4] for name in names] == [f"000{n}" for n in range(1, 7)]
    assert sorted(p.name for p in proposed.iterdir()) == sorted([*names, "series"])
    fix = parse_patch(proposed / names[3])
    assert fix.name == STATIC_SINK_FIX
    assert fix.carried_for(require_release("0.34.0")), fix.affects
    assert snapshot(patches) == before
    title = (out / "pr-title.txt").read_text()
    assert "drop upstreamed" not in title and "new release ranges of 0004" in title
    body = (out / "pr-body.md").read_text()
    assert "### Upstreamed, kept for older releases" in body
    assert f"- `{STATIC_SINK_FIX}`: `Affects: 0.14.0..0.33.0` -> " in body
    assert (
        (out / "pr-title.txt")
        .read_text()
        .startswith("Rebase the patch series onto vllm-project/vllm v0.34.0")
    )


# --- the matrix workflow: one job per release, one merged table -------------

MATRIX = WORKFLOWS / "matrix.yml"
MATRIX_BREAKAGES = {
    # the publish job reading an output the merge job does not declare.
    "unknown-job-output": (
        "needs.merge.outputs.changed ==",
        "needs.merge.outputs.change ==",
        'property "change" is not defined',
    ),
    # a release job reading a matrix key that does not exist.
    "unknown-matrix-key": (
        "VERSION: ${{ matrix.version }}",
        "VERSION: ${{ matrix.release }}",
        'property "release" is not defined',
    ),
    # shellcheck, through actionlint: an unquoted variable in a run: script.
    "unquoted-variable": (
        '"$RUNNER_TEMP/rows" "$RUNNER_TEMP/matrix-docs"',
        '$RUNNER_TEMP/rows "$RUNNER_TEMP/matrix-docs"',
        "SC2086",
    ),
}


@pytest.mark.parametrize("breakage", sorted(MATRIX_BREAKAGES))
def test_actionlint_reports_a_broken_matrix_workflow(
    tmp_path: Path, breakage: str
) -> None:
    assert_actionlint_catches(MATRIX, MATRIX_BREAKAGES[breakage], tmp_path)


def test_matrix_workflow_fans_out_per_release_and_keeps_the_token_apart() -> None:
    doc = load_workflow(MATRIX)
    on = triggers(doc)
    assert [s["cron"] for s in on["schedule"]] == ["41 4 * * 1"]  # weekly
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["from"]["default"] == "0.11.0"
    assert inputs["to"]["default"] == "latest"
    assert doc["permissions"] == {}
    jobs = doc["jobs"]
    assert list(jobs) == ["releases", "release", "merge", "publish"]
    for name in ("releases", "release", "merge"):
        assert jobs[name]["permissions"] == {"contents": "read"}, name
    publish = jobs["publish"]
    assert publish["permissions"] == {"contents": "write", "pull-requests": "write"}
    for job in jobs.values():
        assert 0 < job["timeout-minutes"] <= 60
        checkout = next(s for s in job["steps"] if "checkout" in s.get("uses", ""))
        assert checkout["with"]["persist-credentials"] is False

    # One job per release of the listed range.
    release = jobs["release"]
    assert release["needs"] == "releases"
    assert release["strategy"]["fail-fast"] is False
    assert release["strategy"]["matrix"]["version"] == (
        "${{ fromJSON(needs.releases.outputs.versions) }}"
    )
    assert release["env"]["LAST"] == "${{ needs.releases.outputs.last }}"
    names = [s.get("uses", "") + s.get("run", "") for s in release["steps"]]

    def at(needle: str) -> int:
        hits = [i for i, n in enumerate(names) if needle in n]
        assert hits, needle
        return hits[0]

    # Every cache is saved before release code runs, never by a post step.
    measure = at("tools/ci/matrix-shard.sh")
    saves = [i for i, n in enumerate(names) if "actions/cache/save" in n]
    assert len(saves) == 3 and max(saves) < measure
    assert at("tools/ci/matrix_prepare.py") < min(saves[1:])
    assert not any("actions/cache@" in n for n in names)
    paths = "\n".join(
        s["with"]["path"] for s in release["steps"] if "cache/" in s.get("uses", "")
    )
    assert "trees/vllm-${{ matrix.version }}" in paths and "~/.cache/pip" in paths
    upload = release["steps"][at("upload-artifact")]
    assert upload["with"]["name"] == "matrix-rows-${{ matrix.version }}"
    assert at("upload-artifact") > measure

    # The merge runs even when a release job failed, and names the gap.
    merge = jobs["merge"]
    assert merge["needs"] == ["releases", "release"]
    assert "!cancelled()" in merge["if"]
    assert "tools/ci/matrix-merge.sh" in "\n".join(
        s.get("run", "") for s in merge["steps"]
    )

    # The write token: no venv, no vllm-patchkit, the artifact as data.
    assert publish["needs"] == "merge"
    assert publish["env"]["BRANCH"] == "bot/matrix"
    runs = "\n".join(s.get("run", "") for s in publish["steps"])
    for banned in ("vllm-patchkit", "bootstrap", ".venv", "python", "GITHUB_PATH"):
        assert banned not in runs, banned
    for script in ("install-matrix.sh", "commit-bot-branch.sh", "open-bot-pr.sh"):
        assert f"tools/ci/{script}" in runs
    assert "docs/matrix.md docs/matrix.json" in runs
    with_token = [s for s in publish["steps"] if "GH_TOKEN" in s.get("env", {})]
    assert len(with_token) == 1 and "GH_TOKEN" not in publish["env"]
    text = MATRIX.read_text()
    assert not re.search(r"\w+://", text)
    assert not re.search(r"\b[\w-]+\.(com|org|net|io|dev)\b", text)


def test_pre_commit_actionlint_hook_covers_the_matrix_workflow() -> None:
    config = yaml.safe_load((PROJECT_ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {h["id"]: h for repo in config["repos"] for h in repo["hooks"]}
    assert re.search(hooks["actionlint"]["files"], ".github/workflows/matrix.yml")


@pytest.fixture
def docs_repo(tmp_path: Path) -> Path:
    """A repository with this project's docs/matrix.* and a bare remote."""
    origin = tmp_path / "docs-origin.git"
    repo = tmp_path / "docs-repo"
    Git(tmp_path).run("init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    Git(tmp_path).run("init", "--quiet", "--initial-branch=main", str(repo))
    (repo / "docs").mkdir()
    for name in ("matrix.md", "matrix.json", "audit.md"):
        shutil.copy(PROJECT_ROOT / "docs" / name, repo / "docs" / name)
    git = as_user(repo)
    git.run("add", "docs")
    git.run("commit", "--quiet", "-m", "The docs")
    git.run("remote", "add", "origin", str(origin))
    git.run("push", "--quiet", "origin", "main")
    return repo


@pytest.mark.release_trees
@pytest.mark.slow
def test_matrix_scripts_list_measure_merge_and_publish(
    tmp_path: Path, docs_repo: Path
) -> None:
    """The workflow's scripts end to end on 0.28.0..0.29.0 (trees read only):
    the job matrix, one row file per release job, the merge and its PR texts,
    the artifact installed as data, the bot branch pushed, and a second run
    with the same table pushing nothing."""
    env = own_matrix_cache(tmp_path)
    listed = ci("matrix-releases.sh", "0.28.0", "0.29.0", patches=PATCHES_DIR, **env)
    assert listed.returncode == 0, listed.stderr
    keys = outputs(listed.stdout)
    assert json.loads(keys["versions"]) == ["0.28.0", "0.29.0"]
    assert keys["last"] == "0.29.0" and "\n" not in keys["versions"]

    rows = tmp_path / "rows"  # as download-artifact lays out matrix-rows-*
    for version in json.loads(keys["versions"]):
        out = rows / f"matrix-rows-{version}"
        job = ci(
            "matrix-shard.sh", "0.28.0", keys["last"], version, str(out), "none",
            patches=PATCHES_DIR, **env,
        )  # fmt: skip
        assert job.returncode == 0, job.stderr
        assert (out / "matrix-rows.json").is_file()

    merged = tmp_path / "matrix-docs"
    args = [str(rows), str(merged), str(docs_repo / "docs"), "run-42"]
    proc = ci("matrix-merge.sh", *args, patches=PATCHES_DIR, **env)
    assert proc.returncode == 0, proc.stderr
    assert outputs(proc.stdout) == {"changed": "true"}
    title = (merged / "pr-title.txt").read_text()
    assert title == "Compatibility matrix: vLLM 0.28.0 to 0.29.0 (2 releases)\n"
    body = (merged / "pr-body.md").read_text()
    assert "of 2 jobs, one per release" in body and "Run: run-42" in body
    # docs/'s row predates StaticSink (three patches, no StaticSink fix):
    # the static columns changed too; overlay and audit are skipped now.
    assert "0.28.0 (static, stock, series, overlay, audit)" in body
    # The same table as one run of the range.
    whole = tmp_path / "whole"
    one = subprocess.run(
        [tool("vllm-patchkit"), "matrix", "--from", "0.28.0", "--to", "0.29.0",
         "--no-suite", "--output-dir", str(whole)],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=900,
    )  # fmt: skip
    assert one.returncode == 0, one.stderr
    assert (merged / "matrix.md").read_bytes() == (whole / "matrix.md").read_bytes()

    # A release job that failed: the merge names the gap, writes nothing.
    shutil.move(rows / "matrix-rows-0.29.0", tmp_path / "held-back")
    gap = ci("matrix-merge.sh", str(rows), str(tmp_path / "gap"), "docs",
             patches=PATCHES_DIR, **env)  # fmt: skip
    assert gap.returncode == 2, gap.stderr
    assert "gap: no row file has 0.29.0" in gap.stderr
    assert not (tmp_path / "gap" / "matrix.md").exists()

    # The publish job: the artifact as data, the bot branch, twice.
    origin = Git(tmp_path / "docs-origin.git")
    for night, expected in (("first", 0), ("second", 1)):
        clone = tmp_path / night
        Git(tmp_path).run(
            "clone", "--quiet", str(tmp_path / "docs-origin.git"), str(clone)
        )
        installed = ci("install-matrix.sh", str(merged), str(clone / "docs"),
                       patches=PATCHES_DIR)  # fmt: skip
        assert installed.returncode == 0, installed.stderr
        pushed = ci(
            "commit-bot-branch.sh", str(clone), "bot/matrix",
            str(merged / "commit-message.txt"), "origin",
            "docs/matrix.md", "docs/matrix.json", patches=PATCHES_DIR,
        )  # fmt: skip
        assert pushed.returncode == expected, pushed.stderr
    head = origin.out("rev-parse", "refs/heads/bot/matrix")
    assert origin.out("rev-parse", f"{head}^") == origin.out("rev-parse", "main")
    changed = origin.out("diff", "--name-only", "main", head).splitlines()
    assert changed == ["docs/matrix.json", "docs/matrix.md"]
    assert origin.out("show", f"{head}:docs/matrix.md") == (
        (merged / "matrix.md").read_text().rstrip("\n")
    )
    logged = origin.out("log", "-1", "--format=%B", head)
    assert logged.startswith("docs: the matrix measured on vLLM 0.28.0 to 0.29.0")


INSTALL_MATRIX_REFUSALS = {
    "missing-md": lambda d: (d / "matrix.md").unlink(),
    "symlink": lambda d: (
        (d / "matrix.md").unlink(),
        (d / "matrix.md").symlink_to("/etc/passwd"),
    ),
    "not-the-document": lambda d: (d / "matrix.json").write_text('{"rows": 1}\n'),
    "not-json": lambda d: (d / "matrix.json").write_text("rm -rf /\n"),
}


@pytest.mark.parametrize("refusal", sorted(INSTALL_MATRIX_REFUSALS))
def test_install_matrix_refuses_anything_else(tmp_path: Path, refusal: str) -> None:
    source = tmp_path / "artifact"
    source.mkdir()
    (source / "matrix.md").write_text("| new |\n")
    (source / "matrix.json").write_text('{"run": {}, "rows": []}\n')
    dest = tmp_path / "docs"
    dest.mkdir()
    (dest / "matrix.md").write_text("old\n")
    ok = ci("install-matrix.sh", str(source), str(dest), patches=PATCHES_DIR)
    assert ok.returncode == 0, ok.stderr
    assert (dest / "matrix.md").read_text() == "| new |\n"
    before = {p.name: p.read_text() for p in dest.iterdir()}
    INSTALL_MATRIX_REFUSALS[refusal](source)

    proc = ci("install-matrix.sh", str(source), str(dest), patches=PATCHES_DIR)

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nothing installed" in proc.stderr
    assert {p.name: p.read_text() for p in dest.iterdir()} == before


def test_bot_branch_refuses_a_path_outside_the_repository(docs_repo: Path) -> None:
    message = docs_repo / "message.txt"
    message.write_text("x\n")
    for path in ("../outside", "/etc/passwd"):
        proc = ci("commit-bot-branch.sh", str(docs_repo), "bot/matrix", str(message),
                  "origin", path, patches=PATCHES_DIR)  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert "not a path inside the repository" in proc.stderr
