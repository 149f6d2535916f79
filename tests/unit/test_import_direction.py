"""The toolkit's library does not import its command line.

``vllm_patchkit.commands`` (with ``cli.py`` and the reference page rendered
from its parsers, ``cli_reference.py``) is the top layer: it parses
arguments and reports. A library module that imports it runs the layers
upward (``runtime.require`` once printed and returned exit codes through
``commands.common``); a failure is a ``PatchkitError`` for
``cli.error_handler`` to report instead. Below the command line the
package is layered (:data:`LAYERS`: floor, trees, git, judge, present,
workflows); no module imports a higher layer, even inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

from vllm_patchkit.paths import PACKAGE_DIR, PROJECT_ROOT

CLI_LAYER = ("commands", "cli.py", "cli_reference.py")
"""Where the command line lives, relative to the package: it may import itself."""


def imported(source: str, where: Path) -> set[str]:
    """The absolute names of the modules ``source``, the text of the package's
    file ``where``, imports (relative imports resolved)."""
    package = ["vllm_patchkit", *where.relative_to(PACKAGE_DIR).parent.parts]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source, str(where))):
        names |= import_names(node, package)
    return names


def import_names(node: ast.AST, package: list[str]) -> set[str]:
    """The absolute names an import statement in ``package`` names (the
    module, and module.name for each name taken from it); none for another
    node."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = package[: len(package) - node.level + 1] if node.level else []
    module = ".".join([*base, *([node.module] if node.module else [])])
    return {module, *(f"{module}.{alias.name}" for alias in node.names)}


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
    where = PACKAGE_DIR / "judge" / "verify.py"
    assert upward("import vllm_patchkit.commands.common\n", where) == [
        "vllm_patchkit.commands.common"
    ]
    assert "vllm_patchkit.commands.common" in upward(
        "from ..commands.common import emit_json\n", where
    )
    assert upward("from .. import commands\n", where) == ["vllm_patchkit.commands"]
    top = PACKAGE_DIR / "errors.py"
    assert upward("from .commands import common\n", top) == [
        "vllm_patchkit.commands",
        "vllm_patchkit.commands.common",
    ]
    assert upward("from vllm_patchkit.errors import PatchkitError\n", top) == []


OVERLAY_DIR = PROJECT_ROOT / "vllm_overlay"


def module_files() -> dict[str, Path]:
    """Every module of the toolkit and the overlay, by its dotted name."""
    modules = {}
    for package, root in (
        ("vllm_patchkit", PACKAGE_DIR),
        ("vllm_overlay", OVERLAY_DIR),
    ):
        for file in sorted(root.rglob("*.py")):
            parts = [package, *file.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = file
    return modules


def load_time_imports(source: str, name: str, is_package: bool) -> set[str]:
    """What module ``name`` imports while it loads: its top-level statements,
    ``if``/``try`` included, ``if TYPE_CHECKING:`` blocks and function bodies
    left out (they run later, when every module is loaded)."""
    package = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if not (
                    isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                ):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
            else:
                found.update(import_names(node, package))

    visit(ast.parse(source).body)
    # Importing a.b.c loads the packages a and a.b first.
    return {
        ".".join(parts[:end])
        for parts in (dotted.split(".") for dotted in found)
        for end in range(1, len(parts) + 1)
    }


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


def load_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {
        name: {
            target
            for target in load_time_imports(
                file.read_text(), name, file.name == "__init__.py"
            )
            if target in modules
            and target != name
            and not name.startswith(f"{target}.")  # its own parent package
        }
        for name, file in modules.items()
    }


def test_no_module_imports_itself_back_in_a_circle() -> None:
    graph = load_graph()
    assert len(graph) > 60  # the scan sees both packages
    assert import_cycles(graph) == []


def test_the_overlay_never_imports_the_toolkit() -> None:
    """The overlay runs inside vLLM without the toolkit installed."""
    graph = load_graph()
    assert {
        name: sorted(t for t in targets if t.startswith("vllm_patchkit"))
        for name, targets in graph.items()
        if name.startswith("vllm_overlay")
        and any(t.startswith("vllm_patchkit") for t in targets)
    } == {}


def test_the_cycle_finder_finds_a_circle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
    lazy = "def f():\n    from vllm_patchkit import cli\n"
    guarded = "if TYPE_CHECKING:\n    from vllm_patchkit import cli\n"
    assert load_time_imports(lazy, "vllm_patchkit.x", False) == set()
    assert load_time_imports(guarded, "vllm_patchkit.x", False) == set()
    assert "vllm_patchkit.judge.regression" in load_time_imports(
        "from .regression import verdict\n", "vllm_patchkit.judge.x", False
    )


LAYERS = {
    # The floor: every layer imports it.
    "errors": 0,
    "paths": 0,
    "gitcmd": 0,
    "judgement": 0,
    "progress": 0,
    # Children die with the toolkit (gitcmd's and the trees' launchers use it).
    "child_death": 0,
    # Where an unexpected error's traceback is written (the CLI's last resort).
    "error_log": 0,
    "trees": 1,
    "git": 2,
    "judge": 3,
    # Runs the project's hooks on files and says passed or failed: it imports
    # only the floor, and present renders its result.
    "precommit": 3,
    "present": 4,
    "pull_request": 5,
    "commands": 6,
    "cli": 6,
    "cli_reference": 6,
    # Renders the fixes' facts into the docs, as cli_reference renders --help.
    "fix_reference": 6,
    "__main__": 6,
}
"""The toolkit's layers, lowest first, by top-level module or subpackage: a
module imports only modules of its own layer or a lower one."""


def layer(module: str) -> int:
    """The rank of a module of the toolkit (the package itself is the floor)."""
    parts = module.split(".")
    return LAYERS[parts[1]] if len(parts) > 1 else 0


def every_import(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` plus the imports that run later (in functions, under
    ``TYPE_CHECKING``), to modules of the toolkit."""
    files = module_files()
    found = {name: set(targets) for name, targets in graph.items()}
    for name, file in files.items():
        if name.startswith("vllm_patchkit"):
            found[name] |= {
                target
                for target in imported(file.read_text(), file)
                if target in files and target != name
            }
    return found


def upward_edges(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports of the toolkit that go to a higher layer."""
    return sorted(
        (name, target)
        for name, targets in graph.items()
        if name.startswith("vllm_patchkit")
        for target in targets
        if target.startswith("vllm_patchkit") and layer(target) > layer(name)
    )


def test_every_toolkit_module_is_in_a_layer() -> None:
    """A new top-level module or subpackage must be placed in LAYERS."""
    tops = {
        name.split(".")[1]
        for name in module_files()
        if name.startswith("vllm_patchkit.")
    }
    assert tops - set(LAYERS) == set()
    assert set(LAYERS) - tops == set()  # no stale entry


def test_no_layer_imports_a_higher_one() -> None:
    graph = every_import(load_graph())
    assert sum(name.startswith("vllm_patchkit.judge.") for name in graph) > 20
    assert upward_edges(graph) == []


def test_the_layer_check_finds_an_upward_import() -> None:
    graph = {
        "vllm_patchkit.trees.tree_process": {"vllm_patchkit.judge.regression"},
        "vllm_patchkit.judge.verify": {"vllm_patchkit.git.apply"},
        "vllm_patchkit.git.apply": {"vllm_patchkit.errors", "vllm_patchkit"},
    }
    assert upward_edges(graph) == [
        ("vllm_patchkit.trees.tree_process", "vllm_patchkit.judge.regression")
    ]
    late = "def f():\n    from vllm_patchkit.present.reports import tally_line\n"
    where = PACKAGE_DIR / "judge" / "verify.py"
    assert "vllm_patchkit.present.reports" in imported(late, where)
