"""What a ``vllm-patchkit`` command costs as a whole process, against a bare start.

    .venv/bin/python benchmarks/cli_startup.py [--version 0.28.0] [--repeat 10] [--json]
        [--python VENV/bin/python]

Each command runs as the user runs it, ``python -m vllm_patchkit ...`` in a
new process, alternating with a bare ``python -c pass`` of the same
interpreter and environment, byte-code cached as after an install (see
``processes.with_bytecode``); ratios are of medians from this run. Targets:
``--help`` within 3x a bare start, ``check`` and ``doctor PATH`` on a release
tree within 5x. Where the time goes is shown by ``-X importtime``: the total
import time of each command, and which heavy runtime packages (torch, vLLM,
numpy, Triton) it imported (none should be). ``--python`` measures another
interpreter, such as a venv with the toolkit's wheel installed, without this
checkout on ``PYTHONPATH``: the project venv's editable install of the
overlay adds a start-up hook to every process there, baseline included.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from processes import Series, arguments, import_profile, paired, ratio, with_bytecode

from vllm_patchkit.trees.releases import clone_release

HEAVY = ("torch", "vllm", "numpy", "triton")
TARGETS = {"--help": 3.0, "check": 5.0, "doctor PATH": 5.0}


def imports(argv: list[str], env: dict[str, str]) -> dict[str, object]:
    """Total import time (ms) of one run, and the heavy packages it imported."""
    total_ms, packages = import_profile(argv, env)
    return {"import_ms": total_ms, "heavy_imported": sorted(packages & set(HEAVY))}


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__, repeat=10)
    parser.add_argument("--python", help="interpreter to measure (default: this one)")
    args = parser.parse_args(argv)
    python = args.python or sys.executable
    env = dict(os.environ)
    if args.python:
        env.pop("PYTHONPATH", None)
    cli = [python, "-m", "vllm_patchkit"]
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch:
        env = with_bytecode(env, Path(scratch))
        tree = Path(scratch) / "vllm"
        clone_release(args.version, tree)
        commands = {
            "--help": Series("--help", [*cli, "--help"]),
            "check": Series("check", [*cli, "check", str(tree)]),
            # 1: the release is affected and not patched, the expected verdict.
            "doctor PATH": Series("doctor PATH", [*cli, "doctor", str(tree)], (0, 1)),
        }
        results = {}
        for name, command in commands.items():
            baseline = Series("python -c pass", [python, "-c", "pass"])
            paired(baseline, command, args.repeat, env=env)
            results[name] = {
                "baseline": baseline.summary(),
                "command": command.summary(),
                "ratio_wall": ratio(command, baseline),
                "ratio_cpu": ratio(command, baseline, "cpu_s"),
                "target": TARGETS[name],
                "baseline_import_ms": imports(baseline.argv, env)["import_ms"],
                **imports(command.argv, env),
            }
    report = {
        "python": python,
        "vllm_version": args.version,
        "repeat": args.repeat,
        "commands": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{python}, vLLM {args.version} release tree, {args.repeat} paired rounds, "
        "medians (whole processes; CPU includes git children):"
    )
    for name, r in results.items():
        base, cmd = r["baseline"], r["command"]
        print(
            f"  {name:<12} {cmd['wall_s'] * 1e3:7.1f} ms wall "
            f"{cmd['cpu_s'] * 1e3:7.1f} ms CPU {cmd['max_rss_mib']:6.1f} MiB | "
            f"python -c pass {base['wall_s'] * 1e3:6.1f} ms wall "
            f"{base['cpu_s'] * 1e3:6.1f} ms CPU | "
            f"ratio {r['ratio_wall']:.2f}x wall, {r['ratio_cpu']:.2f}x CPU "
            f"(target <= {r['target']:g}x)"
        )
        heavy = ", ".join(r["heavy_imported"]) or "none"
        print(
            f"  {'':<12} imports {r['import_ms']:.1f} ms "
            f"(bare start {r['baseline_import_ms']:.1f} ms); heavy imported: {heavy}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
