#!/usr/bin/env bash
# Clone upstream vLLM and apply the patch series on a work branch at its base.
#
#   tools/ci/provision-upstream.sh URL CHECKOUT [BASE_REF]
#
# BASE_REF defaults to the release named by the series file's
# "# Base: vLLM X.Y.Z" comment, as the tag vX.Y.Z. The series goes on the new
# branch vllm-overlay/series with `vllm-patchkit apply` (git am -3 plus the
# invariants; it also records the base that rebase and refresh use). Prints
# the base ref on stdout; progress goes to stderr. Exits with apply's status
# when it fails, 2 on bad input. Needs vllm-patchkit on PATH and a git
# identity for the commits. VLLM_PATCHKIT_PATCHES overrides the series
# directory (default: this repository's patches/).
set -euo pipefail

usage="usage: $0 URL CHECKOUT [BASE_REF]"
url=${1:?$usage}
checkout=${2:?$usage}
base=${3:-}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
patches=${VLLM_PATCHKIT_PATCHES:-$root/patches}

if [[ -z $base ]]; then
    base=$(sed -nE 's/^# Base: vLLM ([0-9][0-9A-Za-z.+-]*[0-9A-Za-z+-]).*$/v\1/p' \
        "$patches/series" | head -n 1)
fi
if [[ -z $base ]]; then
    echo "error: $patches/series has no '# Base: vLLM X.Y.Z' line; give BASE_REF" >&2
    exit 2
fi
if [[ $base == -* ]] || ! git check-ref-format --allow-onelevel "$base"; then
    echo "error: '$base' is not a valid ref name" >&2
    exit 2
fi
# URL and CHECKOUT reach git as arguments: neither may pass for an option.
if [[ $url == -* || $checkout == -* ]]; then
    echo "error: URL and CHECKOUT must not start with '-'" >&2
    exit 2
fi
if [[ -e $checkout ]]; then
    echo "error: $checkout already exists" >&2
    exit 2
fi

echo "cloning $url into $checkout (base $base)" >&2
# Blobless: only the trees that get checked out are downloaded.
git -c protocol.ext.allow=never clone --quiet --filter=blob:none --no-checkout \
    -- "$url" "$checkout"
git -C "$checkout" checkout --quiet -b vllm-overlay/series "$base^{commit}"
vllm-patchkit --patches "$patches" apply "$checkout" >&2
echo "$base"
