"""The CLI starts without torch: only commands that run vLLM code import it.

Each command runs as a user runs it, ``python -m vllm_patchkit ...`` in a new
process, under ``-X importtime``, which names every module the process
imported. Modules a bare ``python -c pass`` of the same interpreter imports
(site hooks of the venv) are not the command's and are left out. This tests
behaviour, not time: benchmarks/cli_startup.py measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.release_trees

RUNTIME = {"torch", "vllm", "numpy", "triton"}
"""What only the commands that run vLLM code may import."""

OTHER_COMMANDS = {
    "yaml",
    "identify",
    "pip",
    "urllib.request",
    "vllm_patchkit.judge.verify",
}
"""Libraries of other commands: the parser alone (``--help``) needs none."""


def imported_modules(*args: str, ok: tuple[int, ...] = (0,)) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )
    assert proc.returncode in ok, proc.stdout + proc.stderr[-3000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "self [us]" not in line
    }


def added_by(*args: str, ok: tuple[int, ...] = (0,)) -> set[str]:
    """Modules ``python -m vllm_patchkit ARGS`` imports beyond a bare start."""
    bare = imported_modules("-c", "pass")
    command = imported_modules("-m", "vllm_patchkit", *args, ok=ok)
    assert "vllm_patchkit.cli" in command, "the probe did not see the CLI's imports"
    return command - bare


def packages(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_help_imports_no_command_library() -> None:
    added = added_by("--help")

    assert not packages(added) & RUNTIME, sorted(packages(added) & RUNTIME)
    assert not added & OTHER_COMMANDS, sorted(added & OTHER_COMMANDS)


@pytest.mark.parametrize(
    ("command", "ok"),
    [("check", (0,)), ("doctor", (1,))],  # doctor: 0.28.0 is affected, unpatched
)
def test_git_level_commands_import_no_vllm_runtime(
    release_clone: Callable[[str], Path], command: str, ok: tuple[int, ...]
) -> None:
    tree = release_clone("0.28.0")

    added = added_by(command, str(tree), ok=ok)

    assert not packages(added) & RUNTIME, sorted(packages(added) & RUNTIME)
    assert "vllm_patchkit.judge.verify" not in added


def test_the_probe_sees_torch_when_a_command_imports_it() -> None:
    """The check above can fail: the same probe names torch for a module that
    imports it (the regression scenarios run vLLM code on torch)."""
    modules = imported_modules("-c", "import vllm_patchkit.judge.regression.harness")

    assert "torch" in packages(modules)


def test_check_imports_no_other_command(
    release_clone: Callable[[str], Path],
) -> None:
    """``check`` (a pre-commit hook, issue #38) builds its own parser alone:
    no other command's module is imported."""
    added = added_by("check", str(release_clone("0.28.0")))

    commands = {m for m in added if m.startswith("vllm_patchkit.commands.")}
    assert commands == {"vllm_patchkit.commands.check", "vllm_patchkit.commands.common"}


INSTALL_SIDE = {
    "logging",
    "vllm_overlay.arming",
    "vllm_overlay.import_hook",
    "vllm_overlay.kernel_switch",
    "vllm_overlay.proof",
}
"""What installing a fix needs and reading one never does."""


def modules_after(tmp_path: Path, *argv: str) -> set[str]:
    """``sys.modules`` of a process that ran ``vllm-patchkit ARGV`` to its
    end: unlike ``-X importtime``, it counts the modules the fix registry
    imports by name (``importlib.import_module``)."""
    out = tmp_path / "modules.json"
    script = (
        "import json, sys\n"
        "from vllm_patchkit.cli import main\n"
        f"code = main({list(argv)!r})\n"
        f"open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules)))\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return set(json.loads(out.read_text()))


def test_check_imports_no_fix_install_side(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """``check`` reads each fix's record and code, never its install side
    (issue #38): no fix's ``install`` or kernel-switch module, no arming, no
    ``logging``; the plugin imports them when it arms a fix."""
    modules = modules_after(tmp_path, "check", str(release_clone("0.28.0")))

    assert "vllm_overlay.fixes.static_sink_seq_lens" in modules, "no fix was read"
    installs = {
        m
        for m in modules
        if m.startswith("vllm_overlay.fixes.")
        and m.rsplit(".", 1)[1] in ("install", "kernel_switch")
    }
    assert not installs, sorted(installs)
    assert not modules & INSTALL_SIDE, sorted(modules & INSTALL_SIDE)
