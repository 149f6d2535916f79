"""The docs state the fixes as the fix registry does.

The README, the index, the operators' page and the settings carry regions
rendered from :data:`vllm_overlay.fixes.FIXES` (which fixes, which releases,
which upstream release fixed each, the ``VLLM_OVERLAY_DISABLE`` names, when
the overlay can go); these tests fail when a page drifts from the registry,
and show what a change of the registry does to the pages. The products'
descriptions name the series, never one fix's PR.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from vllm_overlay.fixes import FIXES
from vllm_patchkit.cli import build_parser
from vllm_patchkit.fix_reference import (
    COMMAND,
    PAGES,
    facts,
    kinds_in,
    regions,
    removal,
    render_page,
    stale_pages,
    table,
)
from vllm_patchkit.git.series import load_series
from vllm_patchkit.paths import PROJECT_ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_patchkit.fix_reference", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def _check(*pages: Path) -> subprocess.CompletedProcess[str]:
    return _run("--check", *map(str, pages))


def _check_or_write(page: Path) -> subprocess.CompletedProcess[str]:
    """The generator writing ``page`` (it refuses; nothing is written)."""
    return _run(str(page))


def test_every_page_is_what_the_registry_says() -> None:
    assert stale_pages() == [], f"stale: run {COMMAND}"
    for page in PAGES:
        text = page.read_text()
        assert "table" in kinds_in(text), page
        # Every copy of the table says when the overlay as a whole can go.
        assert removal(facts())[0] in text
    assert _check().returncode == 0


def test_a_stale_line_in_a_page_is_caught(tmp_path: Path) -> None:
    """What a hand edit of a generated line (the advice this table replaced)
    does: the page is stale, and ``--check`` says so."""
    operators = PROJECT_ROOT / "docs" / "operators.md"
    stale = tmp_path / "operators.md"
    stale.write_text(
        operators.read_text().replace(
            "not yet: no vLLM release fixes it",
            "once the oldest vLLM you run is 0.29.0 or newer",
        )
    )
    assert stale.read_text() != operators.read_text()
    assert stale_pages((stale,)) == [stale]
    proc = _check(stale)
    assert proc.returncode == 1
    assert "is stale" in proc.stderr
    # Rendering puts it back.
    assert render_page(stale.read_text(), regions()) == operators.read_text()


def test_a_page_without_a_region_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\nNo fixes here.\n")
    unknown = tmp_path / "unknown.md"
    unknown.write_text(
        f"<!-- generated: fix names ({COMMAND}) -->\n"
        "<!-- generated: fix names end -->\n"
    )
    assert stale_pages((page, unknown)) == [page, unknown]
    assert _check(page).returncode == 1
    for path in (page, unknown):
        proc = _check_or_write(path)
        assert proc.returncode == 1 and "no generated fix region" in proc.stderr
    assert unknown.read_text().count("\n") == 2


def test_the_table_has_each_fix_and_its_disable_name() -> None:
    lines = table(facts())
    assert len(lines) == 2 + len(FIXES)
    for fix, line in zip(FIXES, lines[2:], strict=True):
        assert f"`{fix.name}`" in line
        assert fix.record.affected_text in line
        assert load_series().of_fix(fix)[0].name[:4] in line


def test_the_overlay_stays_while_a_fix_is_not_upstream() -> None:
    """StaticSink is fixed in no release: the overlay cannot go on any
    release, whatever the other fixes' "fixed upstream in" says. Every fix
    fixed in no release is named."""
    advice = " ".join(removal(facts()))
    open_fixes = [f.pr for f in FIXES if f.record.inert_from == "none yet"]
    assert "StaticSink" in open_fixes
    assert all(pr in advice for pr in open_fixes), advice
    assert "not fixed upstream in any vLLM release" in advice
    assert "0.29.0" not in advice


def test_the_advice_follows_the_registry() -> None:
    """Once upstream fixes StaticSink (a record's ``inert_from`` changes),
    the advice names the newest such release; a fourth fix gets its row."""
    fixed = [
        dataclasses.replace(
            fix,
            record=dataclasses.replace(
                fix.record,
                inert_from="0.35.0"
                if fix.record.inert_from == "none yet"
                else fix.record.inert_from,
            ),
        )
        for fix in FIXES
    ]
    advice = " ".join(removal(facts(tuple(fixed))))
    assert "vLLM 0.35.0 or newer" in advice and "Not yet" not in advice

    fourth = dataclasses.replace(
        FIXES[-1],
        pr="#99999",
        record=dataclasses.replace(FIXES[-1].record, name="a-fourth-fix"),
    )
    lines = table(facts((*FIXES, fourth)))
    assert "`a-fourth-fix`" in lines[-1] and "vLLM #99999" in lines[-1]
    readme = PAGES[0].read_text()
    assert render_page(readme, regions()) == readme
    assert "`a-fourth-fix`" in render_page(readme, regions(facts((*FIXES, fourth))))


def _descriptions() -> dict[str, str]:
    """Each product's and the site's one-line description."""
    overlay = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    toolkit = tomllib.loads((PROJECT_ROOT / "tools" / "pyproject.toml").read_text())
    site = yaml.safe_load((PROJECT_ROOT / "mkdocs.yml").read_text())
    readme = (PROJECT_ROOT / "tools" / "README.md").read_text().split("\n\n")[1]
    return {
        "pyproject.toml": overlay["project"]["description"],
        "tools/pyproject.toml": toolkit["project"]["description"],
        "mkdocs.yml": site["site_description"],
        "vllm-patchkit --help": build_parser().description or "",
        "tools/README.md": readme,
    }


def test_the_descriptions_name_the_series_not_one_fix() -> None:
    prs = [fix.pr for fix in FIXES]
    for where, text in _descriptions().items():
        assert "series" in text, where
        assert [pr for pr in prs if pr in text] == [], where
