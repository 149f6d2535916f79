"""Fork one process per mutant from a process that has imported vLLM once.

Importing vLLM and configuring it takes 15-25 s on this project's 2-core
machines; the scenarios themselves take a few seconds. So the mutation
runner starts this process once per tree: it imports vLLM and every module
the scenarios use, except the modules under mutation that vLLM can do
without (the ROCm attention backends: ``worker.KEPT_OUT``,
blocked while warming up, so a module that imports them is left for the
children), then forks each mutant's run into
its own process, at most two at a time. Each child loads its mutant module
and builds its own configs and process group.

Input (stdin): a JSON list of jobs ``{"name", "module_file", "args", "log"}``;
the first job runs alone and, when it fails, nothing else runs (it is the
unmutated baseline). Output (stdout, last line): a JSON list of
``{"name", "returncode", "seconds"}``. Exit status 3: warming up imported
a module under mutation after all, so forking would test the wrong module.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vllm_patchkit.errors import EXIT_ERROR
from vllm_patchkit.judge.mutation.worker import KEPT_OUT, run_with_module

WARM_MODULES = (
    "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.attn_utils",
    "vllm.v1.worker.utils",
    "vllm.v1.worker.block_table",
    "vllm.v1.attention.backends.gdn_attn",
    "vllm.model_executor.layers.attention.mla_attention",
    "vllm.model_executor.layers.linear",
    "vllm.v1.attention.backends.mla.prefill.trtllm_ragged",
    "vllm.v1.worker.workspace",
    "vllm.v1.worker.cpu_model_runner",
    # Imported lazily by GDN's builder; pulls the mamba and quantization stacks.
    "vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn",
    "vllm.distributed.device_communicators.shm_broadcast",
    # What rocm_attn itself imports.
    "vllm.v1.attention.ops.prefix_prefill",
    "vllm.v1.attention.ops.chunked_prefill_paged_decode",
    "vllm.v1.attention.ops.paged_attn",
)
"""Modules the scenarios import lazily (measured on 0.28.0: with them, a
mutant's whole suite takes about a second of CPU). Absent ones are skipped."""


class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: object | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in KEPT_OUT:
            raise ImportError(f"{fullname} is left for the mutant processes")
        return None


def warm_up() -> None:
    """Import what the scenarios import, except the module under mutation
    (in the environment of the tree's launcher: CPU only, vLLM's CPU platform)."""
    blocker = _Blocked()
    sys.meta_path.insert(0, blocker)
    try:
        import vllm  # noqa: F401

        from vllm_patchkit.judge.regression import by_fix, harness, scenarios

        for model in harness.MODEL_CONFIGS:
            for query_len in scenarios.DECODE_QUERY_LENS:
                harness.vllm_config(query_len, model)
        # A module absent here, or one that imports rocm_attn, is the child's.
        for builder in by_fix.recipes():
            with contextlib.suppress(Exception):
                harness.import_vllm(builder.rpartition(".")[0])
        for name in WARM_MODULES:
            with contextlib.suppress(Exception):
                importlib.import_module(name)
    finally:
        sys.meta_path.remove(blocker)
    harness.reset_process_state()


def _child(job: dict[str, Any]) -> None:
    """In the forked process: the mutant's suite, output to its log."""
    code = 3
    try:
        fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        code = run_with_module(Path(job["module_file"]), list(job["args"]))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_jobs(
    jobs: list[dict[str, Any]], jobs_at_once: int, timeout: float
) -> list[dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    running: dict[int, tuple[str, float]] = {}
    pending = list(jobs)
    first = True
    while pending or running:
        limit = 1 if first else jobs_at_once
        while pending and len(running) < limit:
            job = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(job)
            running[pid] = (job["name"], time.monotonic())
        time.sleep(0.05)
        for pid, (name, started) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.monotonic() - started
            if done == 0 and elapsed > timeout:
                os.kill(pid, signal.SIGKILL)
                done, status = os.waitpid(pid, 0)
            if done:
                del running[pid]
                code = os.waitstatus_to_exitcode(status)
                results[name] = {"name": name, "returncode": code, "seconds": elapsed}
                if first and code != 0:
                    pending.clear()
        if first and not running:
            first = False
    return [results[j["name"]] for j in jobs if j["name"] in results]


def main() -> int:
    request = json.loads(sys.stdin.read())
    warm_up()
    if any(name in sys.modules for name in KEPT_OUT):
        return EXIT_ERROR
    results = run_jobs(request["jobs"], request["jobs_at_once"], request["timeout"])
    sys.stdout.write(json.dumps(results) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
