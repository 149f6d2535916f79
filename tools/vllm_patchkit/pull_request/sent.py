"""The checkout a pull request's checks run on: its base plus its commits.

The Test Result must be about what is sent, not about the user's HEAD,
which holds other fixes' commits and their own work besides the fix's. So
``test`` and ``precommit`` run in a throwaway shared clone of the checkout
(the one ``precommit`` already runs in, :func:`scratch_clone`), at the
commits the branch will hold: the same ids ``submit`` makes (same trees,
parents, authors, dates and the user's identity as committer), with the
series base recorded there as apply records it, for ``test``'s before
column. The user's checkout and its ``.git`` are only read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from vllm_patchkit.git.checkout import BASE_REF
from vllm_patchkit.gitcmd import NO_HOOKS, Git
from vllm_patchkit.precommit.runner import scratch_clone

IDENTITY = ("user.name", "user.email")


@contextmanager
def sent_checkout(
    git: Git, base: str, build: Callable[[Git], str]
) -> Iterator[tuple[Path, str]]:
    """A clone of ``git``'s checkout at the commits ``build`` makes in it
    (on ``base``), and the head commit's id."""
    with scratch_clone(git.root) as tree:
        clone = Git(tree)
        for key in IDENTITY:  # the committer submit's commits get
            value = git.run("config", key, check=False).stdout.strip()
            if value:
                clone.run("config", key, value)
        head = build(clone)
        clone.run("update-ref", BASE_REF, base)
        clone.run(*NO_HOOKS, "checkout", "--quiet", "--detach", head)
        yield tree, head
