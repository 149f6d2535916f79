"""Plausible wrong versions of #51585's fixed ``build_for_cudagraph_capture``.

Each mutant rewrites statements of ROCM_ATTN's fixed capture method the way
a hurried port, a refactor or a half-understood review comment could. A
regression suite worth having fails on every one of them at run time; a
mutant it lets through names a scenario it lacks. The mutation tier runs
them against :data:`ROCM` (``rocm_attn.py``), judged by the fix's AST read.
"""

from __future__ import annotations

from pathlib import Path

from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    BUILDER_CLASS,
    CAPTURE_METHOD,
    ROCM_ATTN,
    inspect_capture_source,
)
from vllm_patchkit.judge.mutation.file_mutants import FileMutant, Target
from vllm_patchkit.judge.mutation.mutants import Mutant, edit_method, method_lines

DEVICE_ZERO = "common_attn_metadata.query_start_loc.zero_()"
SEQ_LENS_FILL = "attn_metadata.seq_lens.fill_(1)"
HOST = "common_attn_metadata.query_start_loc_cpu"
DEVICE = "common_attn_metadata.query_start_loc"


def _keep_device(*extra: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return ((DEVICE_ZERO, (DEVICE_ZERO, *extra)),)


def _device(*lines: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return ((DEVICE_ZERO, lines),)


def _fill(*lines: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return ((SEQ_LENS_FILL, lines),)


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "both_zeroed",
        "device and host zeroed (the bug)",
        _keep_device(f"{HOST}.zero_()"),
    ),
    Mutant("none_zeroed", "device zeroing dropped too", _device("pass")),
    Mutant("host_only", "host zeroed instead of device", _device(f"{HOST}.zero_()")),
    Mutant(
        "device_rebound",
        "device offsets replaced by a new zero tensor, not zeroed in place",
        _device(f"{DEVICE} = torch.zeros_like({DEVICE})"),
    ),
    Mutant(
        "device_copy_zeroed",
        "a copy of the device offsets zeroed",
        _device(f"{DEVICE}.clone().zero_()"),
    ),
    Mutant(
        "device_partial",
        "device offsets zeroed but the last",
        _device(f"{DEVICE}[:-1].zero_()"),
    ),
    Mutant(
        "rocm_metadata_copy",
        "only the ROCm metadata's own offsets zeroed, on a copy",
        _device(
            "attn_metadata.query_start_loc = "
            "attn_metadata.query_start_loc.clone().zero_()"
        ),
    ),
    Mutant(
        "device_zeroed_once",
        "device zeroed on the first capture only",
        _device(
            "if not getattr(self, '_offsets_zeroed', False):",
            f"    {DEVICE_ZERO}",
            "    self._offsets_zeroed = True",
        ),
    ),
    Mutant(
        "host_partial",
        "host offsets zeroed from index 1",
        _keep_device(f"{HOST}[1:].zero_()"),
    ),
    Mutant(
        "host_tail", "last host offset zeroed", _keep_device(f"{HOST}[-1:].zero_()")
    ),
    Mutant(
        "host_alias",
        "host zeroed through a local alias (the AST check cannot see it)",
        _keep_device(f"offsets = {HOST}", "offsets.zero_()"),
    ),
    Mutant(
        "host_torch_fn",
        "host zeroed by torch.zero_() (the AST check cannot see it)",
        _keep_device(f"torch.zero_({HOST})"),
    ),
    Mutant(
        "host_rebound",
        "host rebound to a zero tensor",
        _keep_device(f"{HOST} = torch.zeros_like({HOST})"),
    ),
    Mutant(
        "host_from_device",
        "host synced from the zeroed device",
        _keep_device(f"{HOST}.copy_({DEVICE})"),
    ),
    Mutant(
        "host_stale_restore",
        "host zeroed, then restored from a copy kept from an earlier capture",
        _keep_device(
            "saved = getattr(self, '_host_offsets', None)",
            "if saved is None:",
            f"    saved = self._host_offsets = {HOST}.clone()",
            f"{HOST}.zero_()",
            f"{HOST}.copy_(saved[: {HOST}.numel()])",
        ),
    ),
    Mutant(
        "host_zeroed_spec_only",
        "host zeroed only with draft tokens",
        _keep_device(
            "if common_attn_metadata.max_query_len > 1:", f"    {HOST}.zero_()"
        ),
    ),
    Mutant(
        "host_zeroed_decode_only",
        "host zeroed only for one-token decode",
        _keep_device(
            "if common_attn_metadata.max_query_len == 1:", f"    {HOST}.zero_()"
        ),
    ),
    Mutant(
        "max_query_len_zeroed",
        "shared max_query_len set to 0 to go with the device zeroing",
        _keep_device("common_attn_metadata.max_query_len = 0"),
    ),
    Mutant("seq_lens_fill_dropped", "seq_lens fill dropped", _fill("pass")),
    Mutant(
        "seq_lens_zero",
        "seq_lens filled with 0",
        _fill("attn_metadata.seq_lens.fill_(0)"),
    ),
    Mutant(
        "seq_lens_fill_copy",
        "seq_lens filled on a copy, not the runner's buffer",
        _fill("attn_metadata.seq_lens = attn_metadata.seq_lens.clone().fill_(1)"),
    ),
)


def mutate(source: str, mutant: Mutant) -> str:
    """``source`` with ``mutant``'s edits made inside the capture method."""
    span = method_lines(source, BUILDER_CLASS, CAPTURE_METHOD)
    where = ROCM_ATTN.name
    return edit_method(source, mutant.edits, span, mutant.name, CAPTURE_METHOD, where)


def _capture_shape(directory: Path) -> str:
    file = directory / ROCM_ATTN
    return inspect_capture_source(file.read_text(), file).shape.value


ROCM = Target("rocm-attn", ROCM_ATTN, _capture_shape)
TARGETS: tuple[Target, ...] = (ROCM,)


def file_mutant(mutant: Mutant) -> FileMutant:
    """``mutant`` as the tier runs it: a rewrite of the tree's ROCM_ATTN file."""
    return FileMutant(
        mutant.name, mutant.description, ROCM, lambda source: mutate(source, mutant)
    )


FILE_MUTANTS: tuple[FileMutant, ...] = tuple(file_mutant(m) for m in MUTANTS)
