"""The carry decision's reading of ``gpu_model_runner.py`` is made once.

It is kept by the file's git blob id (:mod:`vllm_patchkit.git.code_readings`);
a second run finds it and parses nothing, and an entry that is not what
the reader writes (corrupt, of another shape, planted) is ignored: the
file is read again and the entry replaced. The runner read is the installed
vLLM's own (real code, the 0003 rule's BUG shape on 0.28.0).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_patchkit.git.code_readings import blob_id, read_cached
from vllm_patchkit.gitcmd import Git, init_repo

RUN = """
import json, sys
from pathlib import Path

parsed = []
def count(event, args):
    if event == "compile" and str(args[1]).endswith("gpu_model_runner.py"):
        parsed.append(args[1])
sys.addaudithook(count)

from vllm_patchkit.git.code_readings import read_cached
from vllm_patchkit.git.invariants import INVARIANTS
from vllm_patchkit.git.series import load_series

# The rule itself: read_code would keep its whole verdict in front of it.
patch = next(p for p in load_series().patches if p.name.startswith("0003"))
code = INVARIANTS[patch.invariant].carry(Path(sys.argv[1]), read_cached)
print(json.dumps({"parsed": len(parsed), "reading": code.shape, "why": code.detail}))
"""


def _installed_vllm() -> Path:
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parents[1]


def _read_code(cache: Path) -> dict[str, object]:
    """0003's code rule on the installed vLLM, in a new process: what it
    found and how many times it compiled the runner's source."""
    env = {**os.environ, "VLLM_OVERLAY_CACHE": str(cache)}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(_installed_vllm())],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "code-readings").glob("*.json"))


def test_a_second_run_reads_the_runner_from_the_cache(tmp_path: Path) -> None:
    first = _read_code(tmp_path)
    assert first["parsed"] == 1 and first["reading"] == "buggy"
    assert len(_entries(tmp_path)) == 1
    second = _read_code(tmp_path)
    assert second == {**first, "parsed": 0}


@pytest.mark.parametrize(
    "entry",
    [
        "not json {",
        json.dumps({"kind": "k"}),
        json.dumps({"value": {"text": "x"}}),
        json.dumps({"value": [{"text": "x", "line": "1", "full": 1, "true": 0}]}),
        json.dumps({"value": [{"text": "x", "line": 1, "full": True}]}),
        json.dumps({"value": [{"__class__": "os.system"}]}),
        json.dumps({"value": [{}] * 1000}),
    ],
    ids=[
        "not-json",
        "no-value",
        "not-a-list",
        "wrong-types",
        "a-field-short",
        "planted",
        "too-long",
    ],
)
def test_a_bad_entry_is_ignored_and_replaced(tmp_path: Path, entry: str) -> None:
    first = _read_code(tmp_path)
    (stored,) = _entries(tmp_path)
    stored.write_text(entry)
    again = _read_code(tmp_path)
    assert again == first  # read afresh: parsed once more, the same finding
    assert _read_code(tmp_path)["parsed"] == 0  # the entry is whole again


def test_an_unwritable_cache_still_reads(tmp_path: Path) -> None:
    (tmp_path / "code-readings").write_text("a file where the directory goes")
    assert _read_code(tmp_path)["reading"] == "buggy"


def test_the_key_is_git_s_blob_id(tmp_path: Path) -> None:
    git: Git = init_repo(tmp_path / "repo")
    data = b"class GPUModelRunner:\n    pass\n"
    (git.root / "f.py").write_bytes(data)
    assert blob_id(data) == git.run("hash-object", "f.py").stdout.strip()


def test_the_reader_s_code_is_in_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change to the reader's source reads the file again."""
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path / "cache"))
    reader = tmp_path / "reader.py"
    reader.write_text("v1\n")
    calls: list[bytes] = []
    shape = {"n": int}

    def read(data: bytes) -> list[dict[str, object]]:
        calls.append(data)
        return [{"n": len(data)}]

    assert read_cached("k", b"abc", (reader,), shape, read) == [{"n": 3}]
    assert read_cached("k", b"abc", (reader,), shape, read) == [{"n": 3}]
    assert len(calls) == 1
    reader.write_text("v2\n")
    read_cached("k", b"abc", (reader,), shape, read)
    read_cached("k", b"abcd", (reader,), shape, read)
    assert len(calls) == 3
