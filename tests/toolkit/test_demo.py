"""The main job end to end, and its refusals on bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import checkout_state, directory_state
from tests.toolkit.cli_helpers import patchkit

pytestmark = pytest.mark.release_trees


@pytest.mark.slow
def test_demo_on_the_embedded_release(tmp_path: Path) -> None:
    proc = patchkit("demo", "--json", "--workdir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    payload = json.loads(proc.stdout)
    assert payload["ok"] and payload["verdict"] == "fixed"
    assert payload["before"]["bug_reproduced"]
    assert payload["before"]["verdict"] == "not-fixed"
    counts = payload["after"]["counts"]
    # 0.28.0 is in every fix's range: each fix's checks run, and pass.
    assert counts["passed"] == counts["ran"] > 0 and counts["failed"] == 0
    assert [c["name"] for c in counts["not_run"]] == [
        "rocm_then_kimi_k3_rocm_kda[q=3]",
        "rocm_then_triton_mla[q=3]",
        "rocm_then_deepseek_v32_indexer[q=3]",
    ]
    assert payload["before"]["vllm_version"] == "0.28.0"
    assert payload["before"]["vllm_file"].startswith(str(tmp_path))
    assert payload["apply"]["status"] == "applied"
    assert payload["after"]["fixed"]


def test_demo_refuses_a_directory_that_is_not_a_checkout(tmp_path: Path) -> None:
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    before = directory_state(tmp_path)
    proc = patchkit("demo", str(tmp_path))
    assert proc.returncode == 2
    assert "not a git checkout" in proc.stderr
    assert directory_state(tmp_path) == before


def test_demo_refuses_a_dirty_checkout(release_clone: Callable[[str], Path]) -> None:
    checkout = release_clone("0.28.0")
    (checkout / "README.md").write_text("edited\n")
    (checkout / "scratch.py").write_text("x = 1\n")
    before = checkout_state(checkout)
    proc = patchkit("demo", str(checkout))
    assert proc.returncode == 2
    assert "dirty" in proc.stderr and "README.md" in proc.stderr
    assert checkout_state(checkout) == before


def test_demo_refuses_a_missing_path(tmp_path: Path) -> None:
    proc = patchkit("demo", str(tmp_path / "nowhere"))
    assert proc.returncode == 2
    assert "no such directory" in proc.stderr
