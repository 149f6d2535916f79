"""StaticSink's scenarios: the static-sink builder leaves shared metadata alone.

See :mod:`.runs` for what is run, :mod:`.mutants` for its wrong fixes. On
a tree without the module (before 0.14.0) the scenarios record that it is
absent: their checks do not apply there, so the fix is neither fixed nor
not fixed on such a tree.
"""

from __future__ import annotations

from vllm_overlay.fixes.static_sink_seq_lens import RECORD, STATIC_SINK

FIX = RECORD.name
MODULE = RECORD.module
RELPATH = str(STATIC_SINK.relative_to("vllm"))
"""The module's file, relative to the ``vllm`` package."""
SINK_ONCE = "static_sink_then_others"
SINK_TWICE = "static_sink_twice"
PROPOSER_REBUILDS = "static_sink_proposer_rebuilds"
DRAFT_UPDATE = "static_sink_draft_update"
SPECULATORS = (
    "vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator",
    "vllm.v1.worker.gpu.spec_decode.autoregressive.speculator",
)
"""Model Runner V2's fused drafting (0.32.0 on, then 0.28.0-0.31.x)."""
NO_DRAFT_UPDATE = (
    "not applicable: this tree has no Model Runner V2 fused drafting with "
    "an in-place draft metadata update (vLLM 0.28.0 and later)"
)
NOT_APPLICABLE = (
    "not applicable: this tree has no static-sink attention "
    f"(vllm/{RELPATH}, in releases from 0.14.0)"
)
SHARED_KEPT = (
    "shared_seq_lens_kept",
    "shared_max_seq_len_kept",
    "shared_block_table_kept",
)
"""The metadata the runner handed the static-sink group, as every later
reader of it (the group's other builders, the drafter, later groups through
the shared tensors) sees it, is what it was."""

FACTS = {
    SINK_ONCE: (
        *SHARED_KEPT,
        "later_builders_unaffected",
        "sink_seen_once",
        "sink_max_seq_len_once",
        "sink_buffer_persistent",
        "sink_block_table_persistent",
    ),
    SINK_TWICE: (
        *SHARED_KEPT,
        "first_sees_sink_once",
        "second_sees_sink_once",
        "max_seq_len_once",
    ),
    PROPOSER_REBUILDS: (
        "each_step_sees_sink_once",
        "runner_seq_lens_only_advanced",
    ),
    DRAFT_UPDATE: (
        "draft_steps_follow_runner",
        "draft_buffers_persistent",
        "runner_seq_lens_only_advanced",
    ),
}
SCENARIOS = tuple(FACTS)
CORE = (SINK_ONCE, SINK_TWICE, PROPOSER_REBUILDS)


RUNS = f"{__name__}.runs"
MUTATION = f"{__name__}.mutants"
RECIPES = f"{__name__}.recipes"
"""The module of the builder's recipe (``RECIPES``), which the audit uses."""
UPSTREAM = MUTATION
"""The same module holds the mutants its upstream test alone must kill."""
