"""Turn one ``vllm-patchkit rebase --json`` result into the nightly job's texts.

The nightly workflow (``.github/workflows/rebase-upstream.yml``, through
``tools/ci/rebase-series.sh``) calls this right after the rebase, while
``patches/`` still holds the series it started from, so the trailers of a
patch dropped as upstreamed (``Invariant``, ``Applied-Upstream``) can still be
read. It writes into OUT:

* ``pr-title.txt``, ``pr-body.md``: the pull request that carries the
  refreshed ``patches/``; both name every patch dropped as upstreamed and why;
* ``commit-message.txt``: the bot branch's commit message (the same record);
* ``issue-title.txt``, ``issue-body.md``: the conflict report. The title
  depends on the upstream repository and ref only (``tools/ci/gate_report.py``
  uses the same one when a check fails after a clean rebase), so the job finds
  the open issue of an earlier night and comments on it instead of opening
  another.

and prints ``key=value`` lines for ``$GITHUB_OUTPUT``: ``status``, ``applied``
and ``dropped`` (counts) and ``branch`` (the bot branch for this upstream).

``tools/ci/nightly-rebase`` runs it again after ``vllm-patchkit refresh``
with ``--refreshed DIR`` (the refreshed series): the PR texts then say what
merging really changes. A patch upstream carries at the ref but the refresh
keeps (older releases in its ``Affects:`` range still need it) is named as
kept, not dropped, and each ``Affects:`` or ``Applied-Upstream:`` trailer the
refresh rewrote is listed, old and new.

    python tools/ci/rebase_report.py --rebase-json OUT/rebase.json \\
        --summary OUT/rebase-summary.md --repo vllm-project/vllm --ref main \\
        --out OUT
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_patchkit.git.series import SeriesError, inside, parse_patch, series_entries
from vllm_patchkit.paths import PATCHES_DIR
from vllm_patchkit.present.tables import markdown_table

STATUS_BY_EXIT = {0: "rebased", 2: "refused", 3: "error", 4: "conflict"}
GATES = (
    "`vllm-patchkit precommit`: vLLM's own pre-commit hooks on the rebased checkout",
    "`vllm-patchkit test`: the regression suite on the rebased checkout",
    (
        "`vllm-patchkit pr --fix NAME --dry-run`, for each fix the series "
        "carries: every commit of its pull request carries a DCO "
        "`Signed-off-by` (skipped when no patch is left)"
    ),
    "`vllm-patchkit refresh`, then this repository's pre-commit on the result",
)


@dataclass(frozen=True)
class Dropped:
    """A patch the rebase dropped because upstream carries it."""

    name: str
    subject: str
    why: str


@dataclass(frozen=True)
class RangeChange:
    """A range trailer of one patch that the refresh rewrote."""

    name: str
    key: str
    old: str | None
    new: str | None

    def line(self) -> str:
        def said(value: str | None) -> str:
            return "none" if value is None else f"`{self.key}: {value}`"

        return f"- `{self.name}`: {said(self.old)} -> {said(self.new)}"


RANGE_TRAILERS = ("Affects", "Applied-Upstream")


@dataclass(frozen=True)
class Report:
    status: str
    repo: str
    ref: str
    onto: str
    message: str
    patches: list[dict[str, Any]]
    dropped: list[Dropped]
    summary: str
    run_url: str
    kept: list[Dropped] = field(default_factory=list)
    """Upstream carries them at the ref; the refreshed series keeps them."""
    ranges: list[RangeChange] = field(default_factory=list)

    @property
    def short(self) -> str:
        return self.onto[:12] if self.onto else "unknown commit"

    @property
    def target(self) -> str:
        return f"{self.repo} `{self.ref}`"

    @property
    def applied(self) -> int:
        return sum(p.get("status") == "applied" for p in self.patches)


def bot_branch(repo: str, ref: str) -> str:
    """One bot branch (so one pull request) per upstream repository and ref."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{repo}-{ref}").strip("-.")
    return f"bot/rebase-{slug or 'upstream'}"


def why_dropped(patch: dict[str, Any], patches_dir: Path, target: str) -> Dropped:
    """Name, subject and reason, from the JSON and the patch's own trailers."""
    name = str(patch.get("name", "?"))
    detail = str(patch.get("detail") or "dropped: upstream carries it")
    why = f"{target} carries it ({detail.removeprefix('dropped: ')})"
    subject = ""
    try:
        # The name comes from the rebase's JSON: read only a patch file that
        # is directly in the series directory.
        parsed = parse_patch(inside(patches_dir, name))
    except SeriesError:
        parsed = None
    if parsed is not None:
        subject = parsed.subject
        if parsed.invariant:
            why = (
                f"{target} carries it: the rebase found the patch's commit in "
                f"upstream's history or its invariant `{parsed.invariant}` "
                "already holding there"
            )
        applied_upstream = parsed.trailer("Applied-Upstream")
        if applied_upstream:
            why += f"; the patch records Applied-Upstream: {applied_upstream}"
    return Dropped(name, subject, why)


def read_result(rebase_json: Path | None) -> dict[str, Any]:
    """The rebase's JSON result; empty when there is none or it is unreadable."""
    try:
        result = json.loads(rebase_json.read_text()) if rebase_json else {}
    except (OSError, ValueError):
        return {}
    return result if isinstance(result, dict) else {}


def listed(directory: Path) -> list[str]:
    """The patch names ``directory/series`` lists; none when it is unreadable."""
    try:
        entries = series_entries(directory / "series")
    except (OSError, SeriesError):
        return []
    return [name for _, name in entries if name is not None]


def range_changes(before: Path, after: Path) -> list[RangeChange]:
    """Each range trailer that differs between a patch in both directories."""
    changes = []
    for name in listed(after):
        try:
            old = parse_patch(inside(before, name))
            new = parse_patch(inside(after, name))
        except (OSError, SeriesError):
            continue  # a new patch, or one that cannot be read: nothing to compare
        for key in RANGE_TRAILERS:
            if old.trailer(key) != new.trailer(key):
                changes.append(
                    RangeChange(name, key, old.trailer(key), new.trailer(key))
                )
    return changes


def load_report(args: argparse.Namespace) -> Report:
    result = read_result(args.rebase_json)
    status = str(result.get("status") or STATUS_BY_EXIT.get(args.exit_code, "error"))
    patches = [p for p in result.get("patches") or [] if isinstance(p, dict)]
    summary = ""
    if args.summary is not None and args.summary.is_file():
        summary = args.summary.read_text().strip()
    upstreamed = [
        why_dropped(p, args.patches, f"upstream {args.repo} `{args.ref}`")
        for p in patches
        if p.get("status") == "upstreamed"
    ]
    kept: list[Dropped] = []
    ranges: list[RangeChange] = []
    if args.refreshed is not None:
        still = set(listed(args.refreshed))
        kept = [d for d in upstreamed if d.name in still]
        upstreamed = [d for d in upstreamed if d.name not in still]
        ranges = range_changes(args.patches, args.refreshed)
    return Report(
        status=status,
        repo=args.repo,
        ref=args.ref,
        onto=str(result.get("onto") or ""),
        message=str(
            result.get("message")
            or result.get("error")  # the CLI's JSON when it refused or failed
            or "vllm-patchkit rebase gave no result"
        ),
        patches=patches,
        dropped=upstreamed,
        summary=summary,
        run_url=args.run_url,
        kept=kept,
        ranges=ranges,
    )


def pr_title(report: Report) -> str:
    title = f"Rebase the patch series onto {report.repo} {report.ref} ({report.short})"
    if report.dropped:
        names = ", ".join(d.name for d in report.dropped)
        title += f"; drop upstreamed {names}"
    if report.ranges:
        names = ", ".join(dict.fromkeys(c.name[:4] for c in report.ranges))
        title += f"; new release ranges of {names}"
    return title


def dropped_lines(drops: list[Dropped]) -> list[str]:
    """Markdown list entries (the commit message strips them: :func:`_entry`)."""
    return [
        f"- `{d.name}`" + (f' ("{d.subject}")' if d.subject else "") + f": {d.why}"
        for d in drops
    ]


def merge_meaning(report: Report) -> list[str]:
    """What merging a drop does, and does not do, in plain words."""
    names = ", ".join(f"`{d.name}`" for d in report.dropped)
    return [
        "### What merging this means",
        "",
        (
            f"- This repository stops carrying {names} in `patches/`: the series "
            f"becomes the one for {report.target}, and the file(s) are deleted "
            "here."
        ),
        (
            "- The series for older releases is not lost: it stays in git history "
            "(`patches/` as of the commit before this PR, on the default branch); "
            "check that commit out to get it back."
        ),
        (
            "- The `vllm_overlay` package is not changed by this PR: it still "
            "fixes installed affected releases at start-up."
        ),
        (
            "- The comment lines of `patches/series` (the `# Base:` line and what "
            "it says about each patch) are kept as they were. If they describe a "
            "dropped patch or a release range that no longer holds, edit them on "
            "this branch before merging."
        ),
        "",
    ]


def pr_body(report: Report) -> str:
    parts = [
        (
            f"Nightly rebase of `patches/` onto {report.target} at `{report.onto}`: "
            f"{report.applied} patch(es) replayed, {len(report.dropped)} dropped as "
            "upstreamed."
        ),
        "",
    ]
    if report.dropped:
        parts += [
            "### Dropped as upstreamed",
            "",
            *dropped_lines(report.dropped),
            "",
            *merge_meaning(report),
        ]
    parts += kept_and_ranges(report, markdown=True)
    parts += [report.summary or report.message, ""]
    parts += [
        "### Checks that passed before this was pushed",
        "",
        *(f"- {gate}" for gate in GATES),
        "",
    ]
    return document(parts, report.run_url)


def kept_and_ranges(report: Report, markdown: bool) -> list[str]:
    """The upstreamed patches the refresh kept, and the ranges it rewrote."""
    parts = []
    if report.kept:
        parts += [
            "### Upstreamed, kept for older releases" if markdown else "Kept:",
            "",
            (
                "Upstream carries these at the new base, and the series keeps "
                "them: older releases in their `Affects:` range still need them."
            ),
            "",
            *dropped_lines(report.kept),
            "",
        ]
    if report.ranges:
        parts += [
            "### Release ranges" if markdown else "Release ranges:",
            "",
            (
                "The refresh read each patch's code on the new base: still "
                "buggy there, its range goes on; fixed there, the range closes "
                "and `Applied-Upstream:` names the release."
            ),
            "",
            *(change.line() for change in report.ranges),
            "",
        ]
    return parts


def document(parts: list[str], run_url: str) -> str:
    """Markdown lines as one text, ending with the workflow run's link."""
    text = "\n".join(parts).rstrip()
    return text + (f"\n\nWorkflow run: {run_url}\n" if run_url else "\n")


def _wrap(text: str) -> str:
    return textwrap.fill(text, width=72, break_on_hyphens=False)


def _entry(line: str) -> str:
    """A Markdown list entry as commit message text: no backquotes, and no
    word (a path, a URL) broken."""
    return textwrap.fill(
        line.replace("`", ""),
        width=72,
        subsequent_indent="  " if line.startswith("- ") else "",
        break_long_words=False,
        break_on_hyphens=False,
    )


def commit_message(report: Report) -> str:
    if report.dropped:
        subject = "Drop upstreamed " + ", ".join(d.name for d in report.dropped)
    else:
        subject = f"Rebase the patch series onto {report.repo} {report.ref}"
    paragraphs = [
        _wrap(
            f"Nightly rebase of patches/ onto {report.repo} {report.ref} at "
            f"{report.onto}: {report.applied} patch(es) replayed, "
            f"{len(report.dropped)} dropped as upstreamed. Committed only after "
            "vLLM's pre-commit, the regression suite, the sign-off check and "
            "this repository's pre-commit passed on the result."
        )
    ]
    if report.dropped:
        entries = [_entry(line) for line in dropped_lines(report.dropped)]
        paragraphs.append("\n".join(["Dropped as upstreamed:", *entries]))
        paragraphs.append(
            _wrap(
                "This repository stops carrying the dropped patch(es) in "
                "patches/; the series for older releases stays in git history "
                "(patches/ as of the commit before this one), and the "
                "vllm_overlay package still fixes installed affected releases."
            )
        )
    extra = [_entry(line) for line in kept_and_ranges(report, markdown=False)]
    if extra:
        paragraphs.append("\n".join(extra).strip())
    return subject + "\n\n" + "\n\n".join(paragraphs) + "\n"


def issue_title(repo: str, ref: str) -> str:
    """One issue per upstream repository and ref, whatever failed.

    No commit id and no cause: the same title every night, so the job comments
    on the open issue instead of opening one per run (a conflict one night and
    a failing check the next land in the same issue).
    """
    return f"Nightly rebase onto {repo} {ref} fails"


def _quoted(patch: dict[str, Any], key: str) -> str:
    return ", ".join(f"`{item}`" for item in patch.get(key) or []) or "-"


def issue_opening(target: str, onto: str, what: str) -> str:
    """The first sentence of either issue: what stopped, and that nothing moved."""
    return (
        f"The nightly rebase of `patches/` onto {target} (`{onto or 'unknown'}`) "
        f"{what}. Nothing was pushed; the series on the default branch is unchanged."
    )


def issue_body(report: Report) -> str:
    parts = [
        issue_opening(report.target, report.onto, f"stopped: **{report.status}**"),
        "",
        report.message,
        "",
    ]
    rows = [
        (
            f"`{patch.get('name', '?')}`",
            _quoted(patch, "files"),
            _quoted(patch, "hunks"),
        )
        for patch in report.patches
        if patch.get("status") == "conflict"
    ]
    parts += markdown_table(("patch", "files", "conflicting hunks"), rows)
    if report.summary:
        parts += ["", report.summary]
    return document(parts, report.run_url)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rebase-json", type=Path, required=True)
    parser.add_argument("--summary", type=Path, help="the rebase's Markdown summary")
    parser.add_argument("--repo", required=True, help="upstream owner/name")
    parser.add_argument("--ref", required=True, help="the upstream ref rebased onto")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--patches", type=Path, default=PATCHES_DIR)
    parser.add_argument(
        "--refreshed",
        type=Path,
        help="the series after `vllm-patchkit refresh`, for what merging changes",
    )
    parser.add_argument("--run-url", default="")
    parser.add_argument(
        "--exit-code", type=int, default=3, help="the rebase's exit status"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = load_report(args)
    args.out.mkdir(parents=True, exist_ok=True)
    texts = {
        "pr-title.txt": pr_title(report) + "\n",
        "pr-body.md": pr_body(report),
        "commit-message.txt": commit_message(report),
        "issue-title.txt": issue_title(report.repo, report.ref) + "\n",
        "issue-body.md": issue_body(report),
    }
    for name, text in texts.items():
        (args.out / name).write_text(text)
    print(f"status={report.status}")
    print(f"applied={report.applied}")
    print(f"dropped={len(report.dropped)}")
    print(f"branch={bot_branch(report.repo, report.ref)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
