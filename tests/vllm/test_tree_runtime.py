"""The runtime of an old release tree: its own requirements, real pip, this torch.

vLLM 0.12.0 pins torch 2.9.1 and needs ``gguf``, which this venv (vLLM
0.28.0's dependencies) lacks: the runtime must read that from the tree's
requirement files, fetch it through pip's configured index into the cache,
and put it on the path beside the venv's torch, without touching anything
the venv has.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit_json
from vllm_patchkit.releases import release_tree
from vllm_patchkit.tree_runtime import (
    MANIFEST,
    RuntimeUnavailable,
    runtime_for,
    tree_requirements,
    venv_distributions,
)

pytestmark = pytest.mark.release_trees

OLD = "0.12.0"


def _names(specs: tuple[str, ...]) -> set[str]:
    return {spec.split("==")[0].lower() for spec in specs}


def test_old_release_gets_its_missing_packages_beside_this_torch() -> None:
    tree = release_tree(OLD)
    runtime = runtime_for(tree)
    assert runtime.version == OLD
    assert runtime.torch == metadata.version("torch")
    assert runtime.pinned_torch is not None
    assert runtime.pinned_torch.startswith("2.9.1")
    assert "gguf" not in venv_distributions()
    assert "gguf" in _names(runtime.extras)
    # Only what the venv lacks: nothing installed shadows one of its packages.
    assert not _names(runtime.extras) & venv_distributions()
    assert runtime.extras_dir is not None
    manifest = json.loads((runtime.extras_dir / MANIFEST).read_text())
    assert manifest["complete"] and tuple(manifest["extras"]) == runtime.extras
    # Torch and what is built against it are never fetched: they are missing,
    # with the reason.
    why = {m.split(":")[0].split("=")[0]: m for m in runtime.missing}
    assert "torchvision" in why and "torch" in why["torchvision"]
    assert runtime.pythonpath() == [str(tree), str(runtime.extras_dir)]
    assert runtime.to_json()["extras"] == list(runtime.extras)
    # A second call is served from the cache entry, identically.
    assert runtime_for(tree) == runtime


def test_runtime_env_imports_the_tree_and_its_extras() -> None:
    """Without the runtime the tree's gguf is absent; with it, both import
    from where the runtime says, and torch is still the venv's."""
    tree = release_tree(OLD)
    runtime = runtime_for(tree)
    probe = (
        "import gguf, torch, vllm, json; "
        "print(json.dumps([gguf.__file__, torch.__version__, vllm.__file__]))"
    )
    env = runtime.env({"PATH": "/usr/bin:/bin"})
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    gguf_file, torch_version, vllm_file = json.loads(proc.stdout)
    assert runtime.extras_dir is not None
    assert Path(gguf_file).is_relative_to(runtime.extras_dir)
    assert Path(vllm_file).is_relative_to(tree)
    assert torch_version == runtime.torch
    bare = subprocess.run(
        [sys.executable, "-c", "import gguf"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
    )
    assert bare.returncode != 0 and "gguf" in bare.stderr


def test_requirements_follow_includes_and_markers(tmp_path: Path) -> None:
    """cpu.txt includes common.txt; markers are evaluated here; pip options
    (index URLs) are never followed; an unreadable line is reported."""
    requirements = tmp_path / "requirements"
    requirements.mkdir()
    (requirements / "common.txt").write_text(
        "gguf >= 0.17.0  # a comment\nnot a requirement !!\n"
    )
    (requirements / "cpu.txt").write_text(
        "-r common.txt\n--extra-index-url file:///nonexistent/simple\n"
        'six>=1.16.0; python_version > "3.99"\n'
        "torch==2.9.1+cpu\n"
    )
    found, problems = tree_requirements(tmp_path)
    assert sorted(str(r) for r in found) == ["gguf>=0.17.0", "torch==2.9.1+cpu"]
    assert len(problems) == 1 and problems[0].startswith("not a requirement")


def test_no_directory_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(RuntimeUnavailable, match="no such directory"):
        runtime_for(tmp_path / "absent")


def test_test_judges_an_old_release_stock_and_patched(
    release_clone: Callable[[str], Path],
) -> None:
    """``test`` on 0.12.0 with the series applied: the base (stock, exported
    with its requirement files) reproduces the bug, the patched tree is
    fixed, both in the release's runtime. 0.12.0 has neither MiniMax-M3 (the
    crash check does not apply) nor ``vllm.v1.attention.backend`` (0002's
    test cannot be collected): both are reported as not run, never passed."""
    tree = release_clone(OLD)
    code, applied = patchkit_json("apply", str(tree))
    assert code == 0, applied

    code, result = patchkit_json("test", str(tree))

    assert code == 0, result["message"]
    before, after = result["before"], result["after"]
    for run in (before, after):
        runtime = run["runtime"]
        assert runtime["torch"] == metadata.version("torch")
        assert runtime["pinned_torch"].startswith("2.9.1")
        assert "gguf" in _names(tuple(runtime["extras"]))
        assert run["vllm_version"] == OLD
        checks = {c["name"]: c for c in run["checks"]}
        crash = checks["minimax_indexer_after_rocm[q=1]"]
        assert crash["status"] == "not run" and crash["applies"] is False
        test = run["upstream_test"]
        assert test["passed"] == test["failed"] == 0
        assert test["absent_modules"] == ["vllm.v1.attention.backend"]
    stock = {c["name"]: c["status"] for c in before["checks"]}
    fixed = {c["name"]: c["status"] for c in after["checks"]}
    assert before["bug_reproduced"] and not after["bug_reproduced"]
    for q in (1, 3):
        assert stock[f"capture_effects[q={q}]"] == "failed"
        assert fixed[f"capture_effects[q={q}]"] == "passed"
    assert "did not run: it imports vllm.v1.attention.backend" in result["message"]
