#!/usr/bin/env bash
# Commit the refreshed patches/ of REPO to BRANCH and force-push it.
#
#   tools/ci/commit-bot-branch.sh REPO BRANCH MESSAGE_FILE [REMOTE]
#
# Only patches/ is committed (with a DCO sign-off, by the configured git
# identity), on BRANCH made from the current HEAD; BRANCH belongs to the bot,
# so it is overwritten. Prints the new commit. Exit 1 when patches/ has no
# change (nothing to commit), 2 on bad input.
set -euo pipefail

usage="usage: $0 REPO BRANCH MESSAGE_FILE [REMOTE]"
repo=${1:?$usage}
branch=${2:?$usage}
message=${3:?$usage}
remote=${4:-origin}

if ! git -C "$repo" check-ref-format --branch "$branch" >/dev/null 2>&1; then
    echo "error: '$branch' is not a valid branch name" >&2
    exit 2
fi
if [[ ! -s $message ]]; then
    echo "error: empty or missing commit message $message" >&2
    exit 2
fi
if [[ -z $(git -C "$repo" status --porcelain -- patches) ]]; then
    echo "patches/ is unchanged: nothing to commit" >&2
    exit 1
fi
git -C "$repo" switch --quiet -C "$branch"
git -C "$repo" add --all -- patches
git -C "$repo" commit --quiet --signoff --file "$message" -- patches
git -C "$repo" push --quiet --force "$remote" "HEAD:refs/heads/$branch"
git -C "$repo" rev-parse HEAD
