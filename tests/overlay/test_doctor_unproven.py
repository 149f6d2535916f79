"""A host zeroing the classifier cannot prove away is never called fixed.

Issue "Right on the checkouts users have", item 6: vLLM 0.29.0 (the fixed
method) with the host zeroing put back through a local alias, committed in a
real clone of the release. Before, doctor said "affected: no (fixed)" with
exit 0, check called 0001 upstreamed (so apply skipped it) and the overlay
installed nothing, while the host offsets were still zeroed at run time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json
from tests.toolkit.series_expectations import SERIES_FIXES, doctor_exit
from vllm_overlay.fixes.rocm_capture_host_offsets import assess_file
from vllm_overlay.fixes.rocm_capture_host_offsets.code import ROCM_ATTN
from vllm_overlay.state import Action
from vllm_patchkit.gitcmd import Git

pytestmark = pytest.mark.release_trees

CAPTURE_PR = SERIES_FIXES["rocm-capture-keeps-host-offsets"]
DEVICE_LINE = "        common_attn_metadata.query_start_loc.zero_()\n"
ALIASED = (
    DEVICE_LINE
    + "        host = common_attn_metadata.query_start_loc_cpu\n"
    + "        host.zero_()\n"
)


@pytest.fixture
def aliased_tree(release_clone) -> Path:  # type: ignore[no-untyped-def]
    tree = release_clone("0.29.0")
    file = tree / ROCM_ATTN
    text = file.read_text()
    assert text.count(DEVICE_LINE) == 1
    file.write_text(text.replace(DEVICE_LINE, ALIASED))
    Git(tree).run("commit", "--quiet", "--no-verify", "-am", "zero host via alias")
    return tree


def test_doctor_and_check_do_not_call_it_fixed(aliased_tree: Path) -> None:
    code, report = patchkit_json("doctor", str(aliased_tree))
    # StaticSink is needed on 0.29.0 and the tree is not patched: that fix's
    # "not fixed" outranks #51585's "cannot judge" (exit 3 where none is).
    expected = doctor_exit("0.29.0", [CAPTURE_PR])
    assert code == expected, report
    assert report["judged"] is False
    assert report["affected"] is (True if expected == 1 else None)
    assert report["patches"][0]["status"] != "upstreamed"
    entry = next(e for e in report["fixes"] if e["fix"] == CAPTURE_PR)
    assert entry["affected"] is None and entry["shape"] == "unknown", entry
    assert "host = common_attn_metadata.query_start_loc_cpu" in entry["detail"]
    assert "left as it is" in entry["overlay_decision"]
    assert report["overlay_would_activate"] is False
    text = patchkit("doctor", str(aliased_tree))
    assert text.returncode == expected
    assert f"{CAPTURE_PR}: cannot judge (unknown)" in text.stdout
    assert f"{CAPTURE_PR}: no (fixed)" not in text.stdout

    check = patchkit("check", str(aliased_tree))
    first = check.stdout.splitlines()[0]
    assert first.startswith("  0001-") and "upstreamed" not in first, check.stdout


def test_the_overlay_leaves_it_alone(aliased_tree: Path) -> None:
    state = assess_file(aliased_tree / ROCM_ATTN, "0.29.0")
    assert state.action is Action.UNRECOGNISED and state.plan is None
    assert "cannot judge" in state.reason
