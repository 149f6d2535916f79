"""The memory checker on small real Triton kernels run by the interpreter."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter

from vllm_patchkit.judge.memcheck import MemoryViolation, Stats, memcheck

pytestmark = pytest.mark.kernels


@triton.jit
def _copy(src, dst, n, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    live = offs < n
    tl.store(dst + offs, tl.load(src + offs + shift, mask=live), mask=live)


@triton.jit
def _bump(dst, n, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(dst + offs + shift, 1.0, mask=offs < n)


@triton.jit
def _swap(dst, shift):
    tl.atomic_cas(dst + shift, 0.0, 1.0)


@triton.jit
def _via_descriptor(src, dst, n, BLOCK: tl.constexpr):
    desc = tl.make_tensor_descriptor(src, shape=[n], strides=[1], block_shape=[BLOCK])
    tl.store(dst + tl.arange(0, BLOCK), desc.load([0]))


def copy(src: torch.Tensor, dst: torch.Tensor, n: int, shift: int = 0) -> None:
    _copy[(1,)](src, dst, n, shift, BLOCK=triton.next_power_of_2(max(n, 16)))


def test_in_bounds_accesses_are_counted() -> None:
    src, dst = torch.arange(10.0), torch.zeros(10)
    with memcheck() as seen:
        copy(src, dst, 10)
    assert torch.equal(dst, src)
    assert (seen.launches, seen.accesses, seen.lanes) == (1, 2, 20)
    assert seen.kernels == {"_copy"}


def test_load_past_the_end_names_kernel_argument_and_offset() -> None:
    src, dst = torch.arange(10.0), torch.zeros(10)
    with pytest.raises(MemoryViolation) as caught, memcheck():
        copy(src, dst, 10, shift=1)
    found = caught.value
    assert (found.kernel, found.argument, found.offset) == ("_copy", "src", 40)
    assert "0 bytes after the end of 'src'" in str(found)
    assert "1 of 16 lanes out of bounds, first at lane (9,)" in str(found)
    assert not dst.any()  # the kernel stopped at the load


def test_store_is_stopped_before_any_lane_is_written() -> None:
    src, dst = torch.arange(10.0), torch.zeros(6)
    with pytest.raises(MemoryViolation) as caught, memcheck():
        copy(src, dst, 10)
    assert (caught.value.argument, caught.value.offset) == ("dst", 24)
    assert "out-of-bounds store" in str(caught.value)
    assert not dst.any()  # not even the six in-bounds lanes


def test_before_the_start() -> None:
    src, dst = torch.arange(10.0), torch.zeros(10)
    with pytest.raises(MemoryViolation) as caught, memcheck():
        copy(src, dst, 10, shift=-2)
    assert (caught.value.argument, caught.value.offset) == ("src", -8)
    assert "8 bytes before the start of 'src'" in str(caught.value)


def test_masked_lanes_are_not_accesses() -> None:
    src, dst = torch.arange(10.0), torch.zeros(10)
    with memcheck() as seen:
        copy(src, dst, 0, shift=1 << 20)
    assert seen.lanes == 0


def test_a_lane_inside_another_argument_is_out_of_bounds() -> None:
    # One buffer holds both tensors back to back, so src's overrun is
    # valid memory: a storage-only check would miss it.
    src, dst = torch.arange(10.0), torch.zeros(10)
    gap = (dst.data_ptr() - src.data_ptr()) // 4
    with pytest.raises(MemoryViolation) as caught, memcheck():
        copy(src, dst, 10, shift=gap)
    assert caught.value.argument == "src"
    assert "inside 'dst' instead" in str(caught.value)


def test_atomics_are_checked() -> None:
    dst = torch.zeros(8)
    with memcheck():
        _bump[(1,)](dst, 8, 0, BLOCK=16)
    assert torch.equal(dst, torch.ones(8))
    with pytest.raises(MemoryViolation, match="out-of-bounds atomic_rmw"), memcheck():
        _bump[(1,)](dst, 8, 1, BLOCK=16)
    with pytest.raises(MemoryViolation, match="out-of-bounds atomic_cas"), memcheck():
        _swap[(1,)](dst, 8)
    assert torch.equal(dst, torch.ones(8))


def test_tensor_descriptors_are_checked() -> None:
    src, dst = torch.arange(16.0), torch.zeros(32)
    with memcheck():
        _via_descriptor[(1,)](src, dst, 16, BLOCK=32)  # its bounds mask holds
    assert torch.equal(dst[:16], src) and not dst[16:].any()
    with pytest.raises(MemoryViolation) as caught, memcheck():
        _via_descriptor[(1,)](src, dst, 32, BLOCK=32)  # a shape larger than src
    assert (caught.value.argument, caught.value.offset) == ("src", 64)


def test_views_of_one_storage_are_one_region() -> None:
    buf = torch.arange(20.0)
    with memcheck():
        copy(buf[10:], buf[:10], 10)  # within the storage both views share
    assert torch.equal(buf[:10], buf[10:])
    with pytest.raises(MemoryViolation) as caught, memcheck():
        copy(buf[10:], buf[:10], 10, shift=1)
    assert caught.value.argument == "src/dst"


def test_checker_is_removed_on_exit() -> None:
    builder = interpreter.InterpreterBuilder
    original = builder.__dict__["create_masked_load"]
    with memcheck():
        assert builder.__dict__["create_masked_load"] is not original
        with memcheck():
            pass
        assert builder.__dict__["create_masked_load"] is not original
    assert builder.__dict__["create_masked_load"] is original


def test_fixture(memcheck: Stats) -> None:
    src, dst = torch.arange(4.0), torch.zeros(4)
    copy(src, dst, 4)
    assert memcheck.launches == 1 and memcheck.lanes == 8
