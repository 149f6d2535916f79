"""The #53821 fix: which AITER unified code it accepts, and how it installs.

The shape check runs on source variants (AST only). The install step runs on
real modules: a copy of installed vLLM 0.28.0's ``rocm_aiter_unified_attn.py``
written to disk and imported under another name, so it binds vLLM's real
``RocmAttentionMetadataBuilder`` while the class it changes is the copy's,
never vLLM's own (other tests in this process keep vLLM as installed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.conftest import ModuleFromSource
from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_aiter_unified_builder import (
    assess_file as assess_aiter_file,
)
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    AITER_UNIFIED_ATTN,
    inspect_aiter_source,
)
from vllm_overlay.fixes.rocm_aiter_unified_builder.install import (
    AITER_BUILDER,
    AiterPlan,
    install_on,
    installed_builder,
    is_installed_on,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.code import ROCM_ATTN, CaptureCode
from vllm_overlay.proof import FixRefused
from vllm_overlay.state import Action
from vllm_patchkit.git.invariants import check_invariant

FILE = Path("/v/rocm_aiter_unified_attn.py")
HEADER = """\
from vllm.v1.attention.backends.rocm_attn import (
    RocmAttentionBackend,
    RocmAttentionMetadataBuilder,
)


"""
SHARED = (
    HEADER
    + """\
class RocmAiterUnifiedAttentionBackend(RocmAttentionBackend):
    @staticmethod
    def get_name() -> str:
        return "ROCM_AITER_UNIFIED_ATTN"

    @staticmethod
    def get_builder_cls() -> type["RocmAttentionMetadataBuilder"]:
        return RocmAttentionMetadataBuilder
"""
)
OWN = (
    HEADER
    + """\
class RocmAiterUnifiedAttentionMetadataBuilder(RocmAttentionMetadataBuilder):
    def build_for_cudagraph_capture(self, common_attn_metadata):
        attn_metadata = self.build(0, common_attn_metadata)
        attn_metadata.seq_lens.fill_(1)
        return attn_metadata


class RocmAiterUnifiedAttentionBackend(RocmAttentionBackend):
    @staticmethod
    def get_builder_cls():
        return RocmAiterUnifiedAttentionMetadataBuilder
"""
)
RETURN = "        return RocmAttentionMetadataBuilder\n"


def shape(source: str) -> Shape:
    return inspect_aiter_source(source, FILE).shape


def test_the_known_shapes() -> None:
    shared = inspect_aiter_source(SHARED, FILE)
    assert shared.shape is Shape.BUGGY and shared.affected
    assert shared.line == 13 and shared.method is not None
    assert "imported from vllm.v1.attention.backends.rocm_attn at line 1" in (
        shared.detail
    )
    own = inspect_aiter_source(OWN, FILE)
    assert own.shape is Shape.FIXED and not own.affected
    assert "leaves query_start_loc and query_start_loc_cpu alone" in own.detail
    docstring = SHARED.replace(RETURN, '        """Vendor doc."""\n' + RETURN)
    assert shape(docstring) is Shape.BUGGY


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (
            SHARED.replace(RETURN, "        x = 1\n" + RETURN),
            "the body is not one `return <name>`",
        ),
        (
            SHARED.replace(
                "    @staticmethod\n    def get_builder_cls",
                "    @classmethod\n    def get_builder_cls",
            ).replace("get_builder_cls()", "get_builder_cls(cls)"),
            "not a plain @staticmethod",
        ),
        (
            SHARED.replace(
                "    RocmAttentionMetadataBuilder,\n)",
                "    RocmAttentionMetadataBuilder,\n)\n"
                "RocmAttentionMetadataBuilder = RocmAttentionBackend",
            ),
            "binds that name at line(s) [1, 5]",
        ),
        (
            SHARED.replace(
                "    RocmAttentionMetadataBuilder,\n)",
                "    RocmAttentionMetadataBuilder as RocmAttentionMetadataBuilder,\n)",
            ),
            "not only by `from vllm.v1.attention.backends.rocm_attn import",
        ),
        (
            SHARED + "\n\ndef f():\n    global RocmAttentionMetadataBuilder\n",
            "not only by",
        ),
        (
            SHARED.replace(RETURN, "        return SomethingElse\n"),
            "returns SomethingElse, which is not one builder class",
        ),
        (
            OWN.replace(
                "        attn_metadata.seq_lens.fill_(1)\n",
                "        attn_metadata.seq_lens.fill_(1)\n"
                "        common_attn_metadata.query_start_loc.zero_()\n",
            ),
            "is not one method that leaves both query offsets alone",
        ),
        # The device zeroing written another way (issue "Right on the
        # checkouts users have", item 6): never "own builder".
        (
            OWN.replace(
                "        attn_metadata.seq_lens.fill_(1)\n",
                "        attn_metadata.seq_lens.fill_(1)\n"
                "        dev = common_attn_metadata.query_start_loc\n"
                "        dev.zero_()\n",
            ),
            "is not one method that leaves both query offsets alone",
        ),
        (
            OWN.replace(
                "        attn_metadata.seq_lens.fill_(1)\n",
                "        attn_metadata.seq_lens.fill_(1)\n"
                "        torch.Tensor.zero_(common_attn_metadata.query_start_loc)\n",
            ),
            "is not one method that leaves both query offsets alone",
        ),
        (
            SHARED.replace(
                "    @staticmethod\n    def get_builder_cls() -> type",
                "    get_builder_cls = None\n\n    @staticmethod\n    def g() -> type",
            ),
            "is not one plain method definition",
        ),
        (HEADER + "class RocmAiterUnifiedAttentionBackend:\n    pass\n", "defines no"),
    ],
)
def test_anything_else_is_unknown_naming_the_line(source: str, why: str) -> None:
    code = inspect_aiter_source(source, FILE)
    assert code.shape is Shape.UNKNOWN, code
    assert not code.judged
    assert why in code.detail
    assert code.line is not None


def test_unparseable_and_missing() -> None:
    broken = inspect_aiter_source(
        SHARED.replace("class Rocm", "<<<<<<< HEAD\nclass Rocm"), FILE
    )
    assert broken.shape is Shape.UNPARSEABLE and not broken.judged
    assert broken.line == 7
    assert shape(HEADER) is Shape.MISSING


def rocm_code(shape: Shape) -> CaptureCode:
    return CaptureCode(shape, Path("/v/rocm_attn.py"), 97, f"rocm_attn is {shape}")


@pytest.mark.parametrize(
    ("rocm", "action"),
    [
        (Shape.BUGGY, Action.INSTALLED),
        (Shape.FIXED, Action.INSTALLED),
        (Shape.NOT_FOR, Action.NOT_NEEDED),
        (Shape.UNKNOWN, Action.UNRECOGNISED),
        (Shape.UNPARSEABLE, Action.UNRECOGNISED),
    ],
)
def test_the_decision_needs_a_known_generic_capture(
    tmp_path: Path, rocm: Shape, action: Action
) -> None:
    file = tmp_path / "rocm_aiter_unified_attn.py"
    file.write_text(SHARED)
    state = assess_aiter_file(file, rocm_code(rocm), "0.28.0")
    assert state.action is action, state.reason
    assert state.name == "rocm-aiter-unified-capture-keeps-offsets"
    if action is Action.UNRECOGNISED:
        assert state.reason.startswith(f"left as it is: {file}:13 ")
        assert f"not a known shape ({rocm})" in state.reason


def test_own_builder_is_not_needed_whatever_rocm_attn_does(tmp_path: Path) -> None:
    file = tmp_path / "rocm_aiter_unified_attn.py"
    file.write_text(OWN)
    state = assess_aiter_file(file, rocm_code(Shape.FIXED), "0.29.0")
    assert state.action is Action.NOT_NEEDED and state.plan is None


# --- install, on a copy of the real 0.28.0 module -----------------------------


def installed_aiter_source() -> str:
    from vllm_patchkit.trees.installed import installed_vllm_dir

    return (installed_vllm_dir().parent / AITER_UNIFIED_ATTN).read_text()


def plan_for(source: str, file: Path) -> AiterPlan:
    code = inspect_aiter_source(source, file)
    assert code.shape is Shape.BUGGY, code.detail
    return AiterPlan(code)


@pytest.mark.usefixtures("vllm_in_process")
def test_install_hands_out_a_subclass_and_is_idempotent(
    module_from_source: ModuleFromSource,
) -> None:
    from vllm.v1.attention.backends import rocm_attn

    source = installed_aiter_source()
    module, file = module_from_source(source, "aiter_copy_install")
    backend = module.RocmAiterUnifiedAttentionBackend
    vendor_function = backend.__dict__["get_builder_cls"].__func__
    builder, new = install_on(module, plan_for(source, file))
    assert new and is_installed_on(module)
    assert backend.get_builder_cls() is builder is installed_builder(backend)
    assert builder.__qualname__ == builder.__name__ == AITER_BUILDER
    assert builder.__mro__[1] is rocm_attn.RocmAttentionMetadataBuilder
    # Only build_for_cudagraph_capture is its own (and ABC bookkeeping).
    own = {k for k in vars(builder) if not k.startswith("__")} - {"_abc_impl"}
    assert own == {"build_for_cudagraph_capture"}
    # The vendor's function still runs, wrapped (inspect sees through it).
    assert backend.__dict__["get_builder_cls"].__func__.__wrapped__ is vendor_function
    # ROCM_ATTN and vLLM's own AITER backend are not touched.
    assert rocm_attn.RocmAttentionBackend.get_builder_cls() is (
        rocm_attn.RocmAttentionMetadataBuilder
    )
    again, new = install_on(module, plan_for(source, file))
    assert again is builder and not new


@pytest.mark.usefixtures("vllm_in_process")
def test_install_refuses_code_it_did_not_read(
    module_from_source: ModuleFromSource,
) -> None:
    source = installed_aiter_source()
    module, file = module_from_source(source, "aiter_copy_refuse")
    before = module.RocmAiterUnifiedAttentionBackend.__dict__["get_builder_cls"]
    # The file changed on disk after the import (an upgrade mid-run): the
    # method moved down two lines.
    changed = source.replace("logger = init_logger", "\n\nlogger = init_logger")
    file.write_text(changed)
    with pytest.raises(FixRefused, match="not compiled from this source"):
        install_on(module, plan_for(changed, file))
    file.write_text(source)
    # The module's name rebound after import.
    module.RocmAttentionMetadataBuilder = type("Other", (), {})
    with pytest.raises(FixRefused, match="rebound since import"):
        install_on(module, plan_for(source, file))
    assert module.RocmAiterUnifiedAttentionBackend.__dict__["get_builder_cls"] is before
    assert not is_installed_on(module)


@pytest.mark.usefixtures("vllm_in_process")
def test_install_refuses_a_replaced_method(
    module_from_source: ModuleFromSource,
) -> None:
    source = installed_aiter_source()
    module, file = module_from_source(source, "aiter_copy_replaced")
    backend = module.RocmAiterUnifiedAttentionBackend
    backend.get_builder_cls = classmethod(lambda cls: None)  # type: ignore[assignment]
    with pytest.raises(FixRefused, match="not the plain static method"):
        install_on(module, plan_for(source, file))


def test_each_fix_is_decided_on_its_own_for_a_tree(tmp_path: Path) -> None:
    """``vllm_overlay.fixes.assess_tree``: the reports' one call per tree,
    one decision per fix; a fix whose file the tree lacks is ABSENT."""
    from vllm_overlay.fixes import FIXES, assess_tree
    from vllm_overlay.fixes.rocm_capture_host_offsets.code import ROCM_ATTN
    from vllm_patchkit.trees.installed import installed_vllm_dir

    capture = "rocm-capture-keeps-host-offsets"
    aiter = "rocm-aiter-unified-capture-keeps-offsets"
    sink = "static-sink-keeps-shared-seq-lens"

    def decided() -> dict[str, Action]:
        states = assess_tree(tmp_path, "vendor")
        assert [s.name for s in states] == [fix.name for fix in FIXES]
        for fix, state in zip(FIXES, states, strict=True):
            if not (tmp_path / fix.record.source_file).exists():
                assert state.action is Action.ABSENT, fix.name
        return {state.name: state.action for state in states}

    installed = installed_vllm_dir().parent
    (tmp_path / ROCM_ATTN).parent.mkdir(parents=True)
    (tmp_path / ROCM_ATTN).write_bytes((installed / ROCM_ATTN).read_bytes())
    (tmp_path / AITER_UNIFIED_ATTN).write_text(OWN)
    actions = decided()
    assert actions[capture] is Action.INSTALLED  # 0.28.0's rocm_attn
    assert actions[aiter] is Action.NOT_NEEDED  # a builder of its own
    assert actions[sink] is Action.ABSENT  # no static-sink module in this tree
    (tmp_path / AITER_UNIFIED_ATTN).unlink()
    actions = decided()
    assert actions[capture] is Action.INSTALLED and actions[aiter] is Action.ABSENT


ROCM_FIXED = """\
class RocmAttentionMetadataBuilder:
    def build_for_cudagraph_capture(self, common_attn_metadata):
        attn_metadata = self.build(0, common_attn_metadata)
        attn_metadata.seq_lens.fill_(1)
        common_attn_metadata.query_start_loc.zero_()
        return attn_metadata
"""


@pytest.mark.parametrize(
    ("aliased", "holds"),
    [(False, True), (True, False)],
    ids=["own-builder", "own-builder-zeroing-through-an-alias"],
)
def test_the_0003_invariant_does_not_hold_through_an_alias(
    tmp_path: Path, aliased: bool, holds: bool
) -> None:
    """check/apply's upstreamed detection of 0003 uses the same proof."""
    aiter = OWN
    if aliased:
        aiter = OWN.replace(
            "        attn_metadata.seq_lens.fill_(1)\n",
            "        attn_metadata.seq_lens.fill_(1)\n"
            "        dev = common_attn_metadata.query_start_loc\n"
            "        dev.zero_()\n",
        )
    (tmp_path / AITER_UNIFIED_ATTN).parent.mkdir(parents=True)
    (tmp_path / AITER_UNIFIED_ATTN).write_text(aiter)
    (tmp_path / ROCM_ATTN).write_text(ROCM_FIXED)
    result = check_invariant("rocm-aiter-unified-capture-keeps-offsets", tmp_path)
    assert result.holds is holds, result
