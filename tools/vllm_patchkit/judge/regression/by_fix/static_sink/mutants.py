"""Plausible wrong fixes of the static-sink builder's ``build``, as mutants.

Each mutant rewrites statements of ``StaticSinkAttentionBuilder`` as patch
0004 leaves it: ``build`` works on a copy of the metadata and puts the
lengths with the sink in a buffer of its own, and
``update_draft_decode_metadata`` refreshes that buffer from the runner's
lengths (Model Runner V2's in-place draft steps). One mutant is the series'
own earlier 0004, without the refresh. The scenarios of :mod:`.runs` must
fail on every one, pass on the fix, and fail on the stock builder.

``python -m vllm_patchkit.judge.regression.by_fix.static_sink.mutants --json``
runs them all in this process against the importable vLLM, each mutated
module's ``create_static_sink_attention_backend`` handed to the scenarios.
"""

from __future__ import annotations

import ast
from functools import partial
from typing import Any

from vllm_overlay.fixes.static_sink_seq_lens import BUILDER, FACTORY, STATIC_SINK
from vllm_patchkit.judge.mutation.file_mutants import FileMutant, Target, holds
from vllm_patchkit.judge.mutation.mutants import (
    Mutant,
    MutationError,
    edit_method,
    report_command,
)
from vllm_patchkit.judge.mutation.statements import (
    Rewrite,
    SourceMutant,
    dropped,
    same_behaviour_key,
    swapped,
)
from vllm_patchkit.judge.regression.by_fix.static_sink import MODULE
from vllm_patchkit.judge.regression.layout import run_quietly_on_cpu
from vllm_patchkit.trees.child_json import exit_with

COPY = "common_attn_metadata = copy(common_attn_metadata)"
ADD = "torch.add(self.runner_seq_lens, self.sink_len, out=seq_lens)"
MASK = "seq_lens.masked_fill_(self.runner_seq_lens == 0, 0)"
SINK_ADDED = "common_attn_metadata.max_seq_len + self.sink_len"
BUFFER = "seq_lens = self.seq_lens_with_sink[: self.runner_seq_lens.shape[0]]"
REFRESH = "self._add_sink(self.max_num_blocks)"

SINK_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "copy_but_writes_shared_seq_lens",
        "copies the metadata, but still adds the sink to the shared seq_lens "
        "in place (and copies the result into its buffer)",
        (
            (
                ADD,
                (
                    "self.runner_seq_lens.add_(self.sink_len)",
                    "seq_lens.copy_(self.runner_seq_lens)",
                ),
            ),
        ),
    ),
    Mutant(
        "no_copy_assigns_on_shared_object",
        "keeps the shared seq_lens tensor, but assigns seq_lens, max_seq_len "
        "and block_table_tensor on the group's shared object",
        ((COPY, ("pass",)),),
    ),
    Mutant(
        "padding_gets_the_sink",
        "drops the mask: padded requests (length 0) get the sink's length",
        ((MASK, ("pass",)),),
    ),
    Mutant(
        "max_seq_len_without_sink",
        "adds the sink to seq_lens but not to max_seq_len",
        ((SINK_ADDED, ("common_attn_metadata.max_seq_len",)),),
    ),
    Mutant(
        "fresh_clone_per_build",
        "a fresh tensor per build instead of the builder's persistent buffer "
        "(a captured graph reads the address it was captured with)",
        ((BUFFER, ("seq_lens = self.runner_seq_lens.clone()",)),),
    ),
    Mutant(
        "no_refresh_on_draft_update",
        "the series' earlier 0004: a buffer of the builder's own, not "
        "refreshed when Model Runner V2 advances the runner's seq_lens in "
        "place between draft steps",
        ((REFRESH, ("pass",)),),
    ),
)


UPDATE = "super().update_draft_decode_metadata(metadata)"
BLOCK_TABLE_COPY = (
    "self.block_table_with_sink[: block_table.shape[0], "
    "self.num_sink_blocks:self.num_sink_blocks + block_table.shape[1]] = block_table"
)
COPY_WIDTH = "width = min(max_num_blocks, self.max_num_blocks)"

UPSTREAM_FILE = str(STATIC_SINK)
"""The file the fix changes (its upstream mutants are of it)."""
UPSTREAM_TESTS = ("tests/v1/attention/test_static_sink_shared_state.py",)
"""The test patch 0005 adds: alone, it must kill every upstream mutant."""
UPSTREAM_REFRESH = ("update_draft_decode_metadata", "_add_sink")
"""The draft refresh: the override and the helper it shares with build;
each adjacent pair of their statements swapped is a mutant."""
UPSTREAM_MUTANTS: tuple[Rewrite, ...] = (
    Rewrite(
        "refresh_after_super",
        "the refresh runs after the underlying builder's draft update, which "
        "then recomputes its schedule from the stale lengths",
        ((REFRESH, ("pass",)), (UPDATE, (UPDATE, REFRESH))),
    ),
    Rewrite(
        "no_block_table_refresh_in_update",
        "the draft update refreshes seq_lens only, not the block table",
        ((REFRESH, (BUFFER, ADD, MASK)),),
    ),
    Rewrite(
        "no_block_table_copy",
        "the runner's block table is never copied behind the sink blocks",
        ((BLOCK_TABLE_COPY, ("pass",)),),
    ),
    Rewrite(
        "no_masked_fill",
        "padded requests (length 0) get the sink's length",
        ((MASK, ("pass",)),),
    ),
    Rewrite(
        "copy_width_not_clamped",
        "the block-table copy is as wide as max_seq_len needs, past the buffer "
        "when capture passes max_seq_len = max_model_len",
        ((COPY_WIDTH, ("width = max_num_blocks",)),),
    ),
    Rewrite(
        "override_dropped",
        "no update_draft_decode_metadata of its own: the underlying builder's "
        "runs on the lengths of the last build",
        (("def update_draft_decode_metadata", ("pass",)),),
    ),
)
"""The wrong fixes a review named (issue 49), for the upstream test alone."""


def upstream_mutants(base: str, fixed: str) -> list[SourceMutant]:
    """Every mutant the upstream test alone must kill: the named ones, each
    statement 0004 adds dropped, each adjacent pair of the draft refresh
    swapped; one entry per distinct source (names joined)."""
    made: dict[str, SourceMutant] = {}
    named = [m.make(fixed, BUILDER) for m in UPSTREAM_MUTANTS]
    for mutant in [
        *named,
        *dropped(base, fixed),
        *swapped(fixed, BUILDER, UPSTREAM_REFRESH),
    ]:
        key = same_behaviour_key(mutant.source)
        seen = made.get(key)
        if seen is None:
            made[key] = mutant
        else:
            made[key] = SourceMutant(
                f"{seen.name} = {mutant.name}",
                seen.description,
                seen.source,
                seen.equivalent and mutant.equivalent,
            )
    return list(made.values())


def builder_lines(source: str) -> tuple[int, int]:
    """1-based first and last line of the nested builder class (the fix
    spans its ``build``, its draft update and their helper)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == BUILDER:
            assert node.end_lineno is not None
            return node.lineno, node.end_lineno
    raise MutationError(f"no {BUILDER}")


def mutate_sink(source: str, mutant: Mutant) -> str:
    """``source`` with the mutant's edits made inside the builder class."""
    span = builder_lines(source)
    return edit_method(source, mutant.edits, span, mutant.name, BUILDER, MODULE)


SINK = Target(
    "static-sink",
    STATIC_SINK,
    holds("static-sink-keeps-shared-seq-lens"),
    forks=False,
)
"""The tier's target: vLLM's configuration imports the module's package,
which imports it, so its mutants each run in a fresh interpreter."""
TARGETS: tuple[Target, ...] = (SINK,)


FILE_MUTANTS: tuple[FileMutant, ...] = tuple(
    FileMutant(m.name, m.description, SINK, partial(mutate_sink, mutant=m))
    for m in SINK_MUTANTS
)


def run_sink_mutants(mutants: tuple[Mutant, ...] = SINK_MUTANTS) -> dict[str, Any]:
    """The importable method (the baseline) and every mutant of it through
    the scenarios. Only the module up to the factory runs, as a fresh module
    (its own lru_cache): the layer class after it registers a custom op,
    once per process."""
    run_quietly_on_cpu()
    from vllm_patchkit.judge.regression.by_fix.static_sink import runs as static_sink
    from vllm_patchkit.judge.regression.scenarios import (
        DECODE_QUERY_LENS,
        failing_checks,
        fresh_module,
        module_source,
        mutant_report,
    )

    source = module_source(MODULE)

    def failing(mutant: Mutant | None) -> list[str]:
        mutated = source if mutant is None else mutate_sink(source, mutant)
        factory = next(
            node
            for node in ast.parse(mutated).body
            if isinstance(node, ast.FunctionDef) and node.name == FACTORY
        )
        head = "".join(mutated.splitlines(keepends=True)[: factory.end_lineno])
        label = "baseline" if mutant is None else mutant.name
        create = getattr(fresh_module(MODULE, head, label), FACTORY)
        return failing_checks(
            [
                run(query_len, create)
                for run in static_sink.SCENARIOS.values()
                for query_len in DECODE_QUERY_LENS
            ]
        )

    return mutant_report(failing(None), mutants, failing)


def main(argv: list[str] | None = None) -> int:
    prog = "python -m vllm_patchkit.judge.regression.by_fix.static_sink.mutants"
    return report_command(prog, __doc__ or "", run_sink_mutants, argv)


if __name__ == "__main__":
    exit_with(main)
