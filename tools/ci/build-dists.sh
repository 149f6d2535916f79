#!/usr/bin/env bash
# The release job's build step: both products' sdists and wheels, checked.
#
#   tools/ci/build-dists.sh OUT VERSION [BUILD_OPTION...]
#
# Builds the overlay (the checkout's root) and the toolkit (tools/) with
# `python -m build`, which makes each sdist and then the wheel from that
# sdist (so a wheel built from the sdist is what users of the sdist get),
# into the empty or missing directory OUT. Then checks that OUT holds
# exactly the four files of VERSION, and runs `twine check --strict` on them.
# BUILD_OPTION... go to every `python -m build` (the tests pass
# --no-isolation to use the venv's pinned setuptools).
#   PYTHON  interpreter with build and twine (default: python3)
# Exit 0; 1 when a build or a check fails; 2 on bad input.
set -euo pipefail

usage="usage: $0 OUT VERSION [BUILD_OPTION...]"
out=${1:?$usage}
version=${2:?$usage}
shift 2
python=${PYTHON:-python3}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "error: '$version' is not a version X.Y.Z" >&2
    exit 2
fi
mkdir -p "$out"
if [[ -n $(find "$out" -mindepth 1 -maxdepth 1) ]]; then
    echo "error: $out is not empty; the release takes every file in it" >&2
    exit 2
fi
out=$(cd "$out" && pwd)

for project in "$root" "$root/tools"; do
    echo "build-dists: building ${project#"$root"/} (sdist, then the wheel from it)" >&2
    "$python" -m build --outdir "$out" "$@" "$project" || exit 1
done

expected=$(printf '%s\n' \
    "vllm_overlay-$version-py3-none-any.whl" \
    "vllm_overlay-$version.tar.gz" \
    "vllm_patchkit-$version-py3-none-any.whl" \
    "vllm_patchkit-$version.tar.gz")
built=$(find "$out" -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort)
if [[ $built != "$expected" ]]; then
    echo "error: $out holds other files than the four of $version:" >&2
    echo "$built" >&2
    exit 1
fi
"$python" -m twine check --strict "$out"/* || exit 1
