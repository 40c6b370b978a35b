#!/usr/bin/env bash
# Python venvs for the local tools (moto, the SAM CLI and cfn-lint, the MCP client): creates
# VENV (when it has no working interpreter) and installs the pinned requirements into it.
#
#   infra/pyvenv.sh VENV REQUIREMENT...
#
# The installer is uv (pinned below, itself installed with pip into .local/tools/uv once):
# it installs the same pins in 0.4-1.3 CPU-seconds of user time where pip took 12-33 (mcp 12,
# moto[server] 25, aws-sam-cli with cfn-lint 33; docs/ci.md), and CI runs these installs beside
# its build, which is CPU-bound. When uv cannot be had or fails (no wheel for this platform,
# the index unreachable for it, a pip-only mirror: uv does not read pip's configuration, or
# FEEDSAFE_UV=0), pip does the install, as before. Either way the venv uses this machine's
# python3 (uv is told never to download an interpreter).
#
# Several scripts may run this at once (CI starts the engines' install and the template
# checks together): the uv bootstrap is serialized by a lock.
set -euo pipefail
case "${1:-}" in -h | --help) # the comment above, as usage; no work is done
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0 ;;
esac

UV_VERSION="0.13.8"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
uv_home="$root/.local/tools/uv"
uv_bin="$uv_home/bin/uv"

log() { printf 'pyvenv: %s\n' "$*" >&2; }

if [ "$#" -lt 2 ]; then
    echo "usage: infra/pyvenv.sh VENV REQUIREMENT..." >&2
    exit 2
fi
venv="$1"
shift
python3="$(command -v python3 || true)"
if [ -z "$python3" ]; then
    echo "pyvenv: python3 not found on PATH; install Python 3 (with the venv module)" >&2
    exit 1
fi

# `uv --version` says "uv 0.13.8 (x86_64-unknown-linux-gnu)".
uv_is_pinned() {
    local version
    version="$("$uv_bin" --version 2>/dev/null)" || return 1
    [[ "$version" == "uv $UV_VERSION" || "$version" == "uv $UV_VERSION "* ]]
}

# Prints the uv to use, or nothing (then pip installs).
find_uv() {
    if [ "${FEEDSAFE_UV:-1}" = 0 ]; then
        return 0
    fi
    mkdir -p "$root/.local/tools"
    (
        # flock is util-linux's; without it (macOS) two first installs at once may both try.
        if command -v flock >/dev/null 2>&1; then flock 9; fi
        if uv_is_pinned; then
            exit 0
        fi
        rm -rf "$uv_home"
        if "$python3" -m venv "$uv_home" >&2 &&
            "$uv_home/bin/python" -m pip install --quiet --disable-pip-version-check \
                --no-compile "uv==$UV_VERSION" >&2 &&
            uv_is_pinned; then
            log "uv $UV_VERSION installed in ${uv_home#"$root/"}"
        else
            log "uv $UV_VERSION could not be installed; pip installs instead"
            rm -rf "$uv_home"
        fi
    ) 9>"$root/.local/tools/uv.lock"
    if [ -x "$uv_bin" ]; then
        printf '%s' "$uv_bin"
    fi
}

# A venv whose interpreter went away (its base python removed or moved) is made again.
if [ -e "$venv" ] && ! "$venv/bin/python" -c 'pass' >/dev/null 2>&1; then
    rm -rf "$venv"
fi

uv="$(find_uv)"
if [ -n "$uv" ]; then
    export UV_PYTHON_DOWNLOADS=never
    if { [ -x "$venv/bin/python" ] || "$uv" venv --quiet --python "$python3" "$venv"; } &&
        "$uv" pip install --quiet --python "$venv/bin/python" "$@"; then
        exit 0
    fi
    log "uv could not make ${venv#"$root/"} or install $* into it; trying pip"
fi
if [ ! -x "$venv/bin/python" ]; then
    if ! "$python3" -m venv "$venv" >&2; then
        echo "pyvenv: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2
        exit 1
    fi
fi
# A venv made by uv has no pip: ensurepip puts one in (what is installed there stays).
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    if ! "$venv/bin/python" -m ensurepip --default-pip >&2; then
        echo "pyvenv: $venv has no pip and ensurepip could not add one" >&2
        exit 1
    fi
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "$@"
