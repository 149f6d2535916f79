"""One version: both products print the one CHANGELOG.md's newest section
names, and the release refuses a tag or a changelog that says otherwise.

``tools/ci/release_notes.py`` is what the release workflow runs; here it is
imported from its file (its functions) and run as the workflow runs it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import vllm_overlay
from vllm_patchkit.paths import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "tools" / "ci" / "release_notes.py"
CHANGELOG = PROJECT_ROOT / "CHANGELOG.md"
BIN = Path(sys.executable).parent


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("release_notes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "release_notes", module)
    spec.loader.exec_module(module)
    return module


def script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=60,
    )


def test_both_products_print_the_version_the_changelog_names_first(
    notes: ModuleType,
) -> None:
    top = notes.top_version(CHANGELOG.read_text())
    toolkit = subprocess.run(
        [str(BIN / "vllm-patchkit"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    overlay = subprocess.run(
        [sys.executable, "-m", "vllm_overlay", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert toolkit.returncode == 0, toolkit.stderr
    assert toolkit.stdout == f"vllm-patchkit {top}\n"
    assert overlay.returncode == 0, overlay.stderr
    assert overlay.stdout == f"vllm-overlay {top}\n"
    assert top == vllm_overlay.__version__


def test_the_version_is_written_once() -> None:
    """Only ``vllm_overlay/__init__.py`` spells it; the packaging reads it."""
    version = vllm_overlay.__version__
    written = [
        str(path.relative_to(PROJECT_ROOT))
        for path in [
            PROJECT_ROOT / "pyproject.toml",
            PROJECT_ROOT / "tools" / "pyproject.toml",
            PROJECT_ROOT / "tools" / "setup.py",
            *(PROJECT_ROOT / "vllm_overlay").rglob("*.py"),
            *(PROJECT_ROOT / "tools" / "vllm_patchkit").glob("*.py"),
        ]
        if f'"{version}"' in path.read_text()
    ]
    assert written == ["vllm_overlay/__init__.py"]


SAMPLE = """\
# Changelog

## [Unreleased]

- not yet

## [1.2.0] - 2026-12-24

### Fixed

- the thing

## [1.1.0] - 2026-11-01

- older
"""


def test_the_notes_are_the_version_s_section_only(notes: ModuleType) -> None:
    assert notes.top_version(SAMPLE) == "1.2.0"
    assert notes.notes(SAMPLE, "1.2.0") == "### Fixed\n\n- the thing\n"
    assert notes.notes(SAMPLE, "1.1.0") == "- older\n"
    with pytest.raises(notes.Refused, match=r"no section \[1\.3\.0\]"):
        notes.notes(SAMPLE, "1.3.0")
    with pytest.raises(notes.Refused, match="is empty"):
        notes.notes("## [2.0.0] - 2027-01-01\n\n## [1.0.0]\n- x\n", "2.0.0")


def test_the_changelog_has_the_current_version_s_notes() -> None:
    proc = script("notes", vllm_overlay.__version__)
    assert proc.returncode == 0, proc.stderr
    for fix in ("#51585", "#53821", "StaticSink"):
        assert fix in proc.stdout
    assert "## [" not in proc.stdout  # the next section is not included


@pytest.mark.parametrize(
    "tag",
    ["v9.9.9", "0.1.0", "v0.1", "v0.1.0rc1", "v0.1.0-dirty", "release-0.1.0"],
)
def test_a_tag_that_is_not_v_plus_the_version_is_refused(tag: str) -> None:
    proc = script("check-tag", tag)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert f"release: refused: tag {tag!r}" in proc.stderr


def test_the_version_s_tag_is_accepted() -> None:
    proc = script("check-tag", f"v{vllm_overlay.__version__}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"version={vllm_overlay.__version__}\n"
