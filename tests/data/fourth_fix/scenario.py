"""The scratch fourth fix's scenario (tests/overlay/test_fourth_fix.py)."""

from __future__ import annotations

import importlib

from vllm_patchkit.judge.regression.records import Outcome

FACTS = {"scratch_fourth_fix": ("marked",)}
RUNS = __name__


def scratch_fourth_fix(decode_query_len: int) -> Outcome:
    module = importlib.import_module("vllm.utils.math_utils")
    marked = getattr(module, "SCRATCH_FIXED", False) is True
    return Outcome("scratch_fourth_fix", decode_query_len, "ok", {"marked": marked})


SCENARIOS = {"scratch_fourth_fix": scratch_fourth_fix}
