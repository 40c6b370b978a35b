#!/usr/bin/env bash
# Runs the whole system locally: installs and starts the engines (DynamoDB Local, moto), creates
# the resources from template.yaml when missing, seeds the sample tenant, connectors, secrets and
# tokens, and runs every function in the function host (local-stack up).
#
#   infra/local.sh           start (or resume) the stack; its data lives in .local/data
#   infra/local.sh --fresh   stop the stack's engines, delete .local/data, start empty
#   infra/local.sh stop      stop the stack's engines (after the function host has stopped)
#   infra/local.sh status    show whether the stack's engines run
#
# The engines run in their own processes (their own session, so a Ctrl-C in this terminal does
# not reach them); the function host is this script's child. Ctrl-C stops the host gracefully
# (intake first, then the queues drain, then it stops), then the engines. If the host dies any
# other way (kill -9, a crash) or reports messages still in flight, the engines keep running,
# so that nothing acknowledged is lost: the next infra/local.sh resumes the same queues.
# What survives which stop: docs/adr/0028-what-survives-which-stop.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# The stack's own engines, apart from the test suite's (.local/engines, in memory).
export ENGINES_HOME="$root/.local/stack/engines"
export ENGINES_DATA="$root/.local/data"

fresh=0
case "${1:-}" in
    "") ;;
    --fresh) fresh=1 ;;
    stop) exec infra/engines.sh stop ;;
    status) exec infra/engines.sh status ;;
    -h | --help | help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: infra/local.sh [--fresh | stop | status | --help]" >&2; exit 2 ;;
esac

host_pid_file="$root/.local/stack/host.pid"
if [ -s "$host_pid_file" ] && kill -0 "$(cat "$host_pid_file")" 2>/dev/null &&
    tr '\0' ' ' <"/proc/$(cat "$host_pid_file")/cmdline" 2>/dev/null | grep -q "local-stack up"; then
    echo "local.sh: a function host already runs (pid $(cat "$host_pid_file")); stop it first" >&2
    exit 1
fi

if [ "$fresh" = 1 ]; then
    infra/engines.sh stop
    rm -rf "$ENGINES_DATA"
    echo "local.sh: --fresh: .local/data removed; starting empty" >&2
fi

# FEEDSAFE_PREBUILT=1: scripts/test has built target/debug/local-stack already.
if [ "${FEEDSAFE_PREBUILT:-0}" != 1 ]; then
    cargo build --quiet -p local-stack
fi
infra/engines.sh start
eval "$(infra/engines.sh env)"
export FEEDSAFE_DATA_DIR="$ENGINES_DATA/stack"

# The host runs in the background so that this script can forward the stop signal and then
# see how the host ended.
# In its own session: a Ctrl-C in the terminal reaches this script only, which passes it on
# once (a second Ctrl-C stops the host at once).
setsid "$root/target/debug/local-stack" up &
host=$!
echo "$host" >"$host_pid_file"
trap 'kill -INT "$host" 2>/dev/null || true' INT
trap 'kill -TERM "$host" 2>/dev/null || true' TERM
rc=0
while :; do
    wait "$host" && rc=0 || rc=$?
    kill -0 "$host" 2>/dev/null || break
done
rm -f "$host_pid_file"
case "$rc" in
    0)
        infra/engines.sh stop
        echo "local.sh: stopped; the data stays in .local/data (infra/local.sh resumes it)" >&2
        ;;
    75)
        echo "local.sh: messages are still in flight: the engines keep running (infra/local.sh resumes, infra/local.sh stop stops them)" >&2
        ;;
    *)
        echo "local.sh: the function host ended with status $rc; the engines keep running so that nothing acknowledged is lost (infra/local.sh resumes, infra/local.sh stop stops them)" >&2
        ;;
esac
exit "$rc"
