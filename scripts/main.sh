#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh) and run the main job, examples/roundtrip.py: start a local
# broker (data in ./eoslog-data, 127.0.0.1:9092 or a free port if that one is taken), do a
# produce/consume round trip with confluent-kafka, print what happened, stop the broker.
#
#   ./scripts/main.sh                  # the default run
#   ./scripts/main.sh --records 10000  # extra arguments go to the main job (see --help)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

"$ROOT/scripts/setup.sh"
printf '\n'
exec "$ROOT/.venv/bin/python" "$ROOT/examples/roundtrip.py" "$@"
