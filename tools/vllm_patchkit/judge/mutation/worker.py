"""One mutant's run: the regression suite with one backend module from another file.

The tree on ``PYTHONPATH`` stays as it is (several mutants share it, two at
a time); only the mutated module (one of :data:`.targets.TARGETS`) is loaded
from the mutant's file, by a finder placed first on ``sys.meta_path``. Which
module is read from the file's path
(``.../vllm/v1/attention/backends/rocm_attn.py``). The report
gains the file that was really imported, so a run that silently used the
unmutated module cannot count as a kill or a survival.

``python -m vllm_patchkit.judge.mutation.worker FILE -- [regression arguments]``;
``FILE --pytest [pytest arguments]`` runs pytest instead (a fix's upstream
test alone: :mod:`.upstream_test`).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from vllm_patchkit.errors import EXIT_REFUSED
from vllm_patchkit.judge.mutation.targets import TARGETS

MODULES = tuple(t.module for t in TARGETS)
"""The modules a mutant may replace."""
KEPT_OUT = tuple(t.module for t in TARGETS if t.forks)
"""The modules the zygote's warm-up leaves for the forked mutants."""


def module_of(file: Path) -> str:
    """``vllm.v1.x`` for ``.../vllm/v1/x.py``: the module a mutant file replaces."""
    parts = file.with_suffix("").parts
    start = len(parts) - 1 - parts[::-1].index("vllm")
    name = ".".join(parts[start:])
    if name not in MODULES:
        raise ValueError(f"{file}: not a module under mutation ({', '.join(MODULES)})")
    return name


class ModuleFromFile(importlib.abc.MetaPathFinder):
    """Finds one module name at a given file, leaves all others alone."""

    def __init__(self, name: str, file: Path) -> None:
        self.name = name
        self.file = file

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: object | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.file)


def run_with_module(file: Path, regression_args: list[str]) -> int:
    """The regression suite in this process, the module ``file`` stands for
    loaded from it."""
    module_name = module_of(file)
    sys.meta_path.insert(0, ModuleFromFile(module_name, file.resolve()))
    from vllm_patchkit.judge.regression.__main__ import main as regression

    code = regression(regression_args)
    if "--output" in regression_args:
        output = Path(regression_args[regression_args.index("--output") + 1])
        if output.is_file():
            report = json.loads(output.read_text())
            module = sys.modules.get(module_name)
            report["module_file"] = getattr(module, "__file__", None)
            output.write_text(json.dumps(report, indent=2))
    return code


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[1] not in ("--", "--pytest"):
        print(__doc__, file=sys.stderr)
        return EXIT_REFUSED
    file = Path(args[0])
    if args[1] == "--":
        return run_with_module(file, args[2:])
    sys.meta_path.insert(0, ModuleFromFile(module_of(file), file.resolve()))
    import pytest

    return int(pytest.main(args[2:]))


if __name__ == "__main__":
    sys.exit(main())
