"""pytest with one vLLM module loaded from a mutant's file.

``python -m vllm_patchkit.judge.mutation.test_worker FILE -- [pytest arguments]``:
the tree on ``PYTHONPATH`` stays as it is; only the module ``FILE`` stands
for (see :func:`.worker.module_of`) is loaded from it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vllm_patchkit.errors import EXIT_REFUSED
from vllm_patchkit.judge.mutation.worker import ModuleFromFile, module_of


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[1] != "--":
        print(__doc__, file=sys.stderr)
        return EXIT_REFUSED
    file = Path(args[0]).resolve()
    sys.meta_path.insert(0, ModuleFromFile(module_of(file), file))
    import pytest

    return int(pytest.main(args[2:]))


if __name__ == "__main__":
    sys.exit(main())
