"""The reference pages cannot fall behind the code.

``docs/reference/cli.md`` is rendered from the argparse definitions; these
tests fail when it is stale, when a command, option or argument has no help
text, and when ``docs/reference/settings.md`` misses an environment variable
the code reads or a cache directory it writes.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from vllm_patchkit.cli_reference import (
    PAGE,
    Command,
    all_commands,
    render,
    undocumented,
)
from vllm_patchkit.paths import PROJECT_ROOT

SETTINGS = PROJECT_ROOT / "docs" / "reference" / "settings.md"
CODE = [
    *sorted((PROJECT_ROOT / "vllm_overlay").rglob("*.py")),
    *sorted((PROJECT_ROOT / "tools" / "vllm_patchkit").rglob("*.py")),
    *(PROJECT_ROOT / "tools" / name for name in ("bootstrap.sh", "run-tests", "demo")),
]


def test_the_page_is_what_the_parsers_say() -> None:
    assert PAGE.read_text() == render(), (
        "docs/reference/cli.md is stale: run python -m vllm_patchkit.cli_reference"
    )


def test_every_command_option_and_argument_has_help() -> None:
    assert undocumented(all_commands()) == []


def test_a_new_option_without_help_or_page_is_caught() -> None:
    """What happens to a contributor who adds ``apply --frobnicate`` and a
    ``frob`` subcommand without documenting them: both checks fail."""
    commands = all_commands()
    apply = next(c for c in commands if c.invocation == "vllm-patchkit apply")
    apply.parser.add_argument("--frobnicate", action="store_true")
    frob = argparse.ArgumentParser(prog="vllm-patchkit frob")
    commands.append(Command("vllm-patchkit frob", "", frob))

    assert undocumented(commands) == [
        "vllm-patchkit apply --frobnicate",
        "vllm-patchkit frob (no summary or description)",
    ]
    assert "--frobnicate" in render(commands)
    assert render(commands) != PAGE.read_text()


def test_the_check_command_agrees_with_the_page(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_patchkit.cli_reference", "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    stale = tmp_path / "cli.md"
    stale.write_text(PAGE.read_text().replace("--dry-run", "--dry"))
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_patchkit.cli_reference", "--check"]
        + ["--output", str(stale)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "is stale" in proc.stderr


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    names = set()
    for path in CODE:
        names |= set(
            re.findall(r"\b(VLLM_(?:OVERLAY|PATCHKIT)_[A-Z_]+)\b", path.read_text())
        )
    assert names, "the scan found no variable: the pattern or the paths are wrong"
    page = SETTINGS.read_text()
    assert sorted(n for n in names if f"`{n}`" not in page) == []


def test_every_cache_directory_the_code_writes_is_documented() -> None:
    names = set()
    for path in CODE:
        names |= set(re.findall(r'cache_dir\(\)\s*/\s*"([\w-]+)"', path.read_text()))
    assert {"sdists", "trees", "logs"} <= names
    page = SETTINGS.read_text()
    assert sorted(n for n in names if f"`{n}/`" not in page) == []
