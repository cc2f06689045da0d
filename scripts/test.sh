#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh) and run every check: ruff, mypy, then the whole pytest suite.
#
#   ./scripts/test.sh                 # everything: what CI runs, on EOSLOG_TEST_WORKERS (3) workers
#   ./scripts/test.sh tests/unit -x   # extra arguments go to pytest (one process)
#   ./scripts/test.sh --allow-skips   # a developer's machine without e.g. Java: skip, not fail
#
# A missing system dependency (Java 17, kcat, ...) is an error, in the set-up and in the tests,
# unless skips were allowed (--allow-skips or EOSLOG_ALLOW_SKIPS=1; refused under CI=true).
# All three checks run even when one fails, so one run shows every problem; the exit
# status is non-zero if any failed. pytest collecting no test at all (exit 5) is a failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

for arg in "$@"; do
    if [[ "$arg" == "--allow-skips" ]]; then export EOSLOG_ALLOW_SKIPS=1; fi
done
if [[ "${EOSLOG_ALLOW_SKIPS:-}" =~ ^(1|[Tt]rue|yes|on)$ ]]; then
    export EOSLOG_STRICT_DEPS=0
else
    export EOSLOG_STRICT_DEPS=1
fi
"$ROOT/scripts/setup.sh"
BIN="$ROOT/.venv/bin"

if [[ -t 1 ]]; then
    _bold=$'\e[1m' _green=$'\e[32m' _red=$'\e[31m' _off=$'\e[0m'
else
    _bold="" _green="" _red="" _off=""
fi

declare -a results=()
failed=0
run_check() {
    local name="$1"; shift
    printf '\n%s==> %s%s  (%s)\n' "$_bold" "$name" "$_off" "$*"
    local start=$SECONDS rc=0
    "$@" || rc=$?
    local took=$((SECONDS - start))
    if [[ $name == pytest && $rc -eq 5 ]]; then
        printf '%serror:%s pytest collected no tests (exit 5); that counts as a failure\n' \
            "$_red" "$_off" >&2
    fi
    if [[ $rc -eq 0 ]]; then
        results+=("${_green}passed${_off}  $name (${took}s)")
    else
        results+=("${_red}FAILED${_off}  $name (exit $rc, ${took}s)")
        failed=1
    fi
}

run_check ruff "$BIN/ruff" check .
run_check mypy "$BIN/mypy" src/eoslog
# Brokers started by tests are subprocesses of this interpreter; unbuffered output
# keeps their log lines in order with pytest's.
# The whole suite (no arguments, or only --allow-skips) runs on pytest-xdist's workers, the tests
# that share a module- or package-scoped broker, cluster or JVM on one worker:
# tests/support/distribution.py. EOSLOG_TEST_WORKERS=0 runs it in one process.
if [[ $# -eq 0 || ( $# -eq 1 && "$1" == "--allow-skips" ) ]]; then
    workers="${EOSLOG_TEST_WORKERS:-3}"
    if [[ "$workers" == 0 ]]; then
        set -- tests "$@"
    else
        set -- tests -n "$workers" --dist loadgroup --no-loadscope-reorder "$@"
    fi
fi
PYTHONUNBUFFERED=1 run_check pytest "$BIN/python" -m pytest "$@"

printf '\n%s==> summary%s\n' "$_bold" "$_off"
printf '    %s\n' "${results[@]}"
exit "$failed"
