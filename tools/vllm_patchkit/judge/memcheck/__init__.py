"""A memory checker for Triton kernels run by the interpreter.

``with memcheck():`` checks every interpreted load and store against the
storages of the tensors passed to the running launch and raises
:class:`MemoryViolation` before an out-of-bounds access happens. Also a
pytest fixture (``vllm_patchkit.judge.memcheck.fixture``) and the command
``vllm-patchkit memcheck SCRIPT`` (``vllm_patchkit.commands.memcheck``).

Exports load lazily: the command line imports this package and must not pay
for torch and numpy.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from typing import Any

    from vllm_patchkit.judge.memcheck.checker import MemoryViolation, Stats, memcheck
    from vllm_patchkit.judge.memcheck.regions import Region

__all__ = ["MemoryViolation", "Region", "Stats", "memcheck"]

REPORT_OPTION = "--report="
"""Before SCRIPT in the runner's arguments: write the outcome as JSON to the
path that follows, and send the script's stdout to stderr (the parent's
stdout is for ``vllm-patchkit memcheck --json``'s one object)."""


def __getattr__(name: str) -> Any:
    if name in __all__:  # the checker imports Region too
        from vllm_patchkit.judge.memcheck import checker

        return getattr(checker, name)
    raise AttributeError(name)
