"""``vllm-patchkit pr`` on real 0.28.0 and 0.33.0 checkouts with the series applied.

On 0.28.0 the series carries #51585's fix (0001 and 0002), #53821's (0003)
and StaticSink's (0004 and 0005), with any fix added since; the tests
propose #51585's.

The checks the PR body reports (``test``, ``precommit``) run for real in one
test; the others skip them to test sign-offs, the branch and the hand-off
to gh. gh itself is GitHub's client and cannot reach GitHub here: a small
stand-in on PATH records the arguments it is given, and the push goes to a
local bare repository.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json, snapshot, user_commit
from tests.toolkit.series_expectations import carried
from vllm_overlay.fixes import by_name
from vllm_patchkit.git.series import load_series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import clone_release

pytestmark = pytest.mark.release_trees

ME = "Fork Maintainer <fork@example.invalid>"
SERIES_AUTHOR = "vllm-overlay developers <dev@vllm-overlay.invalid>"
UPSTREAM_TEST = "tests/v1/attention/test_rocm_attn_cudagraph_capture.py"
AITER_TEST = "tests/v1/attention/test_rocm_aiter_unified_attn_cudagraph_capture.py"
STATIC_SINK_TEST = "tests/v1/attention/test_static_sink_shared_state.py"
PR = ("pr", "--fix", "rocm-capture-keeps-host-offsets")
SERIES = load_series()
PR_PATCHES = tuple(
    p.name for p in SERIES.of_fix(by_name("rocm-capture-keeps-host-offsets"))
)
STATIC_SINK = "static-sink-keeps-shared-seq-lens"
STATIC_SINK_PATCHES = tuple(p.name for p in SERIES.of_fix(by_name(STATIC_SINK)))


@pytest.fixture
def checkout(
    tmp_path: Path, pooled_tree: Callable[[str, Path, Callable[[Path], None]], Path]
) -> Path:
    """0.28.0 with the series applied by a user whose git identity is ME
    (built once per process, put back as new for each test)."""

    def build(tree: Path) -> None:
        user_commit(clone_release("0.28.0", tree, checkout=True))
        git = Git(tree)
        git.run("config", "user.name", "Fork Maintainer")
        git.run("config", "user.email", "fork@example.invalid")
        git.run("switch", "--quiet", "-c", "rocm-fixes")
        # Its origin is the shared release cache: nothing may be pushed there.
        git.run("remote", "remove", "origin")
        code, result = patchkit_json("apply", str(tree))
        assert code == 0, result

    return pooled_tree("0.28.0-pr-checkout", tmp_path / "vllm-0.28.0", build)


def test_missing_signoff_is_refused_then_added_only_on_request(
    checkout: Path,
) -> None:
    before = snapshot(checkout)
    code, refused = patchkit_json(*PR, "--no-test", "--no-precommit", str(checkout))
    assert code == 2, refused
    assert refused["status"] == "refused"
    assert f"Signed-off-by of submitter {ME}" in refused["message"]
    assert "--signoff" in refused["message"]

    # A fork as the push remote: gh needs OWNER:branch to find the branch.
    git = Git(checkout)
    git.run("remote", "add", "origin", "https://example.invalid/forker/vllm.git")
    before = snapshot(checkout)
    code, pr = patchkit_json(
        *PR, "--signoff", "--no-test", "--no-precommit", str(checkout)
    )
    assert code == 0, pr
    head = pr["gh_command"][pr["gh_command"].index("--head") + 1]
    assert head == f"forker:{pr['branch']}"
    assert [c["signoff_added"] for c in pr["commits"]] == [ME] * 2
    # Upstream's trailers only: the series' placeholder is no one, so its
    # commits are sent as the submitter's, signed off by them alone.
    assert [c["sent_as"] for c in pr["commits"]] == [ME] * 2
    for commit in pr["commits"]:
        trailers = commit["message"].rstrip().split("\n\n")[-1].splitlines()
        assert trailers == [f"Signed-off-by: {ME}"]
    assert snapshot(checkout) == before  # a dry run changes nothing


@pytest.mark.slow
def test_dry_run_body_comes_from_real_test_and_precommit_runs(
    checkout: Path,
) -> None:
    before = snapshot(checkout)

    code, pr = patchkit_json(*PR, "--dry-run", "--signoff", str(checkout))

    assert code == 0, pr
    assert pr["status"] == "ready"
    assert pr["title"] == (
        "[Bugfix][ROCm] Preserve CPU query offsets during CUDA graph capture"
    )
    assert pr["template"] == ".github/PULL_REQUEST_TEMPLATE.md"
    body = pr["body"]
    purpose = body.split("## Purpose", 1)[1].split("## Test Plan", 1)[0]
    assert "(#25985)" in purpose and "Related: " in purpose
    details = body.split("## Details", 1)[1]
    assert "Zeroing it makes the" in details  # the commit messages: no notes
    plan = body.split("## Test Plan", 1)[1].split("## Test Result", 1)[0]
    # Upstream's own commands, as run in the checkout: no path of this machine.
    assert "vllm-patchkit" not in plan
    assert str(checkout) not in body
    assert f"pytest {UPSTREAM_TEST} -v" in plan and "pre-commit run --files" in plan
    assert AITER_TEST not in plan and STATIC_SINK_TEST not in plan  # other PRs
    result = body.split("## Test Result", 1)[1].split("## Claims", 1)[0]
    assert f"`pytest {UPSTREAM_TEST}` without the fix: 0 passed, 4 failed." in result
    assert f"`pytest {UPSTREAM_TEST}` with the fix: 4 passed, 0 failed." in result
    # The toolkit's suite gates the PR but is no figure a reviewer reproduces.
    assert "Regression suite" not in body and "vllm-patchkit" not in body
    assert pr["runs"][0]["output"].count("fix #51585: FIXED") == 1
    # Only this fix's checks and verdict: the others have PRs of their own.
    assert "static_sink" not in body and "StaticSink" not in body
    assert "#53821" not in body
    assert "ruff-check" in result and "pre-commit on 2 file(s)" in result
    claims = body.split("## Claims", 1)[1].split("## Details", 1)[0]
    assert f"`{UPSTREAM_TEST}` passes with the fix (4 passed, 0 failed)" in claims
    assert body.count("- [x]") == 3
    assert "PLEASE FILL IN" not in body
    assert [r["returncode"] for r in pr["runs"]] == [0, 0]
    body_file = Path(pr["body_file"])
    assert body_file.read_text() == body
    assert not body_file.is_relative_to(checkout)
    assert pr["gh_command"][:3] == ["gh", "pr", "create"]
    assert pr["gh_command"][pr["gh_command"].index("--title") + 1] == pr["title"]
    assert snapshot(checkout) == before


def test_submit_pushes_a_branch_and_hands_it_to_gh(
    checkout: Path, tmp_path: Path
) -> None:
    remote = tmp_path / "fork.git"
    Git(tmp_path).run("init", "--quiet", "--bare", str(remote))
    git = Git(checkout)
    git.run("remote", "add", "origin", str(remote))
    bin_dir, gh_log = tmp_path / "bin", tmp_path / "gh-args"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$@\" > '{gh_log}'\n"
        "echo https://example.invalid/vllm-project/vllm/pull/1\n"
    )
    gh.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    head, branch = git.head(), git.branch()
    args = (*PR, "--submit", "--signoff", "--no-test", "--no-precommit")

    proc = patchkit(*args, "--json", str(checkout), env=env)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"status": "submitted"' in proc.stdout
    pr_branch = "vllm-overlay/preserve-cpu-query-offsets-during-cuda-graph-cap"
    new_head = git.out("rev-parse", f"refs/heads/{pr_branch}")
    assert Git(remote).out("rev-parse", f"refs/heads/{pr_branch}") == new_head
    # Same trees on the same base; upstream messages; the user's branch and
    # work tree untouched. The fix's patches (0001, 0002) come first in the
    # series: the tree after them is HEAD's less the later patches'.
    applied = [p.name for p in carried("0.28.0")]
    assert applied[: len(PR_PATCHES)] == list(PR_PATCHES)
    assert [name[:4] for name in PR_PATCHES] == ["0001", "0002"]  # by hand
    later = len(applied) - len(PR_PATCHES)
    assert git.out("rev-parse", f"{new_head}^{{tree}}") == git.out(
        "rev-parse", f"HEAD~{later}^{{tree}}"
    )
    assert git.out("rev-parse", f"{new_head}~2") == git.out(
        "rev-parse", "refs/vllm-patchkit/base"
    )
    for rev in (new_head, f"{new_head}^"):
        message = git.out("log", "-1", "--format=%B", rev)
        assert "Invariant:" not in message and "Origin:" not in message
        assert SERIES_AUTHOR not in message
        assert message.endswith(f"\n\nSigned-off-by: {ME}")
        assert git.out("log", "-1", "--format=%an <%ae>", rev) == ME
    assert (git.head(), git.branch()) == (head, branch) and git.is_clean()
    gh_args = gh_log.read_text().splitlines()
    assert gh_args[:2] == ["pr", "create"]
    assert gh_args[gh_args.index("--head") + 1] == pr_branch
    assert gh_args[gh_args.index("--repo") + 1] == "vllm-project/vllm"

    again = patchkit(*args, str(checkout), env=env)
    assert again.returncode == 0, again.stdout  # same commits: idempotent


@pytest.mark.skipif(shutil.which("gh") is not None, reason="gh is installed here")
def test_submit_without_gh_prints_the_command(checkout: Path, tmp_path: Path) -> None:
    remote = tmp_path / "fork.git"
    Git(tmp_path).run("init", "--quiet", "--bare", str(remote))
    proc = patchkit(
        *PR, "--submit", "--signoff", "--no-test", "--no-precommit",
        "--remote", str(remote), str(checkout),
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout
    assert "gh is not installed" in proc.stdout
    assert "gh pr create --repo vllm-project/vllm" in proc.stdout


def test_refusals(checkout: Path, tmp_path: Path) -> None:
    other = Git(checkout)
    other.run(
        "-c", "user.name=Someone Else", "-c", "user.email=else@example.invalid",
        "commit", "--quiet", "--allow-empty", "-m", "[Misc] unsigned",
    )  # fmt: skip
    # A commit that is no series patch is in no fix's PR; proposed alone
    # (its own base), it still needs its author's sign-off.
    code, pr = patchkit_json(
        *PR, "--signoff", "--no-test", "--no-precommit", str(checkout)
    )
    assert code == 0 and pr["left_out"][-1].endswith("[Misc] unsigned"), pr
    code, pr = patchkit_json(
        "pr", "--signoff", "--no-test", "--no-precommit", "--base", "HEAD~1",
        str(checkout),
    )  # fmt: skip
    assert code == 2
    assert "only the author can certify it" in pr["message"]

    (checkout / UPSTREAM_TEST).write_text("# edited\n")
    code, pr = patchkit_json(*PR, "--no-test", "--no-precommit", str(checkout))
    assert code == 2 and "the PR is built from commits" in pr["message"]

    git = Git(checkout)
    git.run("commit", "--quiet", "--amend", "--no-edit", "-a")
    git.run("config", "--unset", "user.email")
    # No identity anywhere: the machine's global config is left out too.
    no_identity = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    proc = patchkit(
        *PR, "--signoff", "--no-test", "--no-precommit", "--json", str(checkout),
        env=no_identity,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "set git's user.name and user.email" in json.loads(proc.stdout)["message"]

    stock = tmp_path / "stock"
    clone_release("0.28.0", stock)
    code, pr = patchkit_json(*PR, "--no-test", "--no-precommit", str(stock))
    assert code == 2 and "no series base" in pr["message"]


def test_values_that_read_as_options_are_refused(
    checkout: Path, tmp_path: Path
) -> None:
    """A --remote (or branch, base, repo) that git or gh would read as an
    option is refused, exit 2, before anything runs: ``--receive-pack=CMD``
    and ``--exec=CMD`` would make ``git push`` run CMD."""
    remote = tmp_path / "fork.git"
    Git(tmp_path).run("init", "--quiet", "--bare", str(remote))
    git = Git(checkout)
    git.run("remote", "add", "origin", str(remote))
    ran = tmp_path / "ran"
    cases = [
        ("--remote", f"--receive-pack=touch {ran}"),
        ("--remote", f"--exec=touch {ran}"),
        ("--remote", f"ext::sh -c touch% {ran}"),
        ("--remote", f"fd::{3}"),
        ("--branch", f"--receive-pack=touch {ran}"),
        ("--branch", "bad..name"),
        ("--branch", "main\n"),
        ("--upstream-branch", "--web"),
        ("--repo", "--web"),
        ("--base", f"--output={ran}"),
    ]
    refs = git.out("for-each-ref", "--format=%(refname) %(objectname)")
    for flag, value in cases:
        proc = patchkit(
            *PR, "--submit", "--signoff", "--no-test", "--no-precommit",
            "--json", f"{flag}={value}", str(checkout),
        )  # fmt: skip
        assert proc.returncode == 2, (flag, value, proc.stdout + proc.stderr)
        assert json.loads(proc.stdout)["status"] == "refused"
        assert not ran.exists(), (flag, value)
        assert git.out("for-each-ref", "--format=%(refname) %(objectname)") == refs
    assert Git(remote).out("for-each-ref") == ""


def test_static_sink_pr_on_0_33_proposes_its_own_patches_only(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """On 0.33.0 apply carries #51585's test (0002) and StaticSink's 0004,
    0005 and 0006 (its V1 runner is there): the StaticSink PR is those three,
    replayed on the base without 0002, and with no [ROCm] tag (static sink
    attention runs on every platform)."""
    tree = release_clone("0.33.0")
    git = Git(tree)
    git.run("config", "user.name", "Fork Maintainer")
    git.run("config", "user.email", "fork@example.invalid")
    git.run("remote", "remove", "origin")
    code, result = patchkit_json("apply", str(tree))
    assert code == 0, result
    base = git.out("rev-parse", "refs/vllm-patchkit/base")
    applied = [p.name[:4] for p in carried("0.33.0")]
    # By hand: 0001, 0003 upstream; 0006 for 0.33.0's V1 runner.
    assert {"0002", "0004", "0005", "0006"} <= set(applied)
    assert not {"0001", "0003"} & set(applied)
    assert git.out("rev-list", "--count", f"{base}..HEAD") == str(len(applied))

    args = ("pr", "--signoff", "--no-test", "--no-precommit")
    code, ambiguous = patchkit_json(*args, str(tree))
    assert code == 2, ambiguous
    message = ambiguous["message"]
    assert "rocm-capture-keeps-host-offsets (#51585: 0002)" in message
    assert "static-sink-keeps-shared-seq-lens (StaticSink: 0004, 0005, 0006)" in message
    assert "--fix NAME" in message
    code, unknown = patchkit_json(*args, "--fix", "no-such-fix", str(tree))
    assert code == 2 and "static-sink-keeps-shared-seq-lens" in unknown["message"]

    remote = tmp_path / "fork.git"
    Git(tmp_path).run("init", "--quiet", "--bare", str(remote))
    bin_dir = tmp_path / "bin"  # a stand-in gh: GitHub is not reachable here
    bin_dir.mkdir()
    (bin_dir / "gh").write_text("#!/bin/sh\necho https://example.invalid/pull/2\n")
    (bin_dir / "gh").chmod(0o755)
    proc = patchkit(
        *args, "--submit", "--fix", "static-sink-keeps-shared-seq-lens",
        "--remote", str(remote), "--json", str(tree),
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pr = json.loads(proc.stdout)
    assert pr["fix"] == "static-sink-keeps-shared-seq-lens"
    assert [c["subject"] for c in pr["commits"]] == [
        "[Bugfix] Keep the shared seq_lens in StaticSinkAttentionBuilder",
        "[Bugfix] Test that static sink attention keeps the shared seq_lens",
        "[Bugfix] Keep static-sink groups off the V1 runner's block table shortcut",
    ]
    assert pr["title"] == (
        "[Bugfix] Keep the shared seq_lens in StaticSinkAttentionBuilder"
    )
    # Left out: every other commit the series carries here (0002 among them).
    assert len(pr["left_out"]) == len(applied) - 3
    assert any("CUDA graph capture" in commit for commit in pr["left_out"])
    # The branch (pushed before gh is looked for) is 0004-0006 on the base.
    head = Git(remote).out("rev-parse", f"refs/heads/{pr['branch']}")
    assert git.out("rev-parse", f"{head}~3") == base
    changed = git.out("diff", "--name-only", base, head).splitlines()
    assert changed == [
        STATIC_SINK_TEST,
        "vllm/model_executor/layers/attention/static_sink_attention.py",
    ]
    # What is sent carries upstream's trailers only, and is the submitter's.
    for rev in (head, f"{head}^", f"{head}~2"):
        message = git.out("log", "-1", "--format=%B", rev)
        trailers = message.rstrip().split("\n\n")[-1].splitlines()
        assert trailers == [f"Signed-off-by: {ME}"], message
        assert "dev@vllm-overlay.invalid" not in message
        assert git.out("log", "-1", "--format=%an <%ae>", rev) == ME
    # Every section of the release's template, filled; a reviewer's Test Plan.
    body = pr["body"]
    template = (tree / ".github/PULL_REQUEST_TEMPLATE.md").read_text()
    headings = [line for line in template.splitlines() if line.startswith("## ")]
    assert headings == ["## Overview", "## Claims", "## Validation", "## Details"]
    kept = body.split("**BEFORE SUBMITTING", 1)[0]
    for heading, following in zip(headings, [*headings[1:], "---"], strict=True):
        section = kept.split(heading + "\n", 1)[1].split(following, 1)[0]
        assert section.split("<!--", 1)[0].strip(), f"{heading} is empty"
    plan = body.split("### Test Plan", 1)[1].split("### Test Result", 1)[0]
    assert f"pytest {STATIC_SINK_TEST} -v" in plan and "vllm-patchkit" not in plan
    details = body.split("## Details", 1)[1]
    assert "update_draft_decode_metadata" in details  # the fix's reviewer notes
    assert "(63) must match the existing size (64)" in details


def _series_commits(git: Git) -> dict[str, str]:
    """Each patch's commit after the base, by patch name (apply's order)."""
    shas = git.out("rev-list", "--reverse", "refs/vllm-patchkit/base..HEAD").split()
    return dict(zip([p.name for p in carried("0.28.0")], shas, strict=True))


def _reword(git: Git, subject: str) -> None:
    """HEAD's subject replaced; its body and sign-offs kept."""
    body = git.out("log", "-1", "--format=%B").split("\n", 1)[1]
    git.run("commit", "--quiet", "--amend", "-a", "-m", f"{subject}\n{body}")


def test_a_reworded_or_edited_fix_commit_is_still_the_fixs(checkout: Path) -> None:
    """Commits are a fix's by what they change, never by their subject: a
    reworded fix commit by its patch-id, one edited too by its files and
    its patch's invariant (holds after it, not before)."""
    git = Git(checkout)
    commits = _series_commits(git)
    git.run("switch", "--quiet", "-c", "reworded", "refs/vllm-patchkit/base")
    static_sink_file = "vllm/model_executor/layers/attention/static_sink_attention.py"
    for name, sha in commits.items():
        git.run("cherry-pick", sha)
        if name == PR_PATCHES[0]:
            _reword(git, "Keep the host query offsets in ROCm capture")
        elif name == STATIC_SINK_PATCHES[0]:
            with (checkout / static_sink_file).open("a") as handle:
                handle.write("# a reviewer's tweak\n")
            _reword(git, "Static sink: a seq_lens buffer of the builder's own")
    args = ("--signoff", "--no-test", "--no-precommit", str(checkout))

    code, pr = patchkit_json(*PR, *args)

    assert code == 0, pr
    assert [c["subject"] for c in pr["commits"]] == [
        "Keep the host query offsets in ROCm capture",
        "[Bugfix][ROCm] Test that CUDA graph capture keeps the CPU query offsets",
    ]
    assert [c["found_by"] for c in pr["commits"]] == [
        f"{name} (its patch-id)" for name in PR_PATCHES
    ]
    assert pr["title"] == "[Bugfix][ROCm] Keep the host query offsets in ROCm capture"

    code, pr = patchkit_json("pr", "--fix", STATIC_SINK, *args)

    assert code == 0, pr
    assert [c["found_by"] for c in pr["commits"]] == [
        f"{STATIC_SINK_PATCHES[0]} (its files and invariant)",
        *(f"{name} (its patch-id)" for name in STATIC_SINK_PATCHES[1:]),
    ]
    assert not any("Static sink:" in left for left in pr["left_out"])


def test_a_pr_without_its_fix_is_refused(checkout: Path) -> None:
    """The commits a PR would send must carry the fix on the base: a fix
    commit reverted, or dropped while its test stays, is exit 1, naming the
    commits, the patch missing and what undid it; nothing is run."""
    git = Git(checkout)
    commits = _series_commits(git)
    fix, test = (commits[name] for name in STATIC_SINK_PATCHES[:2])
    git.run("revert", "--no-edit", fix)
    revert = git.head()
    args = ("pr", "--fix", STATIC_SINK, "--signoff", "--no-test", "--no-precommit")

    code, pr = patchkit_json(*args, str(checkout))

    assert code == 1, pr
    assert pr["status"] == "fix-missing"
    message = pr["message"]
    assert f"{STATIC_SINK_PATCHES[0]} (its invariant {STATIC_SINK}" in message
    assert f"{revert[:12]} 'Revert " in message and "undoes" in message
    assert pr["body"] == "" and pr["runs"] == []

    # Dropped: the test's commit alone, on the commit before the fix's.
    git.run("switch", "--quiet", "-c", "dropped", f"{fix}^")
    git.run("cherry-pick", test)
    code, pr = patchkit_json(*args, str(checkout))

    assert code == 1, pr
    assert [c["sha"] for c in pr["commits"]] == [git.head()]
    assert f"({git.head()[:12]} '[Bugfix] Test that static sink" in pr["message"]
    assert f"{STATIC_SINK_PATCHES[0]} (its invariant" in pr["message"]


def test_test_result_is_measured_on_what_the_pr_sends(
    checkout: Path, tmp_path: Path
) -> None:
    """``test`` runs on the base plus the fix's commits as the branch holds
    them, not on HEAD: a local commit that fails the fix's test at HEAD is
    left out, and so is its failure."""
    git = Git(checkout)
    with (checkout / STATIC_SINK_TEST).open("a") as handle:
        handle.write(
            "\n\ndef test_local_experiment():\n"
            "    raise AssertionError('a local experiment, not in the PR')\n"
        )
    git.run("commit", "--quiet", "-a", "-s", "-m", "Local experiment")

    code, pr = patchkit_json(
        "pr", "--fix", STATIC_SINK, "--signoff", "--no-precommit", "--no-mutation",
        str(checkout),
    )  # fmt: skip

    assert code == 0, pr["message"]
    assert pr["left_out"][-1].endswith("Local experiment")
    result = pr["body"].split("## Test Result", 1)[1]
    with_fix = f"`pytest {STATIC_SINK_TEST}` with the fix: "
    assert ", 0 failed" in result.split(with_fix, 1)[1].split("\n", 1)[0]
    assert "test_local_experiment" not in pr["body"]
    assert pr["mutation"] is None and "mutants" not in pr["body"]  # --no-mutation
    measured = pr["measured"]
    assert f"after: {measured[:7]}" in pr["runs"][0]["output"]
    # What was measured is the branch submit makes (same commit ids).
    remote = tmp_path / "fork.git"
    Git(tmp_path).run("init", "--quiet", "--bare", str(remote))
    bin_dir = tmp_path / "bin"  # a stand-in gh: GitHub is not reachable here
    bin_dir.mkdir()
    (bin_dir / "gh").write_text("#!/bin/sh\necho https://example.invalid/pull/3\n")
    (bin_dir / "gh").chmod(0o755)
    proc = patchkit(
        "pr", "--fix", STATIC_SINK, "--signoff", "--no-test", "--no-precommit",
        "--submit", "--remote", str(remote), "--json", str(checkout),
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    branch = json.loads(proc.stdout)["branch"]
    assert Git(remote).out("rev-parse", f"refs/heads/{branch}") == measured
