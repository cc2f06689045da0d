"""kafka_harness.skipped_transaction_markers reads Kafka 4.4's log the way test_copy's diagnosis
needs: a transaction whose markers a restarted node skipped is named, hanging when its completion
was written, harmless when the append was refused. The lines are Kafka 4.4's own, from the
kafka-eoslog copy run that hung (copier-1's abort at 05:04:22 left copy-output-0..2 and
__consumer_offsets-0 open for good)."""

from __future__ import annotations

from support.kafka_harness import skipped_transaction_markers

MANAGER = "(kafka.coordinator.transaction.TransactionMarkerChannelManager)"
PARTITIONS = "Set(__consumer_offsets-0, copy-output-1, copy-output-2, copy-output-0)"


def skipped(time: str, txn_id: str) -> str:
    return (f"[2026-11-29 {time}] INFO [Transaction Marker Channel Manager 1]: Couldn't find leader endpoint for "
            f"partitions {PARTITIONS} while trying to send transaction markers for {txn_id}, these partitions are "
            f"likely deleted already and hence can be skipped {MANAGER}")


def refused(time: str, txn_id: str) -> str:
    return (f"[2026-11-29 {time}] INFO [Transaction Marker Channel Manager 1]: No longer the coordinator for "
            f"transactionalId: {txn_id} while trying to append to transaction log, skip writing to transaction log "
            f"{MANAGER}")


def test_a_written_completion_is_a_hanging_transaction_and_a_refused_one_is_not() -> None:
    log = "\n".join([
        skipped("05:03:24,819", "copier-1"),
        refused("05:03:24,820", "copier-1"),
        "[2026-11-29 05:03:25,766] INFO [Transaction State Manager 1]: Sending txn markers for copier-1",
        skipped("05:04:22,344", "copier-1"),
        "[2026-11-29 05:04:24,203] INFO [Broker id=1] Leader copy-output-0 starts at leader epoch 6",
    ])
    assert skipped_transaction_markers(log) == [
        f"2026-11-29 05:03:24,819 copier-1: markers for {PARTITIONS} skipped; its completion was refused "
        "(sent again later)",
        f"2026-11-29 05:04:22,344 copier-1: markers for {PARTITIONS} skipped; its completion was written: "
        "a hanging transaction",
    ]


def test_another_transactional_id_refused_does_not_count() -> None:
    log = "\n".join([skipped("05:04:22,344", "copier-1"), refused("05:04:22,345", "copier-0")])
    assert skipped_transaction_markers(log)[0].endswith("a hanging transaction")


def test_a_log_without_skipped_markers_names_nothing() -> None:
    assert skipped_transaction_markers(refused("05:03:24,820", "copier-1")) == []
