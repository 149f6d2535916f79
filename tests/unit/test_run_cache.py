"""The one cache: each part of its key decides a hit, and both users store there.

The report cache (per test session) and the matrix's step cells (across
runs) are entries of :class:`vllm_patchkit.trees.run_cache.RunCache`; the matrix
imports its steps as plain imports (no module named by a string), and the
code of one step's own module stays out of every other step's key.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_import_direction import imported
from vllm_patchkit.git.series import load_series
from vllm_patchkit.judge import matrix
from vllm_patchkit.judge.regression import report_cache
from vllm_patchkit.paths import PACKAGE_DIR
from vllm_patchkit.trees.run_cache import CacheKey, RunCache

KEY = CacheKey("kind", "tree", "code", {"python": "3"})


def test_each_part_of_the_key_decides_a_hit(tmp_path: Path) -> None:
    cache = RunCache(tmp_path)
    runs: list[str] = []

    def compute(value: str) -> tuple[str, bool]:
        runs.append(value)
        return value, True

    assert cache.get(KEY, lambda: compute("first")) == ("first", False)
    assert cache.get(KEY, lambda: compute("again")) == ("first", True)
    others = [
        CacheKey("other kind", "tree", "code", {"python": "3"}),
        CacheKey("kind", "other tree", "code", {"python": "3"}),
        CacheKey("kind", "tree", "other code", {"python": "3"}),
        CacheKey("kind", "tree", "code", {"python": "4"}),
    ]
    for key in others:
        assert cache.get(key, lambda: compute("new")) == ("new", False)
    assert runs == ["first", "new", "new", "new", "new"]
    assert RunCache(tmp_path, refresh=True).get(KEY, lambda: compute("fresh")) == (
        "fresh",
        False,
    )
    assert cache.get(KEY, lambda: compute("later")) == ("fresh", True)


def test_a_value_that_may_not_be_kept_is_measured_again(tmp_path: Path) -> None:
    cache = RunCache(tmp_path)
    assert cache.get(KEY, lambda: ("spoiled", False)) == ("spoiled", False)
    assert cache.get(KEY, lambda: ("measured", True)) == ("measured", False)
    assert cache.get(KEY, lambda: ("unused", True)) == ("measured", True)


def test_two_processes_asking_for_one_key_run_it_once(tmp_path: Path) -> None:
    """Real processes, one lock: the second waits and is served."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from vllm_patchkit.trees.run_cache import CacheKey, RunCache\n"
        "root, log = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "def compute():\n"
        "    with log.open('a') as out: out.write('ran\\n')\n"
        "    time.sleep(1)\n"
        "    return 'value', True\n"
        "print(RunCache(root).get(CacheKey('k', 't', 'c'), compute))\n"
    )
    log = tmp_path / "log"
    command = [sys.executable, "-c", script, str(tmp_path / "cache"), str(log)]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in "ab"]
    outputs = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert outputs == ["('value', False)", "('value', True)"]
    assert log.read_text() == "ran\n"


def test_the_report_cache_and_the_matrix_store_in_the_one_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = tmp_path / "reports"
    monkeypatch.setenv(report_cache.ENV, str(reports))
    tree = tmp_path / "tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("")
    record = report_cache.reuse("k", tree, [], {}, lambda: ({"ok": 1}, True))
    assert record == {"ok": 1}
    key = report_cache.run_key("k", tree, [], {}, report_cache.tree_fingerprint(tree))
    stored = RunCache(reports).load(key)
    assert stored == {"tree": str(tree), "record": {"ok": 1}}

    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path / "user-cache"))
    cells = matrix.StepCache(load_series())
    assert cells.get("0.0.1", "c0ffee", "static", lambda: {"facts": 1}) == (
        {"facts": 1},
        False,
    )
    key = CacheKey("static", "0.0.1-c0ffee", cells.keys["static"], cells.environment)
    assert cells.cache.root == tmp_path / "user-cache" / "matrix"
    assert json.loads(cells.cache.path(key).read_text())["value"] == {"facts": 1}
    assert cells.get("0.0.1", "c0ffee", "static", lambda: {"facts": 2}) == (
        {"facts": 1},
        True,
    )


def test_the_matrix_imports_its_steps_plainly() -> None:
    """No step module named by a string: the import edges are in the source."""
    source = (PACKAGE_DIR / "judge" / "matrix.py").read_text()
    names = imported(source, PACKAGE_DIR / "judge" / "matrix.py")
    assert {"vllm_patchkit.judge.overlay_probe", "vllm_patchkit.judge.audit"} <= names
    assert "import_module" not in source


def test_a_steps_own_module_is_in_its_key_only() -> None:
    probe = Path(matrix.overlay_probe.__file__ or "").resolve()
    findings = PACKAGE_DIR.resolve() / "judge" / "audit" / "findings.py"
    for step in matrix.STEPS:
        files = set(matrix.decider_files(step))
        assert (probe in files) == (step == "overlay"), step
        assert (findings in files) == (step == "audit"), step
