#!/usr/bin/env bash
# A first look at eoslog: a broker with its Prometheus metrics, the payments pipeline running
# against it, and the web console — one command.
#
#   ./scripts/first_look.sh [--listen 127.0.0.1:8080]
#
# Sets up .venv and Java (scripts/setup.sh), starts a broker on a free port with two-phase
# commit on and metrics.listener on another free port (data in a temporary directory), runs
# examples/payments_pipeline.py against it in the background (its output in
# ./eoslog-first-look-pipeline.log), and serves `eoslog console` in the foreground: open the
# URL it prints and watch the transactions pin and free the LSO, and the Spark job's group lag
# fall. Ctrl-C stops the console, the pipeline and the broker.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
EOSLOG_REQUIRE_JAVA=1 "$ROOT/scripts/setup.sh"
PY="$ROOT/.venv/bin/python"
listen="127.0.0.1:8080"
[[ "${1:-}" == "--listen" && -n "${2:-}" ]] && listen="$2"

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port="$(free_port)"
metrics_port="$(free_port)"
data="$(mktemp -d -t eoslog-first-look-XXXXXX)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$data"
}
trap cleanup EXIT INT TERM

"$PY" -m eoslog broker --data-dir "$data/broker" --listen "127.0.0.1:$port" \
    --override transaction.two.phase.commit.enable=true \
    --override "metrics.listener=http://127.0.0.1:$metrics_port" >"$data/ready" 2>"$ROOT/eoslog-first-look-broker.log" &
pids+=($!)
for _ in $(seq 1 600); do grep -q "ready on" "$data/ready" 2>/dev/null && break; sleep 0.1; done
grep -q "ready on" "$data/ready" || { echo "the broker did not start; see eoslog-first-look-broker.log" >&2; exit 2; }
echo "broker on 127.0.0.1:$port, metrics on http://127.0.0.1:$metrics_port/metrics"

"$PY" "$ROOT/examples/payments_pipeline.py" --bootstrap "127.0.0.1:$port" --work-dir "$data/spark" \
    >"$ROOT/eoslog-first-look-pipeline.log" 2>&1 &
pids+=($!)
echo "payments pipeline running (log: eoslog-first-look-pipeline.log)"

# In the background and waited for, so that a TERM reaches the trap at once.
# --no-auth: the broker here has no SASL listener to log in with; the console refuses it off loopback.
"$PY" -m eoslog console --bootstrap-server "127.0.0.1:$port" --listen "$listen" --no-auth \
    --metrics "http://127.0.0.1:$metrics_port/metrics" &
pids+=($!)
wait "$!"
