"""``python -m vllm_patchkit.memcheck SCRIPT [ARGS...]``."""

import sys

from vllm_patchkit.memcheck.runner import run

sys.exit(run(sys.argv[1:]))
