"""What the bytecode cache saves a command that runs a tree's vLLM.

    .venv/bin/python benchmarks/tree_bytecode.py [--version V] [--repeat N] [--json]

``vllm-patchkit test --no-baseline TREE`` on a fresh clone of a release
checkout, as a whole process (its suite child included), alternating with
the same command with the cache off (``VLLM_PATCHKIT_BYTECODE`` empty: the
child compiles every module of the tree it imports, as it did before the
cache) in one run; CPU time from ``wait4``, children included; ratio of
medians. The cache is a scratch directory that the warm-up round fills, as
a user's first run does; no report cache, so each run is a run.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from processes import Series, arguments, paired, ratio

from vllm_patchkit.trees import bytecode
from vllm_patchkit.trees.releases import clone_release

NOT_FIXED = 1
"""``test``'s exit on a stock affected release: the bug reproduces."""


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__, repeat=5).parse_args(argv)
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-bytecode-") as scratch:
        tree = Path(scratch) / "vllm"
        clone_release(args.version, tree, checkout=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("VLLM_PATCHKIT_REPORT_CACHE", bytecode.ENV)
        }
        command = [python, "-m", "vllm_patchkit", "test", "--no-baseline", str(tree)]
        ok = (0, NOT_FIXED)
        baseline = Series("cache off", command, ok, env={**env, bytecode.ENV: ""})
        cache = str(Path(scratch) / "bytecode")
        cached = Series("cache on", command, ok, env={**env, bytecode.ENV: cache})
        paired(baseline, cached, args.repeat)
    report = {
        "python": python,
        "vllm_version": args.version,
        "repeat": args.repeat,
        "baseline": baseline.summary(),
        "cached": cached.summary(),
        "ratio_cpu": ratio(cached, baseline, "cpu_s"),
        "ratio_wall": ratio(cached, baseline),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    off, on = report["baseline"], report["cached"]
    print(
        f"{python}, vLLM {args.version} checkout, `test --no-baseline`, "
        f"{args.repeat} paired rounds, medians (whole processes, children "
        "included):\n"
        f"  cache on  {on['cpu_s']:6.2f} s CPU {on['wall_s']:6.2f} s wall\n"
        f"  cache off {off['cpu_s']:6.2f} s CPU {off['wall_s']:6.2f} s wall\n"
        f"  ratio {report['ratio_cpu']:.2f}x CPU, {report['ratio_wall']:.2f}x wall"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
