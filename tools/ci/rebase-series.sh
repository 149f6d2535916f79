#!/usr/bin/env bash
# Rebase the series of CHECKOUT onto upstream REF and write the job's reports.
#
#   tools/ci/rebase-series.sh CHECKOUT REF OUT
#
# REF (branch, tag or commit) is fetched from the checkout's `origin`, the
# upstream clone made by provision-upstream.sh. Writes OUT/rebase.json and
# OUT/rebase-summary.md (vllm-patchkit rebase --json --ci), then the PR,
# commit and issue texts (tools/ci/rebase_report.py), and prints its
# key=value lines (status, applied, dropped, branch) for $GITHUB_OUTPUT.
# Exits with the rebase's status: 0 rebased (patches upstream carries are
# dropped), 4 conflict, 2 refused, 3 error.
#
#   UPSTREAM_REPO          owner/name for the texts (default vllm-project/vllm)
#   RUN_URL                link to the workflow run, for the texts
#   VLLM_PATCHKIT_PATCHES  the series directory (default: this repo's patches/)
set -euo pipefail

usage="usage: $0 CHECKOUT REF OUT"
checkout=${1:?$usage}
ref=${2:?$usage}
out=${3:?$usage}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
patches=${VLLM_PATCHKIT_PATCHES:-$here/../../patches}

# A ref must not pass for an option of the git commands it reaches.
if [[ $ref == -* ]] || ! git check-ref-format --allow-onelevel "$ref"; then
    echo "error: '$ref' is not a valid ref name" >&2
    exit 2
fi
mkdir -p "$out"
rm -f "$out/rebase.json" "$out/rebase-summary.md"
status=0
vllm-patchkit --patches "$patches" rebase --ci --onto "$ref" --upstream origin \
    --summary "$out/rebase-summary.md" --json "$checkout" \
    >"$out/rebase.json" || status=$?
if ! python "$here/rebase_report.py" --rebase-json "$out/rebase.json" \
    --summary "$out/rebase-summary.md" --exit-code "$status" \
    --repo "${UPSTREAM_REPO:-vllm-project/vllm}" --ref "$ref" \
    --run-url "${RUN_URL:-}" --patches "$patches" --out "$out"; then
    echo "error: rebase_report.py failed" >&2
    exit 3
fi
exit "$status"
