"""#51585's scenarios: what the ROCm capture leaves in the shared metadata,
and what the builders after it (the PR's MiniMax-M3 indexer, every victim,
vLLM's own per-group loops) build from it.

A scenario records what vLLM did (the facts, or the exception with the file
and line that raised it); :mod:`.checks` judges it, so the same run shows
the bug on stock code and its absence with the fix.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from vllm_patchkit.judge.regression import harness
from vllm_patchkit.judge.regression.by_fix import rocm_capture_host_offsets as names
from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets import (
    capture_loop,
    victims,
)
from vllm_patchkit.judge.regression.harness import NUM_REQS
from vllm_patchkit.judge.regression.recipes import add_group_fields, make_builder
from vllm_patchkit.judge.regression.records import (
    Outcome,
    describe,
    error_info,
    unavailable,
)
from vllm_patchkit.judge.regression.v1_runner import LoopUnavailable


def capture_effects(decode_query_len: int) -> Outcome:
    """What the ROCm builder's capture leaves in the shared metadata (the
    builder taken from its backend, as the runner takes it)."""
    facts = harness.capture_through(harness.rocm_backend_cls(), decode_query_len)
    return Outcome(names.CAPTURE, decode_query_len, "ok", facts)


def minimax_indexer_after_rocm(decode_query_len: int) -> Outcome:
    """The PR's crash: MiniMax-M3's indexer builder after the ROCm builder."""
    try:
        indexer = harness.import_vllm("vllm.models.minimax_m3.common.indexer")
    except ModuleNotFoundError as exc:
        return Outcome(
            names.MINIMAX,
            decode_query_len,
            "unavailable",
            # Absent from the tree (not a module it fails to import): by
            # content, whatever the tree's version says.
            facts={"absent": not harness.vllm_has("models/minimax_m3")},
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
        return Outcome(names.MINIMAX, decode_query_len, "raised", error=error_info(exc))
    decode = built.decode
    facts = {
        "num_decodes": built.num_decodes,
        "decode_query_len": decode.decode_query_len if decode else None,
    }
    return Outcome(names.MINIMAX, decode_query_len, "ok", facts)


def repeated_capture(decode_query_len: int) -> Outcome:
    """One ROCm builder capturing several batches, as the capture loop does.

    vLLM captures many batch shapes with the same builders. A decode batch is
    followed by a smaller mixed one (FULL graphs cover mixed batches for this
    ALWAYS-capable backend); the host offsets must be intact after each. This
    tells a fix that keeps the host offsets from one that restores them from
    a copy kept across calls.
    """
    rocm = harness.make_builder(harness.rocm_builder_cls(), decode_query_len, "rocm")
    batches = [[decode_query_len] * NUM_REQS, [decode_query_len, decode_query_len + 4]]
    kept, after, device_zeroed = [], [], []
    for query_lens in batches:
        metadata = harness.batch_metadata(query_lens)
        before = metadata.query_start_loc_cpu.clone()
        rocm.build_for_cudagraph_capture(metadata)
        kept.append(bool(torch.equal(metadata.query_start_loc_cpu, before)))
        after.append(metadata.query_start_loc_cpu.tolist())
        device_zeroed.append(bool(torch.all(metadata.query_start_loc == 0)))
    facts = {"host_kept": kept, "host_after": after, "device_zeroed": device_zeroed}
    return Outcome(names.REPEATED, decode_query_len, "ok", facts)


def victim_after_rocm(victim: victims.Victim, decode_query_len: int) -> Outcome:
    """The ROCm capture, then ``victim``'s, on one shared metadata object.

    The expectation is the victim's own build from the metadata the ROCm
    capture is meant to leave (device offsets zeroed, device ``seq_lens``
    set to 1, host untouched; see ``harness.apply_intended_capture_effects``).
    Any difference, or an exception, is the capture leaking into this builder.

    When the victim cannot even be made, or cannot build from the intended
    metadata, the rule of :func:`_victim_setup_failed` decides between a
    failure and a check that could not run.
    """
    from vllm.config import set_current_vllm_config

    def unavailable(why: str) -> Outcome:
        return _victim_unavailable(victim, decode_query_len, why)

    if decode_query_len not in victim.query_lens:
        return unavailable(f"not run at query length {decode_query_len} on CPU")
    try:
        cls = victims.builder_class(victim)
    except victims.VictimUnavailable as exc:
        cause = exc.__cause__
        # "Not in this tree" only when the tree lacks it; a module the tree
        # has that cannot import a package of its own cannot be imported.
        present = isinstance(cause, ModuleNotFoundError)
        present = present and harness.absent_module(cause) is None
        return unavailable(
            f"{'cannot import' if present else 'not in this tree'}: {exc}"
        )
    try:
        layer = f"{victim.scenario}.{decode_query_len}"
        builder = make_builder(cls, victim, decode_query_len, layer)
    except Exception as exc:  # see _victim_setup_failed
        return _victim_setup_failed(victim, decode_query_len, cls, exc, "be made")
    rocm = harness.make_builder(harness.rocm_builder_cls(), decode_query_len, "rocm")
    config = harness.vllm_config(decode_query_len, victim.model)

    intended = harness.uniform_decode_metadata(NUM_REQS, decode_query_len)
    add_group_fields(victim, intended)
    harness.apply_intended_capture_effects(intended)
    try:
        with set_current_vllm_config(config):
            expected = harness.snapshot(builder.build_for_cudagraph_capture(intended))
    except Exception as exc:  # see _victim_setup_failed
        return _victim_setup_failed(
            victim, decode_query_len, cls, exc, "build from the intended metadata"
        )

    shared = harness.uniform_decode_metadata(NUM_REQS, decode_query_len)
    add_group_fields(victim, shared)
    reads = harness.track_host_offset_reads(shared)
    rocm.build_for_cudagraph_capture(shared)
    reads.clear()
    facts: dict[str, Any] = {"builder": victim.qualname}
    try:
        with set_current_vllm_config(config):
            built = builder.build_for_cudagraph_capture(shared)
    except Exception as exc:  # what the capture does to this builder
        facts["reads_host_offsets"] = bool(reads)
        return Outcome(
            victim.scenario, decode_query_len, "raised", facts, error_info(exc)
        )
    facts["reads_host_offsets"] = bool(reads)
    facts["diverged"] = harness.diff(expected, harness.snapshot(built))
    return Outcome(victim.scenario, decode_query_len, "ok", facts)


def _victim_setup_failed(
    victim: victims.Victim,
    decode_query_len: int,
    cls: type,
    exc: Exception,
    step: str,
) -> Outcome:
    """A victim that cannot be made, or cannot build from the intended metadata.

    Neither step sees what the ROCm capture did: the intended metadata is
    made by the harness. So when the victim is not a ROCm builder and the
    exception did not come through the ROCm backend's file, the code under
    test took no part, and the victim would raise the same on a stock tree
    and on a fixed one (on CPU: a kernel launch, a CUDA-only package): the
    check could not run, and says why. Otherwise the code under test ran
    and raised: that is a failure (on a stock tree, the crash reproduced).
    """
    info = error_info(exc)
    why = f"cannot {step}: {describe(info)}"
    derived = issubclass(cls, harness.rocm_builder_cls())
    if derived or info["in_code_under_test"]:
        info["step"] = step
        facts = {"builder": victim.qualname, "derived_from_rocm": derived}
        return Outcome(victim.scenario, decode_query_len, "raised", facts, info)
    return _victim_unavailable(victim, decode_query_len, why)


def _victim_unavailable(victim: victims.Victim, query_len: int, why: str) -> Outcome:
    return unavailable(victim.scenario, query_len, why, builder=victim.qualname)


def _loop_scenario(name: str, run: Callable[[int], dict[str, Any]]) -> Scenario:
    def scenario(decode_query_len: int) -> Outcome:
        try:
            facts = run(decode_query_len)
        except LoopUnavailable as exc:
            return unavailable(name, decode_query_len, str(exc))
        return Outcome(name, decode_query_len, "ok", facts)

    scenario.__doc__ = f"vLLM's per-group loop ({name}) for capture."
    return scenario


Scenario = Callable[[int], Outcome]

SCENARIOS: dict[str, Scenario] = {
    names.CAPTURE: capture_effects,
    names.MINIMAX: minimax_indexer_after_rocm,
    names.REPEATED: repeated_capture,
    names.LOOP_V1: _loop_scenario(names.LOOP_V1, capture_loop.run_v1_loop),
    names.LOOP_V2: _loop_scenario(names.LOOP_V2, capture_loop.run_v2_loop),
    **{v.scenario: functools.partial(victim_after_rocm, v) for v in victims.VICTIMS},
}
