#!/usr/bin/env bash
# Put the refreshed series from the nightly's artifact into place, as data.
#
#   tools/ci/install-series.sh SOURCE PATCHES
#
# SOURCE is the patches/ directory of the artifact the rebase job uploaded;
# that job ran upstream code, so its files are untrusted: nothing in them is
# run, and SOURCE must hold only plain files named `series` or
# NNNN-NAME.patch (NAME: letters, digits, ".", "_", "-"). Every
# non-comment line of SOURCE/series must name one of those patches. Anything
# else is refused (exit 2) before PATCHES is touched. Then the series file and
# the NNNN-*.patch files of PATCHES are replaced by SOURCE's (so a patch
# dropped as upstreamed disappears); other files in PATCHES stay.
set -euo pipefail

usage="usage: $0 SOURCE PATCHES"
source_dir=${1:?$usage}
dest=${2:?$usage}
patch_re='^[0-9]{4}-[A-Za-z0-9._-]+\.patch$'

refuse() {
    echo "error: $*; nothing installed" >&2
    exit 2
}

[[ -d $source_dir && ! -L $source_dir ]] || refuse "$source_dir is not a directory"
[[ -d $dest && ! -L $dest ]] || refuse "$dest is not a directory"
[[ -f $source_dir/series && ! -L $source_dir/series ]] ||
    refuse "$source_dir has no series file"

names=()
while IFS= read -r -d '' entry; do
    name=${entry##*/}
    if [[ -L $entry || ! -f $entry ]]; then
        refuse "$source_dir/$name is not a plain file"
    fi
    if [[ $name != series && ! $name =~ $patch_re ]]; then
        refuse "unexpected file '$name' in $source_dir (only series and NNNN-*.patch)"
    fi
    [[ $name == series ]] || names+=("$name")
done < <(find "$source_dir" -mindepth 1 -maxdepth 1 -print0)

while IFS= read -r line || [[ -n $line ]]; do
    line=${line%$'\r'}
    [[ -z ${line//[[:space:]]/} || $line == \#* ]] && continue
    if [[ ! $line =~ $patch_re || ! -f $source_dir/$line ]]; then
        refuse "series names '$line', which is not a patch in $source_dir"
    fi
done <"$source_dir/series"

find "$dest" -mindepth 1 -maxdepth 1 \( -name series -o -name '[0-9][0-9][0-9][0-9]-*.patch' \) \
    -delete
cp -- "$source_dir/series" "$dest/series"
for name in "${names[@]}"; do
    cp -- "$source_dir/$name" "$dest/$name"
done
echo "installed series and ${#names[@]} patch(es) into $dest" >&2
