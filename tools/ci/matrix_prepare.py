"""Build one release's tree and its runtime, before any of its code runs.

The matrix job saves the release-tree and pip caches right after this step,
so what the next run restores was made by this project's code alone (the
release's code, run by the steps after, cannot poison it).

    python tools/ci/matrix_prepare.py VERSION
"""

from __future__ import annotations

import sys

from vllm_patchkit.present.reports import runtime_line
from vllm_patchkit.trees.releases import release_tree
from vllm_patchkit.trees.tree_runtime import runtime_for


def main(version: str) -> int:
    tree = release_tree(version)
    print(f"vLLM {version}: {tree}")
    print(runtime_line(runtime_for(tree).to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
