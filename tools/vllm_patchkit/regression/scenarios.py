"""The capture-time scenarios, each run against whatever vLLM is importable.

A scenario never decides pass or fail by itself: it records what vLLM did
(the facts, or the exception with the file and line that raised it). The
expectations live in :mod:`vllm_patchkit.regression.verdict`, so the same
run shows the bug on stock code and its absence with the fix.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from vllm_patchkit.regression import harness

DECODE_QUERY_LENS = (1, 3)
"""1: plain decode; 3: speculative decoding with two draft tokens."""
NUM_REQS = 4


@dataclass
class Outcome:
    scenario: str
    decode_query_len: int
    status: str
    """``ok``, ``raised`` or ``unavailable`` (the tree lacks the builder)."""
    facts: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _vllm_relpath(filename: str) -> str:
    _, sep, tail = filename.rpartition("/vllm/")
    return f"vllm/{tail}" if sep else filename


def _error_info(exc: BaseException) -> dict[str, Any]:
    """The exception and the innermost vLLM frame that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    vllm_frames = [f for f in frames if "/vllm/" in f.filename] or frames
    last = vllm_frames[-1]
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "file": last.filename,
        "relpath": _vllm_relpath(last.filename),
        "line": last.lineno,
        "function": last.name,
        "source": (last.line or "").strip(),
    }


def capture_effects(decode_query_len: int) -> Outcome:
    """What the ROCm builder's capture leaves in the shared metadata."""
    rocm = harness.make_builder(harness.rocm_builder_cls(), decode_query_len, "rocm")
    metadata = harness.uniform_decode_metadata(NUM_REQS, decode_query_len)
    device = metadata.query_start_loc
    host = metadata.query_start_loc_cpu
    device_ptr = device.data_ptr()
    host_before = host.clone()
    attn = rocm.build_for_cudagraph_capture(metadata)
    return Outcome(
        "capture_effects",
        decode_query_len,
        "ok",
        facts={
            "device_same_tensor": metadata.query_start_loc is device
            and device.data_ptr() == device_ptr,
            "device_zeroed": bool(torch.all(device == 0)),
            "seq_lens_all_one": bool(torch.all(attn.seq_lens == 1)),
            "host_same_tensor": metadata.query_start_loc_cpu is host,
            "host_unchanged": bool(
                torch.equal(metadata.query_start_loc_cpu, host_before)
            ),
            "host_after": metadata.query_start_loc_cpu.tolist(),
        },
    )


def minimax_indexer_after_rocm(decode_query_len: int) -> Outcome:
    """The PR's crash: MiniMax-M3's indexer builder after the ROCm builder."""
    try:
        indexer = harness.import_without_parent_init(
            "vllm.models.minimax_m3", "common.indexer"
        )
    except ModuleNotFoundError as exc:
        return Outcome(
            "minimax_indexer_after_rocm",
            decode_query_len,
            "unavailable",
            error={"type": type(exc).__name__, "message": str(exc)},
        )
    rocm = harness.make_builder(harness.rocm_builder_cls(), decode_query_len, "rocm")
    index = harness.make_builder(
        indexer.MiniMaxM3IndexerTritonMetadataBuilder, decode_query_len, "indexer"
    )
    metadata = harness.uniform_decode_metadata(NUM_REQS, decode_query_len)
    rocm.build_for_cudagraph_capture(metadata)
    try:
        built = index.build_for_cudagraph_capture(metadata)
    except Exception as exc:  # the bug under test is an AssertionError
        return Outcome(
            "minimax_indexer_after_rocm",
            decode_query_len,
            "raised",
            error=_error_info(exc),
        )
    decode = built.decode
    return Outcome(
        "minimax_indexer_after_rocm",
        decode_query_len,
        "ok",
        facts={
            "num_decodes": built.num_decodes,
            "decode_query_len": decode.decode_query_len if decode else None,
        },
    )


SCENARIOS: dict[str, Callable[[int], Outcome]] = {
    "capture_effects": capture_effects,
    "minimax_indexer_after_rocm": minimax_indexer_after_rocm,
}


def run_all(names: list[str] | None = None) -> list[Outcome]:
    outcomes = []
    for name in names or list(SCENARIOS):
        for query_len in DECODE_QUERY_LENS:
            try:
                outcomes.append(SCENARIOS[name](query_len))
            except Exception as exc:  # a harness failure, reported, not hidden
                outcomes.append(
                    Outcome(name, query_len, "error", error=_error_info(exc))
                )
    return outcomes
