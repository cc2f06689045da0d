"""rdkafka_log.explain_wedge on librdkafka lines of a real wedge (test_copy[cluster-confluent]
under load): the group coordinator's handle was decommissioned before the TxnOffsetCommit that
waits for it."""

from __future__ import annotations

from pathlib import Path

from rdkafka_log import explain_wedge, instance_lines, sequence_desync

P = "%7|{t}|{tag}|rdkafka#producer-1| [thrd:{thread}]: {text}"
WEDGE = [
    P.format(t="1795671372.616", tag="COORD", thread="main",
             text="TxnCoordinator/1: Transaction coordinator is now up"),
    P.format(t="1795671372.709", tag="METADATA", thread="main", text="127.0.0.1:49945/1: 2 brokers, 1 topics"),
    P.format(t="1795671372.709", tag="FAIL", thread="127.0.0.1:49131/3",
             text="127.0.0.1:49131/3: Decommissioning this broker (after 517ms in state TRY_CONNECT)"),
    P.format(t="1795671372.709", tag="TERMINATE", thread="127.0.0.1:49131/3",
             text="127.0.0.1:49131/3: Handle is terminating in state INIT: 2 refcnts"),
    P.format(t="1795671372.857", tag="ADDOFFSETS", thread="main",
             text="AddOffsetsToTxn response from TxnCoordinator/1: NO_ERROR ()"),
    P.format(t="1795671372.857", tag="CONNECT", thread="127.0.0.1:49131/3",
             text="127.0.0.1:49131/3: Received CONNECT op"),
    *[P.format(t=f"1795671372.{858 + i}", tag="TERMINATE", thread="127.0.0.1:49131/3",
               text="127.0.0.1:49131/3: Handle is terminating in state TRY_CONNECT: 3 refcnts") for i in range(50)],
]
SENT = P.format(t="1795671372.900", tag="SEND", thread="127.0.0.1:49945/1",
                text="127.0.0.1:49945/1: Sent TxnOffsetCommitRequest (v3, 91 bytes @ 0, CorrId 23)")


def test_a_lookup_waiting_on_a_decommissioned_coordinator_is_named() -> None:
    text = explain_wedge(["{\"ev\": \"started\"}", *WEDGE])
    verdict, *excerpt = text.splitlines()
    assert verdict.startswith("librdkafka #5511") and "127.0.0.1:49131/3" in verdict
    assert "decommissioned at 1795671372.709" in verdict
    assert not any("Handle is terminating" in line for line in excerpt)  # the spin is left out
    assert any("Received CONNECT op" in line for line in excerpt)


def test_no_verdict_once_the_offsets_were_sent_or_without_a_decommission() -> None:
    assert not explain_wedge([*WEDGE, SENT]).startswith("librdkafka #5511")
    assert not explain_wedge([line for line in WEDGE if "Decommissioning" not in line]).startswith("librdkafka")
    assert explain_wedge(["{\"ev\": \"started\"}"]).startswith("no librdkafka debug lines")


def test_instance_lines_are_those_under_the_instance_marker(tmp_path: Path) -> None:
    log = tmp_path / "copier-1.log"
    log.write_text("--- instance 0 ---\na\n--- instance 1 ---\nb\nc\n--- instance 2 ---\nd\n")
    assert instance_lines(log, 1) == ["b", "c"]
    assert instance_lines(log, 2) == ["d"]
    assert instance_lines(log, 3) == []


def test_a_sequence_desynchronization_is_found_and_other_fatal_errors_are_not() -> None:
    """The line librdkafka logged in tests/interop/test_librdkafka_sequence_reuse.py (level 0,
    logged whatever the debug contexts)."""
    desync = (
        "%0|1795926717.559|FATAL|rdkafka#producer-2| [thrd:127.0.0.1:47355/0]: Fatal error: Broker: Broker "
        "received an out of order sequence number: ProduceRequest for sequence-reuse [0] with 10 message(s) "
        "failed due to sequence desynchronization with broker 0 (PID{Id:0,Epoch:0}, base seq 0, idemp state "
        "change 2073ms ago, last partition error _TRANSPORT (actions Refresh,MsgPossiblyPersisted, base seq "
        "0..9, base msgid 1, 1959ms ago)")
    fenced = P.format(t="1795922897.575", tag="FATAL", thread="main",
                      text="Fatal error: Broker: Producer attempted to produce with an old epoch: Producer fenced")
    found = sequence_desync(["{\"ev\": \"started\"}", fenced, desync])
    assert found is not None and desync.startswith(found) and "failed due to sequence desynchronization" in found
    assert sequence_desync(["{\"ev\": \"started\"}", fenced]) is None
