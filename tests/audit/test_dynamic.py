"""The audit's dynamic pass and effect classification on real vLLM trees.

One child process per tree per session (each 25 to 60 s on one core):
the venv's vLLM 0.28.0 (the #51585 host zeroing is there); in the
``audit_sweep`` tier also the cached 0.29.0 release tree (fixed: the static
pass's verdict on it stays in the default run, ``test_static.py``) and a
copy of 0.29.0 seeded with shared-state writes the #51585 regression suite
was never told about. Every expectation on a line number is read from the
tree's source, never written down here.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from pathlib import Path

import pytest

from vllm_patchkit.judge.audit import effect
from vllm_patchkit.judge.audit.dynamic import DynamicResult, run_dynamic
from vllm_patchkit.judge.audit.findings import Finding
from vllm_patchkit.judge.regression import survey
from vllm_patchkit.trees.installed import installed_vllm_dir
from vllm_patchkit.trees.releases import release_tree

ROCM = "vllm/v1/attention/backends/rocm_attn.py"
ROCM_CAPTURE = "RocmAttentionMetadataBuilder.build_for_cudagraph_capture"
HOST_ZEROING = "common_attn_metadata.query_start_loc_cpu.zero_()"
DEVICE_ZEROING = "common_attn_metadata.query_start_loc.zero_()"


def installed_vllm_root() -> Path:
    return installed_vllm_dir().parent


def line_of(tree: Path, relpath: str, statement: str) -> int:
    """The one line of ``relpath`` whose code is ``statement``."""
    lines = (tree / relpath).read_text().splitlines()
    found = [n for n, text in enumerate(lines, 1) if text.strip() == statement]
    assert len(found) == 1, (relpath, statement, found)
    return found[0]


def findings_at(result: DynamicResult, relpath: str, line: int) -> list[Finding]:
    return [f for f in effect.classify(result) if (f.file, f.line) == (relpath, line)]


def short(victims: list[str]) -> set[str]:
    """``module.Class (mode, q=N)`` -> ``Class``."""
    return {v.split(" ")[0].rpartition(".")[2] for v in victims}


@pytest.fixture(scope="session")
def installed_result() -> DynamicResult:
    result = run_dynamic(None)
    assert result.error is None, result.error
    return result


@pytest.fixture(scope="session")
def fixed_result() -> DynamicResult:
    result = run_dynamic(release_tree("0.29.0"))
    assert result.error is None, result.error
    return result


def test_host_zeroing_is_harmful_on_0_28_with_the_suites_victims(
    installed_result: DynamicResult,
) -> None:
    tree = installed_vllm_root()
    line = line_of(tree, ROCM, HOST_ZEROING)
    (finding,) = findings_at(installed_result, ROCM, line)
    assert (finding.field, finding.method, finding.operation) == (
        "query_start_loc_cpu",
        ROCM_CAPTURE,
        "zero_",
    )
    assert finding.kind == "harmful"
    assert finding.evidence == ["dynamic"]
    victims = short(finding.victims)
    # The PR's own crash, and the hybrid builders the regression suite
    # names as readers of the host offsets (with draft tokens).
    assert {
        "MiniMaxM3IndexerTritonMetadataBuilder",
        "GDNAttentionMetadataBuilder",
        "Mamba1AttentionMetadataBuilder",
        "AiterFlashAttentionMetadataBuilder",
    } <= victims
    assert all("(capture, q=" in v for v in finding.victims)


@pytest.mark.parametrize(
    "where",
    ["installed", pytest.param("0.29.0", marks=pytest.mark.audit_sweep)],
)
def test_device_zeroing_is_intentional_with_its_reason(
    where: str, request: pytest.FixtureRequest
) -> None:
    if where == "installed":
        tree = installed_vllm_root()
        result = request.getfixturevalue("installed_result")
    else:
        tree, result = release_tree(where), request.getfixturevalue("fixed_result")
    line = line_of(tree, ROCM, DEVICE_ZEROING)
    (finding,) = findings_at(result, ROCM, line)
    assert finding.field == "query_start_loc"
    assert finding.kind == "intentional"
    assert "#25985" in finding.reason
    assert finding.victims == []


@pytest.mark.audit_sweep
def test_host_zeroing_is_gone_on_0_29(fixed_result: DynamicResult) -> None:
    host = [
        f
        for f in effect.classify(fixed_result)
        if f.file == ROCM and f.field == "query_start_loc_cpu"
    ]
    assert host == []
    rocm_harmful = [
        f
        for f in effect.classify(fixed_result)
        if f.kind == "harmful" and "Rocm" in f.method
    ]
    assert rocm_harmful == []


def test_a_factory_made_builders_write_is_found(
    installed_result: DynamicResult,
) -> None:
    """StaticSink's builder exists only once its factory runs (it wraps
    another backend's builder); its in-place write of the shared seq_lens
    in normal build is found with its line and changes later builders."""
    relpath = "vllm/model_executor/layers/attention/static_sink_attention.py"
    statement = "common_attn_metadata.seq_lens[:] = ("
    line = line_of(installed_vllm_root(), relpath, statement)
    (finding,) = findings_at(installed_result, relpath, line)
    assert (finding.field, finding.operation, finding.method) == (
        "seq_lens",
        "slice assignment",
        "StaticSinkAttentionBuilder.build",
    )
    assert finding.kind == "harmful"
    assert "FlashAttentionMetadataBuilder" in short(finding.victims)
    assert any("(build, q=" in v for v in finding.victims)


def test_every_builder_is_run_or_said_why_not(installed_result: DynamicResult) -> None:
    """No builder of the tree is silently dropped: each one ran in both modes,
    or is listed as could-not-run / raised / abstract with a reason."""
    listed = {e.qualname for e in survey.builder_classes(installed_vllm_root())}
    seen = {r.builder for r in installed_result.runs}
    # Factory-made builders are reported by their factory's module, like the
    # survey lists them; a class reached twice (an alias) is run once.
    assert listed - seen == set()
    for run in installed_result.runs:
        assert run.status in ("ran", "raised", "could not run", "abstract"), run
        if run.status != "ran":
            assert run.reason, run
    ran = {(r.builder, r.mode) for r in installed_result.ran}
    assert (
        "vllm.v1.attention.backends.rocm_attn.RocmAttentionMetadataBuilder",
        "capture",
    ) in ran
    assert len({b for b, _ in ran}) >= 30


def test_a_tree_without_vllm_is_never_audited_as_the_installed_one(
    tmp_path: Path,
) -> None:
    result = run_dynamic(tmp_path)
    assert result.error is not None
    assert result.writes == [] and result.runs == []


# --- seeded mutants ----------------------------------------------------------

BACKENDS = "vllm/v1/attention/backends"


def insert_at_method_start(
    tree: Path, relpath: str, cls: str, method: str, statement: str
) -> int:
    """Put ``statement`` first in ``cls.method``'s body; its line number."""
    path = tree / relpath
    lines = path.read_text().splitlines(keepends=True)
    start = next(n for n, t in enumerate(lines) if t.startswith(f"class {cls}("))
    head = next(
        n
        for n in range(start + 1, len(lines))
        if lines[n].lstrip().startswith(f"def {method}(")
    )
    indent = lines[head][: len(lines[head]) - len(lines[head].lstrip())] + "    "
    end = next(n for n in range(head, len(lines)) if lines[n].rstrip().endswith(":"))
    lines.insert(end + 1, f"{indent}{statement}\n")
    path.write_text("".join(lines))
    return end + 2


MUTANTS = (
    # (file, class, method, statement, field, operation, kind)
    (
        f"{BACKENDS}/flash_attn.py",
        "FlashAttentionMetadataBuilder",
        "build",
        "common_attn_metadata.seq_lens.zero_()",
        "seq_lens",
        "zero_",
        "harmful",
    ),
    (
        f"{BACKENDS}/triton_attn.py",
        "TritonAttentionMetadataBuilder",
        "build_for_cudagraph_capture",
        "common_attn_metadata.query_start_loc_cpu[2:] = 0",
        "query_start_loc_cpu",
        "slice assignment",
        "harmful",
    ),
    (
        f"{BACKENDS}/gdn_attn.py",
        "GDNAttentionMetadataBuilder",
        "build",
        "common_attn_metadata.query_start_loc_cpu.numpy()[1:] += 1",
        "query_start_loc_cpu",
        "slice assignment",
        "harmful",
    ),
    (
        f"{BACKENDS}/mamba2_attn.py",
        "Mamba2AttentionMetadataBuilder",
        "build",
        "common_attn_metadata.max_query_len = 0",
        "max_query_len",
        "reassignment",
        "harmful",
    ),
    (
        f"{BACKENDS}/flex_attention.py",
        "FlexAttentionMetadataBuilder",
        "build",
        "common_attn_metadata.is_prefilling.zero_()",
        "is_prefilling",
        "zero_",
        "latent",
    ),
)


@pytest.fixture(scope="session")
def mutant(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """A copy of the 0.29.0 tree (the parts a runtime reads) with every seed."""
    source = release_tree("0.29.0")
    tree = tmp_path_factory.mktemp("mutant") / "vllm-0.29.0-seeded"
    tree.mkdir()
    shutil.copytree(source / "vllm", tree / "vllm")
    for name in ("requirements", "pyproject.toml", "setup.py"):
        if (source / name).is_dir():
            shutil.copytree(source / name, tree / name)
        elif (source / name).is_file():
            shutil.copy2(source / name, tree / name)
    lines = [
        insert_at_method_start(tree, file, cls, method, statement)
        for file, cls, method, statement, *_ in MUTANTS
    ]
    return tree, lines


@pytest.fixture(scope="session")
def mutant_result(mutant: tuple[Path, list[int]]) -> DynamicResult:
    result = run_dynamic(mutant[0])
    assert result.error is None, result.error
    return result


@pytest.mark.audit_sweep
@pytest.mark.parametrize("index", range(len(MUTANTS)), ids=[m[1] for m in MUTANTS])
def test_seeded_write_is_found_with_its_line_and_kind(
    index: int, mutant: tuple[Path, list[int]], mutant_result: DynamicResult
) -> None:
    file, cls, method, statement, field, operation, kind = MUTANTS[index]
    tree, lines = mutant
    assert (tree / file).read_text().splitlines()[lines[index] - 1].strip() == (
        statement
    )
    found = findings_at(mutant_result, file, lines[index])
    assert [(f.field, f.operation, f.method) for f in found] == [
        (field, operation, f"{cls}.{method}")
    ]
    (finding,) = found
    assert finding.kind == kind, finding
    if kind == "harmful":
        assert finding.victims
    else:
        assert finding.victims == []


@pytest.mark.audit_sweep
def test_unseeded_writes_of_the_mutant_are_those_of_0_29(
    mutant: tuple[Path, list[int]],
    mutant_result: DynamicResult,
    fixed_result: DynamicResult,
) -> None:
    """The seeds add findings; they do not move or hide the release's own."""
    seeded = {(m[0], line) for m, line in zip(MUTANTS, mutant[1], strict=True)}

    def shifted(f: Finding) -> tuple[str, str, str, str]:
        return (f.file, f.field, f.method, f.operation)

    mutant_own = {
        shifted(f)
        for f in effect.classify(mutant_result)
        if (f.file, f.line) not in seeded
    }
    assert mutant_own == {shifted(f) for f in effect.classify(fixed_result)}


# --- a tree that starts a process at import ----------------------------------


def _processes_with(marker: str) -> list[int]:
    """Ids of the live processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def test_a_process_the_tree_starts_at_import_is_neither_waited_for_nor_left(
    tmp_path: Path,
) -> None:
    """A tree whose ``import vllm`` starts a process that inherits stdout
    (then fails): the pass reports the failure as soon as the child exits,
    not a timeout, and the process it started is gone with it."""
    source = release_tree("0.29.0")
    tree = tmp_path / "vllm-0.29.0-spawns"
    tree.mkdir()
    shutil.copytree(source / "vllm", tree / "vllm")
    marker = f"vllm-patchkit-leak-{uuid.uuid4().hex}"
    init = tree / "vllm" / "__init__.py"
    init.write_text(
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', "
        f"{marker!r}])\n"
        "raise ImportError('this tree stops at import')\n" + init.read_text()
    )
    timeout = 60
    start = time.monotonic()
    try:
        result = run_dynamic(tree, timeout=timeout)
        took = time.monotonic() - start
        # SIGKILL to the group is sent when the child exits; the kernel
        # takes a moment to end the process, longer on a loaded machine.
        deadline = time.monotonic() + 10
        while (left := _processes_with(marker)) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for pid in _processes_with(marker):  # the test's own: the old code left it
            os.kill(pid, signal.SIGKILL)
    assert result.error is not None
    assert "ran past" not in result.error, result.error
    assert "this tree stops at import" in result.error
    assert took < timeout / 2, took
    assert left == []
