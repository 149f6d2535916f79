"""Capture-time and padded metadata: the cases where vLLM 0.28.0's kernel strays.

Each scenario is a batch plus metadata overrides as CUDA graph capture or
batch padding produces them, with upstream's first out-of-bounds access as
the Triton interpreter's memory checker sees it (kernel, argument, byte
offset) or ``None`` where upstream stays in bounds. Shared by the CPU test
(``test_capture_safety``), the GPU tier (``gpu_check``) and the sanitizer
children (``sanitize_child``), so all three run the same cases. Imports
neither vLLM nor pytest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tests.kernels.inputs import Case, Inputs

SENTINEL = 7.0  # what inputs.build puts in o


def i32(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32)


@dataclass
class Scenario:
    case: Case
    # Metadata overrides, computed from the built inputs (CPU tensors).
    overrides: Callable[[Inputs], dict[str, Any]]
    # Upstream's first violation: (kernel, argument, byte offset from inputs).
    upstream: tuple[str, str, Callable[[Inputs], int]] | None
    intact: tuple[int, ...] = ()  # requests the overlay must still compute
    untouched: tuple[int, ...] = field(default=())  # requests it must not write

    def arguments(self, inputs: Inputs) -> dict[str, Any]:
        """The overrides, on the device of the inputs."""
        device = inputs.args["q"].device
        return {
            name: value.to(device) if isinstance(value, torch.Tensor) else value
            for name, value in self.overrides(inputs).items()
        }


TWO = Case(((4, 10), (4, 10)))  # fp32, 4 query heads, 2 KV heads, page 16
DECODE3 = Case(((3, 20), (3, 20)), kv_from_cache=True)
ALIBI = TWO.with_(alibi=True)


def q_end(inputs: Inputs) -> int:
    return inputs.args["q"].nbytes


def table_end(inputs: Inputs) -> int:
    return inputs.args["b_loc"].nbytes


def one_block_before(inputs: Inputs) -> int:
    cache = inputs.args["k_cache"]
    return -cache.stride(0) * cache.element_size()


def cache_end(inputs: Inputs) -> int:
    return inputs.args["k_cache"].nbytes


def two_slots_before(inputs: Inputs) -> int:
    cache = inputs.args["k_cache"]  # slot stride: x elements
    return -2 * cache.stride(3) * cache.element_size()


def with_block(request: int, block: Callable[[Inputs], int]) -> Callable:
    def overrides(inputs: Inputs) -> dict[str, Any]:
        table = inputs.args["b_loc"].cpu().clone()
        table[request, 0] = block(inputs)
        return {"b_loc": table}

    return overrides


def capture_decode(zero_offsets: bool) -> Callable:
    """Uniform decode batch at capture: seq_lens filled with 1, table zeroed."""

    def overrides(inputs: Inputs) -> dict[str, Any]:
        starts = inputs.args["b_start_loc"].cpu()
        return {
            "b_start_loc": torch.zeros_like(starts) if zero_offsets else starts,
            "b_seq_len": torch.ones_like(inputs.args["b_seq_len"].cpu()),
            "b_loc": torch.zeros_like(inputs.args["b_loc"].cpu()),
        }

    return overrides


SCENARIOS = {
    # Query offsets past the end of q (a padded token count): reads q and
    # would write o past their last row.
    "offsets-past-q": Scenario(
        TWO,
        lambda _: {"b_start_loc": i32(0, 4, 9), "b_seq_len": i32(14, 15)},
        ("_fwd_kernel", "Q", q_end),
        intact=(0,),
        untouched=(1,),
    ),
    "padded-token-count": Scenario(
        TWO,
        lambda _: {"b_start_loc": i32(0, 8, 16), "b_seq_len": i32(18, 18)},
        ("_fwd_kernel", "Q", q_end),
    ),
    # A context longer than the block-table row (seq_lens not yet shrunk).
    "context-past-table-row": Scenario(
        TWO,
        lambda _: {"b_seq_len": i32(14, 14 + 2 * 16)},
        ("_fwd_kernel", "B_Loc", table_end),
        intact=(0,),
        untouched=(1,),
    ),
    "max-model-len-seq-lens": Scenario(
        TWO,
        lambda _: {"b_seq_len": i32(4096, 4096)},
        ("_fwd_kernel", "B_Loc", table_end),
        untouched=(0, 1),
    ),
    # Block ids that name no cache block.
    "block-id-minus-one": Scenario(
        TWO,
        with_block(1, lambda _: -1),
        ("_fwd_kernel", "K_cache", one_block_before),
        intact=(0,),
        untouched=(1,),
    ),
    "block-id-num-blocks": Scenario(
        TWO,
        with_block(1, lambda inputs: inputs.args["k_cache"].shape[0]),
        ("_fwd_kernel", "K_cache", cache_end),
        intact=(0,),
        untouched=(1,),
    ),
    # Spec-decode capture without the device zeroing, K/V read from the
    # cache: query_len 3 > seq_len 1 gives a context of -2 tokens.
    "cached-kv-decode3-seq-lens-1": Scenario(
        DECODE3,
        capture_decode(zero_offsets=False),
        ("_fwd_kernel", "K_cache", two_slots_before),
        untouched=(0, 1),
    ),
    "alibi-offsets-past-q": Scenario(
        ALIBI,
        lambda _: {"b_start_loc": i32(0, 4, 9), "b_seq_len": i32(14, 15)},
        ("_fwd_kernel_alibi", "Q", q_end),
        intact=(0,),
        untouched=(1,),
    ),
    "alibi-context-past-table-row": Scenario(
        ALIBI,
        lambda _: {"b_seq_len": i32(14, 14 + 2 * 16)},
        ("_fwd_kernel_alibi", "B_Loc", table_end),
        intact=(0,),
        untouched=(1,),
    ),
    # Metadata upstream survives: the #25983 band-aid (offsets zeroed,
    # seq_lens 1), capture without it on dense K/V, padded requests.
    "band-aid-dense": Scenario(
        Case(((3, 20), (3, 20))),
        capture_decode(zero_offsets=True),
        None,
        untouched=(0, 1),
    ),
    "band-aid-cached-kv": Scenario(
        DECODE3, capture_decode(True), None, untouched=(0, 1)
    ),
    "decode3-seq-lens-1-dense": Scenario(
        Case(((3, 20), (3, 20))), capture_decode(False), None
    ),
    "padded-requests": Scenario(
        Case(((4, 10), (0, 1), (0, 0))), lambda _: {}, None, intact=(0,)
    ),
}


def rows(inputs: Inputs, request: int) -> slice:
    starts = inputs.args["b_start_loc"]
    return slice(int(starts[request]), int(starts[request + 1]))
