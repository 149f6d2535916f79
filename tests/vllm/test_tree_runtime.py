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
import zipfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json
from vllm_patchkit.trees.releases import release_tree
from vllm_patchkit.trees.requirement_files import (
    MAX_DEPTH,
    UnreadableRequirements,
    tree_requirements,
)
from vllm_patchkit.trees.tree_process import TreeLauncher
from vllm_patchkit.trees.tree_runtime import (
    MANIFEST,
    RuntimeUnavailable,
    runtime_for,
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
    env = TreeLauncher.of(tree, runtime).env(PATH="/usr/bin:/bin")
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
    # Named by file and line, never by the line's content.
    assert problems == ["requirements/common.txt:2: not a requirement; not installed"]


def test_no_directory_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(RuntimeUnavailable, match="no such directory"):
        runtime_for(tmp_path / "absent")


@pytest.mark.slow
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


SECRET = "TOKEN=ghp_not-a-real-token-7f3a"


def _hostile(tree: Path, how: str) -> str:
    """Make ``tree``'s requirement files hostile in one way; the line that
    a report must name instead of quoting (``file:line``)."""
    requirements = tree / "requirements"
    common = requirements / "common.txt"
    if how == "parent":
        (tree.parent / "secret.env").write_text(SECRET + "\n")
        line = "-r ../../secret.env"
    elif how == "proc":
        line = "-r /proc/self/environ"
    elif how == "symlink-escape":
        (tree.parent / "secret.env").write_text(SECRET + "\n")
        (requirements / "extra.txt").symlink_to(tree.parent / "secret.env")
        line = "-r extra.txt"
    elif how == "symlink-loop":
        (requirements / "loop.txt").symlink_to("loop.txt")
        line = "-r loop.txt"
    elif how == "cycle":
        (requirements / "a.txt").write_text("-r common.txt\n")
        line = "-r a.txt"
    else:  # a chain 1,200 files deep
        for i in range(1200):
            (requirements / f"deep{i}.txt").write_text(f"-r deep{i + 1}.txt\n")
        line = "-r deep0.txt"
    number = len(common.read_text().splitlines()) + 1
    with common.open("a") as handle:
        handle.write(line + "\n")
    return f"requirements/common.txt:{number}"


HOSTILE = ["parent", "proc", "symlink-escape", "symlink-loop", "cycle", "deep"]


@pytest.mark.parametrize("how", HOSTILE)
def test_hostile_requirement_files_cannot_be_judged(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An include that leaves the tree, loops or nests without end is an
    UnreadableRequirements naming the line by file and number: no content
    read from outside the tree, no traceback."""
    tree = tmp_path / "tree"
    (tree / "requirements").mkdir(parents=True)
    (tree / "requirements" / "common.txt").write_text("gguf>=0.17.0\n")
    where = _hostile(tree, how)
    monkeypatch.setenv("VLLM_PATCHKIT_TEST_SECRET", SECRET)
    with pytest.raises(UnreadableRequirements) as caught:
        tree_requirements(tree)
    message = str(caught.value)
    assert SECRET not in message and "ghp_" not in message
    if how in ("parent", "proc", "symlink-escape", "symlink-loop"):
        assert message.startswith(where + ":"), message
    elif how == "cycle":  # named where it closes
        assert message.startswith("requirements/a.txt:1: -r includes a file that")
    else:
        assert f"more than {MAX_DEPTH} files deep" in message
    assert caught.value.code == 3


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("proc", marks=pytest.mark.slow),
        pytest.param("symlink-loop", marks=pytest.mark.slow),
        "deep",
    ],
)
def test_test_and_audit_cannot_judge_a_hostile_tree(
    release_clone: Callable[[str], Path], how: str
) -> None:
    """``test`` and ``audit`` on such a tree: exit 3 (cannot judge) before
    any suite runs, no traceback, and nothing of the environment in the
    output (``/proc/self/environ`` holds the CLI's)."""
    tree = release_clone("0.28.0")
    where = _hostile(tree, how)
    env = {"VLLM_PATCHKIT_TEST_SECRET": SECRET}
    # audit's static pass still reads the tree: 0.28.0's device zeroing,
    # which AITER unified reads, is harmful from the source alone (exit 1);
    # the dynamic pass could not run, and says why.
    for command, code in ((["test", "--no-baseline"], 3), (["audit"], 1)):
        proc = patchkit(*command, "--json", str(tree), env=env)
        output = proc.stdout + proc.stderr
        assert proc.returncode == code, output
        assert "Traceback" not in output
        assert SECRET not in output and "VLLM_PATCHKIT_TEST_SECRET" not in output
        assert where in output or "files deep" in output, output


def _shadow_wheel(directory: Path) -> Path:
    """``torchshadow-1.0-py3-none-any.whl``: a distribution whose ``torch/``
    would replace the venv's torch."""
    wheel = directory / "torchshadow-1.0-py3-none-any.whl"
    info = "torchshadow-1.0.dist-info"
    files = {
        "torch/__init__.py": "__version__ = '0.0.0+shadow'\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: torchshadow\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(name, text)
    return wheel


def test_a_wheel_file_name_is_not_installed_from_the_current_directory(
    release_clone: Callable[[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pip installs a requirement that names a wheel file from the current
    directory; its ``torch/`` would shadow the venv's torch in the tree's
    runs while the report names the venv's. Only plain names are
    installed: the line is reported (file:line) as not provided."""
    tree = release_clone("0.28.0")
    here = tmp_path / "cwd"
    here.mkdir()
    _shadow_wheel(here)
    common = tree / "requirements" / "common.txt"
    number = len(common.read_text().splitlines()) + 1
    with common.open("a") as handle:
        handle.write("torchshadow-1.0-py3-none-any.whl\n")
    monkeypatch.chdir(here)

    runtime = runtime_for(tree)

    assert "torchshadow" not in _names(runtime.extras)
    assert any(
        m.startswith(f"requirements/common.txt:{number}: not a plain requirement")
        for m in runtime.missing
    ), runtime.missing
    probe = "import torch; print(torch.__file__)"
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        env=TreeLauncher.of(tree, runtime).env(),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    torch_file = Path(proc.stdout.strip())
    assert runtime.extras_dir is None or not torch_file.is_relative_to(
        runtime.extras_dir
    )
    assert torch_file == Path(
        metadata.distribution("torch").locate_file("torch/__init__.py")
    )


def test_an_index_package_that_shadows_a_venv_module_is_dropped(
    tmp_path: Path,
) -> None:
    """``enum34`` (a plain name on the index) provides ``enum``, which the
    venv's Python has: installed beside the tree it would replace it, so it
    is not kept, and the runtime says why."""
    tree = tmp_path / "tree"
    (tree / "requirements").mkdir(parents=True)
    (tree / "requirements" / "common.txt").write_text("enum34\n")

    runtime = runtime_for(tree)

    assert "enum34" not in _names(runtime.extras)
    assert any(
        m.startswith("enum34==") and "provides enum" in m for m in runtime.missing
    ), runtime.missing
    assert runtime.extras_dir is not None
    assert not (runtime.extras_dir / "enum").exists()
