#!/usr/bin/env bash
# Commit the refreshed patches/ (or PATHs) of REPO to BRANCH and force-push it.
#
#   tools/ci/commit-bot-branch.sh REPO BRANCH MESSAGE_FILE [REMOTE [PATH...]]
#
# Only the PATHs are committed (default: patches; the matrix workflow gives
# docs/matrix.md docs/matrix.json), with a DCO sign-off, by the configured git
# identity, on BRANCH made from the current HEAD; BRANCH belongs to the bot,
# so it is overwritten. Prints the new commit.
#
# Exit 1 ("unchanged": nothing committed, nothing pushed) when the PATHs are
# the same as HEAD's, or when REMOTE's BRANCH already is HEAD plus a commit
# whose tree is this one: a second night with the same result pushes
# nothing. Exit 2 on bad input.
set -euo pipefail

usage="usage: $0 REPO BRANCH MESSAGE_FILE [REMOTE [PATH...]]"
repo=${1:?$usage}
branch=${2:?$usage}
message=${3:?$usage}
remote=${4:-origin}
paths=("${@:5}")
if [[ ${#paths[@]} -eq 0 ]]; then
    paths=(patches)
fi
for path in "${paths[@]}"; do
    # A path reaches git after "--"; one outside the repository is refused.
    if [[ -z $path || $path == /* || $path == *..* ]]; then
        echo "error: '$path' is not a path inside the repository" >&2
        exit 2
    fi
done

if ! git -C "$repo" check-ref-format --branch "$branch" >/dev/null 2>&1; then
    echo "error: '$branch' is not a valid branch name" >&2
    exit 2
fi
# REMOTE reaches git as an argument (ls-remote, fetch, push): a value that
# starts with '-' would be read as an option (--upload-pack=CMD runs CMD).
if [[ $remote == -* || $remote == *::* ]]; then
    echo "error: '$remote' is not a remote name, URL or path" >&2
    exit 2
fi
if [[ ! -s $message ]]; then
    echo "error: empty or missing commit message $message" >&2
    exit 2
fi
if [[ -z $(git -C "$repo" status --porcelain -- "${paths[@]}") ]]; then
    echo "${paths[*]} unchanged from HEAD: nothing to commit" >&2
    exit 1
fi

# The tree the commit would have, without touching the index or any branch.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export GIT_INDEX_FILE=$scratch/index
git -C "$repo" read-tree HEAD
git -C "$repo" add --all -- "${paths[@]}"
tree=$(git -C "$repo" write-tree)
unset GIT_INDEX_FILE

tracking=refs/vllm-overlay/bot-branch
git -C "$repo" update-ref -d "$tracking" 2>/dev/null || true
if git -C "$repo" ls-remote --exit-code --heads -- "$remote" "refs/heads/$branch" \
    >/dev/null; then
    git -C "$repo" fetch --quiet --no-tags -- "$remote" "+refs/heads/$branch:$tracking"
    pushed_tree=$(git -C "$repo" rev-parse --verify --quiet "$tracking^{tree}" || true)
    pushed_parent=$(git -C "$repo" rev-parse --verify --quiet "$tracking^" || true)
    if [[ $pushed_tree == "$tree" && $pushed_parent == $(git -C "$repo" rev-parse HEAD) ]]; then
        echo "${paths[*]} unchanged from $remote's $branch: nothing to push" >&2
        exit 1
    fi
else
    status=$?
    # ls-remote --exit-code: 2 means no such branch; anything else is an error.
    if [[ $status -ne 2 ]]; then
        echo "error: cannot list $remote's branches" >&2
        exit "$status"
    fi
fi

git -C "$repo" switch --quiet -C "$branch"
git -C "$repo" add --all -- "${paths[@]}"
git -C "$repo" commit --quiet --signoff --file "$message" -- "${paths[@]}"
git -C "$repo" push --quiet --force -- "$remote" "HEAD:refs/heads/$branch"
git -C "$repo" rev-parse HEAD
