#!/usr/bin/env bash
# One job of the matrix workflow: the measured steps on one release (or a
# comma-separated list), written as a row file for the merge job.
#
#   tools/ci/matrix-shard.sh FROM LAST RELEASES OUT [STEPS]
#
# FROM..LAST is the whole range (the release list every row file records,
# which the merge checks); RELEASES the ones this job runs; STEPS the
# measured steps (empty: all; "none": read the tree only, --no-suite).
# Writes OUT/matrix-rows.json.
#
# Exit 0 when the row file is written, also when a cell could not be judged
# (vllm-patchkit's exit 3: the cell says why, and the table shows it, as an
# unsharded run's does); exit 2 on bad input; any other failure as is.
set -euo pipefail

usage="usage: $0 FROM LAST RELEASES OUT [STEPS]"
from=${1:?$usage}
last=${2:?$usage}
releases=${3:?$usage}
out=${4:?$usage}
steps=${5:-}
version_re='^[0-9]+(\.[0-9]+)*$'

for value in "$from" "$last"; do
    if [[ ! $value =~ $version_re ]]; then
        echo "error: '$value' is not a release version such as 0.11.0" >&2
        exit 2
    fi
done
if [[ ! $releases =~ ^[0-9]+(\.[0-9]+)*(,[0-9]+(\.[0-9]+)*)*$ ]]; then
    echo "error: releases '$releases' is not a comma-separated version list" >&2
    exit 2
fi
if [[ -n $steps && ! $steps =~ ^[a-z]+(,[a-z]+)*$ ]]; then
    echo "error: steps '$steps' is not a comma-separated step list" >&2
    exit 2
fi

code=0
if [[ $steps == none ]]; then
    vllm-patchkit matrix --from "$from" --to "$last" --releases "$releases" \
        --output-dir "$out" --no-suite || code=$?
elif [[ -n $steps ]]; then
    vllm-patchkit matrix --from "$from" --to "$last" --releases "$releases" \
        --output-dir "$out" --steps "$steps" || code=$?
else
    vllm-patchkit matrix --from "$from" --to "$last" --releases "$releases" \
        --output-dir "$out" || code=$?
fi
if [[ $code -eq 3 && -f $out/matrix-rows.json ]]; then
    echo "::warning::vLLM $releases: a cell could not be judged (the row says why)"
    exit 0
fi
exit "$code"
