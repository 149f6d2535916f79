"""Build hooks of the vllm-patchkit distribution; the rest is pyproject.toml.

This directory is built two ways: from the project checkout (``pip install
./tools``, ``python -m build tools``), where the version and the patch series
are read from the project root, and from its own sdist, which carries both.
"""

from __future__ import annotations

import ast
import shutil
from email.parser import HeaderParser
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
"""The project checkout, when building from one."""

DATA = Path("vllm_patchkit", "data")
"""Where the series (and the license) go inside the package."""

# What the toolkit imports outside the standard library on the commands that
# only read or change a checkout (tests/packaging checks this list against
# the code). torch, vLLM, Triton, numpy and pytest are never installed by the
# toolkit: the commands that run vLLM code use the venv's own and say so
# when it has none (vllm_patchkit.trees.runtime).
REQUIREMENTS = [
    "pyyaml>=6",  # precommit: reads and writes .pre-commit-config.yaml
    "identify>=2.5",  # precommit: file types, as pre-commit matches them
    "pre-commit>=4",  # precommit: runs `python -m pre_commit`
    "pip>=23",  # index: the index URLs pip is configured with
    "packaging>=23",  # versions: every release string; tree_runtime: requirements
]


def _from_checkout() -> bool:
    return (ROOT / "patches" / "series").is_file() and (
        ROOT / "vllm_overlay" / "__init__.py"
    ).is_file()


def _in_sdist() -> bool:
    """An unpacked sdist: the series is already package data."""
    return (HERE / DATA / "patches" / "series").is_file()


def version() -> str:
    """vllm_overlay.__version__ in a checkout; the sdist's own PKG-INFO otherwise."""
    pkg_info = HERE / "PKG-INFO"
    if pkg_info.is_file():
        return HeaderParser().parsestr(pkg_info.read_text())["Version"]
    tree = ast.parse((ROOT / "vllm_overlay" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise RuntimeError("vllm_overlay/__init__.py has no __version__")


def copy_data(dest: Path) -> None:
    """The checkout's patches/ and LICENSE into ``dest`` (a package dir's data/)."""
    if not _from_checkout():
        raise RuntimeError(
            f"no patch series: {HERE} is neither in a vllm-overlay checkout "
            "nor an unpacked vllm-patchkit sdist"
        )
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "patches").mkdir(parents=True)
    for item in (ROOT / "patches").iterdir():
        if item.is_file():
            shutil.copy2(item, dest / "patches" / item.name)
    shutil.copy2(ROOT / "LICENSE", dest / "LICENSE")


class BuildPy(build_py):
    """Put the series in the wheel when building from the checkout."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode and not _in_sdist():
            copy_data(Path(self.build_lib) / DATA)


class Sdist(sdist):
    """Put the series in the sdist, so a wheel built from it has it too."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        if not _in_sdist():
            copy_data(Path(base_dir) / DATA)


setup(
    version=version(),
    install_requires=[*REQUIREMENTS, f"vllm-overlay=={version()}"],
    cmdclass={"build_py": BuildPy, "sdist": Sdist},
)
