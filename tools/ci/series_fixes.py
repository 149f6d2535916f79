"""The fixes whose patches a checkout's series commits carry, one name a line.

Upstream takes one fix per pull request, so ``vllm-patchkit pr`` refuses a
checkout that carries several fixes unless ``--fix NAME`` picks one; the
nightly sign-off check (``tools/ci/check-signoffs.sh``) runs ``pr --fix`` for
each name this prints. A fix is listed when ``pr --fix`` would find commits
of it: the same matching by content
(:func:`vllm_patchkit.pull_request.contents.patch_carriers`,
:func:`vllm_patchkit.pull_request.scope.choose_fix`) on the commits from the
series base (``refs/vllm-patchkit/base``, recorded by apply and rebase) to
HEAD. Nothing is printed when no commit is a series patch.

    python tools/ci/series_fixes.py CHECKOUT [--patches DIR]

Exit 0; 3 when the checkout, its base or the series cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vllm_overlay.fixes import FIXES
from vllm_patchkit.errors import EXIT_ERROR, PatchkitError
from vllm_patchkit.git.checkout import BASE_REF, open_checkout
from vllm_patchkit.git.series import Series, load_series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PATCHES_DIR
from vllm_patchkit.pull_request.contents import patch_carriers
from vllm_patchkit.pull_request.scope import ScopeError, choose_fix
from vllm_patchkit.pull_request.signoff import series_commits


def carried_fixes(git: Git, base: str, series: Series) -> list[str]:
    """Registry names, in the registry's order, of the fixes ``pr --fix``
    finds commits of between ``base`` and HEAD."""
    commits = series_commits(git, base)
    carriers = patch_carriers(git, commits, series)
    names = []
    for fix in FIXES:
        try:
            choose_fix(commits, series, fix.name, carriers)
        except ScopeError:
            continue  # no commit of this fix
        names.append(fix.name)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--patches", type=Path, default=PATCHES_DIR)
    args = parser.parse_args(argv)
    try:
        git = open_checkout(args.checkout)
        series = load_series(args.patches)
    except (OSError, PatchkitError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    base = git.commit_of(BASE_REF)
    if base is None:
        print(f"error: {git.root} has no series base {BASE_REF}", file=sys.stderr)
        return EXIT_ERROR
    for name in carried_fixes(git, base, series):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
