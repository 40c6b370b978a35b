#!/usr/bin/env bash
# Starts the local engines and creates the stack's resources from template.yaml, with the sample
# connectors seeded. Stop with `infra/engines.sh stop`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
infra/engines.sh start
eval "$(infra/engines.sh env)"
cargo run --quiet -p local-stack -- resources
