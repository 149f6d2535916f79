#!/usr/bin/env bash
# The merge job: every release job's row file into the one table.
#
#   tools/ci/matrix-merge.sh ROWS OUT DOCS [RUN_URL]
#
# ROWS holds one directory per downloaded artifact, each with a
# matrix-rows.json; they are data (the jobs that wrote them ran release
# code), read by `vllm-patchkit matrix --merge` alone. Writes OUT/matrix.md
# and OUT/matrix.json as one unsharded run writes them, and the pull
# request's texts beside them (tools/ci/matrix_report.py, which compares with
# DOCS/matrix.json). Prints changed=true|false for $GITHUB_OUTPUT.
#
# Exit 2 when the row files do not make one table (a release missing or
# twice, different code, environment or steps: the message names them) or
# one is malformed (the message names the file and the field); a merged
# table with cells that could not be judged is still proposed. Fails closed:
# exit 3 goes on only when the merge wrote the table and said that its
# cells could not all be judged; any other 3 (an unexpected error) stops here.
set -euo pipefail

usage="usage: $0 ROWS OUT DOCS [RUN_URL]"
rows=${1:?$usage}
out=${2:?$usage}
docs=${3:?$usage}
run_url=${4:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

shopt -s nullglob
files=("$rows"/*/matrix-rows.json)
if [[ ${#files[@]} -eq 0 ]]; then
    echo "error: no row file in $rows/*/matrix-rows.json" >&2
    exit 2
fi
mkdir -p "$out"
rm -f "$out/matrix.md" "$out/matrix.json"
code=0
vllm-patchkit matrix --merge "${files[@]}" --output-dir "$out" \
    >"$out/merge.log" 2>"$out/merge.err" || code=$?
cat "$out/merge.err" >&2
if [[ $code -eq 3 ]]; then
    if [[ ! -s $out/matrix.json ]] || grep -q '^vllm-patchkit: ' "$out/merge.err" ||
        ! grep -Eq '^[0-9]+ cell\(s\) could not be judged' "$out/merge.err"; then
        echo "error: matrix --merge exited 3 without a table of unjudged cells" >&2
        exit 3
    fi
elif [[ $code -ne 0 ]]; then
    exit "$code"
fi
python "$here/matrix_report.py" --out "$out" --docs "$docs" --run-url "$run_url"
