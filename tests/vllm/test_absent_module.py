"""A vLLM module the tree lacks is "not in this tree", not a harness error.

ROCm/vllm renamed ``rocm_attn.py``: the suite's import of it failed, and
``test`` said "harness error: ModuleNotFoundError at .../harness.py:256"
(issue #27). On the installed vLLM 0.28.0, with a real failed import.
"""

from __future__ import annotations

import importlib

import pytest

from vllm_patchkit.judge.regression.scenarios import failed_outcome
from vllm_patchkit.judge.regression.verdict import HARNESS_ERROR, NOT_RUN, fixed_checks

MISSING = "vllm.v1.attention.backends.rocm_attn_renamed_by_a_fork"


def _raised(module: str) -> Exception:
    with pytest.raises(ImportError) as info:
        importlib.import_module(module)
    return info.value


def test_a_module_the_tree_lacks_is_not_in_this_tree(vllm_in_process: None) -> None:
    outcome = failed_outcome("capture_effects", 1, _raised(MISSING))

    (check,) = fixed_checks([outcome])

    assert check.status == NOT_RUN
    assert check.detail == (
        f"not in this tree: ModuleNotFoundError: No module named '{MISSING}'"
    )


def test_a_failed_import_inside_the_tree_stays_a_harness_error(
    vllm_in_process: None,
) -> None:
    """The tree has the file; what it imports is missing: the harness (its
    environment) failed, not the tree's layout."""
    exc = ModuleNotFoundError("No module named 'torchvision'", name="torchvision")

    (check,) = fixed_checks([failed_outcome("capture_effects", 1, exc)])

    assert check.status == NOT_RUN
    assert check.detail.startswith(HARNESS_ERROR), check.detail
