"""The scratch fourth fix's four files, written into a copy of the project.

Issue #38's proof that no fix is special: ``tests/overlay/test_fourth_fix.py``
drives each surface with these files present, and

    python -m tests.overlay.fourth_fix_files PROJECT

writes the same four files into ``PROJECT`` (a clone of this project) and
then runs the two page generators there, as a contributor adding a fix
does (the fix table and the CLI reference name every fix); the clone's own
test command then runs the whole suite with the fourth fix present.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from vllm_patchkit.git.refresh import FORMAT_PATCH_OPTIONS
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import clone_release

DATA = Path(__file__).parents[1] / "data" / "fourth_fix"
NAME = "scratch-fourth-fix"
PATCH = "0099-Scratch-mark-endpoint-plugins.patch"
MESSAGE = """\
Scratch: mark endpoint plugins

A scratch patch for the fourth-fix test.

Origin: vendor, vllm-overlay
Forwarded: no
Affects: 0.26.0..0.28.0
Applied-Upstream: 0.29.0, vllm-project/vllm#0
Invariant: scratch-fourth-fix-marks
Signed-off-by: vllm-overlay developers <dev@vllm-overlay.invalid>
"""


def patch_from_a_commit(checkout: Path, dest: Path) -> Path:
    """The scratch patch, as ``refresh`` exports it (its ``git format-patch``
    options) from a commit on a clone of ``checkout`` (made in a directory of
    its own, then removed)."""
    with tempfile.TemporaryDirectory(prefix="fourth-fix-authoring-") as scratch:
        work = Path(scratch) / "vllm"
        Git(Path(scratch)).run("clone", "-q", str(checkout), str(work))
        git = Git(work)
        git.run("config", "user.name", "vllm-overlay developers")
        git.run("config", "user.email", "dev@vllm-overlay.invalid")
        interface = work / "vllm/plugins/endpoint_plugins/interface.py"
        interface.write_text(interface.read_text() + "\n\nSCRATCH_FIXED = True\n")
        git.run("commit", "-q", "-a", "-m", MESSAGE)
        exported = git.run("format-patch", *FORMAT_PATCH_OPTIONS, "-1", "--stdout")
        dest.write_text(exported.stdout)
    return dest


def add_fourth_fix(project: Path, stock: Path) -> list[Path]:
    """The four files written into ``project``, the patch made from a commit
    on ``stock`` (a 0.28.0 checkout): the only files a new fix needs."""
    folder = project / "vllm_overlay/fixes/scratch_fourth_fix"
    folder.mkdir()
    record = folder / "__init__.py"
    shutil.copy(DATA / "fix.py", record)
    patch = patch_from_a_commit(stock, project / "patches" / PATCH)
    series = project / "patches/series"
    series.write_text(series.read_text() + PATCH + "\n")
    by_fix = project / "tools/vllm_patchkit/judge/regression/by_fix"
    scenario = by_fix / "scratch_fourth_fix.py"
    shutil.copy(DATA / "scenario.py", scenario)
    return [record, patch, series, scenario]


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "patches/series").is_file():
        print(
            "usage: python -m tests.overlay.fourth_fix_files PROJECT\n"
            "  PROJECT: a clone of vllm-overlay (its patches/series is read)",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="fourth-fix-stock-") as scratch:
        stock = Path(scratch) / "vllm-0.28.0"
        clone_release("0.28.0", stock, checkout=True)
        project = Path(argv[0]).resolve()
        for path in add_fourth_fix(project, stock):
            print(f"wrote {path}")
    return regenerate_pages(project)


GENERATORS = ("vllm_patchkit.fix_reference", "vllm_patchkit.cli_reference")
"""The generated pages' commands (each rewrites its pages from the code)."""


def regenerate_pages(project: Path) -> int:
    """Run each page generator of ``project`` on its own code; its exit."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(project / "tools"), str(project)]),
    }
    for module in GENERATORS:
        proc = subprocess.run(
            [sys.executable, "-m", module], cwd=project, env=env, check=False
        )
        if proc.returncode != 0:
            return proc.returncode
        print(f"ran python -m {module}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
