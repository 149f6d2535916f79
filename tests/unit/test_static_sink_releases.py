"""The StaticSink fix's proof on the real code of every vLLM release.

The overlay installs only on a ``create_static_sink_attention_backend``
that is, by the normalised AST of the whole factory, a known upstream
factory; these tests read the factory from each release's source
distribution (cached) and hold the listed variants to them: every release
from 0.14.0 to the newest ships a listed buggy variant, every listed variant is
shipped by a release, the releases before have no such module, and patch
0004 applied to each release gives one fixed variant (0004 then 0006, on
the releases with the V1 runner, the other). The first 0004
(a buffer of the builder's own, never refreshed between Model Runner V2's
draft steps) and any other factory (a vendor's) are left alone, with the
file and line.
"""

from __future__ import annotations

import ast
import functools
import subprocess
from pathlib import Path

import pytest

from tests.overlay.sink_vendor_shapes import SHAPES
from vllm_overlay.code import Shape, method_def
from vllm_overlay.fixes.static_sink_seq_lens import (
    FACTORY,
    FIX,
    KNOWN_BUGGY,
    KNOWN_FIXED,
    STATIC_SINK,
    assess_file,
    factory_digest,
    inspect_static_sink_source,
    inspect_static_sink_tree,
)
from vllm_overlay.state import Action
from vllm_patchkit.git.series import load_series
from vllm_patchkit.trees.releases import release_sources

pytestmark = pytest.mark.release_trees

WITH_STATIC_SINK = [
    "0.14.0", "0.14.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.18.1",
    "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0",
    "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0",
    "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0",
    "0.34.0",
]  # fmt: skip
"""Every release on the package index from 0.14.0 to the newest (0.15.x was
never published as an sdist)."""
WITHOUT = ["0.11.0", "0.12.0", "0.13.0"]
FIX_PATCH, _, OPT_OUT_PATCH = (p.path for p in load_series().of_fix(FIX))
"""Patch 0004, the fix (the first of the fix's patches)."""
"""Patch 0006, the opt-out of the V1 runner's update_block_table shortcut."""
WITH_V1_RUNNER = WITH_STATIC_SINK[: WITH_STATIC_SINK.index("0.33.0") + 1]
"""The releases 0006 is for (the V1 model runner is gone in 0.34.0)."""
FIRST_0004 = (
    Path(__file__).resolve().parents[1]
    / "data/first-0004-static-sink-without-draft-refresh.patch"
)
"""The series' first 0004, kept verbatim: its own buffer, no draft refresh."""
"""The commit whose patch 0004 was the first fix (a seq_lens buffer of the
builder's own, not refreshed in ``update_draft_decode_metadata``)."""


@functools.cache
def released(version: str) -> bytes | None:
    """The release's ``static_sink_attention.py`` (None: it has none)."""
    return release_sources(version, (str(STATIC_SINK),))[str(STATIC_SINK)]


@pytest.mark.parametrize("version", WITH_STATIC_SINK)
def test_every_release_ships_a_listed_buggy_method(version: str) -> None:
    source = released(version)
    assert source is not None
    code = inspect_static_sink_source(source, Path(STATIC_SINK))
    assert code.shape is Shape.BUGGY, code.detail
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
        shipped.setdefault(factory_digest(factory), []).append(version)
    assert set(shipped) == set(KNOWN_BUGGY)
    for digest, versions in shipped.items():
        first, last = versions[0], versions[-1]
        assert KNOWN_BUGGY[digest] == f"{first}-{last}"


@pytest.mark.parametrize("version", WITHOUT)
def test_releases_before_have_no_static_sink(version: str) -> None:
    assert released(version) is None


def patched(tmp_path: Path, version: str, patches: tuple[Path, ...] | bytes) -> Path:
    """A tree holding the release's module with ``patches`` applied by git
    (their other files, tests, left out)."""
    tree = tmp_path / version
    target = tree / STATIC_SINK
    target.parent.mkdir(parents=True)
    target.write_bytes(released(version) or b"")
    subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    only = f"--include={STATIC_SINK}"
    if isinstance(patches, bytes):
        subprocess.run(["git", "apply", only], cwd=tree, input=patches, check=True)
    for patch in () if isinstance(patches, bytes) else patches:
        subprocess.run(["git", "apply", only, str(patch)], cwd=tree, check=True)
    return tree


def _factory_digests(tree: Path) -> set[str]:
    module = ast.parse((tree / STATIC_SINK).read_bytes())
    return {
        factory_digest(n)
        for n in module.body
        if isinstance(n, ast.FunctionDef) and n.name == FACTORY
    }


@pytest.mark.parametrize(
    ("patches", "releases"),
    [
        ((FIX_PATCH,), WITH_STATIC_SINK),
        ((FIX_PATCH, OPT_OUT_PATCH), WITH_V1_RUNNER),
    ],
    ids=["0004", "0004+0006"],
)
def test_the_series_gives_one_fixed_variant_on_every_release(
    tmp_path: Path, patches: tuple[Path, ...], releases: list[str]
) -> None:
    """Patch 0004 (and 0006 after it, where the V1 runner is) applies to each
    release's module; each result is one listed fixed factory, so the
    overlay does nothing there."""
    fixed = set()
    for version in releases:
        tree = patched(
            tmp_path / "-".join(p.name[:4] for p in patches), version, patches
        )
        code = inspect_static_sink_tree(tree)
        assert code.shape is Shape.FIXED, (version, code.detail)
        assert assess_file(tree / STATIC_SINK, version).action is Action.NOT_NEEDED
        fixed |= _factory_digests(tree)
    assert len(fixed) == 1
    (digest,) = fixed
    assert digest in KNOWN_FIXED
    assert KNOWN_FIXED[digest].startswith(
        "patch 0004 " if len(patches) == 1 else "patches"
    )


def test_every_listed_fixed_variant_is_made_by_the_series(tmp_path: Path) -> None:
    made = _factory_digests(patched(tmp_path / "a", "0.34.0", (FIX_PATCH,)))
    made |= _factory_digests(
        patched(tmp_path / "b", "0.33.0", (FIX_PATCH, OPT_OUT_PATCH))
    )
    assert made == set(KNOWN_FIXED)


def test_the_first_0004_is_left_alone(tmp_path: Path) -> None:
    """The first 0004 kept its own seq_lens but never refreshed them between
    Model Runner V2's draft steps: not fixed, not buggy, not touched."""
    first = FIRST_0004.read_bytes()
    tree = patched(tmp_path, "0.33.0", first)
    code = inspect_static_sink_tree(tree)
    assert code.shape is Shape.UNKNOWN, code.detail
    state = assess_file(tree / STATIC_SINK, "0.33.0")
    assert state.action is Action.UNRECOGNISED and state.plan is None


def factory_line(source: str) -> int:
    """The line of ``def create_static_sink_attention_backend(``."""
    return next(
        i
        for i, line in enumerate(source.splitlines(), 1)
        if line.startswith(f"def {FACTORY}(")
    )


def build_method(source: str) -> str:
    """``StaticSinkAttentionBuilder.build``, unparsed."""
    factory = next(
        n
        for n in ast.parse(source).body
        if isinstance(n, ast.FunctionDef) and n.name == FACTORY
    )
    (builder,) = [
        n
        for n in factory.body
        if isinstance(n, ast.ClassDef) and n.name == "StaticSinkAttentionBuilder"
    ]
    method = method_def(builder, "build")
    assert method is not None
    return ast.unparse(method)


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
    assert f"{file}:{factory_line(vendor)}" in state.reason
    assert "no known upstream factory" in state.reason
    assert state.plan is None


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("version", ["0.14.0", "0.33.0"])
def test_a_vendor_shape_around_build_is_left_alone(
    tmp_path: Path, shape: str, version: str
) -> None:
    """The issue's four vendor shapes keep ``build`` as upstream's (a proof
    of that method alone called them installable) and change what the
    runner calls: no known factory, left alone, named by file and line."""
    source = (released(version) or b"").decode()
    vendor = SHAPES[shape](source)
    assert build_method(vendor) == build_method(source)
    file = tmp_path / "static_sink_attention.py"
    file.write_text(vendor)
    state = assess_file(file, f"{version}+vendor")
    assert state.action is Action.UNRECOGNISED, state.reason
    assert state.plan is None and state.affected is None
    assert f"{file}:{factory_line(vendor)}" in state.reason
    assert "no known upstream factory" in state.reason
