"""``vllm-patchkit apply`` against a bare ``git am -3`` of the same series.

    .venv/bin/python benchmarks/apply_vs_git_am.py [--version V] [--repeat N] [--json]

Both run as a user runs them, each a new process, on the same clone of a
vLLM release tree, alternating, the tree reset before every run; the ratio
is of medians from this run (target: apply within 2x of git am), byte-code
cached as after an install (see ``processes.with_bytecode``). apply adds
to git am its safety (a lock, a clean-checkout check, a rollback point), one
invariant check per patch, and Python's start. Where the time goes comes
from one traced run of each: ``GIT_TRACE2_EVENT`` gives every git process
and its duration, ``-X importtime`` the import time; the rest is Python's
start and the toolkit's own work.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from processes import (
    Series,
    arguments,
    import_profile,
    paired,
    ratio,
    run_process,
    with_bytecode,
)

from vllm_patchkit.git.series import load_series
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git
from vllm_patchkit.trees.releases import clone_release

TARGET = 2.0
BASE_REF = "refs/vllm-patchkit/base"


def git_processes(argv: list[str], env: dict[str, str], scratch: Path) -> dict:
    """One traced run: how many git processes, and the seconds spent in them."""
    trace = scratch / "trace2.json"
    trace.unlink(missing_ok=True)
    sample = run_process(argv, env={**env, "GIT_TRACE2_EVENT": str(trace)})
    top_level_s, count, commands = 0.0, 0, []
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "start":
            count += 1
            if "/" not in event["sid"]:
                commands.append(" ".join(event["argv"][1:3]))
        elif event["event"] == "exit" and "/" not in event["sid"]:
            top_level_s += event["t_abs"]
    return {
        "wall_s": sample.wall_s,
        "processes": count,
        "spawned": len(commands),
        "seconds": top_level_s,
    }


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__, repeat=5).parse_args(argv)
    series = load_series()
    with tempfile.TemporaryDirectory(prefix="bench-apply-") as scratch:
        env = with_bytecode({**os.environ, **TOOL_IDENTITY}, Path(scratch))
        tree = Path(scratch) / "vllm"
        clone_release(args.version, tree)
        git = Git(tree, tuple(TOOL_IDENTITY.items()))
        git.run("switch", "--quiet", "-c", "bench")
        base = git.head()

        def reset() -> None:
            if (tree / ".git" / "rebase-apply").exists():
                git.run("am", "--abort", check=False)
            git.run("reset", "--hard", "--quiet", base)
            git.run("update-ref", "-d", BASE_REF, check=False)

        patches = [str(p.path) for p in series.patches]
        git_am = Series("git am -3", ["git", "-C", str(tree), "am", "-3", *patches])
        apply = Series(
            "vllm-patchkit apply",
            [sys.executable, "-m", "vllm_patchkit", "apply", str(tree)],
        )
        paired(git_am, apply, args.repeat, before_each=reset, env=env)
        reset()
        traced_am = git_processes(git_am.argv, env, Path(scratch))
        reset()
        traced_apply = git_processes(apply.argv, env, Path(scratch))
        reset()
        imports = import_profile(apply.argv, env)[0]
        bare = Series("python -c pass", [sys.executable, "-c", "pass"])
        for _ in range(args.repeat):
            bare.samples.append(run_process(bare.argv, env=env))
    wall = apply.median("wall_s")
    result = {
        "vllm_version": args.version,
        "repeat": args.repeat,
        "patches": len(patches),
        "git_am": git_am.summary(),
        "apply": apply.summary(),
        "git_am_s": git_am.median("wall_s"),
        "patchkit_apply_s": wall,
        "ratio": ratio(apply, git_am),
        "ratio_cpu": ratio(apply, git_am, "cpu_s"),
        "target": TARGET,
        "where": {
            "traced_wall_s": traced_apply["wall_s"],
            "python_start_s": bare.median("wall_s"),
            "imports_s": imports / 1e3,
            "git_s": traced_apply["seconds"],
            "git_processes": traced_apply["processes"],
            "git_spawned": traced_apply["spawned"],
            "git_am_processes": traced_am["processes"],
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    where = result["where"]
    print(
        f"vLLM {args.version} release tree, {len(patches)} patches, "
        f"{args.repeat} paired rounds, medians (whole processes):"
    )
    print(
        f"  bare git am -3:       {result['git_am_s'] * 1e3:8.1f} ms wall "
        f"{git_am.median('cpu_s') * 1e3:8.1f} ms CPU"
    )
    print(
        f"  vllm-patchkit apply:  {wall * 1e3:8.1f} ms wall "
        f"{apply.median('cpu_s') * 1e3:8.1f} ms CPU "
        f"{apply.summary()['max_rss_mib']:6.1f} MiB"
    )
    print(
        f"  ratio (apply / git am): {result['ratio']:.2f}x wall, "
        f"{result['ratio_cpu']:.2f}x CPU   (target <= {TARGET:g}x)"
    )
    rest = (
        where["traced_wall_s"]
        - where["python_start_s"]
        - where["imports_s"]
        - where["git_s"]
    )
    print(
        f"  where the time goes, one traced run of apply "
        f"({where['traced_wall_s'] * 1e3:.1f} ms): python start "
        f"{where['python_start_s'] * 1e3:.1f} ms, imports "
        f"{where['imports_s'] * 1e3:.1f} ms, git "
        f"{where['git_s'] * 1e3:.1f} ms in {where['git_spawned']} git commands "
        f"({where['git_processes']} git processes; git am alone: "
        f"{where['git_am_processes']}), the rest {rest * 1e3:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
