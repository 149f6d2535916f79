"""Does this Python have vLLM? The check before test, demo, matrix, memcheck, doctor.

The toolkit's wheel declares only what its git-level commands import; it
never pulls torch or vLLM into a venv (that would replace a user's builds).
The commands that run vLLM code need them from the environment they run in,
so they look before they start (without importing anything) and, when a
package is missing, say in one line what to install or which venv to use,
and exit 3 (environment error). ``doctor`` without a PATH reads the
installed vLLM and needs one too. The line is a :class:`MissingRuntime`,
reported (and exit 3, one JSON object under ``--json``) by the CLI's one
error path, ``cli.error_handler``.
"""

from __future__ import annotations

import sys

from vllm_patchkit.errors import EnvironmentFailure

VLLM_RUNTIME = ("torch", "vllm")
"""What the regression suite runs on: a vLLM with its dependencies."""

TEST_RUNTIME = (*VLLM_RUNTIME, "pytest")
"""``test`` also runs the tree's own test of the fix (patch 0002) with pytest."""

INSTALLED_VLLM = ("vllm",)
"""What ``doctor`` reads (as source, never imported) when given no tree."""

TRITON_RUNTIME = ("torch", "triton", "numpy")
"""What the Triton memory checker runs on."""


class MissingRuntime(EnvironmentFailure):
    """This Python lacks a package the command runs on (exit 3, "error")."""


def require(command: str, modules: tuple[str, ...], hint: str = "") -> None:
    """Return when this Python has ``modules`` (found, not imported); else
    raise one line of advice."""
    import importlib.util

    absent = [name for name in modules if importlib.util.find_spec(name) is None]
    if not absent:
        return
    raise MissingRuntime(
        f"`vllm-patchkit {command}` needs {', '.join(modules)} in this Python "
        f"({sys.executable}), which lacks {', '.join(absent)}: run it from a venv "
        "that has vLLM installed (this project's: tools/bootstrap.sh), or install "
        f"{' '.join(absent)} here" + (f"; {hint}" if hint else "")
    )
