"""``python -m vllm_patchkit.judge.memcheck SCRIPT [ARGS...]``."""

import sys

from vllm_patchkit.judge.memcheck.runner import run

sys.exit(run(sys.argv[1:]))
