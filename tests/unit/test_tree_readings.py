"""A fix's whole reading of a clean checkout is made once.

Where a tree's content is known (a clean checkout, by HEAD's tree id; the
trial tree ``check`` reads invariants on, by that and the files it took),
the carry rules, the invariants and the readings a stale tag is told by are
kept by it (:func:`vllm_patchkit.git.code_readings.read_tree_cached`): a
second run parses no vLLM file; a new commit or an uncommitted change is
read afresh; and what the cache gives back is what reading gives, on real
release trees, stock and with the series applied.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_overlay.code import Code, Shape
from vllm_overlay.fixes import FIXES
from vllm_patchkit.git.code_readings import known_tree, read_cached, read_tree_cached
from vllm_patchkit.git.invariants import INVARIANTS
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import clone_release, release_tree

RUN = """
import json, sys
from pathlib import Path

root = Path(sys.argv[1])
parsed = []
def count(event, args):
    if event == "compile" and str(args[1]).startswith(str(root)):
        parsed.append(args[1])
sys.addaudithook(count)

from vllm_patchkit.git.checkout import classify_path
from vllm_patchkit.git.series import load_series

reports = classify_path(root, load_series())
print(json.dumps({
    "parsed": len(parsed),
    "reports": [[r.name, str(r.status), r.detail] for r in reports],
}))
"""


def _classify(root: Path, cache: Path) -> dict[str, object]:
    """``classify_path`` (what doctor reads) in a new process: its reports
    and how many of the tree's files it compiled."""
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(root)],
        capture_output=True,
        text=True,
        env={**os.environ, "VLLM_OVERLAY_CACHE": str(cache)},
        timeout=300,
        check=True,
    )
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_a_second_run_parses_no_file_and_a_change_is_read_afresh(
    tmp_path: Path,
) -> None:
    git = clone_release("0.28.0", tmp_path / "vllm")
    cache = tmp_path / "cache"
    first = _classify(git.root, cache)
    assert first["parsed"] > 0
    second = _classify(git.root, cache)
    assert second == {**first, "parsed": 0}
    # An uncommitted change: read afresh, whatever was kept.
    runner = git.root / "vllm" / "v1" / "worker" / "gpu_model_runner.py"
    runner.write_text(runner.read_text() + "\n# a contributor's edit\n")
    assert _classify(git.root, cache)["parsed"] > 0
    # The same change committed: a new tree, read once more, then kept.
    git.run("commit", "-qam", "edit the runner")
    assert _classify(git.root, cache)["parsed"] > 0
    assert _classify(git.root, cache)["parsed"] == 0


def _readings(root: Path) -> list[tuple[str, str, str, int | None, str]]:
    """Every rule's carry and invariant reading and every fix's tree reading
    of ``root``, by their own fields."""
    found = []
    for name, rule in sorted(INVARIANTS.items()):
        for kind, read in (
            (f"carry:{name}", lambda r=rule: r.carry(root, read_cached)),
            (f"holds:{name}", lambda r=rule: r.holds(root, read_cached)),
        ):
            code = read_tree_cached(kind, root, read)
            found.append((kind, code.shape, str(code.file), code.line, code.detail))
    for fix in FIXES:
        if fix.read_tree is not None:
            tree_read = functools.partial(fix.read_tree, root)
            code = read_tree_cached(f"fix:{fix.name}", root, tree_read)
            found.append((fix.name, code.shape, str(code.file), code.line, code.detail))
    return found


@pytest.mark.parametrize(
    "version",
    [
        pytest.param("0.11.0", marks=pytest.mark.slow),
        "0.28.0",
        pytest.param("0.29.0", marks=pytest.mark.slow),
        pytest.param("0.33.0", marks=pytest.mark.slow),
    ],
)
def test_kept_readings_are_the_readings(
    version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.28.0 is stock and buggy; 0.29.0 carries the series' changes."""
    root = release_tree(version)  # from the shared cache, before it is moved
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path / "cache"))
    tree = Git(root).run("rev-parse", "HEAD^{tree}").stdout.strip()
    with known_tree(root, tree):
        read = _readings(root)  # each a miss: read by its reader, then kept
        kept = _readings(root)
    assert kept == read
    assert len(list((tmp_path / "cache" / "code-readings").glob("*.json"))) >= len(read)


def _entry(**fields: object) -> str:
    record = {"shape": "fixed", "file": "f", "line": 1, "detail": "", **fields}
    return json.dumps({"value": {k: v for k, v in record.items() if v != "drop"}})


@pytest.mark.parametrize(
    "entry",
    [
        "not json {",
        json.dumps({"value": [["fixed"]]}),
        _entry(shape=["x"]),
        _entry(line="1"),
        _entry(file="../f"),
        _entry(detail="drop"),
    ],
    ids=["not-json", "not-a-record", "bad-shape", "bad-line", "outside", "short"],
)
def test_a_bad_entry_is_read_again(
    entry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tree's path comes back where it was; a bad entry is replaced."""
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "tree"
    calls: list[int] = []

    def read() -> Code:
        calls.append(1)
        return Code(Shape.BUGGY, root / "vllm" / "f.py", 3, f"in {root}/vllm/f.py")

    with known_tree(root, "a tree id"):
        first = read_tree_cached("k", root, read)
        (stored,) = (tmp_path / "cache" / "code-readings").glob("*.json")
        assert str(root) not in stored.read_text()
        assert read_tree_cached("k", root, read) == first and len(calls) == 1
        stored.write_text(entry)
        assert read_tree_cached("k", root, read) == first and len(calls) == 2
        assert read_tree_cached("k", root, read) == first and len(calls) == 2
    assert read_tree_cached("k", root, read) == first and len(calls) == 3
