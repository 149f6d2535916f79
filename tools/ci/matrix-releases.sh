#!/usr/bin/env bash
# The releases of a matrix range, as the workflow's job matrix.
#
#   tools/ci/matrix-releases.sh FROM TO
#
# Prints two GITHUB_OUTPUT lines: versions=<JSON list> (one job each) and
# last=<the range's newest release>, so every job runs the same range even
# when the index gains a release while the workflow runs ("latest" is read
# once, here). Exit 2 on a FROM or TO that is not a version (TO may be
# "latest"); vllm-patchkit's own exit otherwise.
set -euo pipefail

usage="usage: $0 FROM TO"
from=${1:?$usage}
to=${2:?$usage}
version_re='^[0-9]+(\.[0-9]+)*$'

if [[ ! $from =~ $version_re ]]; then
    echo "error: from '$from' is not a release version such as 0.11.0" >&2
    exit 2
fi
if [[ $to != latest && ! $to =~ $version_re ]]; then
    echo "error: to '$to' is not a release version or 'latest'" >&2
    exit 2
fi
versions=$(vllm-patchkit matrix --from "$from" --to "$to" --list --json)
echo "versions=$(jq -c . <<<"$versions")"
echo "last=$(jq -r '.[-1]' <<<"$versions")"
