#!/usr/bin/env bash
# Put the merged matrix from the merge job's artifact into place, as data.
#
#   tools/ci/install-matrix.sh SOURCE DOCS
#
# SOURCE is the artifact the merge job uploaded: made from row files that
# jobs running release code wrote, so untrusted. Nothing in it is run. It
# must hold matrix.md and matrix.json as plain files (no links), each under
# 20 MB, matrix.json a JSON object with "rows" and "run"; anything else is
# refused (exit 2) before DOCS is touched. Then DOCS/matrix.md and
# DOCS/matrix.json are replaced; nothing else in DOCS changes.
set -euo pipefail

usage="usage: $0 SOURCE DOCS"
source_dir=${1:?$usage}
dest=${2:?$usage}
limit=$((20 * 1024 * 1024))

refuse() {
    echo "error: $*; nothing installed" >&2
    exit 2
}

[[ -d $source_dir && ! -L $source_dir ]] || refuse "$source_dir is not a directory"
[[ -d $dest && ! -L $dest ]] || refuse "$dest is not a directory"
for name in matrix.md matrix.json; do
    file=$source_dir/$name
    [[ -f $file && ! -L $file ]] || refuse "$file is not a plain file"
    (($(stat -c %s "$file") <= limit)) || refuse "$file is over 20 MB"
done
jq -e 'type == "object" and (.rows | type == "array") and (.run | type == "object")' \
    "$source_dir/matrix.json" >/dev/null 2>&1 ||
    refuse "$source_dir/matrix.json is not the matrix's JSON document"
for name in matrix.md matrix.json; do
    cp -- "$source_dir/$name" "$dest/$name.tmp"
    mv -- "$dest/$name.tmp" "$dest/$name"
done
