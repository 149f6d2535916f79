"""The release and CI workflows: their shape, and the release job's steps run
here as the runner runs them.

* release.yml: a tag that is not ``v`` + ``vllm_overlay.__version__`` is
  refused by the job's own tag step, run here with bash; the build, check
  and smoke steps (``tools/ci/build-dists.sh``, ``tools/ci/smoke-dists.sh``)
  run here on a copy of this checkout and leave both sdists and wheels,
  ``twine check --strict`` clean, each wheel answering ``--version`` from a
  fresh venv; publishing holds only the OIDC token, in a deployment
  environment; the GitHub release takes the changelog's section.
* ci.yml: pull requests and pushes to main run ``.ci/run`` with a read-only
  token and the venv cached on the files that decide it.

actionlint (with shellcheck) passes both with the other workflows, and no
``run:`` holds an expression: tests/toolkit/test_workflows.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import vllm_overlay
from tests.packaging.test_wheels import NOT_SOURCE
from tests.toolkit.test_workflows import WORKFLOWS, load_workflow, triggers
from vllm_patchkit.paths import PROJECT_ROOT

RELEASE = WORKFLOWS / "release.yml"
CI = WORKFLOWS / "ci.yml"
VERSION = vllm_overlay.__version__


def release_jobs() -> dict[str, Any]:
    doc = load_workflow(RELEASE)
    assert set(doc["jobs"]) == {"build", "publish", "release"}
    return doc["jobs"]


def step(job: dict[str, Any], needle: str) -> dict[str, Any]:
    """The one step of ``job`` whose ``run`` or ``uses`` contains ``needle``."""
    found = [s for s in job["steps"] if needle in s.get("run", s.get("uses", ""))]
    assert len(found) == 1, f"{len(found)} steps with {needle!r}"
    return found[0]


def run_step(
    script: str, cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """A ``run:`` as the runner runs it: ``bash -e {0}`` (plus pipefail),
    without what points Python at this checkout."""
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env={**inherited, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --- release.yml: shape ----------------------------------------------------


def test_release_runs_on_version_tags_with_no_default_permissions() -> None:
    doc = load_workflow(RELEASE)
    assert triggers(doc) == {"push": {"tags": ["v*"]}}
    assert doc["permissions"] == {}
    jobs = release_jobs()
    assert jobs["build"]["permissions"] == {"contents": "read"}
    checkout = step(jobs["build"], "actions/checkout")
    assert checkout["with"]["persist-credentials"] is False


def test_the_tag_is_checked_before_anything_is_built() -> None:
    build = release_jobs()["build"]
    runs = [s.get("run", "") for s in build["steps"]]
    first = next(i for i, r in enumerate(runs) if r)
    assert "tools/ci/release_notes.py check-tag" in runs[first]
    order = [
        next(i for i, r in enumerate(runs) if needle in r)
        for needle in (
            "check-tag",
            "release_notes.py notes",
            "tools/ci/build-dists.sh",
            "tools/ci/smoke-dists.sh",
        )
    ]
    assert order == sorted(order)
    assert build["outputs"]["version"] == "${{ steps.tag.outputs.version }}"


def test_publishing_holds_only_the_oidc_token_in_an_environment() -> None:
    jobs = release_jobs()
    publish = jobs["publish"]
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"]
    uses = [s["uses"].split("@")[0] for s in publish["steps"]]
    assert uses == ["actions/download-artifact", "pypa/gh-action-pypi-publish"]
    assert not any("run" in s for s in publish["steps"])
    # The build job uploads dist/ only: what the publisher uploads.
    upload = [
        s for s in jobs["build"]["steps"] if "upload-artifact" in s.get("uses", "")
    ]
    assert {s["with"]["name"]: s["with"]["path"] for s in upload} == {
        "dist": "dist/",
        "release-notes": "${{ runner.temp }}/notes/notes.md",
    }
    # Only the job that publishes may get an OIDC token; only the last one
    # may write to the repository, after the index has the files.
    for name, job in jobs.items():
        if name != "publish":
            assert "id-token" not in job["permissions"], name
    release = jobs["release"]
    assert release["permissions"] == {"contents": "write"}
    assert set(release["needs"]) == {"build", "publish"}


def test_the_github_release_takes_the_changelog_section() -> None:
    release = release_jobs()["release"]
    create = step(release, "gh release create")
    assert '--notes-file "$RUNNER_TEMP/notes/notes.md"' in create["run"]
    assert create["env"]["GH_TOKEN"] == "${{ github.token }}"
    notes = step(release_jobs()["build"], "release_notes.py notes")
    assert '>"$RUNNER_TEMP/notes/notes.md"' in notes["run"]


# --- release.yml: its steps, run here ---------------------------------------


@pytest.mark.parametrize("tag", ["v9.9.9", VERSION, f"v{VERSION}.1", f"v{VERSION}rc1"])
def test_the_tag_step_refuses_a_tag_that_is_not_the_version(
    tmp_path: Path, tag: str
) -> None:
    check = step(release_jobs()["build"], "check-tag")
    output = tmp_path / "github-output"
    output.touch()
    proc = run_step(
        check["run"],
        PROJECT_ROOT,
        {"GITHUB_REF_NAME": tag, "GITHUB_OUTPUT": str(output)},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "release: refused" in proc.stderr and tag in proc.stderr
    assert output.read_text() == ""


def test_the_tag_step_passes_the_version_s_tag(tmp_path: Path) -> None:
    check = step(release_jobs()["build"], "check-tag")
    output = tmp_path / "github-output"
    output.touch()
    proc = run_step(
        check["run"],
        PROJECT_ROOT,
        {"GITHUB_REF_NAME": f"v{VERSION}", "GITHUB_OUTPUT": str(output)},
    )
    assert proc.returncode == 0, proc.stderr
    assert output.read_text() == f"version={VERSION}\n"


@pytest.mark.packaging
@pytest.mark.slow
def test_the_build_check_and_smoke_steps_run_here(tmp_path: Path) -> None:
    """The job's steps on a copy of this checkout (the runner's is a clean
    clone), with this venv's pinned build and twine (the job installs the
    same pins) and the default isolated build."""
    source = tmp_path / "source"
    shutil.copytree(PROJECT_ROOT, source, ignore=NOT_SOURCE, symlinks=True)
    build = release_jobs()["build"]
    env = {
        "VERSION": VERSION,
        "PYTHON": sys.executable,
        "RUNNER_TEMP": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }

    built = run_step(step(build, "tools/ci/build-dists.sh")["run"], source, env)
    assert built.returncode == 0, built.stdout + built.stderr
    assert sorted(p.name for p in (source / "dist").iterdir()) == [
        f"vllm_overlay-{VERSION}-py3-none-any.whl",
        f"vllm_overlay-{VERSION}.tar.gz",
        f"vllm_patchkit-{VERSION}-py3-none-any.whl",
        f"vllm_patchkit-{VERSION}.tar.gz",
    ]
    assert built.stdout.count("PASSED") == 4, built.stdout

    smoke = run_step(step(build, "tools/ci/smoke-dists.sh")["run"], source, env)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert f"python -m vllm_overlay --version: vllm-overlay {VERSION}" in smoke.stderr
    assert f"vllm-patchkit --version: vllm-patchkit {VERSION}" in smoke.stderr

    # A second build into the same dist/ is refused: the release takes
    # every file there.
    again = run_step(step(build, "tools/ci/build-dists.sh")["run"], source, env)
    assert again.returncode == 2 and "is not empty" in again.stderr


def test_the_smoke_step_fails_on_a_wheel_of_another_version(tmp_path: Path) -> None:
    """The smoke test can fail: a dist/ without this version's wheels."""
    build = release_jobs()["build"]
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "vllm_overlay-0.0.1-py3-none-any.whl").touch()
    proc = run_step(
        step(build, "tools/ci/smoke-dists.sh")["run"].replace(
            "tools/ci/", f"{PROJECT_ROOT}/tools/ci/"
        ),
        tmp_path,
        {"VERSION": VERSION, "PYTHON": sys.executable},
    )
    assert proc.returncode == 2, proc.stderr
    assert f"error: no dist/vllm_overlay-{VERSION}-py3-none-any.whl" in proc.stderr


# --- ci.yml -------------------------------------------------------------------


def test_ci_runs_the_test_command_on_pull_requests_and_main() -> None:
    doc = load_workflow(CI)
    on = triggers(doc)
    assert set(on) == {"pull_request", "push"}
    assert on["push"]["branches"] == ["main"]
    assert doc["permissions"] == {"contents": "read"}
    (job,) = doc["jobs"].values()
    assert "permissions" not in job  # the workflow's read-only token
    runs = [s.get("run", "") for s in job["steps"]]
    assert runs[-1] == ".ci/run"
    checkout = step(job, "actions/checkout")
    assert checkout["with"]["persist-credentials"] is False
    assert checkout["with"]["fetch-depth"] == 0  # .ci/run counts the commits


def test_ci_caches_the_venv_on_the_files_that_decide_it() -> None:
    (job,) = load_workflow(CI)["jobs"].values()
    restore = step(job, "actions/cache/restore")
    key = restore["with"]["key"]
    # What tools/bootstrap.sh's stamp hashes: the pins and the pyproject files.
    for decider in (
        "requirements/*.txt",
        "pyproject.toml",
        "tools/pyproject.toml",
        "tools/setup.py",
    ):
        assert f"'{decider}'" in key
    bootstrap = (PROJECT_ROOT / "tools" / "bootstrap.sh").read_text()
    for stamped in ("$pins", "$docs_pins", "pyproject.toml", "tools/setup.py"):
        assert stamped in bootstrap
    # Saved before the tests run, so a run cannot poison it.
    names = [s.get("uses", "") + s.get("run", "") for s in job["steps"]]
    saved = next(i for i, n in enumerate(names) if "actions/cache/save" in n)
    assert saved < names.index(".ci/run")
    assert not any("actions/cache@" in n for n in names)
