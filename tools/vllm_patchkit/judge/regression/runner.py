"""Run the regression scenarios against a vLLM tree in a fresh subprocess."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_patchkit import progress
from vllm_patchkit.judge.regression import report_cache
from vllm_patchkit.trees.child_json import run_json_child
from vllm_patchkit.trees.tree_process import TreeLauncher
from vllm_patchkit.trees.tree_runtime import TreeRuntime


@dataclass(frozen=True)
class TreeReport:
    tree: Path | None
    returncode: int
    report: dict[str, Any] | None
    log: str
    runtime: TreeRuntime | None = None
    """What ran the tree: this venv's torch and the tree's extras (None: the
    installed vLLM, run as the venv has it)."""

    @property
    def fixed(self) -> bool:
        return bool(self.report and self.report["fixed"])

    @property
    def bug_reproduced(self) -> bool:
        return bool(self.report and self.report["bug_reproduced"])


def run_scenarios(
    tree: Path | None, scenarios: list[str] | None = None, timeout: float = 600
) -> TreeReport:
    """The suite's report on ``tree``, from a fresh process (its launcher's).

    With ``VLLM_PATCHKIT_REPORT_CACHE`` set (the test session does), a tree
    whose content was already run this session gets that run's report. The
    report's ``runtime`` is handed to whatever else judges the tree.
    """
    where = tree if tree is not None else "the venv's vLLM"
    with progress.phase(f"regression suite on {where}"):
        launcher = TreeLauncher.of(tree)
        env = launcher.env()
        params = list(scenarios or [])
        tree_reads = tree is not None  # what the run read of it, for the cache

        def args(output: Path) -> list[str]:
            flags = ["--output", str(output), *([TREE_READS] if tree_reads else [])]
            for name in params:
                flags += ["--scenario", name]
            return flags

        def produce() -> tuple[dict[str, Any], bool]:
            result = run_json_child(
                "vllm_patchkit.judge.regression",
                args,
                env=env,
                timeout_s=timeout,
                scratch_prefix="vllm-overlay-run-",
                output_name="report.json",
            )
            if result.returncode is None:  # timed out: the matrix makes it a cell
                raise subprocess.TimeoutExpired(list(result.argv), timeout)
            record = {
                "returncode": result.returncode,
                "report": result.data,
                "log": result.log,
            }
            return record, result.data is not None

        key = [*params, TREE_READS] if tree_reads else params
        record = report_cache.reuse(
            "scenarios", tree, key, env, produce, package_only=_read_package_only
        )
        report = record["report"]
        if report is not None and launcher.runtime is not None:
            # This tree's own runtime, also when the run was another tree's
            # with the same package (the release's pins live outside it).
            report["runtime"] = launcher.runtime.to_json()
        return TreeReport(
            tree, record["returncode"], report, record["log"], launcher.runtime
        )


TREE_READS = "--tree-reads"


def _read_package_only(record: dict[str, Any]) -> bool:
    """The run read nothing of its tree outside the package view."""
    report = record["report"] or {}
    return report.get("tree_reads_outside_package") == []
