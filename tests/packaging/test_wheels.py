"""What a user gets from pip: each product's wheel, built and installed on its own.

Both products are built with ``python -m build`` (the sdist, then the wheel
from the sdist, so the sdist is shown to be complete) from a copy of this
checkout, and checked with ``twine check``. Each wheel is then installed,
not editable, into a fresh ``python -m venv`` (no system site-packages)
and run from there with no ``PYTHONPATH`` (the extended tier: each install
is a whole journey; the default run builds, checks and reads the wheels):

- the toolkit, with the dependencies it declares from the package index,
  in a venv with neither torch nor vLLM: ``--help``, ``doctor``, ``check``
  and ``apply`` on a real release tree, and a one-line refusal (exit 3)
  from a command that needs vLLM;
- the overlay, which must pull nothing, beside a real vLLM: the venv gets
  the project venv's site-packages after its own (a ``.pth`` line, whose own
  ``.pth`` files, such as the editable install of this checkout, are not
  processed), and ``python -m vllm_overlay --quick`` runs from the wheel.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import site
import subprocess
import sys
from collections.abc import Callable
from email.parser import HeaderParser
from pathlib import Path
from zipfile import ZipFile

import pytest

import vllm_overlay
from tests.toolkit.cli_helpers import snapshot
from vllm_patchkit.git.series import load_series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PATCHES_DIR, PROJECT_ROOT
from vllm_patchkit.trees import runtime

pytestmark = pytest.mark.packaging

NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".work",
    "__pycache__",
    "*.egg-info",
    "build",
    "dist",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
)


def run(*argv: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=600, **kwargs
    )
    assert proc.returncode == 0, f"{argv}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def user_env() -> dict[str, str]:
    """This environment without what points Python at this checkout."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both products' sdists and wheels, built from a copy of this checkout
    by the release job's build step (``tools/ci/build-dists.sh``: each sdist,
    the wheel from it, exactly the four files of this version, ``twine check
    --strict``).

    ``--no-isolation``: the build backend is the project venv's pinned
    setuptools instead of one downloaded per build; the sdist-then-wheel path
    is the same as an isolated ``python -m build`` (which the release job
    uses; tests/toolkit/test_release_workflow.py runs that one).
    """
    scratch = tmp_path_factory.mktemp("packaging")
    source = scratch / "source"
    shutil.copytree(PROJECT_ROOT, source, ignore=NOT_SOURCE, symlinks=True)
    out = scratch / "dist"
    version = vllm_overlay.__version__
    run(
        "bash",
        source / "tools" / "ci" / "build-dists.sh",
        out,
        version,
        "--no-isolation",
        env={**user_env(), "PYTHON": sys.executable},
    )
    assert sorted(p.name for p in out.iterdir()) == [
        f"vllm_overlay-{version}-py3-none-any.whl",
        f"vllm_overlay-{version}.tar.gz",
        f"vllm_patchkit-{version}-py3-none-any.whl",
        f"vllm_patchkit-{version}.tar.gz",
    ]
    return out


def wheel(dist: Path, name: str) -> Path:
    (found,) = dist.glob(f"{name}-*.whl")
    return found


def metadata(whl: Path) -> dict[str, list[str]]:
    with ZipFile(whl) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = HeaderParser().parsestr(archive.read(name).decode())
    return {key: message.get_all(key) or [] for key in set(message.keys())}


def fresh_venv(path: Path) -> Path:
    """A new venv; pip is the project venv's, run against it (``pip --python``)."""
    run(sys.executable, "-m", "venv", "--without-pip", path)
    return path / "bin" / "python"


def pip_install(python: Path, *args: str | Path) -> None:
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--disable-pip-version-check",
        *args,
        env=user_env(),
    )


def site_packages(python: Path) -> Path:
    out = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    return Path(out.stdout.strip())


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_one_version_for_both_products(dist: Path) -> None:
    overlay = metadata(wheel(dist, "vllm_overlay"))
    toolkit = metadata(wheel(dist, "vllm_patchkit"))
    init = ast.parse((PROJECT_ROOT / "vllm_overlay" / "__init__.py").read_text())
    (written,) = [
        ast.literal_eval(node.value)
        for node in init.body
        if isinstance(node, ast.Assign)
        and ast.unparse(node.targets[0]) == "__version__"
    ]

    assert overlay["Version"] == toolkit["Version"] == [written]
    assert f"vllm-overlay=={written}" in toolkit["Requires-Dist"]


def test_overlay_declares_nothing_and_the_toolkit_every_import(dist: Path) -> None:
    """The toolkit's Requires-Dist covers every package its code imports or
    runs with ``python -m``, except the vLLM runtime its commands check for."""
    assert metadata(wheel(dist, "vllm_overlay")).get("Requires-Dist", []) == []
    declared = {
        normalise(re.split(r"[<>=!~ ;\[]", r)[0])
        for r in metadata(wheel(dist, "vllm_patchkit"))["Requires-Dist"]
    }
    owners = importlib.metadata.packages_distributions()
    runtime_only = {
        *runtime.VLLM_RUNTIME,
        *runtime.TEST_RUNTIME,
        *runtime.TRITON_RUNTIME,
    }
    needed: dict[str, set[str]] = {}
    package = PROJECT_ROOT / "tools" / "vllm_patchkit"
    for path in package.rglob("*.py"):
        for name in imported_or_run(ast.parse(path.read_text())):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in {"vllm_patchkit", "__main__"}:
                continue
            needed.setdefault(top, set()).add(str(path.relative_to(package)))

    assert set(needed) > runtime_only  # the scan sees the runtime imports too
    undeclared = {
        top: sorted(where)
        for top, where in needed.items()
        if top not in runtime_only
        and not {normalise(d) for d in owners.get(top, [top])} & declared
    }
    assert not undeclared, f"imported but not in Requires-Dist: {undeclared}"


def imported_or_run(tree: ast.AST) -> set[str]:
    """Modules in ``import`` statements and in ``[..., "-m", "module", ...]``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
        elif isinstance(node, ast.List):
            values = [getattr(e, "value", None) for e in node.elts]
            for flag, module in zip(values, values[1:], strict=False):
                if flag == "-m" and isinstance(module, str):
                    names.add(module)
    return names


@pytest.mark.release_trees
@pytest.mark.slow
def test_toolkit_wheel_in_a_venv_without_torch_or_vllm(
    dist: Path, tmp_path: Path, release_clone: Callable[[str], Path]
) -> None:
    venv = tmp_path / "toolkit-venv"
    python = fresh_venv(venv)
    # --find-links: the overlay it requires is built here, on no index.
    pip_install(python, "--find-links", dist, wheel(dist, "vllm_patchkit"))
    cli = venv / "bin" / "vllm-patchkit"
    env = user_env()

    def patchkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(cli), *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=600,
        )

    probe = run(
        python,
        "-c",
        "import importlib.util as u, vllm_patchkit.paths as p; "
        "print(p.__file__); print(p.PATCHES_DIR); "
        "print([m for m in ('torch', 'vllm') if u.find_spec(m)])",
        env=env,
        cwd=tmp_path,
    ).stdout.splitlines()
    installed = site_packages(python)
    assert Path(probe[0]).is_relative_to(installed)
    shipped = Path(probe[1])
    assert shipped == installed / "vllm_patchkit" / "data" / "patches"
    assert {p.name: p.read_bytes() for p in shipped.iterdir()} == {
        p.name: p.read_bytes() for p in PATCHES_DIR.iterdir() if p.is_file()
    }
    assert probe[2] == "[]", "the toolkit pulled torch or vLLM into its venv"

    shown = patchkit("--help")
    assert shown.returncode == 0, shown.stderr
    for command in ("apply", "check", "doctor", "rebase", "refresh", "test"):
        assert command in shown.stdout

    no_vllm = patchkit("doctor", "--json")
    assert no_vllm.returncode == 3, no_vllm.stdout + no_vllm.stderr
    assert "vllm" in json.loads(no_vllm.stdout)["error"]
    assert len(no_vllm.stderr.strip().splitlines()) == 1, no_vllm.stderr

    tree = release_clone("0.28.0")
    names = [patch.name for patch in load_series(PATCHES_DIR).patches]
    before = snapshot(tree)

    checked = patchkit("check", "--json", str(tree))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    states = {p["name"]: p["status"] for p in json.loads(checked.stdout)["patches"]}
    assert list(states) == names
    assert "applied" not in states.values()
    assert snapshot(tree) == before

    doctor = patchkit("doctor", "--json", str(tree))
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    diagnosis = json.loads(doctor.stdout)
    assert (diagnosis["vllm_version"], diagnosis["affected"]) == ("0.28.0", True)

    applied = patchkit("apply", "--json", str(tree))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    git = Git(tree)
    assert git.run("rev-list", "--count", f"{before['head']}..HEAD").stdout.strip() == (
        str(len(names))
    )
    rechecked = patchkit("check", "--json", str(tree))
    assert {p["status"] for p in json.loads(rechecked.stdout)["patches"]} == {"applied"}

    # refresh rewrites a series: never the copy pip installed.
    refused = patchkit("refresh", str(tree))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--patches" in refused.stderr
    assert {p.name: p.read_bytes() for p in shipped.iterdir()} == {
        p.name: p.read_bytes() for p in PATCHES_DIR.iterdir() if p.is_file()
    }

    needs_vllm = patchkit("test", str(tree))
    assert needs_vllm.returncode == 3, needs_vllm.stdout + needs_vllm.stderr
    (line,) = needs_vllm.stderr.strip().splitlines()
    assert "torch" in line and "vllm" in line


@pytest.mark.slow
def test_overlay_wheel_beside_an_installed_vllm(dist: Path, tmp_path: Path) -> None:
    venv = tmp_path / "overlay-venv"
    python = fresh_venv(venv)
    pip_install(python, wheel(dist, "vllm_overlay"))
    installed = site_packages(python)
    version = metadata(wheel(dist, "vllm_overlay"))["Version"][0]
    assert sorted(p.name for p in installed.iterdir()) == [
        "vllm_overlay",
        f"vllm_overlay-{version}.dist-info",
    ], "installing the overlay pulled something in"

    (vllm_site,) = site.getsitepackages()
    (installed / "zz_vllm_beside.pth").write_text(f"{vllm_site}\n")
    env = user_env()
    probe = run(
        python,
        "-c",
        "import importlib.metadata as m, vllm, vllm_overlay; "
        "print(vllm_overlay.__file__); print(m.version('vllm')); "
        "(ep,) = [e for e in m.entry_points(group='vllm.general_plugins') "
        "if e.name == 'vllm_overlay']; print(ep.dist.locate_file(''))",
        env=env,
        cwd=tmp_path,
    ).stdout.splitlines()
    assert Path(probe[0]).is_relative_to(installed), "not the wheel's overlay"
    assert probe[1] == importlib.metadata.version("vllm")
    assert Path(probe[2]) == installed, "vLLM would load another overlay"

    doctor = subprocess.run(
        [str(python), "-m", "vllm_overlay", "--quick", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    report = json.loads(doctor.stdout)
    assert report["vllm_version"] == importlib.metadata.version("vllm")
    assert report["affected"] is True
    assert report["entry_point_registered"] is True
