"""``vllm-patchkit audit`` as a user runs it: exit codes, JSON, human output.

The full audit (static and dynamic passes) runs once on the installed vLLM
(the pinned 0.28.0: no PATH, as ``doctor``) and, in the ``audit_sweep``
tier, once on the 0.29.0 release tree, each in a real subprocess of the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.toolkit.cli_helpers import patchkit
from vllm_patchkit.judge.audit.findings import AuditReport
from vllm_patchkit.present.reports import format_audit
from vllm_patchkit.trees.releases import release_tree

pytestmark = pytest.mark.release_trees

ROCM = "vllm/v1/attention/backends/rocm_attn.py"
CAPTURE = "RocmAttentionMetadataBuilder.build_for_cudagraph_capture"
REQUIRED = {"file", "line", "field", "method", "kind", "victims"}


def audit_json(*args: str) -> tuple[int, dict[str, Any]]:
    proc = patchkit("audit", *args, "--json")
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def installed() -> tuple[int, dict[str, Any]]:
    return audit_json()


@pytest.fixture(scope="module")
def fixed() -> tuple[int, dict[str, Any]]:
    return audit_json(str(release_tree("0.29.0")))


def one(report: dict[str, Any], file: str, field: str) -> dict[str, Any]:
    hits = [f for f in report["findings"] if f["file"] == file and f["field"] == field]
    assert len(hits) == 1, hits
    return hits[0]


@pytest.mark.slow
def test_json_shape(installed: tuple[int, dict[str, Any]]) -> None:
    _, report = installed
    assert report["findings"]
    for finding in report["findings"]:
        assert set(finding) >= REQUIRED
        assert finding["kind"] in ("harmful", "latent", "intentional")
        assert not Path(finding["file"]).is_absolute()
        assert isinstance(finding["line"], int) and finding["line"] > 0
        assert set(finding["evidence"]) <= {"static", "dynamic"} and finding["evidence"]
    checks = report["checks"]
    assert checks["ran"] == checks["passed"] + checks["failed"]
    assert checks["could_not_run"] == len(checks["could_not_run_names"])
    assert {"static", "dynamic"} <= set(report["seconds"])


def test_the_51585_host_zeroing_is_harmful_on_the_pinned_release(
    installed: tuple[int, dict[str, Any]],
) -> None:
    code, report = installed
    host = one(report, ROCM, "query_start_loc_cpu")

    assert code == 1
    assert report["verdict"] == "harmful"
    assert (host["kind"], host["method"], host["evidence"]) == (
        "harmful",
        CAPTURE,
        ["static", "dynamic"],
    )
    # The builder in #51585's trace is among the victims.
    assert any("MiniMaxM3IndexerTritonMetadataBuilder" in v for v in host["victims"])
    assert any(
        c.startswith(f"effect of {ROCM}:{host['line']} ") for c in _failed(report)
    )


@pytest.mark.parametrize(
    ("where", "kind", "victims"),
    [
        ("installed", "harmful", ["ROCM_AITER_UNIFIED_ATTN"]),
        pytest.param("fixed", "intentional", [], marks=pytest.mark.audit_sweep),
    ],
)
def test_the_device_zeroing_is_harmful_only_where_aiter_unified_reads_it(
    where: str, kind: str, victims: list[str], request: pytest.FixtureRequest
) -> None:
    """#25985's band-aid: on the pinned 0.28.0 ROCM_AITER_UNIFIED_ATTN is
    handed ROCm's builder and replays dummy batches on the zeroed offsets
    (#53821); 0.29.0 gives it a builder of its own."""
    _, report = request.getfixturevalue(where)
    device = one(report, ROCM, "query_start_loc")
    assert (device["kind"], device["victims"]) == (kind, victims)
    assert device["method"] == CAPTURE
    assert "#25985" in device["reason"]


@pytest.mark.audit_sweep
def test_the_host_zeroing_is_gone_on_0_29_0(
    fixed: tuple[int, dict[str, Any]],
) -> None:
    code, report = fixed

    assert not [f for f in report["findings"] if f["field"] == "query_start_loc_cpu"]
    rocm = [f for f in report["findings"] if f["file"] == ROCM]
    assert rocm and all(f["kind"] == "intentional" for f in rocm)
    # Other harmful writes of the class may live in the release (the
    # StaticSink builder's, docs/audit.md); the exit code follows them.
    harmful = [f for f in report["findings"] if f["kind"] == "harmful"]
    if harmful:
        assert (code, report["verdict"]) == (1, "harmful")
    elif report["checks"]["could_not_run"]:
        assert (code, report["verdict"]) == (3, "cannot judge")
    else:
        assert (code, report["verdict"]) == (0, "no harmful write")


def test_human_output_ranks_harmful_first(
    installed: tuple[int, dict[str, Any]],
) -> None:
    _, data = installed
    text = format_audit(AuditReport.from_json(data))
    lines = [line.split()[0] for line in text.splitlines()]
    kinds = [k for k in lines if k in ("harmful", "latent", "intentional")]

    assert kinds[0] == "harmful"
    assert kinds == sorted(kinds, key=["harmful", "latent", "intentional"].index)
    assert "verdict: harmful;" in text


def test_a_directory_without_vllm_is_refused(tmp_path: Path) -> None:
    proc = patchkit("audit", str(tmp_path), "--json")

    assert proc.returncode == 2
    assert "not a vLLM tree" in json.loads(proc.stdout)["error"]


def _failed(report: dict[str, Any]) -> list[str]:
    return [c["name"] for c in report["checks"]["list"] if c["status"] == "failed"]


def test_the_command_itself_imports_no_vllm_runtime(tmp_path: Path) -> None:
    # The dynamic pass runs in a child process; the CLI process stays light.
    from tests.packaging.test_startup import RUNTIME, added_by, packages

    source = release_tree("0.28.0") / "vllm/v1/attention/backend.py"
    (tmp_path / "vllm/v1/attention").mkdir(parents=True)
    (tmp_path / "vllm/v1/attention/backend.py").write_text(source.read_text())

    added = added_by("audit", str(tmp_path), "--static-only", ok=(3,))

    assert "vllm_patchkit.judge.audit.static" in added
    assert not packages(added) & RUNTIME, sorted(packages(added) & RUNTIME)
