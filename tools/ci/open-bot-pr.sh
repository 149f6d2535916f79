#!/usr/bin/env bash
# Open the bot branch's pull request, or update the one that is open.
#
#   tools/ci/open-bot-pr.sh BRANCH BASE TITLE_FILE BODY_FILE PUSHED
#
# PUSHED is commit-bot-branch.sh's exit: 0 (a commit was pushed) or 1 (the
# branch already holds it). An open PR from BRANCH gets the new title and
# body; otherwise a PR is opened onto BASE when something was pushed, and
# nothing is done when the branch was unchanged (its PR was closed by hand).
# Needs gh with GH_TOKEN (and GH_REPO) in the environment.
set -euo pipefail

usage="usage: $0 BRANCH BASE TITLE_FILE BODY_FILE PUSHED"
branch=${1:?$usage}
base=${2:?$usage}
title_file=${3:?$usage}
body_file=${4:?$usage}
pushed=${5:?$usage}

if [[ ! $branch =~ ^bot/[A-Za-z0-9._-]+$ ]]; then
    echo "error: not a bot branch: '$branch'" >&2
    exit 2
fi
title=$(head -n 1 "$title_file" | cut -c1-250)
number=$(gh pr list --head "$branch" --state open --json number \
    --jq '.[0].number // empty')
if [[ -n $number ]]; then
    gh pr edit "$number" --title "$title" --body-file "$body_file"
elif [[ $pushed -eq 0 ]]; then
    gh pr create --base "$base" --head "$branch" --title "$title" \
        --body-file "$body_file"
else
    echo "$branch is unchanged and has no open PR: nothing to do"
fi
