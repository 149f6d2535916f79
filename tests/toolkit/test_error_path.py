"""The CLI's one error path (``cli.error_handler``) on real trees.

An exception nobody anticipated is exit 3 ("error"), never 1 ("not fixed")
nor 2 ("refused, nothing changed"), with one JSON object under ``--json``
and its traceback in a log file named on stderr; a reader that closes
stdout after a successful apply does not make the apply an error.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit
from vllm_patchkit.errors import EXIT_ERROR
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import release_tree

pytestmark = pytest.mark.release_trees


def test_an_unexpected_exception_is_exit_3_with_json_and_a_log(
    tmp_path: Path,
) -> None:
    """0.29.0's vllm/ with a builder module whose 5000-term expression makes
    ``ast.parse`` raise RecursionError inside the audit's static pass (it
    was exit 1, a traceback, and nothing on stdout under --json)."""
    tree = tmp_path / "vllm-0.29.0-deep"
    shutil.copytree(release_tree("0.29.0") / "vllm", tree / "vllm")
    deep = "x = " + "+".join(["a"] * 5000)
    (tree / "vllm" / "deep_builder.py").write_text(
        f"class DeepBuilder:\n    pass\n{deep}\n"
    )
    cache = tmp_path / "cache"
    proc = patchkit(
        "audit", "--static-only", "--json", str(tree),
        env={"VLLM_OVERLAY_CACHE": str(cache)},
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["status"] == "error"
    assert "unexpected RecursionError" in payload["error"]
    log = Path(payload["log"])
    assert log.parent == cache / "logs"
    assert "Traceback (most recent call last)" in log.read_text()
    assert "RecursionError" in log.read_text()
    assert f"traceback in {log}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_bare_value_error_is_an_error_not_a_refusal(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a RefusedError says "refused, nothing changed": a ValueError
    from a library call (here pathlib's) is exit 3 with its log."""
    from vllm_patchkit.cli import error_handler  # here: absent from older code

    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path))

    def command(args: argparse.Namespace) -> int:
        Path("/a").relative_to("/b")
        return 0

    code = error_handler(argparse.Namespace(json=True), command)
    assert code == EXIT_ERROR
    out, err = capsys.readouterr()
    payload = json.loads(out)
    assert payload["status"] == "error"
    assert "unexpected ValueError" in payload["error"]
    assert "refused" not in err
    assert Path(payload["log"]).is_file()


def test_a_closed_stdout_after_a_successful_apply_is_not_an_error(
    release_clone: Callable[[str], Path],
) -> None:
    """``apply | head -1`` where head has already gone: the apply's own exit
    (0), the series applied, and no BrokenPipeError report."""
    tree = release_clone("0.28.0")
    head = Git(tree).run("rev-parse", "HEAD").stdout
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "vllm_patchkit", "apply", str(tree)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            timeout=600,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert "BrokenPipe" not in proc.stderr and "Exception ignored" not in proc.stderr
    subjects = Git(tree).run("log", "--format=%s", f"{head.strip()}..").stdout
    assert "Preserve CPU query offsets" in subjects, subjects
