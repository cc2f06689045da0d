#!/usr/bin/env bash
# Set up .venv and Java 17 (scripts/setup.sh; here a missing Java 17 is an error) and run the
# main job, examples/payments_pipeline.py: an exactly-once payments pipeline on eoslog and Spark.
#
#   - starts the embedded broker (data in ./eoslog-data, 127.0.0.1:9092 or a free port and a
#     temporary data directory if that one is taken; log in ./eoslog-broker.log);
#   - an upstream service writes ~3,000 payment events to `payments` with eoslog's
#     transactional producer (a fifth of its transactions aborted on purpose and retried,
#     5% of the events invalid);
#   - a Spark job (local[2], scratch and checkpoints in ./.spark) reads the committed events
#     with format("eoslog"), dead-letters invalid ones to `payments-dlq` with the reason, and
#     writes per-account balances per 5-minute event-time window (2-minute watermark) to
#     `balances` with the exactly-once sink; it is stopped and restarted from its checkpoints
#     half-way;
#   - a verifier recomputes every balance and dead letter from the committed input (librdkafka,
#     read_committed), prints expected vs written, and exits 1 on any difference.
#
# Takes about 1-2 minutes. Exit status: 0 all verified, 1 a difference, 2 could not run.
#
#   ./scripts/main.sh                              # the default run
#   ./scripts/main.sh --events 10000 --seconds 60  # extra arguments go to the job (see --help)
#   ./scripts/main.sh --master spark://HOST:PORT   # the Spark job on a standalone cluster instead of
#                                                  # local[2]; one on this machine: .venv/bin/python -m
#                                                  # eoslog.spark.standalone (docs/spark.md, "Running on a
#                                                  # cluster": eoslog on every executor, --conf, --py-files)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

EOSLOG_REQUIRE_JAVA=1 "$ROOT/scripts/setup.sh"
printf '\n'
exec "$ROOT/.venv/bin/python" "$ROOT/examples/payments_pipeline.py" "$@"
