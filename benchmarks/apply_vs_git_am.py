"""``vllm-patchkit apply`` (apply + invariants + safety) against bare ``git am``.

    .venv/bin/python benchmarks/apply_vs_git_am.py [--version 0.28.0] [--repeat 5]

Both run on the same clone of a vLLM release tree, alternating, with the
tree reset between runs; the ratio is computed from medians of this run.
Also times ``check`` (read-only), whose target is under 0.3 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from vllm_patchkit.apply import BASE_REF, Status, apply_series
from vllm_patchkit.check import check_series
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git
from vllm_patchkit.releases import clone_release
from vllm_patchkit.series import load_series


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="0.28.0")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    series = load_series()
    with tempfile.TemporaryDirectory(prefix="bench-apply-") as scratch:
        tree = Path(scratch) / "vllm"
        clone_release(args.version, tree)
        git = Git(tree, tuple(TOOL_IDENTITY.items()))
        git.run("switch", "--quiet", "-c", "bench")
        base = git.head()

        def reset() -> None:
            git.run("reset", "--hard", "--quiet", base)
            git.run("update-ref", "-d", BASE_REF, check=False)

        def bare_am() -> None:
            git.run(
                "am", "-3", "--keep-non-patch", *(str(p.path) for p in series.patches)
            )

        def patchkit_apply() -> None:
            result = apply_series(tree, series)
            assert result.status is Status.APPLIED, result.message

        am_times, apply_times, check_times = [], [], []
        for _ in range(args.repeat):
            reset()
            check_times.append(timed(lambda: check_series(tree, series)))
            am_times.append(timed(bare_am))
            reset()
            apply_times.append(timed(patchkit_apply))
    result = {
        "vllm_version": args.version,
        "repeat": args.repeat,
        "git_am_s": statistics.median(am_times),
        "patchkit_apply_s": statistics.median(apply_times),
        "ratio": statistics.median(apply_times) / statistics.median(am_times),
        "check_s": statistics.median(check_times),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"vLLM {args.version} release tree, {args.repeat} rounds, medians:")
        print(f"  bare git am -3:         {result['git_am_s'] * 1e3:8.1f} ms")
        print(f"  vllm-patchkit apply:    {result['patchkit_apply_s'] * 1e3:8.1f} ms")
        print(f"  ratio (apply / git am): {result['ratio']:8.2f}x   (target <= 1.3x)")
        check_ms = result["check_s"] * 1e3
        print(f"  vllm-patchkit check:    {check_ms:8.1f} ms   (target < 300 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
