#!/usr/bin/env bash
# Runs the whole system locally: installs and starts the engines (DynamoDB Local, moto), creates
# the resources from template.yaml, seeds the sample tenant, connectors, secrets and tokens, and
# runs every function in-process (local-stack up). Ctrl-C stops everything it started.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

started=0
if ! infra/engines.sh status >/dev/null 2>&1; then
    infra/engines.sh start
    started=1
fi
cleanup() {
    if [ "$started" = 1 ]; then
        infra/engines.sh stop || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
eval "$(infra/engines.sh env)"
cargo run --quiet -p local-stack -- up
