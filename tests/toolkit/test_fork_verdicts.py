"""Forks whose code the toolkit cannot read: it says so, and check predicts apply.

Built from real release trees, each edited as a fork might have it: the
host offsets zeroed through an alias on a tree tagged v0.29.0 (the version
decides, and the output must say the code could not be read); rocm_attn.py
renamed away (doctor: cannot judge, never "not affected"); the zeroing
done by a module-level monkeypatch, a ``setattr`` or inside ``build``
(check runs 0001's invariant on a trial application, so it reports the
conflict apply then finds, instead of "applies").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import ROCM_ATTN, as_user, patchkit
from tests.toolkit.series_expectations import SERIES_FIXES, doctor_exit
from tests.toolkit.test_forks import fork_of
from vllm_patchkit.git.series import Series

pytestmark = pytest.mark.release_trees

DEVICE_ZEROED = "        common_attn_metadata.query_start_loc.zero_()\n"


def edit(tree: Path, old: str, new: str, message: str) -> None:
    """Replace ``old`` (once) in rocm_attn.py and commit it as a fork would."""
    source = tree / ROCM_ATTN
    text = source.read_text()
    assert text.count(old) >= 1, old
    source.write_text(text.replace(old, new, 1))
    git = as_user(tree)
    git.run("commit", "--quiet", "--no-verify", "-am", message)


def first_patch(stdout: str) -> dict[str, str]:
    return json.loads(stdout)["patches"][0]


def test_a_trusted_version_says_when_the_code_could_not_be_read(
    release_clone: Callable[[str, str], Path],
) -> None:
    """v0.29.0 whose capture zeroes the host offsets through an alias: the
    version decides (0001 not carried for 0.29.0), and check and apply say
    that the code could not be read, naming the line."""
    tree = release_clone("0.29.0", "tag")
    edit(
        tree,
        DEVICE_ZEROED,
        DEVICE_ZEROED
        + "        host = common_attn_metadata.query_start_loc_cpu\n"
        + "        host.zero_()\n",
        "[ROCm] zero the host offsets too",
    )
    check = patchkit("check", "--json", str(tree))
    assert check.returncode == 0, check.stdout + check.stderr
    report = first_patch(check.stdout)
    assert report["status"] == "not-carried", report
    assert "its code could not be read, so the version decided" in report["detail"]
    assert "cannot judge" in report["detail"], report

    apply = patchkit("apply", str(tree))
    assert apply.returncode == 0, apply.stdout + apply.stderr
    assert "its code could not be read" in apply.stdout, apply.stdout


def test_doctor_cannot_judge_a_fork_whose_rocm_attn_moved(tmp_path: Path) -> None:
    """rocm_attn.py renamed, the builder (still zeroing both offsets) in
    another file: a missing target is "cannot judge", never "affected: no"
    (exit 3, or 1 where another fix is needed: StaticSink on 0.28.0)."""
    tree = tmp_path / "fork"
    git = fork_of("0.28.0", tree, commits=3)
    git.run("mv", ROCM_ATTN, "vllm/v1/attention/backends/rocm_attention.py")
    git.run("commit", "--quiet", "--no-verify", "-m", "Rename the ROCm backend")

    capture = SERIES_FIXES["rocm-capture-keeps-host-offsets"]
    expected = doctor_exit("0.28.0", [capture])
    doctor = patchkit("doctor", str(tree))
    assert doctor.returncode == expected, doctor.stdout + doctor.stderr
    assert f"{capture}: cannot judge (missing)" in doctor.stdout, doctor.stdout
    assert f"{capture}: no" not in doctor.stdout, doctor.stdout

    payload = json.loads(patchkit("doctor", "--json", str(tree)).stdout)
    assert payload["judged"] is False, payload
    assert payload["affected"] is (True if expected == 1 else None), payload


MONKEYPATCH = """

_capture = RocmAttentionMetadataBuilder.build_for_cudagraph_capture


def _capture_zeroing_host(self, common_attn_metadata):
    common_attn_metadata.query_start_loc_cpu.zero_()
    return _capture(self, common_attn_metadata)


"""

TOKENS = "        num_actual_tokens = common_attn_metadata.num_actual_tokens\n"
HOST_ZEROED = "        common_attn_metadata.query_start_loc_cpu.zero_()\n"

FORKS: dict[str, tuple[str, str]] = {
    "a module-level monkeypatch": (
        "",
        MONKEYPATCH
        + "RocmAttentionMetadataBuilder.build_for_cudagraph_capture = "
        + "_capture_zeroing_host\n",
    ),
    "a setattr": (
        "",
        MONKEYPATCH
        + "setattr(RocmAttentionMetadataBuilder, 'build_for_cudagraph_capture', "
        + "_capture_zeroing_host)\n",
    ),
    "inside build": (TOKENS, TOKENS + HOST_ZEROED),
}


@pytest.mark.parametrize("fork", FORKS)
def test_check_predicts_what_apply_does(
    release_clone: Callable[[str], Path], series: Series, fork: str
) -> None:
    """0.28.0 whose host offsets are zeroed elsewhere than in the capture's
    body: 0001's text applies, its invariant then cannot hold. check says
    conflict (exit 1), as apply finds it (exit 4, rolled back)."""
    tree = release_clone("0.28.0")
    old, new = FORKS[fork]
    if old:
        edit(tree, old, new, f"[ROCm] zero the host offsets {fork}")
    else:
        with (tree / ROCM_ATTN).open("a") as source:
            source.write(new)
        as_user(tree).run("commit", "--quiet", "--no-verify", "-am", fork)
    head = as_user(tree).head()

    check = patchkit("check", "--json", str(tree))
    predicted = first_patch(check.stdout)
    apply = patchkit("apply", "--json", str(tree))
    applied = first_patch(apply.stdout)

    assert (apply.returncode, applied["status"]) == (4, "conflict"), apply.stdout
    assert "invariant" in applied["detail"], applied
    assert as_user(tree).head() == head  # rolled back
    assert (check.returncode, predicted["status"]) == (1, "conflict"), check.stdout
    assert predicted["detail"].startswith(
        "applies, but invariant rocm-capture-zeroes-device-offsets-only would not hold"
    ), predicted
    assert series.patches[0].name == predicted["name"]
