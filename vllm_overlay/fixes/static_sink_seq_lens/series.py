"""StaticSink's patches read on a source tree: 0004 (the fix) and 0005 (its test).

0004 is carried where the factory is a known upstream one whose builder
writes the shared metadata, and holds once it is patch 0004's (no release
fixes it yet); 0005 is carried wherever there is a static-sink builder, and
holds once a vLLM test makes a static-sink backend, builds, and then
asserts on ``seq_lens``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from vllm_overlay.code import Code
from vllm_overlay.fixes.static_sink_seq_lens import FACTORY, inspect_static_sink_tree
from vllm_overlay.patch_rules import Cache, PatchRule, fix_patch, test_patch
from vllm_overlay.vllm_tests import (
    ATTENTION_TESTS,
    asserts_on,
    calls,
    find_test,
    test_functions,
)


def factory(tree: Path, cache: Cache) -> Code:
    """0004's reading: the factory's shape."""
    return inspect_static_sink_tree(tree)


def regression_test_present(tree: Path) -> Code:
    """0005: a vLLM test makes a static-sink backend, builds metadata with
    it, and then asserts on ``seq_lens``.

    Judged by what a test function does, in the order of its lines: a call
    of ``create_static_sink_attention_backend`` (or of a module-level helper
    that calls it), a later ``.build(...)``
    call, and after that an ``assert`` (or an ``assert*`` call) whose
    expression reads a ``seq_lens``. Any module under tests/v1/attention
    counts, whatever its name, so an upstream version of 0005's test is
    recognised; a file that only names the factory is not.
    """
    return find_test(
        tree,
        _sink_test_line,
        f"no test in {ATTENTION_TESTS} builds with {FACTORY}'s builder and then "
        "asserts on seq_lens",
    )


def _sink_test_line(source: str) -> int | None:
    """The line of a test that makes a static-sink backend, builds, then
    asserts on seq_lens."""
    if FACTORY not in source:
        return None
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    # A module-level helper that calls the factory makes the backend for
    # the test that calls it (vLLM's tests often build through helpers).
    makers = {FACTORY} | {
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef)
        and any(calls(c, FACTORY) for c in ast.walk(node))
    }
    for test in test_functions(module):
        nodes = list(ast.walk(test))
        made = [c.lineno for c in nodes if any(calls(c, m) for m in makers)]
        if not made:
            continue
        built = [c.lineno for c in nodes if calls(c, "build") and c.lineno > min(made)]
        if built and any(
            asserts_on(n, "seq_lens") and n.lineno > min(built) for n in nodes
        ):
            return test.lineno
    return None


RULES: tuple[PatchRule, ...] = (
    fix_patch("static-sink-keeps-shared-seq-lens", factory),
    test_patch("static-sink-regression-test-present", factory, regression_test_present),
)
