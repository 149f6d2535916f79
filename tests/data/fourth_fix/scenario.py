"""The scratch fourth fix's scenario and mutant (tests/overlay/test_fourth_fix.py).

One module in ``judge/regression/by_fix``: the fix it serves (``FIX``), its
scenario (``SCENARIOS``, also its ``CORE``), the scenario's facts and runner
(``RUNS``), and its mutation target and mutant (``MUTATION``), all here.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from vllm_patchkit.judge.mutation.file_mutants import FileMutant, Target, holds
from vllm_patchkit.judge.regression.records import Outcome

FIX = "scratch-fourth-fix"
FACTS = {"scratch_fourth_fix": ("marked",)}
RUNS = __name__
MUTATION = __name__


def scratch_fourth_fix(decode_query_len: int) -> Outcome:
    module = importlib.import_module("vllm.plugins.endpoint_plugins.interface")
    marked = getattr(module, "SCRATCH_FIXED", False) is True
    return Outcome("scratch_fourth_fix", decode_query_len, "ok", {"marked": marked})


SCENARIOS = {"scratch_fourth_fix": scratch_fourth_fix}
CORE = ("scratch_fourth_fix",)

INTERFACE = Target(
    "scratch-endpoint-plugins",
    Path("vllm/plugins/endpoint_plugins/interface.py"),
    holds("scratch-fourth-fix-marks"),
)
TARGETS = (INTERFACE,)
FILE_MUTANTS = (
    FileMutant(
        "scratch_mark_dropped",
        "the mark dropped again",
        INTERFACE,
        lambda source: source.replace("SCRATCH_FIXED = True", ""),
    ),
)
