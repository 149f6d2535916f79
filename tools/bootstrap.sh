#!/usr/bin/env bash
# Create or refresh the project venv from requirements/constraints.txt.
#
# Idempotent: a stamp in the venv records a hash of the inputs (the pins,
# pyproject.toml and the Python version); when it matches, this returns in
# well under a second. Prints the venv's path on stdout, progress on stderr.
#
#   VLLM_OVERLAY_VENV  venv location (default: <repo>/.venv)
#   PYTHON             interpreter to build it with (default: python3.11, else python3)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${VLLM_OVERLAY_VENV:-$root/.venv}
pins=$root/requirements/constraints.txt
docs_pins=$root/requirements/docs.txt
python=${PYTHON:-$(command -v python3.11 || command -v python3)}

say() { printf 'bootstrap: %s\n' "$*" >&2; }

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    say "error: $python is older than Python 3.11"
    exit 2
}

stamp=$({
    cat "$pins" "$docs_pins" "$root/pyproject.toml" "$root/tools/pyproject.toml" "$root/tools/setup.py"
    "$python" -VV
} | sha256sum | cut -d' ' -f1)
if [[ -f $venv/.bootstrap-stamp && $(<"$venv/.bootstrap-stamp") == "$stamp" ]]; then
    echo "$venv"
    exit 0
fi

log=$(mktemp -t vllm-overlay-bootstrap.XXXXXX.log)
pip_step() {
    # pip's own output goes to the log; it is shown only when a step fails.
    local what=$1
    shift
    say "$what"
    if ! "$venv/bin/python" -m pip "$@" >>"$log" 2>&1; then
        grep -v '^WARNING: Location' "$log" | tail -n 40 >&2
        say "error: '$what' failed; full pip log: $log"
        exit 1
    fi
}

rm -f "$venv/.bootstrap-stamp"
if [[ ! -x $venv/bin/python ]]; then
    say "creating $venv"
    "$python" -m venv "$venv"
fi
# torch first, on its own: resolving it inside the vLLM install could pick
# a GPU build, while the exact pin takes the CPU build where pip offers one.
pip_step "installing torch (pinned)" install --disable-pip-version-check \
    -c "$pins" "$(grep -E '^torch==' "$pins")"
pip_step "installing vLLM and the dev tools (pinned)" install \
    --disable-pip-version-check -r "$pins"
pip_step "installing the documentation tools (pinned)" install \
    --disable-pip-version-check -c "$pins" -r "$docs_pins"
# PyPI's torchvision cannot load beside the CPU torch, and transformers then
# breaks `import vllm`; nothing here needs these three.
pip_step "removing torchvision, torchaudio, torchcodec" uninstall -y \
    torchvision torchaudio torchcodec
# Both products, editable: the overlay (root pyproject.toml) and the toolkit
# (tools/pyproject.toml). Their dependencies are among the pins above.
pip_step "installing this project's overlay and toolkit (editable)" install \
    --disable-pip-version-check --no-deps -e "$root" -e "$root/tools"
"$venv/bin/python" -c 'import vllm, torch, triton, vllm_overlay, vllm_patchkit.cli' \
    >>"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    say "error: the new venv cannot import vllm, torch, triton and this project"
    exit 1
}
echo "$stamp" >"$venv/.bootstrap-stamp"
rm -f "$log"
say "ready: $venv"
echo "$venv"
