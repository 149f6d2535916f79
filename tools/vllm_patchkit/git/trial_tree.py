"""The tree a trial application would make, for ``check`` to read invariants on.

``apply`` checks each patch's invariant on the work tree right after its
``git am``; ``check`` must give the same verdict without writing to the
checkout or under ``.git``. A :class:`TrialTree` mirrors the checkout in a
scratch directory with symbolic links, except the files the patches tried
so far change and the directories above them: a handful of links, not a
copy of vLLM. Where the checkout's content is known
(:func:`~vllm_patchkit.git.code_readings.known_tree`), so is the trial
tree's, and its invariants' readings are kept too.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from vllm_patchkit.git.code_readings import blob_id, known_tree, tree_content
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.gitcmd import Git


class TrialTree:
    """The checkout at ``git.root``, as it would be with the patches so far."""

    def __init__(self, git: Git, scratch: Path) -> None:
        self._git = git
        self.root = scratch / "tree"
        self._staged = scratch / "staged"
        self._own: set[PurePosixPath] = set()
        self._taken: set[str] = set()

    def take_from_index(self, paths: list[str], env: dict[str, str]) -> None:
        """``paths`` as the scratch index (``env``) has them now; a path it
        does not hold (deleted) is absent."""
        self._make_room(paths)
        self._checkout(paths, self.root, env)

    def stage(self, paths: list[str], env: dict[str, str]) -> None:
        """Keep ``paths`` as the scratch index has them now, for
        :meth:`take_staged` to put in place later."""
        self._staged.mkdir(exist_ok=True)
        self._checkout(paths, self._staged, env)

    def take_staged(self, paths: list[str]) -> None:
        """``paths`` as :meth:`stage` kept them (absent if the index had not)."""
        self._make_room(paths)
        for name in paths:
            kept = self._staged / name
            if kept.is_symlink() or kept.exists():
                shutil.copy2(kept, self.root / name, follow_symlinks=False)

    def staged(self, paths: list[str]) -> dict[str, bytes | None]:
        """``paths`` as :meth:`stage` kept them (None: the index had not)."""
        found: dict[str, bytes | None] = {}
        for name in paths:
            kept = self._staged / name
            found[name] = kept.read_bytes() if kept.is_file() else None
        return found

    def take(self, contents: Mapping[str, bytes | None]) -> None:
        """Files with ``contents`` in place of the checkout's (None: absent)."""
        self._make_room(list(contents))
        for name, data in contents.items():
            if data is not None:
                (self.root / name).write_bytes(data)

    def broken(self, invariant: str) -> str | None:
        """Why ``invariant`` would not hold on the trial tree, if it would not."""
        base = tree_content(self._git.root)
        if base is None:
            result = check_invariant(invariant, self.root)
        else:
            with known_tree(self.root, self._content(base)):
                result = check_invariant(invariant, self.root)
        if result.holds:
            return None
        detail = result.detail.replace(str(self.root), str(self._git.root))
        return f"applies, but invariant {invariant} would not hold: {detail}"

    def _content(self, base: str) -> str:
        """The checkout's content id ``base`` with the files taken over it."""
        digest = hashlib.sha256(base.encode())
        for name in sorted(self._taken):
            path = self.root / name
            if path.is_symlink():
                held = f"link {os.readlink(path)}"
            else:
                held = blob_id(path.read_bytes()) if path.is_file() else "absent"
            digest.update(f"\0{name}\0{held}".encode())
        return f"trial:{digest.hexdigest()}"

    def _checkout(self, paths: list[str], dest: Path, env: dict[str, str]) -> None:
        literal = {**env, "GIT_LITERAL_PATHSPECS": "1"}
        prefix = f"--prefix={dest}/"
        done = self._git.run(
            "checkout-index", "--force", prefix, "--", *paths, check=False, env=literal
        )
        if done.returncode == 0:
            return
        # A path the index does not hold (a patch deleted it): the others.
        listed = self._git.run(
            "ls-files", "-z", "--", *paths, env=literal, hooks=False
        ).stdout
        present = [name for name in listed.split("\0") if name]
        if present:
            self._git.run("checkout-index", "--force", prefix, "--", *present, env=env)

    def _make_room(self, paths: list[str]) -> None:
        """Each path's directories made the trial's own, the path itself
        removed, for the caller to fill."""
        self._taken.update(paths)
        for name in paths:
            path = PurePosixPath(name)
            for directory in reversed(path.parents):
                self._own_directory(directory)
            leaf = self.root / path
            if leaf.is_symlink() or leaf.is_file():
                leaf.unlink()

    def _own_directory(self, directory: PurePosixPath) -> None:
        if directory in self._own:
            return
        mirror = self.root / directory
        if mirror.is_symlink():
            mirror.unlink()
        mirror.mkdir()
        real = self._git.root / directory
        if real.is_dir() and not real.is_symlink():
            for entry in os.scandir(real):
                (mirror / entry.name).symlink_to(entry.path)
        self._own.add(directory)
