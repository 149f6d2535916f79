"""tools/ci scripts pass no value to git where git could read it as an option.

Each script gets a value that, read as an option, runs ``touch MARKER``;
the marker must not appear and the script must refuse (exit 2) before git
runs (issue 12, case 7).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_patchkit.git.upstream import build_upstream
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PATCHES_DIR, PROJECT_ROOT

pytestmark = pytest.mark.release_trees

CI = PROJECT_ROOT / "tools" / "ci"
BIN = Path(sys.executable).parent


def ci(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(CI / script), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "VLLM_PATCHKIT_PATCHES": str(PATCHES_DIR),
        },
        timeout=600,
    )


@pytest.fixture(scope="module")
def upstream() -> Path:
    return build_upstream(["0.28.0"])


def test_provision_checkout_that_looks_like_an_option(
    upstream: Path, tmp_path: Path
) -> None:
    """Without `--`, git clone reads the second value as --upload-pack."""
    marker = tmp_path / "marker"
    proc = ci(
        "provision-upstream.sh",
        f"file://{upstream}",
        f"--upload-pack=touch {marker};",
        "v0.28.0",
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_provision_url_that_looks_like_an_option(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    checkout = tmp_path / "checkout"
    proc = ci(
        "provision-upstream.sh",
        f"--upload-pack=touch {marker};",
        str(checkout),
        "v0.28.0",
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert not marker.exists() and not checkout.exists()


def test_bot_branch_remote_that_looks_like_an_option(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git = Git(tmp_path)
    git.run("init", "--quiet", str(repo))
    (repo / "patches").mkdir()
    (repo / "patches" / "series").write_text("x.patch\n")
    message = tmp_path / "message.txt"
    message.write_text("Refresh the series\n")
    marker = tmp_path / "marker"
    for remote in (f"--upload-pack=touch {marker};", f"ext::sh -c touch% {marker}"):
        proc = ci(
            "commit-bot-branch.sh",
            str(repo),
            "bot/x",
            str(message),
            remote,
            cwd=tmp_path,
        )
        assert proc.returncode == 2, proc.stderr
        assert "is not a remote name" in proc.stderr
        assert not marker.exists()


@pytest.mark.parametrize(
    ("script", "position"),
    [("rebase-series.sh", 1), ("check-series-base.sh", 1)],
)
def test_refs_that_look_like_options(
    tmp_path: Path, script: str, position: int
) -> None:
    marker = tmp_path / "marker"
    args = [str(tmp_path), "v0.28.0", str(tmp_path / "out")]
    args[position] = f"--upload-pack=touch {marker};"
    proc = ci(script, *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "is not a valid ref name" in proc.stderr
    assert not marker.exists()
