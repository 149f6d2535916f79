"""The expectations helper against facts known by hand about the series."""

from __future__ import annotations

import pytest

from tests.toolkit.series_expectations import (
    SERIES,
    applied_statuses,
    carried,
    stock_status,
    stock_statuses,
)
from vllm_patchkit.git.series import Patch


def patch(prefix: str) -> Patch:
    return next(p for p in SERIES.patches if p.name.startswith(prefix))


@pytest.mark.parametrize(
    ("prefix", "version", "status"),
    [
        ("0001", "0.11.0", "not-carried"),  # 0.11.0 never zeroed the offsets
        ("0001", "0.11.1", "applies"),
        ("0001", "0.28.0", "applies"),
        ("0001", "0.29.0", "upstreamed"),  # #51585 is in 0.29.0
        ("0002", "0.33.0", "applies"),  # upstream has no such test
        ("0003", "0.25.0", "not-carried"),  # #53821's backport: 0.27.0..0.28.0
        ("0003", "0.27.0", "applies"),
        ("0003", "0.32.0", "upstreamed"),
        ("0004", "0.12.0", "not-carried"),  # no static-sink builder yet
        ("0004", "0.33.0", "applies"),  # upstream in no release
        ("0005", "0.10.1.1", "not-carried"),
        ("0006", "0.33.0", "applies"),  # the V1 runner's shortcut
        ("0006", "0.34.0", "not-carried"),  # Model Runner V2 only
    ],
)
def test_known_states_on_stock_trees(prefix: str, version: str, status: str) -> None:
    assert stock_status(patch(prefix), version) == status


def test_applied_states_and_carried_patches_follow_the_stock_states() -> None:
    stock = stock_statuses("0.29.0")
    after = applied_statuses("0.29.0")
    assert len(stock) == len(after) == len(SERIES.patches)
    assert after[:3] == ["upstreamed", "applied", "upstreamed"]
    names = {p.name[:4] for p in carried("0.20.0")}
    assert {"0001", "0002", "0004", "0005", "0006"} <= names
    assert "0003" not in names
