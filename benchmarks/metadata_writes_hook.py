"""What the audit's pre-commit hook costs a fork, as a whole process.

    .venv/bin/python benchmarks/metadata_writes_hook.py [--repeat 5] [--json]

A stock vLLM 0.28.0 checkout gets a ``.pre-commit-config.yaml`` naming this
repository at HEAD and the ``vllm-metadata-writes`` hook, as a fork would
add it; pre-commit installs the hook's environment once (not timed). Then
``pre-commit run vllm-metadata-writes --files rocm_attn.py`` (exit 1: the
file is harmful there) alternates with ``pre-commit --version`` in the same
run, and the medians are compared. Target: the hook's run within 15 s on the
project's 2-core machine.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from processes import Series, arguments, paired, ratio, run_process

from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.trees.releases import clone_release

HOOK = "vllm-metadata-writes"
ROCM = "vllm/v1/attention/backends/rocm_attn.py"
TARGET_S = 15.0


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__, repeat=5, release=False).parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vllm-overlay-hook-bench-") as scratch:
        tree = Path(scratch) / "vllm"
        clone_release("0.28.0", tree, checkout=True)
        rev = Git(PROJECT_ROOT).head()
        (tree / ".pre-commit-config.yaml").write_text(
            f"repos:\n  - repo: {PROJECT_ROOT}\n    rev: {rev}\n"
            f"    hooks:\n      - id: {HOOK}\n"
        )
        env = {**os.environ, "PRE_COMMIT_HOME": str(Path(scratch) / "home")}
        pre_commit = [sys.executable, "-m", "pre_commit"]
        hook = Series(
            "hook on one file", [*pre_commit, "run", HOOK, "--files", ROCM], ok=(1,)
        )
        run_process(hook.argv, cwd=tree, env=env, ok=(1,))  # installs the hook
        baseline = Series("pre-commit --version", [*pre_commit, "--version"])
        paired(baseline, hook, args.repeat, cwd=tree, env=env)
    result = {
        "baseline": baseline.summary(),
        "hook": hook.summary(),
        "wall_ratio": ratio(hook, baseline),
        "target_s": TARGET_S,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"hook on one file: {hook.median('wall_s'):.2f} s wall, "
            f"{hook.median('cpu_s'):.2f} s CPU (median of {args.repeat}); "
            f"pre-commit --version {baseline.median('wall_s'):.2f} s; "
            f"ratio {result['wall_ratio']:.1f}x; target {TARGET_S:.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
