#!/usr/bin/env bash
# Run one check of the nightly job, keep its output and record its status.
#
#   tools/ci/run-gate.sh NAME OUT COMMAND [ARG...]
#
# Runs COMMAND with its output (stdout and stderr together) shown and kept in
# OUT/gates/NAME.log, appends "NAME<TAB>STATUS" to OUT/gates.tsv for
# tools/ci/gate_report.py, and exits with COMMAND's status. NAME: lower-case
# letters, digits and dashes. Exit 2 on bad input.
set -uo pipefail

usage="usage: $0 NAME OUT COMMAND [ARG...]"
name=${1:?$usage}
out=${2:?$usage}
shift 2
if [[ $# -eq 0 ]]; then
    echo "$usage" >&2
    exit 2
fi
if [[ ! $name =~ ^[a-z0-9-]+$ ]]; then
    echo "error: '$name' is not a check name (a-z, 0-9, -)" >&2
    exit 2
fi
mkdir -p "$out/gates" || exit 2
"$@" 2>&1 | tee "$out/gates/$name.log"
status=${PIPESTATUS[0]}
printf '%s\t%s\n' "$name" "$status" >>"$out/gates.tsv"
if [[ $status -ne 0 ]]; then
    echo "::error::$name exited $status (output kept in $out/gates/$name.log)"
fi
exit "$status"
