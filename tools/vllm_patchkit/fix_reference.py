"""The fixes' facts in the docs, rendered from the fix registry.

Which fixes the series and the overlay carry, for which releases, which
upstream release fixed each, the name that switches it off and when the
overlay can go: written once, in each fix's record
(:mod:`vllm_overlay.fixes`) and its patches' subjects, and rendered here into
marked regions of the pages that state them. A test renders them again and
fails when a page and the registry disagree, so a new fix, or a fix that
upstream takes, reaches every page or none. Regenerate with
``python -m vllm_patchkit.fix_reference``.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.fixes import FIXES
from vllm_overlay.fixes.base import Fix
from vllm_overlay.releases import Release, parse_release
from vllm_patchkit.git.series import Patch, load_series
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.present.tables import markdown_code, markdown_table, markdown_text

PAGES = tuple(
    PROJECT_ROOT / name
    for name in (
        "README.md",
        "docs/index.md",
        "docs/operators.md",
        "docs/reference/settings.md",
    )
)
"""The pages that carry generated regions (each at least one)."""

COMMAND = "python -m vllm_patchkit.fix_reference"
_REGION = re.compile(
    r"(?P<start><!-- generated: fix (?P<kind>[a-z]+) "
    + re.escape(f"({COMMAND})")
    + r" -->\n).*?(?P<end><!-- generated: fix (?P=kind) end -->)",
    re.DOTALL,
)


@dataclass(frozen=True)
class Facts:
    """One fix as the docs state it."""

    label: str
    """How reports name it (:attr:`Fix.pr <vllm_overlay.fixes.base.Fix.pr>`)."""
    what: str
    """Its first patch's subject, without the ``[Bugfix]`` tags."""
    patches: tuple[str, ...]
    """Its patches' numbers (``0001``)."""
    upstream_pr: str | None
    affected: str
    fixed_in: Release | None
    """The first release whose code the fix leaves alone; None: no release yet."""
    disable_name: str


def _subject(patches: tuple[Patch, ...], fix: Fix) -> str:
    """Its first patch's subject without the ``[Bugfix]`` tags (a fix the
    series has no patch for: its target)."""
    if not patches:
        return fix.record.target
    return re.sub(r"^(\[[^\]]*\]\s*)+", "", patches[0].subject).strip()


def facts(fixes: tuple[Fix, ...] = FIXES) -> list[Facts]:
    """Each fix's facts, in the registry's order."""
    series = load_series()
    found = []
    for fix in fixes:
        patches = series.of_fix(fix)
        found.append(
            Facts(
                label=fix.pr,
                what=_subject(patches, fix),
                patches=tuple(p.name.split("-", 1)[0] for p in patches),
                upstream_pr=fix.pr if fix.pr.startswith("#") else None,
                affected=fix.record.affected_text,
                fixed_in=parse_release(fix.record.inert_from),
                disable_name=fix.name,
            )
        )
    return found


def _can_go(fact: Facts) -> str:
    if fact.fixed_in is None:
        return "not yet: no vLLM release fixes it"
    return f"once the oldest vLLM you run is {fact.fixed_in} or newer"


def table(found: list[Facts]) -> list[str]:
    rows = [
        (
            markdown_text(fact.label),
            markdown_text(fact.what),
            ", ".join(fact.patches),
            f"vLLM {fact.upstream_pr}" if fact.upstream_pr else "none yet",
            fact.affected,
            str(fact.fixed_in) if fact.fixed_in else "no release yet",
            markdown_code(fact.disable_name),
            _can_go(fact),
        )
        for fact in found
    ]
    heads = (
        "fix",
        "what it fixes",
        "patches",
        "upstream PR",
        "releases affected",
        "fixed upstream in",
        "`VLLM_OVERLAY_DISABLE` name",
        "this fix can go",
    )
    return markdown_table(heads, rows)


def _names(labels: list[str]) -> str:
    if len(labels) == 1:
        return labels[0]
    return ", ".join(labels[:-1]) + " and " + labels[-1]


def removal(found: list[Facts]) -> list[str]:
    """When the whole overlay can go: once every fix is inert on the oldest
    vLLM you run, which the newest "fixed upstream in" decides. One
    paragraph, under every copy of the table, so that no row is read as
    the overlay's."""
    rule = (
        "The overlay as a whole can go only once every fix in it is inert on "
        "the oldest vLLM you run, that is, once that vLLM carries each fix "
        "itself."
    )
    open_fixes = [fact.label for fact in found if fact.fixed_in is None]
    if open_fixes:
        verb = "is" if len(open_fixes) == 1 else "are"
        when = (
            f"Not yet: {_names(open_fixes)} {verb} not fixed upstream in any "
            "vLLM release, so keep the overlay installed on every release "
            "the table lists as affected. A fix that is not needed on your "
            "vLLM does nothing there."
        )
    else:
        newest = max(fact.fixed_in for fact in found if fact.fixed_in is not None)
        when = f"That is vLLM {newest} or newer for the fixes above."
    return [f"{rule} {when}"]


def regions(found: list[Facts] | None = None) -> dict[str, list[str]]:
    """The text of each kind of region, by kind: the table, and under it
    when the overlay can go."""
    found = facts() if found is None else found
    return {"table": [*table(found), "", *removal(found)]}


def render_page(text: str, rendered: dict[str, list[str]]) -> str:
    """``text`` with each marked region's body replaced by its rendering; a
    region of an unknown kind is a ValueError."""

    def body(match: re.Match[str]) -> str:
        kind = match["kind"]
        if kind not in rendered:
            raise ValueError(f"no region kind {kind!r}: {sorted(rendered)}")
        return match["start"] + "\n".join(rendered[kind]) + "\n" + match["end"]

    return _REGION.sub(body, text)


def kinds_in(text: str) -> list[str]:
    """The kinds of the marked regions in ``text``, in order."""
    return [match["kind"] for match in _REGION.finditer(text)]


def _renderable(text: str, rendered: dict[str, list[str]]) -> bool:
    """Whether ``text`` has a region, and only of kinds that render."""
    kinds = kinds_in(text)
    return bool(kinds) and set(kinds) <= set(rendered)


def stale_pages(
    pages: tuple[Path, ...] = PAGES, rendered: dict[str, list[str]] | None = None
) -> list[Path]:
    """The pages whose regions differ from the registry's rendering, or that
    have no region (or one of an unknown kind)."""
    rendered = regions() if rendered is None else rendered
    stale = []
    for page in pages:
        text = page.read_text()
        if not _renderable(text, rendered) or render_page(text, rendered) != text:
            stale.append(page)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description=(
            "Write (or, with --check, compare) the generated fix regions of "
            "the README and the docs."
        ),
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a page differs from the fix registry; write nothing",
    )
    parser.add_argument(
        "pages",
        nargs="*",
        type=Path,
        help="the pages (default: the README, index, operators and settings)",
    )
    args = parser.parse_args(argv)
    pages = tuple(args.pages) or PAGES
    rendered = regions()
    if args.check:
        stale = stale_pages(pages, rendered)
        for page in stale:
            print(f"{page} is stale or has no region: run {COMMAND}", file=sys.stderr)
        return 1 if stale else 0
    texts = {page: page.read_text() for page in pages}
    for page, text in texts.items():
        if not _renderable(text, rendered):
            print(
                f"{page} has no generated fix region, or one of a kind other "
                f"than {', '.join(sorted(rendered))}",
                file=sys.stderr,
            )
            return 1
    for page, text in texts.items():
        page.write_text(render_page(text, rendered))
    return 0


if __name__ == "__main__":
    sys.exit(main())
