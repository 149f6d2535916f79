"""What ``vllm-patchkit check`` starts: its git processes, and nothing else.

``check`` runs in a contributor's pre-commit hook, at most the CPU of
``pre-commit --version`` (issue #38, ``benchmarks/check_cost.py``); each
process it starts is a good part of that. Counted here with git's own
trace (``GIT_TRACE2_EVENT``: one file per git process), on a real release
checkout, through the real command line in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.release_trees

RUN_CHECK = """
import sys
from vllm_patchkit import child_death
from vllm_patchkit.cli import main
code = main(["check", sys.argv[1]])
print(f"watchdog {child_death.watchdog_running()}", file=sys.stderr)
sys.exit(code)
"""


def traced_check(tree: Path, trace: Path) -> tuple[int, str, list[list[str]]]:
    """Run check on ``tree``: its exit code, stderr, and the argv of every
    git process it started (git's trace2 events)."""
    trace.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", RUN_CHECK, str(tree)],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_TRACE2_EVENT": str(trace)},
        timeout=300,
    )
    argvs = []
    for path in sorted(trace.iterdir()):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("event") == "start":
                argvs.append(event["argv"][1:])
    return proc.returncode, proc.stderr, argvs


def test_check_runs_no_hook_and_starts_no_watchdog(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """check's scratch index is its own: the user's ``post-index-change``
    hook (which git runs for any index it writes) is not run for it, and
    with no child that can run a hook, no watchdog process is started."""
    tree = release_clone("0.28.0")
    ran = tmp_path / "hook-ran"
    hook = tree / ".git" / "hooks" / "post-index-change"
    hook.write_text(f'#!/bin/sh\necho "$GIT_INDEX_FILE" >> "{ran}"\n')
    hook.chmod(0o755)

    code, stderr, argvs = traced_check(tree, tmp_path / "trace")

    assert code == 0, stderr
    assert any("update-index" in argv for argv in argvs)  # it did write one
    assert not ran.exists(), f"check ran the user's hook: {ran.read_text()}"
    assert "watchdog False" in stderr


def test_check_reads_the_series_history_with_one_git_log(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """One ``git log -p`` over every patch's files, split per patch
    (:mod:`vllm_patchkit.git.recent_diffs`), not one per patch; then one
    ``git patch-id`` for them all."""
    tree = release_clone("0.28.0")

    code, stderr, argvs = traced_check(tree, tmp_path / "trace")

    assert code == 0, stderr
    commands = [argv[0] for argv in argvs]
    assert commands.count("log") == 1, argvs
    assert commands.count("patch-id") == 1, argvs


def test_check_seeds_its_scratch_index_with_one_ls_tree(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """The entries the patches' paths decide and their parent directories
    come from one ``git ls-tree -r -t`` where every parent is a directory
    in HEAD (a second one asks only for a parent that is not:
    ``tests/toolkit/test_check_scratch_index.py``)."""
    tree = release_clone("0.28.0")

    code, stderr, argvs = traced_check(tree, tmp_path / "trace")

    assert code == 0, stderr
    listings = [argv for argv in argvs if argv[0] == "ls-tree"]
    assert len(listings) == 1, listings
    assert "-t" in listings[0], listings


RUN_COUNTING_PARSES = """
import json, sys
from collections import Counter
from vllm_patchkit.cli import main

parses = Counter()
def count(event, args):
    if event == "compile" and str(args[1]).endswith(".py"):
        source = args[0] if isinstance(args[0], bytes | str) else None
        if source is not None:
            parses[json.dumps([str(args[1]), hash(source)])] += 1
sys.addaudithook(count)
code = main(["check", sys.argv[1]])
print(json.dumps(dict(parses)), file=sys.stderr)
sys.exit(code)
"""


def test_check_parses_each_file_content_once(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """The carry rules, the version's contradiction and each patch's
    invariant on the trial tree read the same vLLM files: each file's
    content is parsed once in a run (CPython's ``compile`` audit event, on
    every file whose name is a ``.py`` path), with nothing kept from an
    earlier run (an empty cache)."""
    tree = release_clone("0.28.0")
    proc = subprocess.run(
        [sys.executable, "-c", RUN_COUNTING_PARSES, str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "VLLM_OVERLAY_CACHE": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    parses = json.loads(proc.stderr.strip().splitlines()[-1])

    files = {json.loads(key)[0] for key in parses}
    assert any(f.endswith("static_sink_attention.py") for f in files), sorted(files)
    again = {key: n for key, n in parses.items() if n > 1}
    assert not again, again


def test_a_second_check_parses_no_runner(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """The V1 runner (the largest file the rules read) is read through the
    content-keyed cache by the carry rules and the invariants alike: a
    second run on the same checkout parses it nowhere (the invariant of
    0006 once parsed it on every trial tree, 117 ms of each ``check``)."""
    tree = release_clone("0.28.0")
    env = {**os.environ, "VLLM_OVERLAY_CACHE": str(tmp_path / "cache")}
    runs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", RUN_COUNTING_PARSES, str(tree)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        parses = json.loads(proc.stderr.strip().splitlines()[-1])
        runs.append({json.loads(key)[0] for key in parses})
    runner = "gpu_model_runner.py"
    assert any(f.endswith(runner) for f in runs[0]), sorted(runs[0])
    assert not any(f.endswith(runner) for f in runs[1]), sorted(runs[1])


def _parsed_by_check(tree: Path, cache: Path) -> tuple[set[str], str]:
    """The ``.py`` files one ``check`` of ``tree`` parses, and what it says."""
    proc = subprocess.run(
        [sys.executable, "-c", RUN_COUNTING_PARSES, str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "VLLM_OVERLAY_CACHE": str(cache)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    parses = json.loads(proc.stderr.strip().splitlines()[-1])
    return {json.loads(key)[0] for key in parses}, proc.stdout


def test_declared_readings_are_kept_by_their_files_content(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """A checkout whose content is not known (``check`` runs no ``git
    status``): the readings that declare their files
    (:func:`vllm_overlay.code.reads`) are kept by those files' content, on
    the checkout and on each trial tree; a change to one of them is read
    afresh, and says what reading it says."""
    tree = release_clone("0.28.0")
    rocm = tree / "vllm" / "v1" / "attention" / "backends" / "rocm_attn.py"
    fix_files = (
        rocm.name,
        "rocm_aiter_unified_attn.py",
        "static_sink_attention.py",
        "gpu_model_runner.py",
    )
    first, said = _parsed_by_check(tree, tmp_path / "cache")
    assert all(any(f.endswith(name) for f in first) for name in fix_files), first
    second, said_again = _parsed_by_check(tree, tmp_path / "cache")
    assert said_again == said
    assert not [f for f in second if f.endswith(fix_files)], sorted(second)
    rocm.write_text(rocm.read_text() + "\n# a contributor's edit\n")
    third, said_changed = _parsed_by_check(tree, tmp_path / "cache")
    assert said_changed == said
    assert any(f.endswith(rocm.name) for f in third), sorted(third)
    # Only the readings that read rocm_attn.py are made again (AITER's too).
    unread = ("static_sink_attention.py", "gpu_model_runner.py")
    assert not [f for f in third if f.endswith(unread)], sorted(third)


RUN_COUNTING_COLLECTIONS = """
import gc, json, sys
from vllm_patchkit.cli import main

collections = []
gc.callbacks.append(lambda phase, info: collections.append(phase == "start"))
tree, as_process = sys.argv[1], sys.argv[2] == "process"
if as_process:
    sys.argv = ["vllm-patchkit", "check", tree]
    code = main()
else:
    code = main(["check", tree])
print(json.dumps({
    "collections": sum(collections),
    "frozen": gc.get_freeze_count(),
    "enabled": gc.isenabled(),
}), file=sys.stderr)
sys.exit(code)
"""


def collector_during_check(tree: Path, how: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", RUN_COUNTING_COLLECTIONS, str(tree), how],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stderr.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_check_as_its_process_runs_no_garbage_collection(
    release_clone: Callable[[str], Path],
) -> None:
    """Run as the process's command (the console script, ``python -m``),
    check's process ends with it: the cyclic collector makes no pass during
    the run, and its objects are frozen so the exit walks none of them."""
    found = collector_during_check(release_clone("0.28.0"), "process")

    assert found["collections"] == 0, found
    assert isinstance(found["frozen"], int) and found["frozen"] > 0, found


def test_check_called_in_a_process_leaves_the_collector_alone(
    release_clone: Callable[[str], Path],
) -> None:
    """``main(argv)`` called by a longer-lived process (a test, a script)
    leaves that process's collector as it was: on, nothing frozen."""
    found = collector_during_check(release_clone("0.28.0"), "call")

    assert found["enabled"] is True and found["frozen"] == 0, found
    assert isinstance(found["collections"], int) and found["collections"] > 0, found
