"""Wrong combinations of the two ROCm capture builders, as mutants (#53821).

Each mutant rewrites statements of one method of the fixed pair (a 0.28.0
tree with the series, or 0.29.0+): ROCM_AITER_UNIFIED_ATTN's capture, its
backend's ``get_builder_cls``, or ROCM_ATTN's capture. The scenarios of
:mod:`.runs` must fail on every one.

``python -m vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified.mutants``
runs them all in this process against the importable vLLM, each mutated
module's backend class handed to the scenarios.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    AITER_MODULE,
    AITER_UNIFIED_ATTN,
)
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    BACKEND_CLASS as AITER_BACKEND,
)
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    GENERIC_MODULE as ROCM_MODULE,
)
from vllm_overlay.fixes.rocm_aiter_unified_builder.install import AITER_BUILDER
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    BUILDER_CLASS as ROCM_BUILDER,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.code import CAPTURE_METHOD as CAPTURE
from vllm_overlay.fixes.rocm_capture_host_offsets.code import ROCM_ATTN
from vllm_patchkit.judge.mutation.file_mutants import FileMutant, Target, holds
from vllm_patchkit.judge.mutation.mutants import (
    Mutant,
    edit_method,
    method_lines,
    report_command,
)
from vllm_patchkit.judge.regression.layout import run_quietly_on_cpu
from vllm_patchkit.trees.child_json import exit_with

ROCM_BACKEND = "RocmAttentionBackend"

BUILD = "attn_metadata = self.build(0, common_attn_metadata)"
FILL = "attn_metadata.seq_lens.fill_(1)"
DEVICE = "common_attn_metadata.query_start_loc"
HOST = "common_attn_metadata.query_start_loc_cpu"
DEVICE_ZERO = f"{DEVICE}.zero_()"
Edit = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class PairMutant(Mutant):
    module: str
    """The dotted module the edits are made in."""
    cls: str
    method: str
    backend: str
    """The backend class of ``module`` the scenarios are run with."""


def _aiter(name: str, description: str, *edits: Edit) -> PairMutant:
    return PairMutant(
        name, description, edits, AITER_MODULE, AITER_BUILDER, CAPTURE, AITER_BACKEND
    )


def _rocm(name: str, description: str, *edits: Edit) -> PairMutant:
    return PairMutant(
        name, description, edits, ROCM_MODULE, ROCM_BUILDER, CAPTURE, ROCM_BACKEND
    )


PAIR_MUTANTS: tuple[PairMutant, ...] = (
    _aiter(
        "aiter_zeroes_device",
        "AITER unified capture zeroes the device offsets (ROCM_ATTN's guard)",
        (FILL, (FILL, DEVICE_ZERO)),
    ),
    _aiter(
        "aiter_zeroes_device_via_metadata",
        "AITER unified capture zeroes the same buffer through its own metadata",
        (FILL, (FILL, "attn_metadata.query_start_loc.zero_()")),
    ),
    _aiter(
        "aiter_zeroes_host",
        "AITER unified capture zeroes the host offsets",
        (FILL, (FILL, f"{HOST}.zero_()")),
    ),
    _aiter(
        "aiter_zeroes_both",
        "AITER unified capture zeroes both offsets (stock 0.28.0 behaviour)",
        (FILL, (FILL, DEVICE_ZERO, f"{HOST}.zero_()")),
    ),
    _aiter(
        "aiter_host_tail",
        "AITER unified capture zeroes the last host offset",
        (FILL, (FILL, f"{HOST}[-1:].zero_()")),
    ),
    _aiter(
        "aiter_delegates_to_rocm",
        "AITER unified capture hands on to ROCM_ATTN's (which zeroes)",
        (BUILD, (f"attn_metadata = super().{CAPTURE}(common_attn_metadata)",)),
    ),
    _aiter(
        "aiter_offsets_copied",
        "AITER metadata given a copy of the offsets, not the runner's buffer",
        (
            FILL,
            (
                FILL,
                "attn_metadata.query_start_loc = attn_metadata.query_start_loc.clone()",
            ),
        ),
    ),
    _aiter(
        "aiter_fill_dropped", "AITER unified seq_lens fill dropped", (FILL, ("pass",))
    ),
    _aiter(
        "aiter_fill_on_copy",
        "AITER unified seq_lens filled on a copy, not the runner's buffer",
        (FILL, ("attn_metadata.seq_lens = attn_metadata.seq_lens.clone().fill_(1)",)),
    ),
    PairMutant(
        "aiter_generic_builder",
        "AITER unified backend hands out the generic ROCm builder again",
        ((f"return {AITER_BUILDER}", (f"return {ROCM_BUILDER}",)),),
        AITER_MODULE,
        AITER_BACKEND,
        "get_builder_cls",
        AITER_BACKEND,
    ),
    _rocm(
        "rocm_not_zeroing",
        "ROCM_ATTN capture stops zeroing the device offsets",
        (DEVICE_ZERO, ("pass",)),
    ),
    _rocm(
        "rocm_zeroes_host",
        "ROCM_ATTN capture zeroes the host offsets too (the #51585 bug)",
        (DEVICE_ZERO, (DEVICE_ZERO, f"{HOST}.zero_()")),
    ),
    _rocm(
        "rocm_fill_dropped",
        "ROCM_ATTN seq_lens fill dropped",
        (FILL, ("pass",)),
    ),
)


def mutate_pair(source: str, target: PairMutant) -> str:
    """``source`` with the mutant's edits made inside its method."""
    span = method_lines(source, target.cls, target.method)
    where = f"{target.cls}.{target.method}"
    return edit_method(source, target.edits, span, target.name, where, target.module)


AITER = Target(
    "aiter-unified",
    AITER_UNIFIED_ATTN,
    holds("rocm-aiter-unified-capture-keeps-offsets"),
    partners=(ROCM_ATTN,),
)
"""The tier's target: the AITER module, judged by the fix's invariant (which
reads ROCM_ATTN's file beside it)."""
TARGETS: tuple[Target, ...] = (AITER,)


TIER_PAIR_MUTANTS: tuple[PairMutant, ...] = tuple(
    m for m in PAIR_MUTANTS if m.module == AITER_MODULE
)
"""The pair mutants of ROCM_AITER_UNIFIED_ATTN's module. The pair's three
ROCM_ATTN mutants are left out: they rewrite the method #51585's mutants
already cover, into the same source as ``none_zeroed``, ``both_zeroed``
and ``seq_lens_fill_dropped`` (tests/mutation checks the equality)."""
FILE_MUTANTS: tuple[FileMutant, ...] = tuple(
    FileMutant(m.name, m.description, AITER, partial(mutate_pair, target=m))
    for m in TIER_PAIR_MUTANTS
)


def run_pair_mutants(
    mutants: tuple[PairMutant, ...] = PAIR_MUTANTS,
) -> dict[str, Any]:
    """Every mutant through the pair's scenarios; the baseline must pass."""
    run_quietly_on_cpu()
    from vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified import runs as pair
    from vllm_patchkit.judge.regression.scenarios import (
        DECODE_QUERY_LENS,
        failing_checks,
        fresh_module,
        module_source,
        mutant_report,
    )

    def failing(target: PairMutant | None) -> list[str]:
        aiter = rocm = None
        if target is not None:
            source = mutate_pair(module_source(target.module), target)
            module = fresh_module(target.module, source, target.name)
            backend = getattr(module, target.backend)
            if target.module == AITER_MODULE:
                aiter = backend
            else:
                rocm = backend
        outcomes = []
        for query_len in DECODE_QUERY_LENS:
            outcomes += [
                pair.aiter_unified_capture(query_len, aiter),
                pair.rocm_attn_capture_via_backend(query_len, rocm),
                pair.aiter_unified_runner_loop(query_len, aiter),
            ]
        return failing_checks(outcomes)

    return mutant_report(failing(None), mutants, failing)


def main(argv: list[str] | None = None) -> int:
    prog = "python -m vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified.mutants"
    return report_command(prog, __doc__ or "", run_pair_mutants, argv)


if __name__ == "__main__":
    exit_with(main)
