"""``vllm-patchkit pr``: prepare the upstream pull request for one fix."""

from __future__ import annotations

import argparse

from vllm_patchkit.commands import lazy_help
from vllm_patchkit.commands.common import (
    EXIT_CODES_HELP,
    add_command,
    add_json,
    add_path,
    emit,
)
from vllm_patchkit.errors import EXIT_BY_STATUS

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from vllm_patchkit.pull_request import PullRequest


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    from vllm_patchkit.pull_request import UPSTREAM_REPO
    from vllm_patchkit.pull_request.scope import fix_names

    parser.set_defaults(repo=UPSTREAM_REPO)
    for action in parser._actions:  # argparse keeps its actions only here
        if action.dest == "fix":
            action.help = f"{action.help}; the fixes: {fix_names()}"


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "pr",
        help="prepare one fix's upstream PR: sign-offs, title, body, gh command",
        description=(
            "Build the upstream pull request for one fix from the series' commits "
            "in a vLLM checkout (the commits after the base recorded by apply or "
            "rebase). Upstream takes one fix per PR: each commit is matched to "
            "its series patch by its content (the patch's patch-id, else its "
            "files and invariant; never its subject) and that patch to its fix "
            "in the registry (vllm_overlay.fixes), and only the chosen fix's "
            "commits are proposed, replayed on the base; --fix names it, and may "
            "be left out when the commits carry one fix's patches only (several: "
            "exit 2, naming them). When the base plus those commits lacks the "
            "fix (its invariant does not hold there), pr stops: exit 1. `test`, "
            "`precommit` and the mutation of the fix against its upstream test "
            "then run on what the PR sends (a scratch clone at the base plus "
            "those commits, never HEAD), scoped to that fix. The commits sent "
            "carry upstream's trailers only: this project's (Origin, Bug, "
            "Forwarded, Applied-Upstream, Affects, Invariant) and the series' "
            "placeholder sign-off (vllm-overlay developers "
            "<dev@vllm-overlay.invalid>) are removed; a commit of that "
            "placeholder author is sent as yours (git's user.name/user.email), "
            "signed off by you alone. Every other commit must carry a DCO "
            "Signed-off-by of its author, and each one yours; --signoff adds "
            "yours, nothing else does. The title gets vLLM's [Bugfix] prefix, "
            "and [ROCm] for a fix of ROCm code (a vllm rocm_* module); the body "
            "is the checkout's .github/PULL_REQUEST_TEMPLATE.md (or a built-in "
            "one) with every section filled: the overview from the fix "
            "commit, Claims backed by the runs, a Test Plan of upstream's own "
            "commands (pytest on the test files the PR adds, pre-commit), Test "
            "Result from those runs (the added test before and after the fix, "
            "the mutation figure, vLLM's hooks) and Details from the fix's "
            "reviewer notes or the commit messages; `vllm-patchkit test` gates "
            "the PR but stays out of the body. The default is a dry run that "
            "changes nothing and prints the `gh pr create` command; --submit "
            "creates the branch, pushes it to --remote and runs gh when it is "
            "installed."
        ),
        epilog=EXIT_CODES_HELP
        + "  (pr: 1 = test or precommit failed, or the commits lack the fix; "
        "2 = a sign-off is missing)\n",
        add_help=False,
    )
    lazy_help(parser, _show_defaults)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run",
        action="store_true",
        help="change nothing; print title, body and gh command (the default)",
    )
    mode.add_argument(
        "--submit",
        action="store_true",
        help="create the branch, push it and run `gh pr create`",
    )
    parser.add_argument(
        "--signoff",
        action="store_true",
        help="add your Signed-off-by to commits that lack it (DCO); the "
        "series' placeholder commits are sent as yours",
    )
    parser.add_argument(
        "--fix",
        metavar="NAME",
        help="the fix to propose (default: the only fix the commits carry)",
    )
    parser.add_argument("--branch", help="PR branch name (default: from the title)")
    parser.add_argument(
        "--base", metavar="REV", help="series base (default: the one apply recorded)"
    )
    parser.add_argument(
        "--upstream-branch",
        default="main",
        help="branch the PR targets (default: %(default)s)",
    )
    parser.add_argument(
        "--repo",
        help="repository the PR targets (default: %(default)s)",
    )
    parser.add_argument(
        "--remote",
        default="origin",
        help="where --submit pushes the branch (default: %(default)s)",
    )
    parser.add_argument(
        "--no-test", action="store_true", help="do not run `vllm-patchkit test`"
    )
    parser.add_argument(
        "--no-precommit",
        action="store_true",
        help="do not run `vllm-patchkit precommit`",
    )
    parser.add_argument(
        "--no-mutation",
        action="store_true",
        help="do not measure the upstream test alone against the fix's mutants "
        "(minutes: one pytest run per mutant; --no-test skips it too); the body "
        "then has no such figure",
    )
    add_path(parser)
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from vllm_patchkit.git.series import load_series
    from vllm_patchkit.pull_request import (
        UPSTREAM_REPO,
        Options,
        prepare_pull_request,
        submit,
    )

    options = Options(
        signoff=args.signoff,
        run_test=not args.no_test,
        run_precommit=not args.no_precommit,
        run_mutation=not (args.no_mutation or args.no_test),
        base=args.base,
        branch=args.branch,
        base_branch=args.upstream_branch,
        repo=args.repo or UPSTREAM_REPO,
        remote=args.remote,
        fix=args.fix,
    )
    pr = prepare_pull_request(args.path, load_series(args.patches), options)
    if args.submit:
        pr = submit(pr, args.remote)
    payload = {**asdict(pr), "gh_command_line": pr.gh_command_line}
    emit(args, payload, lambda: format_pr(pr, submitted=args.submit))
    return EXIT_BY_STATUS[pr.status]


def format_pr(pr: PullRequest, *, submitted: bool) -> str:
    lines = []
    for commit in pr.commits:
        state = "signed off"
        if commit.signoff_added:
            state = f"adds Signed-off-by: {commit.signoff_added}"
        elif commit.missing_signoffs:
            state = f"MISSING sign-off of {' and '.join(commit.missing_signoffs)}"
        if commit.sent_as:
            state += f"; sent as {commit.sent_as}'s (the series' placeholder author)"
        lines.append(f"  {commit.sha[:12]} {commit.subject}: {state}")
    for left in pr.left_out:
        lines.append(f"  {left}: left out (not {pr.fix}'s)")
    for record in pr.runs:
        verdict = "passed" if record.returncode == 0 else "FAILED"
        lines.append(f"  {record.command}: {verdict} (exit {record.returncode})")
    if pr.mutation is not None:
        lines.append(f"  upstream test mutation: {pr.mutation}")
    if pr.title:
        if pr.fix is not None:
            lines.append(f"fix:    {pr.fix}")
        lines += [f"title:  {pr.title}", f"branch: {pr.branch}"]
    if pr.body:
        lines += [f"body ({pr.template}), also in {pr.body_file}:", "", pr.body]
    if pr.gh_command and not submitted:
        lines += ["dry run: nothing was changed. To open the PR:", pr.gh_command_line]
    lines.append(f"{pr.status}: {pr.message}")
    return "\n".join(lines)
