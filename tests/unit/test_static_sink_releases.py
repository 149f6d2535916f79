"""The StaticSink fix's proof on the real code of every vLLM release.

The overlay installs only on a ``StaticSinkAttentionBuilder.build`` that is,
by its normalised AST, a known upstream method; these tests read the method
from each release's source distribution (cached) and hold the listed
variants to them: every release from 0.14.0 to 0.33.0 ships a listed buggy
variant, every listed variant is shipped by a release, the releases before
have no such module, and patch 0004's method is the one fixed variant. Any
other method (a vendor's) is left alone, with its file and line.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import tarfile
from pathlib import Path

import pytest

from vllm_overlay.fixes.static_sink_seq_lens import (
    FIX,
    KNOWN_BUGGY,
    KNOWN_FIXED,
    STATIC_SINK,
    SinkShape,
    assess_file,
    inspect_static_sink_source,
    inspect_static_sink_tree,
    method_digest,
)
from vllm_overlay.metadata_writes import method_def
from vllm_overlay.state import Action
from vllm_patchkit.trees.releases import release_tree, sdist_path

pytestmark = pytest.mark.release_trees

WITH_STATIC_SINK = [
    "0.14.0", "0.14.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.18.1",
    "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0",
    "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0",
    "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0",
]  # fmt: skip
"""Every release on the package index from 0.14.0 to the newest (0.15.x was
never published as an sdist)."""
WITHOUT = ["0.11.0", "0.12.0", "0.13.0"]
FIX_PATCH = Path(__file__).parents[2] / "patches" / FIX.patches[0]
"""Patch 0004, the fix (the first of the fix's patches)."""


@functools.cache
def released(version: str) -> bytes | None:
    """The release's ``static_sink_attention.py`` (None: it has none)."""
    name = f"vllm-{version}/{STATIC_SINK}"
    with tarfile.open(sdist_path(version), "r|gz") as tar:
        for member in tar:
            if member.name == name:
                handle = tar.extractfile(member)
                return handle.read() if handle else None
    return None


@pytest.mark.parametrize("version", WITH_STATIC_SINK)
def test_every_release_ships_a_listed_buggy_method(version: str) -> None:
    source = released(version)
    assert source is not None
    code = inspect_static_sink_source(source, Path(STATIC_SINK))
    assert code.shape is SinkShape.BUGGY, code.detail
    assert code.affected and code.judged
    assert code.factory is not None and code.line is not None


def test_every_listed_variant_is_shipped() -> None:
    """No variant is listed that no release ships (each names its releases)."""
    shipped: dict[str, list[str]] = {}
    for version in WITH_STATIC_SINK:
        module = ast.parse(released(version) or b"")
        (factory,) = [
            n
            for n in module.body
            if isinstance(n, ast.FunctionDef)
            and n.name == "create_static_sink_attention_backend"
        ]
        (builder,) = [n for n in factory.body if isinstance(n, ast.ClassDef)]
        method = method_def(builder, "build")
        assert method is not None
        shipped.setdefault(method_digest(method), []).append(version)
    assert set(shipped) == set(KNOWN_BUGGY)
    for digest, versions in shipped.items():
        first, last = versions[0], versions[-1]
        assert KNOWN_BUGGY[digest] == f"{first}-{last}"


@pytest.mark.parametrize("version", WITHOUT)
def test_releases_before_have_no_static_sink(version: str) -> None:
    assert released(version) is None


def test_patch_0004_method_is_the_fixed_variant(tmp_path: Path) -> None:
    """Patch 0004 on 0.33.0: not needed any more."""
    tree = tmp_path / "tree"
    target = tree / STATIC_SINK
    target.parent.mkdir(parents=True)
    target.write_bytes((release_tree("0.33.0") / STATIC_SINK).read_bytes())
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    subprocess.run(["git", "apply", str(FIX_PATCH)], cwd=tree, check=True)
    code = inspect_static_sink_tree(tree)
    assert code.shape is SinkShape.FIXED, code.detail
    assert list(KNOWN_FIXED.values())[0] in code.detail
    assert assess_file(target, "0.33.0").action is Action.NOT_NEEDED


def test_a_vendor_method_is_left_alone_with_its_file_and_line(tmp_path: Path) -> None:
    source = (released("0.33.0") or b"").decode()
    statement = "            common_attn_metadata.seq_lens[\n"
    assert source.count(statement) == 1
    vendor = source.replace(
        statement, "            self.vendor_calls = 1\n" + statement
    )
    file = tmp_path / "static_sink_attention.py"
    file.write_text(vendor)
    state = assess_file(file, "0.33.0+vendor")
    assert state.action is Action.UNRECOGNISED
    build_line = next(
        i
        for i, line in enumerate(vendor.splitlines(), 1)
        if line.strip() == "def build("
    )
    assert f"{file}:{build_line}" in state.reason
    assert "no known upstream method" in state.reason
    assert state.plan is None
