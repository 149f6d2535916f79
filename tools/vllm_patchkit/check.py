"""Read-only status of every patch of the series in a checkout.

Nothing changes, in the work tree or under ``.git``: the states come from
:func:`vllm_patchkit.checkout.classify`, which tries each patch against a
scratch index and a temporary object directory, patch after patch, so later
patches are checked on top of earlier ones. It works on a read-only
repository and gives the same answer there.
"""

from __future__ import annotations

from pathlib import Path

from vllm_patchkit.checkout import PatchReport, classify, open_checkout
from vllm_patchkit.series import Series


def check_series(path: Path, series: Series) -> list[PatchReport]:
    """Each patch's PatchState: applied, upstreamed, not-carried, applies, conflict."""
    return classify(open_checkout(path), series)
