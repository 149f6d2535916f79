"""Which vLLM modules a tree's pytest run could not import because the
tree lacks them: read from the exception, never from a warning's words."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from vllm_patchkit.judge.tree_pytest import absent_vllm_modules, run_with
from vllm_patchkit.trees.tree_process import TreeLauncher

# What pytest prints on a user's checkout (no vllm/_version.py): vLLM's own
# warning, then the collection error of the test file.
WARNING = (
    "RuntimeWarning: Failed to read commit hash:\nNo module named 'vllm._version'\n"
)


def test_a_warning_naming_a_module_is_not_an_absent_module(tmp_path: Path) -> None:
    (tmp_path / "vllm").mkdir()
    output = WARNING + "E   ModuleNotFoundError: No module named 'no_such_module'\n"
    assert absent_vllm_modules(tmp_path, output) == []


def test_a_module_the_tree_lacks_is_absent(tmp_path: Path) -> None:
    (tmp_path / "vllm" / "v1").mkdir(parents=True)
    (tmp_path / "vllm" / "v1" / "present.py").write_text("")
    output = (
        WARNING
        + "E   ModuleNotFoundError: No module named 'vllm.v1.attention.backend'\n"
        + "E   ModuleNotFoundError: No module named 'vllm.v1.present'\n"
    )
    assert absent_vllm_modules(tmp_path, output) == ["vllm.v1.attention.backend"]


def test_a_failure_is_named_by_the_id_pytest_reruns(tmp_path: Path) -> None:
    """A reviewer pastes the name into pytest: the file's path, then any
    test class, then the case (JUnit's dotted module is not that)."""
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    tests = tmp_path / "tests" / "v1"
    tests.mkdir(parents=True)
    (tests / "test_shape.py").write_text(
        "import pytest\n\n\n"
        "@pytest.mark.parametrize('n', [1])\n"
        "def test_alone(n):\n    assert n == 2, 'alone'\n\n\n"
        "class TestGroup:\n    def test_inside(self):\n        assert False, 'inside'\n"
    )
    file = "tests/v1/test_shape.py"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", file]

    run = run_with(TreeLauncher.of(tmp_path), tmp_path, [file], command, 120)

    assert run.cases == {file: 2} and run.failed == 2
    assert sorted(f.split(": ")[0] for f in run.failures) == [
        f"{file}::TestGroup::test_inside",
        f"{file}::test_alone[1]",
    ]
    for failure in run.failures:
        node = failure.split(": ")[0]
        rerun = subprocess.run(
            [*command[:-1], node], cwd=tmp_path, capture_output=True, text=True
        )
        assert rerun.returncode == 1 and "1 failed" in rerun.stdout, rerun.stdout
