"""Scenarios for the static-sink builder's writes to shared metadata.

``StaticSinkAttentionBuilder.build`` (made by vLLM's
``create_static_sink_attention_backend``, 0.14.0 on) adds the sink to the
sequence lengths it is handed. The model runner hands every KV-cache group a
shallow copy of one ``CommonAttentionMetadata``, so the tensors are shared:
a build that writes ``seq_lens`` in place, or reassigns fields on a shared
object, changes what every later group's builder reads. The scenarios run
the static-sink builder (over Triton attention, which builds on CPU in every
release that has the module), then other groups' builders, on such copies.

A scenario only records facts; the fix's ``FACTS`` (:mod:`.`) judge them.
It takes the backend factory as an argument (default: the importable one)
so mutants can be run in one process.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import types
from collections.abc import Callable
from typing import Any

import torch

from vllm_patchkit.judge.regression import harness
from vllm_patchkit.judge.regression.by_fix.static_sink import (
    DRAFT_UPDATE,
    MODULE,
    NO_DRAFT_UPDATE,
    NOT_APPLICABLE,
    PROPOSER_REBUILDS,
    RELPATH,
    SINK_ONCE,
    SINK_TWICE,
    SPECULATORS,
)
from vllm_patchkit.judge.regression.records import (
    Outcome,
    raised_outcome,
    setting_up,
    unavailable,
)

SINK_LEN = 2 * harness.BLOCK_SIZE
"""Two blocks of sink tokens, as openPangu's ``param_sink_number`` gives."""
SEQ_LENS = (40, 17, 64, 0)
"""The batch's lengths; the last request is CUDA-graph padding (length 0),
which must stay 0 with the sink."""

Create = Callable[..., type]


def _create() -> Create:
    from importlib import import_module

    return import_module(MODULE).create_static_sink_attention_backend


def _triton() -> type:
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend

    return TritonAttentionBackend


def shared_metadata(decode_query_len: int) -> Any:
    """The batch's metadata as the runner has it before the groups' builds:
    a block table as wide as the model allows (the static-sink builder
    copies as many columns as the longest sequence needs with the sink)."""
    metadata = harness.uniform_decode_metadata(len(SEQ_LENS), decode_query_len)
    lens = torch.tensor(SEQ_LENS, dtype=torch.int32)
    # The host copies the release declares as fields (0.28.0's
    # ``seq_lens_cpu`` is a property over ``_seq_lens_cpu``).
    declared = {f.name for f in dataclasses.fields(metadata)}
    for name in ("seq_lens", "seq_lens_cpu", "_seq_lens_cpu"):
        if name in declared and isinstance(getattr(metadata, name), torch.Tensor):
            setattr(metadata, name, lens.clone())
    metadata.max_seq_len = max(SEQ_LENS)
    width = harness.vllm_config(decode_query_len).model_config.max_model_len
    width = -(-width // harness.BLOCK_SIZE)
    metadata.block_table_tensor = torch.arange(
        len(SEQ_LENS) * width, dtype=torch.int32
    ).view(len(SEQ_LENS), width)
    return metadata


def _builder(backend: type, decode_query_len: int, layer: str) -> Any:
    return harness.make_builder(backend.get_builder_cls(), decode_query_len, layer)


def _with_sink(lens: list[int] | tuple[int, ...] = SEQ_LENS) -> list[int]:
    """``lens`` with the sink once (padding stays 0)."""
    return [n + SINK_LEN if n else 0 for n in lens]


def _build(builder: Any, metadata: Any, decode_query_len: int) -> Any:
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(harness.vllm_config(decode_query_len)):
        return builder.build(0, metadata)


def _unavailable(scenario: str, decode_query_len: int) -> Outcome | None:
    if harness.vllm_has(RELPATH):
        return None
    return _not_applicable(scenario, decode_query_len, NOT_APPLICABLE)


def _not_applicable(scenario: str, decode_query_len: int, why: str) -> Outcome:
    """The tree lacks the code the scenario drives: its checks do not apply."""
    return unavailable(scenario, decode_query_len, why, absent=True)


def _shared_kept(shared: Any, before: dict[str, Any]) -> dict[str, Any]:
    """What the runner's metadata holds after the builds, against before."""
    return {
        "shared_seq_lens_kept": shared.seq_lens is before["seq_lens"]
        and shared.seq_lens.tolist() == before["seq_lens_values"],
        "shared_max_seq_len_kept": shared.max_seq_len == before["max_seq_len"],
        "shared_block_table_kept": shared.block_table_tensor
        is before["block_table_tensor"]
        and torch.equal(shared.block_table_tensor, before["block_table_values"]),
        "shared_seq_lens_before": before["seq_lens_values"],
        "shared_seq_lens_after": shared.seq_lens.tolist(),
        "shared_max_seq_len_after": shared.max_seq_len,
    }


def _before(shared: Any) -> dict[str, Any]:
    return {
        "seq_lens": shared.seq_lens,
        "seq_lens_values": shared.seq_lens.tolist(),
        "max_seq_len": shared.max_seq_len,
        "block_table_tensor": shared.block_table_tensor,
        "block_table_values": shared.block_table_tensor.clone(),
    }


def static_sink_then_others(decode_query_len: int, create: Any = None) -> Outcome:
    """The static-sink builder, then full-attention builders, as the runner
    orders them: ``_build_attention_metadata`` makes one shallow copy of its
    metadata per KV-cache group and hands that same object to every
    attention group of the KV-cache group (and to the drafter).

    Group 0 holds the static-sink layers and ordinary ones (another
    attention group, the same object); group 1 is ordinary (its own copy).
    Each later builder must build what it builds from untouched metadata,
    group 0's object must hold what it held, and the static-sink layer must
    see the sink once (padding kept at 0), from the same buffer at the next
    step."""
    absent = _unavailable(SINK_ONCE, decode_query_len)
    if absent is not None:
        return absent
    backend = (create or _create())(_triton(), SINK_LEN)
    sink = _builder(backend, decode_query_len, "sink")
    beside = _builder(_triton(), decode_query_len, "beside")
    other = _builder(_triton(), decode_query_len, "other")
    expected = harness.snapshot(
        _build(beside, shared_metadata(decode_query_len), decode_query_len)
    )
    runner = shared_metadata(decode_query_len)
    group0 = copy.copy(runner)
    before = _before(group0)
    try:
        built = _build(sink, group0, decode_query_len)
        sink_lens, sink_max = built.seq_lens.tolist(), built.max_seq_len
        later = {
            "same_group": harness.snapshot(_build(beside, group0, decode_query_len)),
            "next_group": harness.snapshot(
                _build(other, copy.copy(runner), decode_query_len)
            ),
        }
        # The next step: the runner rewrites its buffer and builds again. A
        # captured graph reads the address it was captured with.
        runner.seq_lens.copy_(torch.tensor(SEQ_LENS, dtype=torch.int32))
        again = _build(sink, copy.copy(runner), decode_query_len)
    except Exception as exc:  # the builds raising is a finding
        return raised_outcome(SINK_ONCE, decode_query_len, exc)
    diverged = {
        f"{where}.{key}": values
        for where, got in later.items()
        for key, values in harness.diff(expected, got).items()
    }
    facts = {
        "builder": type(sink).__name__,
        **_shared_kept(group0, before),
        "later_builders_unaffected": not diverged,
        "sink_seen_once": sink_lens == _with_sink(),
        "sink_max_seq_len_once": sink_max == max(SEQ_LENS) + SINK_LEN,
        "sink_buffer_persistent": again.seq_lens.data_ptr()
        == built.seq_lens.data_ptr(),
        "sink_block_table_persistent": again.block_table.data_ptr()
        == built.block_table.data_ptr(),
        "sink_seq_lens_after": sink_lens,
        "later_diverged": diverged,
    }
    return Outcome(SINK_ONCE, decode_query_len, "ok", facts)


def static_sink_twice(decode_query_len: int, create: Any = None) -> Outcome:
    """Two static-sink groups on copies of one metadata: each sees the sink
    exactly once, the second as the first."""
    absent = _unavailable(SINK_TWICE, decode_query_len)
    if absent is not None:
        return absent
    backend = (create or _create())(_triton(), SINK_LEN)
    first = _builder(backend, decode_query_len, "sink.0")
    second = _builder(backend, decode_query_len, "sink.1")
    shared = shared_metadata(decode_query_len)
    before = _before(shared)
    try:
        one = _build(first, copy.copy(shared), decode_query_len)
        one_lens, one_max = one.seq_lens.tolist(), one.max_seq_len
        two = _build(second, copy.copy(shared), decode_query_len)
        two_lens, two_max = two.seq_lens.tolist(), two.max_seq_len
    except Exception as exc:  # the builds raising is a finding
        return raised_outcome(SINK_TWICE, decode_query_len, exc)
    once = _with_sink()
    facts = {
        "builder": type(first).__name__,
        **_shared_kept(shared, before),
        "first_sees_sink_once": one_lens == once,
        "second_sees_sink_once": two_lens == once,
        "max_seq_len_once": one_max == two_max == max(SEQ_LENS) + SINK_LEN,
        "first_seq_lens_after": one_lens,
        "second_seq_lens_after": two_lens,
    }
    return Outcome(SINK_TWICE, decode_query_len, "ok", facts)


DRAFT_STEPS = 3
"""Draft steps after the first build: the lengths advance by one each."""


def _advanced(steps: int) -> list[int]:
    """The runner's lengths after ``steps`` draft steps (padding stays 0)."""
    return [n + steps if n else 0 for n in SEQ_LENS]


def static_sink_proposer_rebuilds(decode_query_len: int, create: Any = None) -> Outcome:
    """The V1 EAGLE/MTP proposer: between draft steps it advances the
    metadata's ``seq_lens`` in place (``eagle_step_update_slot_mapping_and_metadata``
    on the GPU; ``+= 1`` here, what that kernel does to them) and builds
    every draft group again on the same metadata. Each build must see the
    runner's lengths with the sink once, and leave them as they were."""
    absent = _unavailable(PROPOSER_REBUILDS, decode_query_len)
    if absent is not None:
        return absent
    backend = (create or _create())(_triton(), SINK_LEN)
    sink = _builder(backend, decode_query_len, "draft.sink")
    shared = shared_metadata(decode_query_len)
    live = shared.seq_lens != 0
    seen, runner = [], []
    try:
        for _ in range(DRAFT_STEPS):
            seen.append(_build(sink, shared, decode_query_len).seq_lens.tolist())
            runner.append(shared.seq_lens.tolist())
            shared.seq_lens[live] += 1
    except Exception as exc:  # the builds raising is a finding
        return raised_outcome(PROPOSER_REBUILDS, decode_query_len, exc)
    expected = [_with_sink(_advanced(step)) for step in range(DRAFT_STEPS)]
    facts = {
        "builder": type(sink).__name__,
        "each_step_sees_sink_once": seen == expected,
        "runner_seq_lens_only_advanced": runner
        == [_advanced(step) for step in range(DRAFT_STEPS)],
        "draft_seq_lens_after": seen,
        "runner_seq_lens_after": runner,
    }
    return Outcome(PROPOSER_REBUILDS, decode_query_len, "ok", facts)


def _draft_inputs_update() -> Callable[..., None] | None:
    """Model Runner V2's ``update_draft_inputs`` (the kernel that advances
    the runner's ``seq_lens`` in place between fused draft steps), its
    Triton kernel interpreted on the CPU; None before the fused drafting
    (0.28.0). The interpreter is chosen when a kernel is defined, so this
    must run before the module's first import."""
    from importlib import import_module

    os.environ.setdefault("TRITON_INTERPRET", "1")
    for module in SPECULATORS:
        if harness.vllm_has(module.removeprefix("vllm.").replace(".", "/") + ".py"):
            update = getattr(import_module(module), "update_draft_inputs", None)
            if update is not None:
                return update
    return None


def _advance(update: Callable[..., None], buffers: Any, step: int, reqs: int) -> None:
    """One draft step's in-place advance, by the release's own kernel: its
    arguments by name and in the types its signature declares (they differ
    between releases). The harness drives the runner here: if the kernel
    cannot be called with what the harness built, the scenario cannot judge
    (:func:`...records.setting_up`)."""
    hidden = torch.zeros(reqs, 8)
    offered = {
        "draft_tokens": torch.zeros(reqs, dtype=torch.int64),
        "current_draft_step": torch.tensor([step], dtype=torch.int32),
        "hidden_states": hidden,
        "output_draft_tokens": torch.zeros(reqs, DRAFT_STEPS + 1, dtype=torch.int64),
        "next_input_hidden_states": torch.zeros_like(hidden),
        "input_buffers": buffers,
        "sample_src_positions": torch.zeros(reqs, dtype=torch.int64),
        "num_reqs": reqs,
        "max_model_len": harness.vllm_config().model_config.max_model_len,
        "num_speculative_steps": DRAFT_STEPS + 1,
    }
    with setting_up("advance the runner's draft inputs (update_draft_inputs)"):
        update(**harness.declared_arguments(update, offered))


def static_sink_draft_update(decode_query_len: int, create: Any = None) -> Outcome:
    """Model Runner V2's fused multi-step drafting (0.28.0 on), with vLLM's
    own code: the draft metadata is built once; between draft steps the
    runner's ``update_draft_inputs`` kernel advances its input ``seq_lens``
    in place, and each attention group's ``update_draft_decode_metadata``
    (``AttentionGroup``'s, as the speculator calls it; recorded in the
    fused draft CUDA graph on a GPU) refreshes the metadata. A builder that
    keeps ``supports_draft_decode_metadata_update`` must follow the
    runner: the sink group sees the advanced lengths with the sink, from
    the same buffers (a graph replays their addresses). One that declines
    it gets an eager rebuild per step instead (the speculator's fallback),
    and is judged on its rebuilds."""
    absent = _unavailable(DRAFT_UPDATE, decode_query_len)
    if absent is not None:
        return absent
    from vllm.v1.worker.utils import AttentionGroup

    update = _draft_inputs_update()
    if update is None or not hasattr(AttentionGroup, "update_draft_decode_metadata"):
        return _not_applicable(DRAFT_UPDATE, decode_query_len, NO_DRAFT_UPDATE)
    backend = (create or _create())(_triton(), SINK_LEN)
    sink = _builder(backend, decode_query_len, "draft.sink")
    in_place = bool(getattr(sink, "supports_draft_decode_metadata_update", False))
    runner = shared_metadata(decode_query_len)
    # The runner's kernels run over the scheduled requests; the padding
    # rows after them stay 0.
    reqs = sum(1 for n in SEQ_LENS if n)
    spec = harness.kv_cache_spec("full", decode_query_len)
    group = AttentionGroup(backend, ["draft.sink"], spec, 0, metadata_builders=[sink])
    buffers = types.SimpleNamespace(
        input_ids=torch.zeros(len(SEQ_LENS), dtype=torch.int32),
        positions=torch.tensor(SEQ_LENS, dtype=torch.int64),
        seq_lens=runner.seq_lens,
    )
    try:
        metadata = _build(sink, copy.copy(runner), decode_query_len)
        addresses = (metadata.seq_lens.data_ptr(), metadata.block_table.data_ptr())
        seen, moved = [], []
        for step in range(DRAFT_STEPS):
            _advance(update, buffers, step, reqs)
            if in_place:
                group.update_draft_decode_metadata({"draft.sink": metadata})
            else:
                metadata = _build(sink, copy.copy(runner), decode_query_len)
            seen.append(metadata.seq_lens.tolist())
            moved.append(
                (metadata.seq_lens.data_ptr(), metadata.block_table.data_ptr())
                != addresses
            )
    except Exception as exc:  # a finding, unless a set-up step failed
        return raised_outcome(DRAFT_UPDATE, decode_query_len, exc)
    runner_lens = runner.seq_lens.tolist()
    expected = [_with_sink(_advanced(step + 1)) for step in range(DRAFT_STEPS)]
    facts = {
        "builder": type(sink).__name__,
        "updates_in_place": in_place,
        "draft_steps_follow_runner": seen == expected,
        "draft_buffers_persistent": not any(moved),
        "runner_seq_lens_only_advanced": runner_lens == _advanced(DRAFT_STEPS),
        "draft_seq_lens_after": seen,
        "runner_seq_lens_after": runner_lens,
    }
    return Outcome(DRAFT_UPDATE, decode_query_len, "ok", facts)


SCENARIOS = {
    SINK_ONCE: static_sink_then_others,
    SINK_TWICE: static_sink_twice,
    PROPOSER_REBUILDS: static_sink_proposer_rebuilds,
    DRAFT_UPDATE: static_sink_draft_update,
}
