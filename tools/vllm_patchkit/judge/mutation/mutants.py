"""Plausible wrong versions of the fixed ``build_for_cudagraph_capture``.

Each mutant rewrites statements of the fixed method (found by its AST, so
line numbers do not matter) the way a hurried port, a refactor or a
half-understood review comment could. A regression suite worth having fails
on every one of them at run time; a mutant it lets through names a scenario
it lacks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from vllm_overlay.metadata_writes import find_method

BUILDER_CLASS = "RocmAttentionMetadataBuilder"
CAPTURE_METHOD = "build_for_cudagraph_capture"
DEVICE_ZERO = "common_attn_metadata.query_start_loc.zero_()"
SEQ_LENS_FILL = "attn_metadata.seq_lens.fill_(1)"
HOST = "common_attn_metadata.query_start_loc_cpu"
DEVICE = "common_attn_metadata.query_start_loc"


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    edits: tuple[tuple[str, tuple[str, ...]], ...]
    """(statement of the fixed method, the lines that replace it)."""


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


class MutationError(ValueError):
    """The source does not hold the fixed method this mutant rewrites."""


def method_lines(source: str, cls: str, method: str) -> tuple[int, int]:
    """1-based first and last line of ``cls.method`` in ``source``."""
    found = find_method(ast.parse(source), f"{cls}.{method}")
    if found is None or found.end_lineno is None:
        raise MutationError(f"no {cls}.{method}")
    return found.lineno, found.end_lineno


def mutate(source: str, mutant: Mutant) -> str:
    """``source`` with ``mutant``'s edits made inside the capture method."""
    span = method_lines(source, BUILDER_CLASS, CAPTURE_METHOD)
    return edit_method(source, mutant.edits, span, mutant.name, CAPTURE_METHOD)


def edit_method(
    source: str,
    edits: tuple[tuple[str, tuple[str, ...]], ...],
    span: tuple[int, int],
    name: str,
    method: str,
    filename: str = "rocm_attn.py",
) -> str:
    """``source`` with each edit's statement (found once in the method's
    lines ``span``) replaced by its lines, at the statement's indent."""
    lines = source.splitlines(keepends=True)
    first, last = span
    for statement, replacement in edits:
        hits = [i for i in range(first - 1, last) if lines[i].strip() == statement]
        if len(hits) != 1:
            raise MutationError(
                f"{name}: expected one `{statement}` in {method}, found {len(hits)}"
            )
        index = hits[0]
        indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
        new = [f"{indent}{line}\n" for line in replacement]
        lines[index : index + 1] = new
        last += len(new) - 1
    mutated = "".join(lines)
    compile(mutated, filename, "exec")
    return mutated
