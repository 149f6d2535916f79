"""The suite passes in any order: the polluter found, and the guard that
keeps its class out (issue: four tests failed in one xdist worker).

Each run here is a fresh pytest or Python process, since the state under
test is the interpreter's own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_patchkit.paths import PROJECT_ROOT

AITER = "tests/unit/test_overlay_aiter.py::"
VICTIMS = (
    AITER + "test_install_hands_out_a_subclass_and_is_idempotent",
    AITER + "test_install_refuses_code_it_did_not_read",
    AITER + "test_install_refuses_a_replaced_method",
    "tests/unit/test_overlay_fix.py::test_the_installed_vllm_method_recompiles_to_its_own_code",
)
"""The four tests that failed after the polluter in one worker."""

POLLUTERS = """\
import importlib.util

from vllm_patchkit.trees.index import configured_index_urls


def test_reads_the_index_configuration():
    # What a first in-process download of a release did: it imported pip.
    assert configured_index_urls()


def test_probes_pip_in_process():
    # pip found in-process, as the old index.py did: the guard must catch it.
    importlib.util.find_spec("pip")
"""


def _env() -> dict[str, str]:
    # No index is asked: only pip's configuration is read.
    return {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}


def test_reading_the_index_configuration_leaves_setuptools_importable() -> None:
    """The polluter itself, fixed: vLLM's import of torch.utils.cpp_extension
    imports setuptools, which failed after pip had been imported."""
    code = (
        "import sys\n"
        "from vllm_patchkit.trees.index import configured_index_urls\n"
        "assert configured_index_urls()\n"
        "assert 'pip' not in sys.modules, 'pip imported in-process'\n"
        "import setuptools\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.slow
def test_the_four_pass_after_the_polluters_in_one_worker(tmp_path: Path) -> None:
    polluters = tmp_path / "test_polluters.py"
    polluters.write_text(POLLUTERS)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:randomly",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(PROJECT_ROOT),
            "-rA",
            str(polluters),
            *VICTIMS,
        ],
        cwd=PROJECT_ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout
    for victim in VICTIMS:
        assert f"PASSED {victim}" in out, out[-4000:]
    assert re.search(r"PASSED \S*test_reads_the_index_configuration", out), out
    # The raw probe changes the distutils finder: the guard fails that test
    # (at teardown) and puts the finder back, so the victims still pass.
    assert "ERROR at teardown of test_probes_pip_in_process" in out, out[-4000:]
    assert "an import hook on sys.meta_path changed its state" in out
    assert proc.returncode == 1  # that one error; everything else passed
