"""Which vLLM modules a tree's pytest run could not import because the
tree lacks them: read from the exception, never from a warning's words."""

from __future__ import annotations

from pathlib import Path

from vllm_patchkit.judge.tree_pytest import absent_vllm_modules

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
