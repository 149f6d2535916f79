"""The toolkit's library does not import its command line.

``vllm_patchkit.commands`` (with ``cli.py`` and the reference page rendered
from its parsers, ``cli_reference.py``) is the top layer: it parses
arguments and reports. A library module that imports it runs the layers
upward (``runtime.require`` once printed and returned exit codes through
``commands.common``); a failure is a ``PatchkitError`` for
``cli.error_handler`` to report instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

from vllm_patchkit.paths import PACKAGE_DIR

CLI_LAYER = ("commands", "cli.py", "cli_reference.py")
"""Where the command line lives, relative to the package: it may import itself."""


def imported(source: str, where: Path) -> set[str]:
    """The absolute names of the modules ``source``, the text of the package's
    file ``where``, imports (relative imports resolved)."""
    package = ["vllm_patchkit", *where.relative_to(PACKAGE_DIR).parent.parts]
    names = set()
    for node in ast.walk(ast.parse(source, str(where))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def upward(source: str, where: Path) -> list[str]:
    """What ``source`` (at ``where``) imports of the command line."""
    return sorted(
        name
        for name in imported(source, where)
        if name == "vllm_patchkit.commands"
        or name.startswith("vllm_patchkit.commands.")
    )


def test_no_library_module_imports_the_command_line() -> None:
    library = [
        file
        for file in sorted(PACKAGE_DIR.rglob("*.py"))
        if file.relative_to(PACKAGE_DIR).parts[0] not in CLI_LAYER
    ]
    assert len(library) > 20  # the scan sees the library
    found = {
        str(file.relative_to(PACKAGE_DIR)): upward(file.read_text(), file)
        for file in library
    }
    assert {file: names for file, names in found.items() if names} == {}


def test_the_scan_sees_each_form_of_import() -> None:
    """Absolute, relative from a subpackage, and ``from . import commands``."""
    where = PACKAGE_DIR / "memcheck" / "command.py"
    assert upward("import vllm_patchkit.commands.common\n", where) == [
        "vllm_patchkit.commands.common"
    ]
    assert "vllm_patchkit.commands.common" in upward(
        "from ..commands.common import emit_json\n", where
    )
    assert upward("from .. import commands\n", where) == ["vllm_patchkit.commands"]
    top = PACKAGE_DIR / "runtime.py"
    assert upward("from .commands import common\n", top) == [
        "vllm_patchkit.commands",
        "vllm_patchkit.commands.common",
    ]
    assert upward("from vllm_patchkit.errors import PatchkitError\n", top) == []
