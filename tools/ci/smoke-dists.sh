#!/usr/bin/env bash
# The release job's smoke test: each wheel installed, not editable, into a
# fresh venv of its own, and run from there.
#
#   tools/ci/smoke-dists.sh DIST VERSION
#
# - the overlay alone, with --no-deps (it declares none, and must run
#   without vLLM or torch for these): `python -m vllm_overlay --version`
#   prints VERSION, `--help` answers, and `--quick --json` finds its
#   vLLM plugin entry point registered (and no vLLM);
# - the toolkit with the overlay wheel beside it (it pins that exact
#   version, which is on no index before the release) and the dependencies
#   it declares, from the package index pip is configured with:
#   `vllm-patchkit --version` prints VERSION, `--help` answers. Neither needs
#   torch or vLLM (the commands that do say so and exit 3).
#   PYTHON  interpreter whose pip installs into the venvs (default: python3)
# Exit 0; 1 when a check fails; 2 on bad input.
set -euo pipefail

usage="usage: $0 DIST VERSION"
dist=${1:?$usage}
version=${2:?$usage}
python=${PYTHON:-python3}
for wheel in vllm_overlay vllm_patchkit; do
    if [[ ! -f $dist/$wheel-$version-py3-none-any.whl ]]; then
        echo "error: no $dist/$wheel-$version-py3-none-any.whl" >&2
        exit 2
    fi
done
dist=$(cd "$dist" && pwd)
work=$(mktemp -d -t vllm-overlay-smoke.XXXXXX)
trap 'rm -rf "$work"' EXIT
# Run from the scratch directory, never the checkout: `python -m` puts the
# working directory first on sys.path, and the checkout's vllm_overlay/
# would answer instead of the installed wheel.
cd "$work"

fresh_venv() {
    "$python" -m venv --without-pip "$work/$1"
}

install() {
    local venv=$1
    shift
    "$python" -m pip --python "$work/$venv/bin/python" install --quiet \
        --disable-pip-version-check "$@"
}

expect() {
    local what=$1 want=$2 got=$3
    if [[ $got != "$want" ]]; then
        echo "error: $what printed '$got', not '$want'" >&2
        exit 1
    fi
    echo "smoke-dists: $what: $got" >&2
}

overlay_wheel=$dist/vllm_overlay-$version-py3-none-any.whl
toolkit_wheel=$dist/vllm_patchkit-$version-py3-none-any.whl

fresh_venv overlay
install overlay --no-deps "$overlay_wheel"
expect "python -m vllm_overlay --version" "vllm-overlay $version" \
    "$(env -u PYTHONPATH "$work/overlay/bin/python" -m vllm_overlay --version)"
env -u PYTHONPATH "$work/overlay/bin/python" -m vllm_overlay --help >/dev/null
# Its doctor from the source alone: the wheel's vLLM plugin entry point is
# registered, and a venv without vLLM is said to be one.
# Without vLLM there is nothing to judge: exit 3 (cannot judge) or 0.
status=0
env -u PYTHONPATH "$work/overlay/bin/python" -m vllm_overlay --quick --json \
    >"$work/doctor.json" || status=$?
if [[ $status -ne 0 && $status -ne 3 ]]; then
    echo "smoke-dists: python -m vllm_overlay --quick exited $status" >&2
    exit 1
fi
"$work/overlay/bin/python" - "$work/doctor.json" <<'CHECK' || exit 1
import json, sys
report = json.load(open(sys.argv[1]))
if report["entry_point_registered"] is not True:
    sys.exit("error: the overlay wheel's vllm.general_plugins entry point is missing")
if report["vllm_version"] != "not installed":
    sys.exit(f"error: the smoke venv has a vLLM: {report['vllm_version']}")
print("smoke-dists: python -m vllm_overlay --quick: entry point registered", file=sys.stderr)
CHECK

fresh_venv toolkit
install toolkit "$overlay_wheel" "$toolkit_wheel"
expect "vllm-patchkit --version" "vllm-patchkit $version" \
    "$(env -u PYTHONPATH "$work/toolkit/bin/vllm-patchkit" --version)"
env -u PYTHONPATH "$work/toolkit/bin/vllm-patchkit" --help >/dev/null
