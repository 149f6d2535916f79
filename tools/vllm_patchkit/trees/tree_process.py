"""The one launcher for code run against a vLLM tree: its environment and its life.

Every child process that runs a tree's code (the regression scenarios, the
tree's own pytest, the audit's dynamic pass, the overlay probe, the mutation
worker and zygote) and memcheck's script starts through :class:`TreeLauncher`,
so they agree on one policy:

- the tree's runtime (:func:`~vllm_patchkit.trees.tree_runtime.runtime_for`: the
  tree first on ``PYTHONPATH``, then the pure-Python packages its release
  needs), made once per launcher and handed down, never remade per child;
- this checkout's own code importable after it (a child runs this toolkit);
- the release the tree is (:data:`~vllm_patchkit.trees.versions.RELEASE_ENV`);
- CPU only: no device visible, vLLM's CPU platform (without it a CPU-only
  host gets the fallback platform, which claims pinned memory and fails);
- vLLM's cache of the tree's release (:func:`vllm_cache_root`), not the
  user's;
- no bytecode written into the tree; a child that installs it compiles the
  tree's modules once per content instead (:mod:`~vllm_patchkit.trees.bytecode`),
  through a cache that is the user's own, trimmed to its bound;
- a process group of its own, killed whole when the child exits, runs past
  its timeout or this process is interrupted, so no grandchild outlives it;
  and killed by the kernel if this process is killed outright
  (:mod:`~vllm_patchkit.child_death`;
  :func:`~vllm_patchkit.trees.child_json.run_in_group`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.releases import Release
from vllm_patchkit.paths import PACKAGE_DIR, cache_dir
from vllm_patchkit.trees import bytecode
from vllm_patchkit.trees.child_json import Finished, run_in_group
from vllm_patchkit.trees.installed import installed_vllm_dir
from vllm_patchkit.trees.tree_runtime import TreeRuntime, runtime_for
from vllm_patchkit.trees.versions import RELEASE_ENV, tree_release


def _checkout_paths() -> tuple[str, ...]:
    """Where this checkout's ``vllm_patchkit`` and ``vllm_overlay`` are
    imported from; none when installed (the venv's site-packages has them,
    and must not be put ahead of the standard library)."""
    tools = PACKAGE_DIR.parent
    root = tools.parent
    if tools.name != "tools" or not (root / "vllm_overlay").is_dir():
        return ()
    return (str(tools), str(root))


TOOLKIT_PATHS = _checkout_paths()
"""After the tree's runtime on every child's path: a child runs this code."""

CPU_ONLY = {"CUDA_VISIBLE_DEVICES": "", "VLLM_TARGET_DEVICE": "cpu"}
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}
VLLM_CACHE_ENV = "VLLM_CACHE_ROOT"


def vllm_cache_root(release: Release | None) -> Path:
    """vLLM's own cache directory for a child running ``release`` (None:
    unknown).

    vLLM keeps one entry per model class there (``modelinfos/``: what
    inspecting the class found, with its file's hash), and a miss costs a
    process that imports vLLM again to inspect it (7-10 s here). Trees of
    different releases have different model files, so in one cache they
    evict each other's entries and every child pays that process; one cache
    per release keeps each release's entries. The user's own vLLM cache is
    left alone.
    """
    name = str(release) if release is not None else "unknown"
    return cache_dir() / "vllm-cache" / name


def _installed_release() -> Release | None:
    """The release of the vLLM this environment has installed (None: none,
    or not a release)."""
    try:
        return tree_release(installed_vllm_dir().parent)[1]
    except ModuleNotFoundError:
        return None


@dataclass(frozen=True)
class TreeLauncher:
    """How children run ``tree``'s code (None: the installed vLLM)."""

    tree: Path | None = None
    runtime: TreeRuntime | None = None
    """Made once by :meth:`of`; every child of this launcher runs in it."""
    user_devices: bool = False
    """memcheck's user script: a device the user made visible stays visible,
    vLLM's settings are the user's, and this checkout's directories stay off
    its path (its ``tests`` must not shadow the user's); else no device is
    visible."""

    @classmethod
    def of(cls, tree: Path | None, runtime: TreeRuntime | None = None) -> TreeLauncher:
        """The launcher of ``tree``, with ``runtime`` when the caller has it
        (a judged tree's runtime is made once). Raises ``RuntimeUnavailable``."""
        if tree is None:
            return cls()
        if runtime is None or runtime.tree != tree.resolve():
            runtime = runtime_for(tree)
        return cls(tree, runtime)

    def env(self, **overrides: str | None) -> dict[str, str]:
        """This process's environment under the policy; ``overrides`` last
        (None removes a variable)."""
        env = dict(os.environ)
        env.pop(RELEASE_ENV, None)
        first = self.runtime.pythonpath() if self.runtime else []
        if self.tree is not None:
            first = first or [str(self.tree)]
            release = tree_release(self.tree)[1]
            env[RELEASE_ENV] = str(release) if release is not None else ""
        else:
            release = _installed_release()
        rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        toolkit = () if self.user_devices else TOOLKIT_PATHS
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*first, *toolkit, *rest]))
        env.update(NO_BYTECODE)
        if self.user_devices:
            env.setdefault("CUDA_VISIBLE_DEVICES", "")
        else:
            env.update(CPU_ONLY)
            env.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
            env[VLLM_CACHE_ENV] = str(vllm_cache_root(release))
            # The user's setting, when there is one ("": compile each time);
            # "" too when the cache is not the user's own.
            env[bytecode.ENV] = bytecode.for_children(env)
        for name, value in overrides.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout_s: float | None,
        stdin: str | None = None,
        log: Path | None = None,
        inherit_stdio: bool = False,
        **overrides: str | None,
    ) -> Finished:
        """``argv`` under the policy, in a group of its own (:func:`run_in_group`)."""
        return run_in_group(
            argv,
            cwd=cwd,
            env=self.env(**overrides),
            timeout_s=timeout_s,
            stdin=stdin,
            log=log,
            inherit_stdio=inherit_stdio,
        )
