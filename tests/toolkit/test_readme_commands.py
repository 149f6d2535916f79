"""Every command the README shows runs as written.

Each line of each ``sh`` block is run the way a reader would run it: the
toolkit's commands on a vLLM 0.28.0 checkout shaped as users have it (the
README's ``~/src/vllm``), the overlay's doctor in this venv. The two
commands that bootstrap the project (``tools/demo``, ``tools/run-tests``)
are what CI itself runs; here they are checked to exist and to answer
``--help``-style use without side effects. A line this test does not know
how to run fails it, so a new README command cannot go untried.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from vllm_patchkit.paths import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
USER_CHECKOUT = "~/src/vllm"

pytestmark = pytest.mark.release_trees


def readme_commands() -> list[list[str]]:
    """The command lines of the README's ``sh`` blocks, comments dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL)
    lines = [line for block in blocks for line in block.splitlines()]
    return [shlex.split(line, comments=True) for line in lines if line.strip()]


TOOLKIT = ".venv/bin/vllm-patchkit"
"""How the README calls the toolkit: after its two commands, ``vllm-patchkit``
is in the project venv, which nothing puts on PATH."""


def test_the_readme_is_short_and_shows_commands() -> None:
    assert len(README.read_text().splitlines()) <= 200
    programs = {words[0] for words in readme_commands()}
    assert {"tools/demo", "tools/run-tests", TOOLKIT} <= programs
    # A bare `vllm-patchkit` is "command not found" after the two commands.
    assert "vllm-patchkit" not in programs


def _run(words: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        words, capture_output=True, text=True, env=env, timeout=1200, **kwargs
    )


@pytest.mark.slow  # every command in turn; each has tests of its own by default
def test_every_readme_command_runs_as_written(
    release_clone: Callable[[str], Path],
) -> None:
    checkout = release_clone("0.28.0")
    bin_dir = Path(sys.executable).parent
    overlay_name = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())[
        "project"
    ]["name"]
    ran = []
    for words in readme_commands():
        program, args = (
            words[0],
            [str(checkout) if a == USER_CHECKOUT else a for a in words[1:]],
        )
        line = shlex.join(words)
        if program in ("tools/demo", "tools/run-tests"):
            # CI runs both; running them here would recurse (run-tests) or
            # repeat tests/toolkit/test_demo.py.
            assert os.access(PROJECT_ROOT / program, os.X_OK), line
            assert args == [], line
            continue
        if program == "pip" and args[:1] == ["uninstall"]:
            # Not run: it would remove the overlay from this venv. It must
            # name the overlay's own distribution.
            assert args[1:] == [overlay_name], line
            continue
        if program == "python" and args[:2] == ["-m", "vllm_overlay"]:
            proc = _run([sys.executable, *args])
            # 0: healthy; 1: a fix is needed and not active (vLLM 0.28.0 is
            # affected; on this CPU the overlay is armed, not installed).
            assert proc.returncode in (0, 1), f"{line}: {proc.stderr}"
            assert "rocm" in proc.stdout.lower(), proc.stdout
        elif program == TOOLKIT:
            # This venv's, wherever the test runs (a venv elsewhere in CI).
            proc = _run([str(bin_dir / "vllm-patchkit"), *args])
            assert proc.returncode == 0, (
                f"{line}: exit {proc.returncode}\n{proc.stderr}"
            )
        else:
            pytest.fail(f"the README shows {line!r}, which this test cannot run")
        ran.append(line)
    assert any(line.startswith(TOOLKIT) for line in ran)


def test_every_link_in_the_readme_leads_to_a_file() -> None:
    """The README is read on the forge, outside the site's strict build: its
    relative links must name files that exist."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    relative = [link for link in links if "://" not in link]
    assert relative
    assert [link for link in relative if not (PROJECT_ROOT / link).exists()] == []
