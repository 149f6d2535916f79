"""The overlay's fix: one statement out of the method as written, nothing else.

Planning works on source (the AST); the compile step on real Python modules
written to disk and imported, with ``super()``, defaults, annotations and a
``from __future__`` import, as a vLLM build may have them.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.unit.conftest import ModuleFromSource
from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    CaptureCode,
    classify_method,
    find_capture_method,
    inspect_capture_source,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.install import (
    FIX_MARKER,
    ORIGINAL_ATTR,
    FixPlan,
    fixed_function,
    plan_fix,
    removed_statements,
)
from vllm_overlay.proof import FixRefused

MODULE = '''\
from __future__ import annotations

calls = []


class Base:
    def build(self, common_prefix_len, common_attn_metadata):
        calls.append("base")
        return "base"


class RocmAttentionMetadataBuilder(Base):
    def build_for_cudagraph_capture(
        self, common_attn_metadata: "Metadata", extra: int = 7, *, flag: bool = True
    ) -> str:
        """Vendor docstring."""
        attn_metadata = self.build(0, common_attn_metadata)
        calls.append(type(super()).__name__)
{body}
        return attn_metadata
'''
BUGGY_BODY = """\
common_attn_metadata.query_start_loc.zero_()
common_attn_metadata.query_start_loc_cpu.zero_()
"""


def method_and_code(source: str, file: Path) -> tuple[ast.FunctionDef, CaptureCode]:
    module = ast.parse(source)
    method = find_capture_method(module)
    assert method is not None
    return method, classify_method(method, file)


def module_source(body: str) -> str:
    return MODULE.format(body=textwrap.indent(body, " " * 8))


def plan_for(body: str, file: Path = Path("rocm_attn.py")) -> FixPlan:
    return plan_fix(*method_and_code(module_source(body), file))


class Offsets:
    def __init__(self) -> None:
        self.query_start_loc = Tensor()
        self.query_start_loc_cpu = Tensor()


class Tensor:
    def __init__(self) -> None:
        self.zeroed = False

    def zero_(self) -> Tensor:
        self.zeroed = True
        return self


def test_the_plan_removes_exactly_the_host_zeroing() -> None:
    plan = plan_for(BUGGY_BODY)
    assert plan.removed_source == "common_attn_metadata.query_start_loc_cpu.zero_()"
    assert plan.removed_line == 20
    removed = removed_statements(plan.method, plan.fixed)
    assert removed is not None and [ast.unparse(s) for s in removed] == [
        plan.removed_source
    ]
    assert classify_method(plan.fixed, Path("x")).shape is Shape.FIXED


@pytest.mark.parametrize(
    "vendor",
    [
        "self._amd_marker = 1\n",
        "if common_attn_metadata is not None:\n    print('vendor')\n",
        "for _ in range(2):\n    pass\nelse:\n    self._amd_marker = 2\n",
    ],
)
def test_vendor_statements_are_kept(vendor: str) -> None:
    plan = plan_for(vendor + BUGGY_BODY)
    kept = [ast.dump(s) for s in plan.fixed.body]
    assert all(ast.dump(s) in kept for s in ast.parse(vendor).body)
    assert "query_start_loc_cpu" not in ast.unparse(plan.fixed)
    assert "query_start_loc.zero_()" in ast.unparse(plan.fixed)


def test_host_zeroing_in_a_nested_block_is_removed_there() -> None:
    plan = plan_for(
        "common_attn_metadata.query_start_loc.zero_()\n"
        "if True:\n"
        "    self._amd_marker = 1\n"
        "    common_attn_metadata.query_start_loc_cpu.zero_()\n"
    )
    assert "self._amd_marker = 1" in ast.unparse(plan.fixed)
    assert "query_start_loc_cpu" not in ast.unparse(plan.fixed)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            BUGGY_BODY + "common_attn_metadata.query_start_loc_cpu.zero_()\n",
            "2 statements",
        ),
        (
            (
                "common_attn_metadata.query_start_loc.zero_()\n"
                "x = common_attn_metadata.query_start_loc_cpu.zero_()\n"
            ),
            "0 statements",
        ),
        (
            (
                "common_attn_metadata.query_start_loc.zero_()\n"
                "if flag:\n    common_attn_metadata.query_start_loc_cpu.zero_()\n"
            ),
            "empty block",
        ),
        (
            (
                "common_attn_metadata.query_start_loc.zero_()\n"
                "common_attn_metadata.query_start_loc_cpu.zero_()\n"
                "common_attn_metadata.query_start_loc_cpu.fill_(0)\n"
            ),
            "2 statements",
        ),
    ],
)
def test_anything_else_is_refused_naming_file_and_line(body: str, why: str) -> None:
    source = module_source(body)
    method, code = method_and_code(source, Path("/v/rocm_attn.py"))
    assert code.shape is Shape.BUGGY
    with pytest.raises(FixRefused, match=why) as refused:
        plan_fix(method, code)
    assert "/v/rocm_attn.py:" in str(refused.value)


def test_decorated_and_unknown_methods_are_refused() -> None:
    decorated = module_source(BUGGY_BODY).replace(
        "    def build_for_cudagraph_capture(\n        self, common",
        "    @staticmethod\n    def build_for_cudagraph_capture(\n        self, common",
    )
    with pytest.raises(FixRefused, match="decorated"):
        plan_fix(*method_and_code(decorated, Path("rocm_attn.py")))
    unknown = module_source("common_attn_metadata.query_start_loc_cpu.zero_()\n")
    with pytest.raises(FixRefused, match="not the known bug"):
        plan_fix(*method_and_code(unknown, Path("rocm_attn.py")))


def test_the_diff_sees_any_change_that_is_not_a_removal() -> None:
    plan = plan_for(BUGGY_BODY)
    changed = ast.parse(ast.unparse(plan.method).replace("zero_()", "zero_(1)", 1))
    assert removed_statements(plan.method, changed.body[0]) is None
    assert removed_statements(plan.fixed, plan.method) is None  # an addition


def test_the_fixed_function_keeps_every_other_line_and_the_closure(
    module_from_source: ModuleFromSource,
) -> None:
    body = "self._amd_marker = extra\n" + BUGGY_BODY
    module, _ = module_from_source(module_source(body), "vendor_rocm_attn")
    cls = module.RocmAttentionMetadataBuilder
    live = cls.__dict__["build_for_cudagraph_capture"]
    plan = plan_for(body, Path(module.__file__))
    fixed = fixed_function(plan, live)
    assert getattr(fixed, FIX_MARKER) and getattr(fixed, ORIGINAL_ATTR) is live
    assert fixed.__qualname__ == live.__qualname__
    assert fixed.__doc__ == "Vendor docstring."
    assert fixed.__defaults__ == (7,) and fixed.__kwdefaults__ == {"flag": True}
    assert fixed.__annotations__ == live.__annotations__
    assert fixed.__code__.co_filename == module.__file__
    assert fixed.__code__.co_firstlineno == live.__code__.co_firstlineno

    cls.build_for_cudagraph_capture = fixed
    builder, offsets = cls(), Offsets()
    assert builder.build_for_cudagraph_capture(offsets) == "base"  # super() works
    assert module.calls == ["base", "super"]
    assert builder._amd_marker == 7
    assert offsets.query_start_loc.zeroed and not offsets.query_start_loc_cpu.zeroed


def test_a_method_that_is_not_the_source_read_is_refused(
    module_from_source: ModuleFromSource,
) -> None:
    module, _ = module_from_source(module_source(BUGGY_BODY), "changed_rocm_attn")
    live = module.RocmAttentionMetadataBuilder.__dict__["build_for_cudagraph_capture"]
    # The file changed on disk after the import (an upgrade mid-run).
    changed = "self._late = 1\n" + BUGGY_BODY
    with pytest.raises(FixRefused, match="not compiled from this source"):
        fixed_function(plan_for(changed, Path(module.__file__)), live)
    # Someone else already wrapped the method.
    with pytest.raises(FixRefused, match="not the plain function"):
        fixed_function(plan_for(BUGGY_BODY, Path(module.__file__)), staticmethod(live))


@pytest.mark.usefixtures("vllm_in_process")
def test_the_installed_vllm_method_recompiles_to_its_own_code() -> None:
    """On the real vLLM 0.28.0 module: the proof step holds, and the fix
    differs from vLLM's method by exactly the host zeroing."""
    from vllm.v1.attention.backends import rocm_attn

    file = Path(rocm_attn.__file__)
    source = file.read_text()
    method, code = method_and_code(source, file)
    plan = plan_fix(method, code)
    live: Any = rocm_attn.RocmAttentionMetadataBuilder.__dict__[
        "build_for_cudagraph_capture"
    ]
    fixed = fixed_function(plan, live)
    gone = set(live.__code__.co_names) - set(fixed.__code__.co_names)
    assert gone == {"query_start_loc_cpu"}
    assert len(fixed.__code__.co_code) < len(live.__code__.co_code)
    assert inspect_capture_source(source, file).shape is Shape.BUGGY
