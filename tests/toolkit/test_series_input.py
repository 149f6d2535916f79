"""A series that says something the toolkit cannot act on is refused, whole.

Every command reads ``patches/`` through one validated loader, so an
unknown ``Invariant:`` trailer or a patch file holding two mails is exit 2
with the patch named, before the checkout is touched (issue 12, case 15).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import checkout_state, lived_in
from tests.toolkit.cli_helpers import patchkit
from vllm_patchkit.paths import PATCHES_DIR

pytestmark = pytest.mark.release_trees

FIX_INVARIANT = "Invariant: rocm-capture-zeroes-device-offsets-only"


@pytest.fixture
def tree(release_clone: Callable[[str], Path]) -> Path:
    tree = release_clone("0.28.0")
    lived_in(tree)
    return tree


def edited_series(tmp_path: Path, edit: Callable[[str], str]) -> tuple[Path, str]:
    """A copy of the series with 0001's text edited; the patch's name."""
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES_DIR, patches)
    fix = sorted(patches.glob("0001-*.patch"))[0]
    fix.write_text(edit(fix.read_text()))
    return patches, fix.name


@pytest.mark.parametrize("command", ["apply", "check", "doctor"])
def test_unknown_invariant_is_exit_2_naming_the_patch(
    tree: Path, tmp_path: Path, command: str
) -> None:
    patches, name = edited_series(
        tmp_path,
        lambda text: text.replace(FIX_INVARIANT, "Invariant: zeroes-nothing"),
    )
    before = checkout_state(tree)

    proc = patchkit("--patches", str(patches), command, str(tree))

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert name in proc.stderr
    assert "unknown invariant 'Invariant: zeroes-nothing'" in proc.stderr
    assert checkout_state(tree) == before


@pytest.mark.parametrize("command", ["apply", "check"])
def test_a_patch_file_with_two_mails_is_refused(
    tree: Path, tmp_path: Path, command: str
) -> None:
    """git am would make two commits of it while the series lists one."""
    test_patch = sorted(PATCHES_DIR.glob("0002-*.patch"))[0]
    patches, name = edited_series(tmp_path, lambda text: text + test_patch.read_text())
    (patches / test_patch.name).unlink()
    (patches / "series").write_text(name + "\n")
    before = checkout_state(tree)

    proc = patchkit("--patches", str(patches), command, str(tree))

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{name}: holds 2 mails" in proc.stderr
    assert "one file per commit" in proc.stderr
    assert checkout_state(tree) == before
