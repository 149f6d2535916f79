#!/usr/bin/env bash
# The nightly sign-off check: one PR dry run per fix the checkout carries.
#
#   tools/ci/check-signoffs.sh CHECKOUT
#
# Upstream takes one fix per pull request, so `vllm-patchkit pr` refuses a
# checkout whose series commits carry several fixes unless --fix names one
# (exit 2, "pass --fix NAME"): that says nothing about sign-offs. This lists
# the fixes the commits carry (series_fixes.py, the matching `pr --fix`
# does) and runs `pr --fix NAME` on each, as the bot would propose them.
# --signoff stands for the bot's own sign-off, which the DCO lets a
# submitter add; a commit that lost its author's sign-off is still refused,
# since only the author can give it. A dry run changes nothing; precommit
# and test are the nightly's own checks. With commits after the base but no
# fix's among them, `pr` runs once without --fix.
#
# Prints each run's output, then one line per run, for the issue
# (tools/ci/gate_report.py):
#
#   signoff of NAME: exit N: STATUS: MESSAGE
#
# Exit 0 when every run is ready; else 2 when one was refused (a sign-off
# is missing, or the checkout is dirty: its line says which), 1 when one
# failed, 3 when one could not run or the fixes could not be listed.
#
#   VLLM_PATCHKIT_PATCHES  the series directory (default: this repo's patches/)
set -uo pipefail

usage="usage: $0 CHECKOUT"
checkout=${1:?$usage}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
patches=${VLLM_PATCHKIT_PATCHES:-$here/../../patches}

if ! fixes=$(python "$here/series_fixes.py" --patches "$patches" -- "$checkout"); then
    echo "signoff of the series: exit 3: could not list the fixes the checkout carries"
    exit 3
fi

scratch=$(mktemp -d) || exit 3
trap 'rm -rf "$scratch"' EXIT
summary=()
codes=()

# Keep a dry run's output (shown) and its last line ("STATUS: MESSAGE").
record() {
    local label=$1 code=$2
    cat "$scratch/pr.log"
    summary+=("signoff of $label: exit $code: $(tail -n 1 "$scratch/pr.log")")
    codes+=("$code")
}

if [[ -z $fixes ]]; then
    code=0
    vllm-patchkit --patches "$patches" pr "$checkout" --dry-run --signoff \
        --no-test --no-precommit >"$scratch/pr.log" 2>&1 || code=$?
    record "the series" "$code"
else
    while IFS= read -r fix; do
        if [[ ! $fix =~ ^[a-z0-9-]+$ ]]; then
            summary+=("signoff of the series: exit 3: '$fix' is not a fix name")
            codes+=(3)
            continue
        fi
        echo "--- vllm-patchkit pr --fix $fix"
        code=0
        vllm-patchkit --patches "$patches" pr "$checkout" --fix "$fix" --dry-run \
            --signoff --no-test --no-precommit >"$scratch/pr.log" 2>&1 || code=$?
        record "$fix" "$code"
    done <<<"$fixes"
fi

echo
printf '%s\n' "${summary[@]}"
# A finding (refused, failed) says more than a check that could not run.
for wanted in 2 1 3; do
    for code in "${codes[@]}"; do
        if [[ $code -eq $wanted ]]; then
            exit "$wanted"
        fi
    done
done
for code in "${codes[@]}"; do
    if [[ $code -ne 0 ]]; then
        exit "$code"
    fi
done
exit 0
