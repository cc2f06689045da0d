"""``eoslog transactions list/describe/find-hanging`` show a prepared two-phase-commit
(KIP-939) transaction as such: never "hanging", awaiting its external coordinator."""

from __future__ import annotations

import json
import subprocess

from clients import ensure_topic
from test_transactions import WAIT_S
from test_transactions_cli import cli, ok
from test_two_phase_commit import TWO_PC_TIMEOUT_MS, prepare_and_kill, two_pc_broker, two_pc_config

from eoslog.client.producer import Producer
from support.harness import BrokerProcess, wait_until

__all__ = ["two_pc_broker"]  # the module-scoped fixture, shared


def two_pc_note(txn_id: str, stderr: str) -> bool:
    """A line of the tool's stderr names the id as a two-phase-commit (KIP-939) transaction."""
    return any(txn_id in line and "two-phase commit" in line.replace("two-phase-commit", "two-phase commit")
               for line in stderr.splitlines())


def test_the_transactions_tool_shows_a_prepared_2pc_transaction(two_pc_broker: BrokerProcess) -> None:
    bootstrap, topic, txn_id = two_pc_broker.bootstrap, "tool", "sink-tool"
    ensure_topic(bootstrap, topic, 2)
    state = prepare_and_kill(bootstrap, txn_id, topic)

    listed = cli(bootstrap, "list", "--transactional-id-pattern", "sink-tool", "--output", "json")
    assert json.loads(ok(listed)) == [{"transactional_id": txn_id, "coordinator_id": 0,
                                       "producer_id": state.producer_id, "state": "Ongoing",
                                       "two_phase_commit": True}]
    assert two_pc_note(txn_id, listed.stderr)
    described = cli(bootstrap, "describe", "--transactional-id", txn_id, "--output", "json")
    [d] = json.loads(ok(described))
    assert d["two_phase_commit"] and d["timeout_ms"] == TWO_PC_TIMEOUT_MS and d["state"] == "Ongoing"
    assert two_pc_note(txn_id, described.stderr)
    plain = cli(bootstrap, "describe", "--transactional-id", txn_id)  # the table is Kafka's; the note says 2PC
    assert two_pc_note(txn_id, plain.stderr) and str(TWO_PC_TIMEOUT_MS) in ok(plain)

    # Open and idle past a 0-minute timeout (A's last write was several commands ago), but
    # known to its coordinator: not hanging, and reported as the prepared transaction it is.
    found = cli(bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0", "--output", "json")
    assert json.loads(ok(found)) == []
    for partition in (0, 1):
        assert (f"not hanging: {topic}-{partition} from offset 0 is the prepared two-phase-commit transaction "
                f"of {txn_id}") in found.stderr

    with Producer(two_pc_config(bootstrap, txn_id)) as b:
        b.init_transactions(WAIT_S, keep_prepared_txn=True)
        b.complete_transaction(state, WAIT_S)
    # EndTxn is answered once PrepareCommit is written, as in Kafka; markers and CompleteCommit follow.
    runs: list[subprocess.CompletedProcess[str]] = []

    def completed() -> bool:
        runs.append(cli(bootstrap, "list", "--transactional-id-pattern", "sink-tool", "--output", "json"))
        return bool(json.loads(ok(runs[-1]))[0]["state"] == "CompleteCommit")

    wait_until(completed, "sink-tool's CompleteCommit", WAIT_S, describe=lambda: runs[-1].stdout)
    assert "note:" not in runs[-1].stderr
