"""The tier's targets and mutants are the fixes' own, collected, never listed.

Cheap (no vLLM import): each fix's module in ``judge/regression/by_fix``
names its mutation module (``MUTATION``), and ``targets.py`` only collects
what those declare. A target or mutant written into ``targets.py`` by hand,
or a fix's module it imports, fails here; so does a mutant of a target its
fix does not declare.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

from vllm_overlay.fixes import FIXES
from vllm_patchkit.judge.mutation import targets
from vllm_patchkit.judge.mutation.file_mutants import FileMutant, Target
from vllm_patchkit.judge.mutation.targets import ALL_MUTANTS, TARGETS, collect
from vllm_patchkit.judge.regression import by_fix


def _declared(name: str) -> list[str]:
    """``name`` of every fix's mutation module, read here, not through targets."""
    found = []
    for module in by_fix.MODULES:
        if hasattr(module, "MUTATION"):
            found += getattr(importlib.import_module(module.MUTATION), name)
    return found


SERIES_TARGETS = {"rocm-attn": 21, "aiter-unified": 10, "static-sink": 6}
"""The three fixes of the series' targets, by key, and their mutant counts;
a fix added later brings targets of its own."""
SERIES_MODULES = ["rocm_aiter_unified", "rocm_capture_host_offsets", "static_sink"]
"""Their modules in ``by_fix``, in its (name) order."""


def test_the_tier_is_what_the_fixes_declare() -> None:
    assert list(TARGETS) == _declared("TARGETS")
    assert list(ALL_MUTANTS) == _declared("FILE_MUTANTS")
    counts = {t.key: sum(m.target is t for m in ALL_MUTANTS) for t in TARGETS}
    assert {key: counts.get(key) for key in SERIES_TARGETS} == SERIES_TARGETS


def test_every_fix_module_in_the_tier_declares_its_mutants() -> None:
    """The three fixes of the series each name a mutation module, and each
    target is a registry fix's own file."""
    with_mutants = [
        m.__name__.rsplit(".", 1)[1] for m in by_fix.MODULES if hasattr(m, "MUTATION")
    ]
    assert [m for m in with_mutants if m in SERIES_MODULES] == SERIES_MODULES
    files = {fix.record.source_file for fix in FIXES}
    assert {str(t.relpath) for t in TARGETS} <= files


def test_targets_py_names_no_fix() -> None:
    """It imports only the registry of fix modules and the tier's types."""
    source = Path(targets.__file__).read_text()
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
    } | {
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert imported == {
        "__future__",
        "importlib",
        "collections.abc",
        "dataclasses",
        "types",
        "vllm_patchkit.judge.mutation.file_mutants",
        "vllm_patchkit.judge.regression",
    }


def _shape(directory: Path) -> str:
    return "fixed"


def _fix(name: str, **exports: object) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in exports.items():
        setattr(module, key, value)
    return module


ONE = Target("one", Path("vllm/one.py"), _shape)
OTHER = Target("other", Path("vllm/other.py"), _shape)


def _mutant(name: str, target: Target) -> FileMutant:
    return FileMutant(name, "a mutant", target, lambda source: source + "#")


def test_collect_keeps_each_fixs_targets_and_mutants_in_order() -> None:
    tier = collect(
        [
            _fix("a", TARGETS=(ONE,), FILE_MUTANTS=(_mutant("m1", ONE),)),
            _fix("b", TARGETS=(OTHER,), FILE_MUTANTS=(_mutant("m2", OTHER),)),
        ]
    )
    assert tier.targets == (ONE, OTHER)
    assert [m.name for m in tier.mutants] == ["m1", "m2"]


def test_mutants_without_their_own_target_are_an_error() -> None:
    with pytest.raises(TypeError, match="a declares no TARGETS"):
        collect([_fix("a", FILE_MUTANTS=(_mutant("m1", ONE),))])
    with pytest.raises(ValueError, match=r"b: mutants of a target .*\['m2'\]"):
        collect(
            [
                _fix("a", TARGETS=(ONE,), FILE_MUTANTS=()),
                _fix("b", TARGETS=(OTHER,), FILE_MUTANTS=(_mutant("m2", ONE),)),
            ]
        )


def test_a_name_or_file_declared_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"mutant name declared twice: \['m'\]"):
        collect(
            [
                _fix("a", TARGETS=(ONE,), FILE_MUTANTS=(_mutant("m", ONE),)),
                _fix("b", TARGETS=(OTHER,), FILE_MUTANTS=(_mutant("m", OTHER),)),
            ]
        )
    again = Target("again", ONE.relpath, _shape)
    with pytest.raises(ValueError, match="target file declared twice"):
        collect([_fix("a", TARGETS=(ONE,)), _fix("b", TARGETS=(again,))])
