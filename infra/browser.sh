#!/usr/bin/env bash
# The browser of the operator console's test (tests/console/browser_test.py): Debian's chromium
# and chromium-driver, installed with apt when missing (as root, or through passwordless sudo).
#
#   infra/browser.sh install   install when missing; exit 0 once both are on PATH
#   infra/browser.sh status    exit 0 when both are on PATH
#
# Exit 1 says why they are not there (no apt, no root, the install failed): the caller decides
# whether that skips the browser test (a developer's machine) or fails it (CI).
set -euo pipefail
case "${1:-}" in -h | --help) # the comment above, as usage; no work is done
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0 ;;
esac

present() {
    command -v chromedriver >/dev/null 2>&1 &&
        { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }
}

case "${1:-install}" in
    status)
        if present; then
            echo "browser: $(chromium --version 2>/dev/null || chromium-browser --version), $(chromedriver --version | cut -d' ' -f1-2)"
            exit 0
        fi
        echo "browser: chromium or chromedriver is not on PATH"
        exit 1
        ;;
    install) ;;
    *) echo "usage: infra/browser.sh [install | status]" >&2; exit 2 ;;
esac

if present; then
    exec "$0" status
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "browser: chromium is missing and there is no apt-get to install it (install chromium and chromedriver yourself)"
    exit 1
fi
if [ "$(id -u)" = 0 ]; then
    as_root=()
elif sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "browser: chromium is missing and installing it needs root (sudo apt-get install chromium chromium-driver)"
    exit 1
fi
started=$SECONDS
export DEBIAN_FRONTEND=noninteractive
# A fresh machine's package lists may be stale or empty: refreshed once if the install fails.
if ! "${as_root[@]}" apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; then
    "${as_root[@]}" apt-get update -q >/dev/null 2>&1 || true
    if ! "${as_root[@]}" apt-get install -y -q chromium chromium-driver; then
        echo "browser: apt-get install chromium chromium-driver failed (output above)"
        exit 1
    fi
fi
echo "browser: installed chromium and chromium-driver in $((SECONDS - started)) s"
exec "$0" status
