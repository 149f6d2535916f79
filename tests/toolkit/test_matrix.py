"""``vllm-patchkit matrix`` end to end on a small range, and its cache.

The suite runs go through the session's report cache
(``VLLM_PATCHKIT_REPORT_CACHE``): a release tree already run by another
test this session is not run twice.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.toolkit.checkout_state import checkout_state
from tests.toolkit.cli_helpers import patchkit
from tests.toolkit.matrix_helpers import own_matrix_cache, project_copy
from tests.toolkit.series_expectations import stock_statuses
from vllm_overlay.fixes import FIXES
from vllm_patchkit.git.series import Series
from vllm_patchkit.judge.matrix import invariant_holds, static_facts
from vllm_patchkit.judge.regression.by_fix.static_sink import FACTS as SINK_FACTS
from vllm_patchkit.judge.regression.verdict import CANNOT_JUDGE
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.present.matrix_table import WORDS
from vllm_patchkit.present.tables import markdown_text
from vllm_patchkit.trees.releases import release_tree

pytestmark = pytest.mark.release_trees
ROOT = PROJECT_ROOT


@pytest.mark.slow
def test_matrix_suites_on_0_28_to_0_29(tmp_path: Path) -> None:
    """Stock and series-applied suites on an affected and a fixed release
    (the suite runs other tests of the session made are reused)."""
    trees = {v: release_tree(v) for v in ("0.28.0", "0.29.0")}
    before = {v: checkout_state(t) for v, t in trees.items()}
    args = ["matrix", "--from", "0.28.0", "--to", "0.29.0", "--jobs", "2"]
    args += ["--steps", "stock,series"]
    first = patchkit(*args, "--refresh", "--output-dir", str(tmp_path))
    assert first.returncode == 0, first.stderr
    # The release trees the rows ran on are untouched: the series went
    # into a clone.
    assert {v: checkout_state(t) for v, t in trees.items()} == before
    data = json.loads((tmp_path / "matrix.json").read_text())
    rows = data["rows"]
    assert [r["version"] for r in rows] == ["0.28.0", "0.29.0"]
    old, new = rows
    for row in rows:
        assert row["commit"] == before[row["version"]]["head"]
        assert row["torch_pin"] == "2.13.0"
        assert row["runtime"]["torch"].startswith("2.13.0")
        assert not row["cached"]
    assert old["fixes"] == {"#51585": True, "#53821": True, "StaticSink": True}
    assert new["fixes"] == {"#51585": False, "#53821": False, "StaticSink": True}

    # Stock 0.28.0: the bug reproduces, on counts that say what ran.
    stock = old["stock"]
    assert stock["status"] == "bug reproduced", stock["text"]
    ran, failed = stock["counts"]["ran"], stock["counts"]["failed"]
    assert ran > 0 and failed > 0 and stock["seconds"] > 0
    assert stock["text"].startswith(f"bug reproduced ({ran} ran")
    # With the series: applied to a clone, run for real, and fixed.
    applied = old["applied"]
    assert applied["detail"]["apply"]["status"] == "applied"
    assert "reused" not in applied["detail"]
    assert applied["status"] == "passes", applied["text"]
    assert applied["counts"]["failed"] == 0 and applied["counts"]["ran"] > 0
    # 0.29.0: upstream carries #51585's and #53821's fixes, not StaticSink's
    # (0004 affects 0.14.0..0.33.0): stock shows StaticSink's bug alone (its
    # checks fail); the series brings 0004's code, so its run is its own,
    # and passes.
    assert new["stock"]["status"] == "bug reproduced", new["stock"]["text"]
    failing = len(SINK_FACTS) * 2  # each at query lengths 1 and 3
    assert new["stock"]["text"].endswith(f": {failing} failed: StaticSink)")
    assert "reused" not in new["applied"]["detail"]
    assert new["applied"]["detail"]["apply"]["status"] == "applied"
    assert new["applied"]["status"] == "passes", new["applied"]["text"]
    assert old["overlay"]["text"] == "skipped (not in --steps stock,series)"
    assert data["run"]["rows_computed"] == 2

    table = (tmp_path / "matrix.md").read_text()
    assert (
        "| [0.28.0](#vllm-0280) | **yes** | **yes** | **yes** "
        f"| {', '.join(stock_statuses('0.28.0'))} "  # every patch applies
        f"| bug ({ran} ran) | passes ({applied['counts']['ran']} ran) "
        "| skipped | skipped |"
    ) in table
    # Each cell's full text is in the release's details below the table
    # (escaped: a check's name holds brackets).
    assert f"- stock: {markdown_text(stock['text'])}" in table
    assert f"- series: {markdown_text(applied['text'])}" in table
    assert "not run (pins" not in table
    assert "| 0.29.0 | 2.13.0 | 2.13.0" in table
    # Progress: which release, which step, elapsed.
    assert re.search(r"\[1/2\] +\d+m\d\ds vLLM 0\.28\.0 +stock \.\.\.", first.stderr)
    assert re.search(r"vLLM 0\.29\.0 +series: passes .*\(\d+\.\d s\)", first.stderr)

    second = patchkit(*args, "--output-dir", str(tmp_path))
    assert second.returncode == 0, second.stderr
    again = json.loads((tmp_path / "matrix.json").read_text())
    assert all(r["cached"] for r in again["rows"])
    assert again["run"]["rows_cached"] == 2
    assert "stock: " in second.stderr and "(cached)" in second.stderr
    # A warm run keeps the cells' own cost, measured when they ran.
    assert again["rows"][0]["stock"]["seconds"] == stock["seconds"]


@pytest.mark.audit_sweep
def test_a_cell_that_cannot_be_judged_makes_the_exit_3(tmp_path: Path) -> None:
    """0.11.0's audit cannot judge (three of its effect checks are not
    exercised there): the table is still written, and the exit says it is
    not whole, naming the cell."""
    proc = patchkit(
        "matrix", "--from", "0.11.0", "--to", "0.11.0", "--steps", "audit",
        "--output-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    (row,) = json.loads((tmp_path / "matrix.json").read_text())["rows"]
    assert row["audit"]["status"] == CANNOT_JUDGE, row["audit"]["text"]
    assert row["stock"]["status"] == "skipped"  # not asked for: not counted
    assert "1 cell(s) could not be judged (each says why): 0.11.0 audit" in (
        proc.stderr
    )
    assert "| 0.11.0 |" in (tmp_path / "matrix.md").read_text()


@pytest.mark.slow
def test_matrix_overlay_and_audit_on_0_28(tmp_path: Path) -> None:
    """The overlay through vLLM's own plugin loader fixes 0.28.0, and the
    audit finds #51585's host zeroing there, harmful."""
    proc = patchkit(
        "matrix",
        "--from",
        "0.28.0",
        "--to",
        "0.28.0",
        "--steps",
        "overlay,audit",
        "--refresh",
        "--output-dir",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads((tmp_path / "matrix.json").read_text())["rows"]
    overlay, audit = row["overlay"], row["audit"]
    assert overlay["status"] == "fixes", overlay["text"]
    assert overlay["detail"]["without"] == "bug reproduced"
    assert overlay["detail"]["with_overlay"] == "passes"
    assert overlay["seconds"] > 0
    assert audit["status"] == "harmful", audit["text"]
    harmful = [f for f in audit["detail"]["findings"] if f["kind"] == "harmful"]
    assert any(
        f["field"] == "query_start_loc_cpu"
        and f["method"] == "RocmAttentionMetadataBuilder.build_for_cudagraph_capture"
        for f in harmful
    ), harmful
    assert "query_start_loc_cpu in RocmAttentionMetadataBuilder" in audit["text"]
    assert audit["counts"]["ran"] > 0
    assert row["stock"]["text"] == "skipped (not in --steps overlay,audit)"
    assert "vLLM 0.28.0   overlay: fixes" in proc.stderr


def test_matrix_rejects_unknown_steps(tmp_path: Path) -> None:
    proc = patchkit("matrix", "--steps", "stock,lint", "--output-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "choose among stock, series, overlay, audit" in proc.stderr


def test_matrix_rejects_an_empty_range(tmp_path: Path) -> None:
    proc = patchkit(
        "matrix", "--from", "9.0.0", "--to", "9.1.0", "--output-dir", str(tmp_path)
    )
    assert proc.returncode == 2
    assert "no vLLM release between" in proc.stderr


def test_matrix_rejects_no_jobs(tmp_path: Path) -> None:
    proc = patchkit("matrix", "--jobs", "0", "--output-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "--jobs 0" in proc.stderr
    assert not (tmp_path / "matrix.json").exists()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("how", ["PIP_INDEX_URL", "PIP_CONFIG_FILE"])
def test_matrix_with_an_unreachable_index_is_an_environment_error(
    tmp_path: Path, how: str
) -> None:
    """Exit 3 with the reason, not "lists no releases" (a refusal, exit 2)."""
    url = f"http://127.0.0.1:{_closed_port()}/simple"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_INDEX")}
    if how == "PIP_INDEX_URL":
        env["PIP_INDEX_URL"] = url
    else:
        config = tmp_path / "pip.conf"
        config.write_text(f"[global]\nindex-url = {url}\n")
        env["PIP_CONFIG_FILE"] = str(config)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm_patchkit",
            "matrix",
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert f"package index {url}/vllm/ is unreachable" in proc.stderr
    assert "Connection refused" in proc.stderr
    assert not (tmp_path / "matrix.json").exists()


ROW_SCRIPT = """
import json, sys
from vllm_patchkit.judge.matrix import STEPS, build_matrix, cache_key
from vllm_patchkit.git.series import load_series
series = load_series()
rows = build_matrix(series, [sys.argv[1]], steps=())
keys = {step: cache_key(series, step) for step in STEPS}
print(json.dumps({"keys": keys, "cached": rows[0].cached}))
"""


def _row(project: Path, version: str) -> dict[str, Any]:
    """One matrix row (its static step) computed by a copy of the project,
    with every step's cache key."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(project / "tools"), str(project)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", ROW_SCRIPT, version],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=600,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _source(module: str) -> str | None:
    """The project-relative file of ``module``, or None where it is absent."""
    try:
        path = Path(importlib.import_module(module).__file__ or "")
    except ImportError:
        return None
    return str(path.relative_to(ROOT))


ALL = ("static", "stock", "series", "overlay", "audit")


def _checkers() -> dict[str, tuple[str, ...]]:
    """Files that decide cells, and the steps whose key each one is in."""
    reading = ("static", "stock", "series")
    everywhere = ALL
    checkers = {
        "tools/vllm_patchkit/git/invariants.py": everywhere,
        "vllm_overlay/code.py": everywhere,
        "vllm_overlay/fixes/rocm_capture_host_offsets/code.py": everywhere,
        "vllm_overlay/fixes/rocm_capture_host_offsets/__init__.py": everywhere,
        # Named by its fix, imported by no statement: a patch's rules.
        "vllm_overlay/fixes/static_sink_seq_lens/series.py": everywhere,
        # Wherever the series' invariant check lives (checkout.py today).
        str(Path(inspect.getsourcefile(invariant_holds) or "").relative_to(ROOT)): (
            everywhere
        ),
        "tools/vllm_patchkit/git/apply.py": everywhere,
        "tools/vllm_patchkit/judge/regression/verdict.py": everywhere,
        "tools/vllm_patchkit/judge/regression/runner.py": everywhere,
        "tools/vllm_patchkit/trees/tree_runtime.py": everywhere,
        "tools/vllm_patchkit/judge/matrix.py": everywhere,
        "patches/series": reading,
    }
    # The steps other modules provide, where this toolkit has them: only
    # their own step is recomputed.
    for module, step in (
        ("vllm_patchkit.judge.overlay_probe", "overlay"),
        ("vllm_patchkit.judge.audit", "audit"),
    ):
        source = _source(module)
        if source is not None:
            checkers[source] = (step,)
    return checkers


ONE_OF_EACH_KIND = "one checker per set of steps"


def _checkers_in(which: str) -> dict[str, tuple[str, ...]]:
    """The first checker of each set of steps it decides, or the others."""
    checkers = _checkers()
    first_of_kind = {}
    for name, steps in checkers.items():
        first_of_kind.setdefault(steps, name)
    firsts = set(first_of_kind.values())
    wanted = which == ONE_OF_EACH_KIND
    return {n: s for n, s in checkers.items() if (n in firsts) == wanted}


@pytest.mark.parametrize(
    "which",
    [ONE_OF_EACH_KIND, pytest.param("every other checker", marks=pytest.mark.slow)],
)
def test_a_changed_checker_never_serves_a_stale_row(which: str, tmp_path: Path) -> None:
    """Each file that decides a cell, changed in a copy: its step's key
    changes (the others' do not), and a static decider recomputes the row.
    A matrix run each: by default one file per set of steps it decides."""
    project = project_copy(tmp_path / "project")
    first = _row(project, "0.29.0")
    again = _row(project, "0.29.0")
    assert again == {"keys": first["keys"], "cached": True}
    keys = first["keys"]
    # A change no earlier run made: rows are cached across runs (the user's
    # cache), and a run of the same code made the same fixed change before.
    change = f"\n# changed by run {uuid.uuid4().hex}\n"
    checkers = _checkers_in(which)
    assert checkers
    for name, steps in checkers.items():
        path = project / name
        path.write_text(path.read_text() + change)
        row = _row(project, "0.29.0")
        changed = {s for s in ALL if row["keys"][s] != keys[s]}
        assert changed == set(steps), name
        if "static" in steps:
            assert row["cached"] is False, f"{name} changed, the row was cached"
        keys = row["keys"]
    # The table's layout decides no cell: changing it keeps every key.
    layout = project / "tools/vllm_patchkit/present/matrix_table.py"
    layout.write_text(layout.read_text() + change)
    assert _row(project, "0.29.0") == {"keys": keys, "cached": True}


def test_an_overlay_cell_that_cannot_be_judged_makes_the_exit_3(
    tmp_path: Path,
) -> None:
    """A logging level vLLM refuses makes both probe runs fail at import on
    0.28.0: the overlay cell cannot judge, and the exit says so (it was 0:
    the cell said "cannot judge", the exit rule looked for "cannot-judge")."""
    env = {**own_matrix_cache(tmp_path), "VLLM_LOGGING_LEVEL": "NO-SUCH-LEVEL"}
    proc = patchkit(
        "matrix", "--from", "0.28.0", "--to", "0.28.0", "--steps", "overlay",
        "--output-dir", str(tmp_path), env=env,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    (row,) = json.loads((tmp_path / "matrix.json").read_text())["rows"]
    assert row["overlay"]["status"] == CANNOT_JUDGE, row["overlay"]["text"]
    assert row["overlay"]["text"].startswith("cannot judge")
    assert "1 cell(s) could not be judged (each says why): 0.28.0 overlay" in (
        proc.stderr
    )


@pytest.mark.slow
def test_an_apply_the_environment_failed_is_exit_3_and_never_cached(
    tmp_path: Path,
) -> None:
    """A ``git am`` that fails for want of disk (a pre-applypatch hook that
    says so, as git does) on 0.29.0: the series cell cannot run and the exit
    is 3; once the fault is gone, the next run (no --refresh) applies and
    measures it, and only the deterministic stock cell comes from the cache."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    hook = hooks / "pre-applypatch"
    hook.write_text(
        "#!/bin/sh\necho 'error: unable to write file: No space left on device' >&2\n"
        "exit 1\n"
    )
    hook.chmod(0o755)
    fault = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.hooksPath",
        "GIT_CONFIG_VALUE_0": str(hooks),
    }
    cache = own_matrix_cache(tmp_path)
    args = ["matrix", "--from", "0.29.0", "--to", "0.29.0", "--steps", "stock,series"]
    args += ["--output-dir", str(tmp_path)]

    first = patchkit(*args, env={**cache, **fault})
    assert first.returncode == 3, first.stderr
    (row,) = json.loads((tmp_path / "matrix.json").read_text())["rows"]
    assert row["applied"]["status"] == "cannot run", row["applied"]["text"]
    assert "No space left on device" in row["applied"]["text"]
    assert "0.29.0 series" in first.stderr
    # StaticSink's bug, in 0.29.0 (the bug the release shows, by name).
    assert row["stock"]["status"] == "bug reproduced", row["stock"]["text"]
    assert "StaticSink" in row["stock"]["text"]

    second = patchkit(*args, env=cache)
    assert second.returncode == 0, second.stderr
    (row,) = json.loads((tmp_path / "matrix.json").read_text())["rows"]
    assert row["stock"]["cached"]
    assert not row["applied"]["cached"]
    assert row["applied"]["detail"]["apply"]["status"] == "applied"
    assert row["applied"]["status"] == "passes", row["applied"]["text"]


def test_a_static_row_is_the_release_s_not_this_shell_s(
    series: Series, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overlay's plan in a cached static cell does not take this shell's
    VLLM_OVERLAY_DISABLE or VLLM_PLUGINS: the cell serves every later sweep."""
    tree = release_tree("0.28.0")
    for name in ("VLLM_OVERLAY_DISABLE", "VLLM_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    plain = static_facts(tree, series)
    assert "installed" in plain["overlay_plan"], plain
    monkeypatch.setenv("VLLM_OVERLAY_DISABLE", "1")
    assert static_facts(tree, series) == plain
    monkeypatch.delenv("VLLM_OVERLAY_DISABLE")
    monkeypatch.setenv("VLLM_PLUGINS", "some_other_plugin")
    assert static_facts(tree, series) == plain


LABEL = "StaticSink"


def test_each_fix_of_the_registry_has_a_column_with_its_word(series: Series) -> None:
    """StaticSink's column comes from the registry: no on 0.11.0 (no
    static-sink attention there), yes on 0.28.0 and 0.33.0 (every release
    from 0.14.0 has the shared write)."""
    assert LABEL in [fix.pr for fix in FIXES]
    words = {
        version: WORDS[static_facts(release_tree(version), series)["fixes"][LABEL]]
        for version in ("0.11.0", "0.28.0", "0.33.0")
    }
    assert words == {"0.11.0": "no", "0.28.0": "**yes**", "0.33.0": "**yes**"}
