"""What ``vllm-patchkit check`` costs against ``pre-commit --version``.

    .venv/bin/python benchmarks/check_cost.py [--version 0.28.0] [--repeat 10] [--json]

``check`` runs in a contributor's pre-commit hook and by hand, so its bar
is the tool it sits beside: whole processes, ``python -m vllm_patchkit
check TREE`` on a fresh clone of a release checkout, alternating with
``pre-commit --version`` (the same interpreter's venv) in one run; CPU time
from ``wait4``, git children included; ratio of medians. Target: at most
1x. Byte-code is cached as after an install (``processes.with_bytecode``);
the code-reading cache (:mod:`vllm_patchkit.git.code_readings`) lives in a
scratch ``VLLM_OVERLAY_CACHE`` that the warm-up round fills, as a
contributor's first ``check`` does.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from processes import Series, arguments, paired, ratio, with_bytecode

from vllm_patchkit.trees.releases import clone_release

TARGET = 1.0


def pre_commit(python: str) -> list[str]:
    """``pre-commit --version`` as installed beside ``python``."""
    beside = Path(python).parent / "pre-commit"
    found = str(beside) if beside.is_file() else shutil.which("pre-commit")
    if found is None:
        raise SystemExit("pre-commit is not installed (tools/bootstrap.sh installs it)")
    return [found, "--version"]


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__, repeat=10).parse_args(argv)
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-check-") as scratch:
        env = with_bytecode(os.environ, Path(scratch))
        env["VLLM_OVERLAY_CACHE"] = str(Path(scratch) / "cache")
        tree = Path(scratch) / "vllm"
        clone_release(args.version, tree)
        baseline = Series("pre-commit --version", pre_commit(python))
        check = Series("check", [python, "-m", "vllm_patchkit", "check", str(tree)])
        paired(baseline, check, args.repeat, env=env)
    report = {
        "python": python,
        "vllm_version": args.version,
        "repeat": args.repeat,
        "baseline": baseline.summary(),
        "check": check.summary(),
        "ratio_cpu": ratio(check, baseline, "cpu_s"),
        "ratio_wall": ratio(check, baseline),
        "target_cpu": TARGET,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    base, cmd = report["baseline"], report["check"]
    print(
        f"{python}, vLLM {args.version} checkout, {args.repeat} paired rounds, "
        "medians (whole processes; CPU includes git children):\n"
        f"  check                {cmd['cpu_s'] * 1e3:7.1f} ms CPU "
        f"{cmd['wall_s'] * 1e3:7.1f} ms wall\n"
        f"  pre-commit --version {base['cpu_s'] * 1e3:7.1f} ms CPU "
        f"{base['wall_s'] * 1e3:7.1f} ms wall\n"
        f"  ratio {report['ratio_cpu']:.2f}x CPU (target <= {TARGET:g}x), "
        f"{report['ratio_wall']:.2f}x wall"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
