#!/usr/bin/env bash
# Does the refreshed series still apply at the base the nightly provisions at?
#
#   tools/ci/check-series-base.sh CHECKOUT BASE OUT
#
# After a rebase onto upstream and `vllm-patchkit refresh`, patches/ holds the
# series as it applies on the new upstream commit, while the "# Base: vLLM
# X.Y.Z" line of patches/series (kept by refresh) still names the old base:
# the one the next night provisions at. This applies the refreshed series
# with `vllm-patchkit apply` on a scratch worktree of CHECKOUT at BASE (the
# checkout, its branch and its refs/vllm-patchkit/base are left as they
# were) and records the answer in OUT's PR texts written by rebase_report.py:
#
#   applies:        a "Base" section in pr-body.md saying the line stays true;
#   does not apply: a warning at the top of pr-body.md naming the old base,
#                   the new one (CHECKOUT's refs/vllm-patchkit/base, the
#                   upstream commit rebased onto) and what to do before
#                   merging; "[Base line out of date]" before the PR title; a
#                   paragraph in commit-message.txt.
#
# Prints base_applies=true|false for $GITHUB_OUTPUT; exit 0 either way, 2 on
# bad input, 3 when the scratch worktree cannot be made.
#
#   UPSTREAM_REPO, UPSTREAM_REF  for the texts
#   VLLM_PATCHKIT_PATCHES        the series directory (default: patches/)
set -euo pipefail

usage="usage: $0 CHECKOUT BASE OUT"
checkout=${1:?$usage}
base=${2:?$usage}
out=${3:?$usage}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
patches=${VLLM_PATCHKIT_PATCHES:-$here/../../patches}
target="${UPSTREAM_REPO:-upstream} \`${UPSTREAM_REF:-?}\`"

if [[ $base == -* ]] || ! git check-ref-format --allow-onelevel "$base"; then
    echo "error: '$base' is not a valid ref name" >&2
    exit 2
fi
for text in pr-title.txt pr-body.md commit-message.txt; do
    if [[ ! -f $out/$text ]]; then
        echo "error: $out/$text is missing (run rebase-series.sh first)" >&2
        exit 2
    fi
done
new_base=$(git -C "$checkout" rev-parse --verify --quiet refs/vllm-patchkit/base) || {
    echo "error: $checkout has no refs/vllm-patchkit/base" >&2
    exit 2
}

scratch=$(mktemp -d)
worktree=$scratch/base-check
branch=vllm-overlay/base-check-$$
cleanup() {
    git -C "$checkout" worktree remove --force "$worktree" >/dev/null 2>&1 || true
    git -C "$checkout" branch --quiet -D "$branch" >/dev/null 2>&1 || true
    # refs/ is shared by all worktrees: apply there rewrote the base ref.
    git -C "$checkout" update-ref refs/vllm-patchkit/base "$new_base"
    rm -rf "$scratch"
}
trap cleanup EXIT
if ! git -C "$checkout" worktree add --quiet -b "$branch" -- "$worktree" \
    "$base^{commit}"; then
    echo "error: cannot make a worktree of $checkout at $base" >&2
    exit 3
fi

applies=true
if ! vllm-patchkit --patches "$patches" apply "$worktree" >"$scratch/apply.log" 2>&1; then
    applies=false
fi
cat "$scratch/apply.log" >&2
# The output as text in a code block it cannot close.
said=$(tail -n 40 "$scratch/apply.log" | tr '`' "'" | cut -c1-300)

if [[ $applies == true ]]; then
    cat >>"$out/pr-body.md" <<TEXT

### Base

The refreshed series still applies at \`$base\`, the base the nightly
provisions at (the \`# Base:\` line of \`patches/series\`, or the
\`base_ref\` input of the run): it was applied there with \`apply\`. The
\`# Base:\` line stays true.
TEXT
else
    echo "::warning::the refreshed series no longer applies at $base"
    title=$(<"$out/pr-title.txt")
    printf '[Base line out of date] %s\n' "$title" >"$out/pr-title.txt"
    {
        cat <<TEXT
> [!WARNING]
> **The refreshed series no longer applies at \`$base\`**, the base the
> nightly provisions at (the \`# Base:\` line of \`patches/series\`, or the
> \`base_ref\` input of the run); applying it there fails (output below).
>
> It applies at the new base, $target at \`$new_base\`. The refresh keeps
> the comment lines of \`patches/series\` as they were, so after merging as
> is the \`# Base:\` line would be wrong and the next night would fail to
> provision. Before merging, change the \`# Base:\` line to a release the
> refreshed series applies at (upstream must have its tag \`vX.Y.Z\`), or
> close this PR and keep carrying the current series.

<details><summary>Applying the refreshed series at $base</summary>

\`\`\`text
$said
\`\`\`

</details>

TEXT
        cat "$out/pr-body.md"
    } >"$scratch/pr-body.md"
    cp "$scratch/pr-body.md" "$out/pr-body.md"
    cat >>"$out/commit-message.txt" <<TEXT

The refreshed series no longer applies at $base (the "# Base:" line of
patches/series); it applies at $new_base.
TEXT
fi
echo "base_applies=$applies"
