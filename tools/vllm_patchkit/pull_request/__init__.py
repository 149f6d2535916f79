"""Prepare (and, when asked, open) the upstream pull request for one fix.

``prepare_pull_request`` reads the series' commits in a vLLM checkout (from
the base recorded by apply or rebase to HEAD), keeps those of one fix, found
by their content (:mod:`.scope`, :mod:`.contents`), refuses them when the
base plus them lacks the fix, checks their DCO sign-offs, runs
``vllm-patchkit test``, ``precommit`` and the upstream test's mutation
(:mod:`vllm_patchkit.judge.mutation.upstream_test`) for real on what the PR
sends (the base plus those commits), scoped to that fix, and
builds the title and the description from vLLM's template. It changes
nothing. ``submit`` then makes the branch (the fix's changes replayed on the
base, messages with upstream's trailers only, sign-offs added only with
``signoff=True``; a commit of the series' placeholder author is sent as the
submitter's), pushes it and runs ``gh pr create`` when gh is installed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.fixes import by_name
from vllm_patchkit import progress
from vllm_patchkit.git.checkout import (
    BASE_REF,
    busy_reason,
    committer_env,
    dirty_reason,
    open_checkout,
)
from vllm_patchkit.git.revs import (
    ArgumentError,
    check_ref_name,
    check_repository,
    check_revision,
)
from vllm_patchkit.git.series import Series
from vllm_patchkit.gitcmd import NO_HOOKS, Git
from vllm_patchkit.judge.mutation.upstream_test import measure_fix
from vllm_patchkit.judge.regression.by_fix import UPSTREAM
from vllm_patchkit.judge.tree_pytest import series_test_files
from vllm_patchkit.judge.verify import verify_tree
from vllm_patchkit.precommit import run_precommit
from vllm_patchkit.precommit.mirrors import repo_slug
from vllm_patchkit.precommit.runner import scratch_clone
from vllm_patchkit.present.reports import format_precommit, format_verify
from vllm_patchkit.pull_request.body import (
    RunRecord,
    claims_section,
    collapsed,
    details_section,
    fill_template,
    is_rocm_fix,
    load_template,
    overview_section,
    plan_section,
    pr_title,
    result_section,
    write_body,
)
from vllm_patchkit.pull_request.contents import (
    Carrier,
    NotReplayableError,
    in_tree,
    missing_patches,
    patch_carriers,
    replayed_tree,
    with_earlier_patches,
)
from vllm_patchkit.pull_request.scope import Scope, ScopeError, choose_fix
from vllm_patchkit.pull_request.signoff import (
    Identity,
    SeriesCommit,
    configured_identity,
    missing_signoffs,
    series_commits,
    split_trailers,
    upstream_message,
)

UPSTREAM_REPO = "vllm-project/vllm"
_REFERENCE = re.compile(r"vllm-project/vllm#(\d+)")
# gh's [HOST/]OWNER/REPO.
_GH_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+){1,2}$")


@dataclass
class CommitPlan:
    sha: str
    subject: str
    author: str
    missing_signoffs: list[str]
    signoff_added: str | None
    message: str
    """The message the PR branch gets."""
    found_by: str = ""
    """The series patch it carries and how it was found (by content)."""
    sent_as: str | None = None
    """The author the PR commit gets when not the commit's own: the
    submitter, for a commit of the series' placeholder author."""


@dataclass
class PullRequest:
    status: str
    """ready, checks-failed, fix-missing (the commits sent lack the fix),
    refused, submitted or error."""
    message: str
    checkout: str
    title: str = ""
    body: str = ""
    body_file: str | None = None
    template: str = ""
    branch: str = ""
    base_branch: str = "main"
    repo: str = UPSTREAM_REPO
    commits: list[CommitPlan] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    gh_command: list[str] = field(default_factory=list)
    head: str | None = None
    pushed_to: str | None = None
    url: str | None = None
    base_commit: str = ""
    fix: str | None = None
    """The registry name of the fix proposed (None: no commit is a series patch)."""
    left_out: list[str] = field(default_factory=list)
    """``sha subject`` of the commits after the base that are not the fix's."""
    measured: str | None = None
    """The PR's head commit ``test`` and ``precommit`` ran on (the base plus
    the fix's commits, as submit builds them); None when neither ran."""
    mutation: str | None = None
    """The upstream test's mutation figure on what the PR sends, or why it
    could not be measured; None when not asked or the fix declares no
    mutants. Evidence, not a gate."""

    @property
    def gh_command_line(self) -> str:
        return shlex.join(self.gh_command)


@dataclass(frozen=True)
class Options:
    signoff: bool = False
    run_test: bool = True
    run_precommit: bool = True
    run_mutation: bool = True
    """Measure the upstream test alone against the fix's mutants (slow;
    evidence beside ``test``'s, so the CLI's --no-test turns it off too)."""
    base: str | None = None
    branch: str | None = None
    base_branch: str = "main"
    repo: str = UPSTREAM_REPO
    remote: str = "origin"
    """Where --submit pushes; a fork's owner goes into gh's --head."""
    fix: str | None = None
    """The fix to propose (registry name); None: the only one the commits carry."""


def check_options(options: Options) -> None:
    """Refuse (exit 2) any user-given value that git or gh could read as an
    option or a remote helper, before anything runs."""
    check_repository(options.remote, "--remote")
    if options.branch is not None:
        check_ref_name(options.branch, "--branch")
    if options.base is not None:
        check_revision(options.base, "--base")
    check_ref_name(options.base_branch, "--upstream-branch")
    if not _GH_REPO.match(options.repo):
        raise ArgumentError(f"--repo {options.repo!r} is not [HOST/]OWNER/REPO")


def prepare_pull_request(path: Path, series: Series, options: Options) -> PullRequest:
    """Everything ``gh pr create`` needs; the checkout is not changed."""
    check_options(options)
    git = open_checkout(path)
    pr = PullRequest(
        "ready", "", str(git.root), base_branch=options.base_branch, repo=options.repo
    )
    scope = _collect(git, pr, options, series)
    if scope is None or pr.status != "ready":
        return pr
    commits, series = scope.commits, scope.series
    if options.run_test or options.run_precommit or options.run_mutation:
        with _sent_checkout(git, pr) as root:
            evidence = _measure(pr, root, series, options, len(commits))
            pr.body = _render_body(root, pr, commits, series, evidence)
    else:
        pr.body = _render_body(git.root, pr, commits, series, Evidence())
    pr.body_file = str(write_body(Path(pr.checkout), pr.branch, pr.body))
    pr.gh_command = [
        "gh", "pr", "create", "--repo", pr.repo, "--base", pr.base_branch,
        "--head", _gh_head(git, options.remote, pr.branch, pr.repo),
        "--title", pr.title, "--body-file", pr.body_file,
    ]  # fmt: skip
    failed = [r.title for r in pr.runs if r.returncode != 0]
    if failed:
        pr.status = "checks-failed"
        pr.message = f"not ready: {', '.join(failed)} failed"
    else:
        pr.message = f"{len(pr.commits)} commit(s) for {pr.repo}"
        if pr.fix is not None:
            pr.message += f": fix {pr.fix}"
    return pr


@contextmanager
def _sent_checkout(git: Git, pr: PullRequest) -> Iterator[Path]:
    """A clone of the checkout at the commits ``submit`` makes (their head
    in ``pr.measured``), the series base recorded there as apply records it.

    The Test Result is about what is sent, not the user's HEAD (other fixes'
    commits, their own work): ``test`` and ``precommit`` run in a throwaway
    shared clone (:func:`scratch_clone`, where ``precommit`` runs) at the
    same commit ids ``submit`` makes (same trees, parents, authors, dates and
    the user's identity as committer). The user's checkout is only read.
    """
    with scratch_clone(git.root) as tree:
        clone = Git(tree)
        for key in ("user.name", "user.email"):  # submit's committer
            value = git.run("config", key, check=False).stdout.strip()
            if value:
                clone.run("config", key, value)
        pr.measured = _build_commits(clone, pr)
        clone.run("update-ref", BASE_REF, pr.base_commit)
        clone.run(*NO_HOOKS, "checkout", "--quiet", "--detach", pr.measured)
        yield tree


def _collect(
    git: Git, pr: PullRequest, options: Options, series: Series
) -> Scope | None:
    """The fix's commits with their sign-off plan; refusals go into ``pr``."""
    reason = busy_reason(git) or dirty_reason(git)
    if reason:
        _stop(pr, f"{git.root}: refusing: {reason} (the PR is built from commits)")
        return None
    base = options.base or BASE_REF
    base_commit = git.commit_of(base)
    if base_commit is None:
        _stop(
            pr,
            f"{git.root}: no series base ({base}); run `vllm-patchkit apply` or "
            "`rebase` first, or pass --base",
        )
        return None
    pr.base_commit = base_commit
    commits = series_commits(git, pr.base_commit)
    if not commits:
        _stop(pr, f"no commits between {base} and HEAD: nothing to propose")
        return None
    carriers = patch_carriers(git, commits, series)
    try:
        scope = choose_fix(commits, series, options.fix, carriers)
    except ScopeError as error:
        _stop(pr, str(error))
        return None
    every, commits = commits, scope.commits
    pr.fix = scope.fix.name if scope.fix is not None else None
    pr.left_out = [f"{c.sha[:12]} {c.subject}" for c in scope.left_out]
    submitter = configured_identity(git)
    if submitter is None:
        _stop(
            pr,
            f"{git.root}: set git's user.name and user.email: every commit needs "
            "your Signed-off-by too (DCO)",
        )
        return None
    problems = _plan_commits(pr, commits, submitter, options.signoff)
    for plan in pr.commits:
        carrier = carriers.get(plan.sha)
        if carrier is not None:
            plan.found_by = f"{carrier.patch} ({carrier.how})"
    vendor = scope.fix is None or is_rocm_fix(scope.fix.record.source_file)
    pr.title = pr_title(commits[0].subject, vendor=vendor)
    pr.branch = options.branch or default_branch(pr.title)
    if problems:
        _stop(pr, "; ".join(problems))
    elif scope.fix is not None:
        _check_carried(git, pr, scope, carriers, every, series)
    return scope


def _check_carried(
    git: Git,
    pr: PullRequest,
    scope: Scope,
    carriers: dict[str, Carrier],
    every: list[SeriesCommit],
    series: Series,
) -> None:
    """Set ``fix-missing`` (exit 1) when the base plus the commits to send
    (after the series' earlier patches) lacks one of the fix's patches: a
    PR is never called fixed by a HEAD that holds commits it leaves out."""
    names = [patch.name for patch in scope.series.patches]
    read = with_earlier_patches(every, scope.commits, series, names, carriers)
    try:
        missing = missing_patches(
            git, pr.base_commit, read, scope.series.patches, carriers
        )
    except NotReplayableError as error:
        _stop(pr, str(error))
        return
    if not missing:
        return
    sent = ", ".join(f"{c.sha[:12]} {c.subject!r}" for c in scope.commits)
    undone = [
        f"{c.sha[:12]} {c.subject!r} undoes {carriers[c.sha].patch}"
        for c in scope.commits
        if c.sha in carriers and carriers[c.sha].undoes
    ]
    message = (
        f"the commits pr would send for {pr.fix} ({sent}) do not carry the fix: "
        f"on the base plus them{_after(read, scope.commits, carriers)}, "
        f"{'; '.join(missing)}"
        + (f"; {'; '.join(undone)}" if undone else "")
        + ". Put the fix's commit back (vllm-patchkit apply adds what is "
        "missing) or drop what undoes it; nothing was run or prepared"
    )
    _stop(pr, message, "fix-missing")


def _after(
    read: list[SeriesCommit], sent: list[SeriesCommit], carriers: dict[str, Carrier]
) -> str:
    """The series' earlier patches a fix's invariants were read after."""
    earlier = [carriers[c.sha].patch[:4] for c in read if c not in sent]
    return f" (after the series' {', '.join(earlier)})" if earlier else ""


def _measure(
    pr: PullRequest, root: Path, series: Series, options: Options, count: int
) -> Evidence:
    """Run the checks asked for on ``root``, the PR's own commits; the
    body's Test Result lines and the Claims they back."""
    what = f"the base plus {count} commit(s)"
    evidence = Evidence()
    if options.run_test:
        progress.step(f"pr: test on what the PR sends ({what})")
        _run_test(pr, root, series, evidence)
    if options.run_mutation and pr.fix in UPSTREAM:
        progress.step(f"pr: the upstream test against the fix's mutants ({what})")
        _run_mutation(pr, root, evidence)
    if options.run_precommit:
        progress.step(f"pr: vLLM's pre-commit on what the PR sends ({what})")
        _run_precommit(pr, root, series, evidence)
    return evidence


@dataclass
class Evidence:
    """What the runs showed, for the body."""

    results: list[str] = field(default_factory=list)
    """Test Result's lines (``  - `` lines nest under the one before)."""
    claims: list[str] = field(default_factory=list)
    """Claims, each backed by a line of :attr:`results`."""
    blocks: list[str] = field(default_factory=list)
    """Collapsed supporting output after the runs' own."""


def _render_body(
    root: Path,
    pr: PullRequest,
    commits: list[SeriesCommit],
    series: Series,
    evidence: Evidence,
) -> str:
    template, pr.template = load_template(root)
    numbers = {int(n) for c in commits for n in _REFERENCE.findall(c.message)}
    references = [f"vllm-project/vllm#{n}" for n in sorted(numbers)]
    messages = [
        (c.subject, "\n\n".join(split_trailers(p.message)[0][1:]))
        for c, p in zip(commits, pr.commits, strict=True)
    ]
    result = (
        result_section(pr.runs, evidence.results)
        if evidence.results or pr.runs
        else "Not run: the checks were skipped (--no-test, --no-precommit)."
    )
    if evidence.blocks:
        result += "\n\n" + "\n\n".join(evidence.blocks)
    sections = {
        "Purpose": overview_section(messages, references),
        "Claims": claims_section(commits[0].subject, evidence.claims),
        "Test Plan": plan_section(_plan_commands(root, series)),
        "Test Result": result,
        "Details": details_section(messages, pr.fix),
    }
    return fill_template(template, sections)


def _gh_head(git: Git, remote: str, branch: str, repo: str) -> str:
    """``OWNER:branch`` when ``remote`` is a fork of ``repo``, else ``branch``.

    gh reads a bare branch name as a branch of the target repository.
    """
    proc = git.run("remote", "get-url", "--", remote, check=False)
    url = proc.stdout.strip()
    if proc.returncode != 0 or url.startswith(("/", ".", "file:")):
        return branch  # a local repository has no owner on the server
    slug = repo_slug(url)
    if slug is None or slug.lower() == repo.lower():
        return branch
    return f"{slug.partition('/')[0]}:{branch}"


def submit(pr: PullRequest, remote: str) -> PullRequest:
    """Create the branch, push it to ``remote`` and run gh; fail closed."""
    if pr.status != "ready":
        return pr
    check_repository(remote, "--remote")
    check_ref_name(pr.branch, "--branch")
    git = Git(Path(pr.checkout))
    existing = git.commit_of(f"refs/heads/{pr.branch}")
    head = _build_commits(git, pr)
    if pr.measured is not None and head != pr.measured:
        return _stop(
            pr,
            f"the branch's commits ({head[:12]}) are not those test and "
            f"precommit ran on ({pr.measured[:12]}); nothing was created",
            "error",
        )
    if existing is not None and existing != head:
        message = f"branch {pr.branch} exists with other commits; delete it or "
        return _stop(pr, message + "pass --branch")
    if existing is None:
        # The empty old value makes git refuse if the branch appeared meanwhile.
        git.run("update-ref", f"refs/heads/{pr.branch}", head, "")
    pr.head = head
    refspec = f"refs/heads/{pr.branch}:refs/heads/{pr.branch}"
    push = git.run("push", "--quiet", "--end-of-options", remote, refspec, check=False)
    if push.returncode != 0:
        return _stop(
            pr,
            f"branch {pr.branch} created, but pushing it to {remote} failed: "
            f"{push.stderr.strip()}",
            "error",
        )
    pr.pushed_to = remote
    gh = shutil.which("gh")
    if gh is None:
        return _stop(
            pr,
            f"branch {pr.branch} is ready, but gh is not installed; open the PR "
            f"with: {pr.gh_command_line}",
            "error",
        )
    proc = subprocess.run(
        [gh, *pr.gh_command[1:]], cwd=pr.checkout, capture_output=True, text=True
    )
    if proc.returncode != 0:
        failed = (proc.stderr or proc.stdout).strip()
        return _stop(pr, f"gh pr create failed: {failed}", "error")
    pr.status = "submitted"
    pr.url = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else None
    pr.message = f"opened {pr.url or 'the pull request'} from {pr.branch}"
    return pr


def default_branch(title: str) -> str:
    words = re.sub(r"^(\[[^\]]+\])+\s*", "", title).lower()
    slug = re.sub(r"[^a-z0-9]+", "-", words).strip("-")[:48].rstrip("-")
    return f"vllm-overlay/{slug or 'series'}"


def _plan_commits(
    pr: PullRequest,
    commits: list[SeriesCommit],
    submitter: Identity,
    signoff: bool,
) -> list[str]:
    """Record each commit's sign-off state and upstream message; the problems."""
    problems = []
    for commit in commits:
        missing = missing_signoffs(commit, submitter)
        author_missing = any(m.startswith("author ") for m in missing)
        adds = signoff and bool(missing)
        if author_missing and not submitter.same(commit.author):
            problems.append(
                f"{commit.sha[:12]} {commit.subject!r} lacks its author's sign-off "
                f"({commit.author}); only the author can certify it (DCO)"
            )
        elif missing and not signoff:
            problems.append(
                f"{commit.sha[:12]} {commit.subject!r} lacks Signed-off-by of "
                f"{' and '.join(missing)}; pass --signoff to add "
                f"'Signed-off-by: {submitter}'"
            )
        pr.commits.append(
            CommitPlan(
                sha=commit.sha,
                subject=commit.subject,
                author=str(commit.author),
                missing_signoffs=missing,
                signoff_added=str(submitter) if adds else None,
                message=upstream_message(commit.message, submitter if adds else None),
                sent_as=str(submitter) if commit.placeholder else None,
            )
        )
    return problems


def _run_test(pr: PullRequest, root: Path, series: Series, evidence: Evidence) -> None:
    """The toolkit's suite gates the PR; only the upstream test's pytest
    results, which a reviewer reproduces from the PR, go into the body."""
    result = verify_tree(root, series)
    code = result.verdict.exit_code
    label = by_name(pr.fix).pr if pr.fix else None  # the fix's word in verdicts
    pr.runs.append(
        RunRecord("vllm-patchkit test", "vllm-patchkit test .", code,
                  in_tree(format_verify(result, label), root))
    )  # fmt: skip
    tests = {}
    for run, where in ((result.before, "without"), (result.after, "with")):
        test = run.upstream_test if run is not None else None
        if test is not None:
            tests[where] = test
            evidence.results.append(
                f"`pytest {' '.join(test.files)}` {where} the fix: {test.summary}."
            )
            evidence.results += [f"  - `{f}`" for f in sorted(test.failures)]
    before, after = tests.get("without"), tests.get("with")
    if code == 0 and after is not None:
        claim = f"`{' '.join(after.files)}` passes with the fix ({after.summary})"
        if before is not None:
            claim += f" and fails without it ({before.summary})"
        evidence.claims.append(claim + ".")


def _run_mutation(pr: PullRequest, root: Path, evidence: Evidence) -> None:
    """The upstream test alone against the fix's mutants: a figure for the
    body, not a gate (a surviving mutant is named, with what it changes)."""
    assert pr.fix is not None
    try:
        report = measure_fix(root, pr.fix, pr.base_commit)
    except Exception as exc:  # evidence: an honest "not measured", never a crash
        pr.mutation = f"could not run: {exc}"
        evidence.results.append(
            f"Mutation of the fix against the added test: not measured ({exc})."
        )
        return
    pr.mutation = report.line
    survivors = [r for r in report.runs if not r.killed]
    line = f"`{' '.join(report.files)}` alone kills {report.killed} of "
    line += f"{len(report.runs)} mutants of the fix (each listed below"
    line += f"; SURVIVED: the {len(survivors)} it passes" if survivors else ""
    if report.equivalent:
        more = len(report.equivalent)
        line += (
            f"; {more} more {'is' if more == 1 else 'are'} the fix's own "
            "program, listed as equivalent and not counted"
        )
    evidence.results.append(line + ").")
    evidence.claims.append(
        f"The added test alone kills {report.killed} of {len(report.runs)} "
        "mutants of the fix" + (" (survivors in Test Result)." if survivors else ".")
    )
    rows = [
        f"{'killed' if r.killed else 'SURVIVED':8} {r.name}: {r.description}"
        for r in report.runs
    ]
    rows += [f"{'same':8} {line}" for line in report.equivalent]
    summary = "The mutants: the fixed file with one change, through the added test"
    evidence.blocks.append(collapsed(summary, rows))


def _run_precommit(
    pr: PullRequest, root: Path, series: Series, evidence: Evidence
) -> None:
    result = run_precommit(root, series.files())
    shown = _precommit_command(series)
    pr.runs.append(
        RunRecord(
            "vllm-patchkit precommit",
            "vllm-patchkit precommit .",
            0 if result.passed else 1,
            in_tree(format_precommit(result), root),
            shown=shown,
        )
    )
    passed, failed = result.count("passed"), result.count("failed")
    evidence.results.append(
        f"vLLM's pre-commit hooks on the changed files: {passed} passed, "
        f"{failed} failed (the rest do not apply to these files)."
    )
    if result.passed:
        evidence.claims.append("vLLM's pre-commit hooks pass on the changed files.")


def _plan_commands(root: Path, series: Series) -> list[str]:
    """Upstream's own commands for the PR: pytest on the test files it adds,
    vLLM's pre-commit on the files it changes (never this toolkit)."""
    tests = [name for name in series_test_files(series) if (root / name).is_file()]
    return [*(f"pytest {name} -v" for name in tests), _precommit_command(series)]


def _precommit_command(series: Series) -> str:
    return f"pre-commit run --files {' '.join(series.files())}"


def _build_commits(git: Git, pr: PullRequest) -> str:
    """The PR commits: the same trees on the same base, upstream messages.

    Author (the submitter for the series' placeholder) and both dates are
    kept, so the same plan always gives the same commits and a second submit
    finds its branch unchanged.
    """
    parent = pr.base_commit
    fmt = "%x1f".join(["%T", "%P", "%an", "%ae", "%aI", "%cI"])
    # A replay goes through a scratch index: the checkout's is not touched.
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-pr-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        for plan in pr.commits:
            fields = git.out("log", "-1", f"--format={fmt}", plan.sha).split("\x1f")
            tree, parents, name, email, author_date, committer_date = fields
            if plan.sent_as is not None:  # the placeholder is no one: the submitter's
                name, _, email = plan.sent_as.rpartition(" <")
                email = email.removesuffix(">")
            if parents != parent:  # another fix's commit came between: replay
                tree = replayed_tree(git, parent, plan.sha, index)
            env = {
                **committer_env(git),
                "GIT_AUTHOR_NAME": name,
                "GIT_AUTHOR_EMAIL": email,
                "GIT_AUTHOR_DATE": author_date,
                "GIT_COMMITTER_DATE": committer_date,
            }
            parent = git.run(
                "commit-tree", tree, "-p", parent, "-F", "-",
                input_text=plan.message, env=env,
            ).stdout.strip()  # fmt: skip
    return parent


def _stop(pr: PullRequest, message: str, status: str = "refused") -> PullRequest:
    pr.status, pr.message = status, message
    return pr
