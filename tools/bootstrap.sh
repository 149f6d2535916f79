#!/usr/bin/env bash
# Create or refresh the project venv from requirements/constraints.txt.
#
# Idempotent: a stamp in the venv records a hash of the inputs (the pins,
# pyproject.toml and the Python version); when it matches, this returns in
# well under a second. Prints the venv's path on stdout, progress on stderr:
# pip's own at a terminal, else a line per step naming what it installs.
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
# The terminal, if stderr is one, kept as fd 3 for the heartbeat: the steps
# below redirect stderr to the log.
exec 3>&2

# At a terminal, a line through every 8 s of a long step: pip is silent for
# minutes while it unpacks torch and vLLM, and so are `python -m venv` and
# the final import check for a quarter of a minute. The line clears pip's
# progress bar, which pip redraws below it.
beat=
trap '[[ -z $beat ]] || kill "$beat" 2>/dev/null' EXIT
heartbeat() {
    local began=$SECONDS nap=
    trap '[[ -z $nap ]] || kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
        sleep 8 &
        nap=$!
        wait "$nap"
        printf '\r\033[K' >&3
        say "  ... $1 ($((SECONDS - began))s)" 2>&3
    done
}

# beating WHAT COMMAND...: COMMAND, with the heartbeat at a terminal.
beating() {
    local what=$1 code=0
    shift
    if [[ -t 3 ]]; then
        heartbeat "$what" >/dev/null 2>&1 &
        beat=$!
    fi
    "$@" || code=$?
    if [[ -n $beat ]]; then
        kill "$beat"
        wait "$beat" 2>/dev/null || true
        beat=
    fi
    return "$code"
}

pip_step() {
    # At a terminal, pip's own output and progress bars (an install of about
    # 3 GB takes minutes); otherwise one line per step naming what it
    # installs, and pip's output in the log, shown only when the step fails.
    local what=$1 installs=$2
    shift 2
    say "$what: $installs"
    if [[ -t 2 ]]; then
        if ! beating "$what" "$venv/bin/python" -m pip "$@" >&2; then
            say "error: '$what' failed (pip's output above)"
            exit 1
        fi
    elif ! "$venv/bin/python" -m pip "$@" >>"$log" 2>&1; then
        grep -v '^WARNING: Location' "$log" | tail -n 40 >&2
        say "error: '$what' failed; full pip log: $log"
        exit 1
    fi
}

# The pins of a requirements file, on one line: what a step installs.
pins_of() {
    grep -E '^[A-Za-z0-9_.-]+==' "$1" | tr '\n' ' ' | sed 's/ $//'
}

rm -f "$venv/.bootstrap-stamp"
if [[ ! -x $venv/bin/python ]]; then
    say "creating $venv"
    beating "creating $venv" "$python" -m venv "$venv"
fi
# torch first, on its own: resolving it inside the vLLM install could pick
# a GPU build, while the exact pin takes the CPU build where pip offers one.
torch_pin=$(grep -E '^torch==' "$pins")
pip_step "installing torch (pinned)" "$torch_pin" install \
    --disable-pip-version-check -c "$pins" "$torch_pin"
pip_step "installing vLLM and the dev tools (pinned)" "$(pins_of "$pins")" \
    install --disable-pip-version-check -r "$pins"
pip_step "installing the documentation tools (pinned)" "$(pins_of "$docs_pins")" \
    install --disable-pip-version-check -c "$pins" -r "$docs_pins"
# PyPI's torchvision cannot load beside the CPU torch, and transformers then
# breaks `import vllm`; nothing here needs these three.
pip_step "removing" "torchvision torchaudio torchcodec" uninstall -y \
    torchvision torchaudio torchcodec
# Both products, editable: the overlay (root pyproject.toml) and the toolkit
# (tools/pyproject.toml). Their dependencies are among the pins above.
pip_step "installing this project (editable)" "vllm-overlay ($root), \
vllm-patchkit ($root/tools)" install --disable-pip-version-check --no-deps \
    -e "$root" -e "$root/tools"
say "checking that the venv imports vllm, torch, triton and this project"
beating "checking the venv" "$venv/bin/python" -c \
    'import vllm, torch, triton, vllm_overlay, vllm_patchkit.cli' >>"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    say "error: the new venv cannot import vllm, torch, triton and this project"
    exit 1
}
echo "$stamp" >"$venv/.bootstrap-stamp"
rm -f "$log"
say "ready: $venv (its commands: $venv/bin/vllm-patchkit ..., or \`. $venv/bin/activate\` first)"
echo "$venv"
