"""Metadata with its topic entries kept encoded (issue 28, ``broker/metadata_cache.py``), through a
real broker: every change is in the next response, whether it asks for every topic or names one,
and each listener's clients get that listener's address while the entries are shared.

(A cluster's leader, ISR and broker changes, and the byte-for-byte encoding at every version,
are in tests/unit/test_metadata_cache.py; topic-level authorization of a full Metadata in
tests/interop/test_security.py::test_produce_without_topic_write_and_metadata_hides_what_it_may_not_see.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clients import RawConnection, request_module
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]

from eoslog.broker.handlers.base import build
from support.harness import BrokerProcess, free_port, wait_until


def metadata(conn: RawConnection, topics: list[str] | None, version: int = 12) -> Any:
    m = request_module(3, version)
    wanted = None if topics is None else tuple(build(m.MetadataRequestTopic, name=t, topic_id=None) for t in topics)
    return conn.call(build(m.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                           include_cluster_authorized_operations=False, include_topic_authorized_operations=False))


def described(response: Any) -> dict[str, tuple[str, int, int]]:
    """topic → (its id: "None" before v10, partitions, error code)"""
    return {t.name: (str(getattr(t, "topic_id", None)), len(t.partitions), int(t.error_code)) for t in response.topics}


def test_every_topic_change_is_in_the_next_response(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("kept", 3, 1), NewTopic("other", 1, 1)])["kept"].result(60)
    with RawConnection(broker.bootstrap) as conn:
        wait_until(lambda: {"kept", "other"} <= set(described(metadata(conn, None))), "both topics listed")
        first = described(metadata(conn, None))
        assert first["kept"][1:] == (3, 0)
        for version in (0, 1, 4, 9, 12):  # each version's entries, asked twice: kept ones are the same
            for _ in range(2):
                every = metadata(conn, None if version else [], version)
                assert {t.name: len(t.partitions) for t in every.topics} == {"kept": 3, "other": 1}
                assert [int(p.partition_index) for p in every.topics[0].partitions] == [0, 1, 2]

        admin.create_partitions([NewPartitions("kept", 7)])["kept"].result(60)
        assert described(metadata(conn, None))["kept"] == (first["kept"][0], 7, 0)
        assert described(metadata(conn, ["kept"]))["kept"] == (first["kept"][0], 7, 0)
        assert described(metadata(conn, ["kept"], 4))["kept"][1:] == (7, 0)

        admin.delete_topics(["kept"])["kept"].result(60)
        assert "kept" not in described(metadata(conn, None))
        assert described(metadata(conn, ["kept"]))["kept"][1:] == (0, 3)  # UNKNOWN_TOPIC_OR_PARTITION

        admin.create_topics([NewTopic("kept", 7, 1)])["kept"].result(60)  # the same name and count again
        again = described(metadata(conn, None))["kept"]
        assert again[1:] == (7, 0) and again[0] != first["kept"][0]
        assert described(metadata(conn, ["kept"]))["kept"] == again
        assert described(metadata(conn, None))["other"] == first["other"]


def test_each_listener_is_answered_with_its_own_addresses(tmp_path: Path) -> None:
    outside, inside = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "data", overrides={
        "listeners": f"OUTSIDE://127.0.0.1:{outside},INSIDE://127.0.0.1:{inside}",
        "advertised.listeners": f"OUTSIDE://localhost:{outside},INSIDE://127.0.0.1:{inside}",
        "listener.security.protocol.map": "OUTSIDE:PLAINTEXT,INSIDE:PLAINTEXT",
        "inter.broker.listener.name": "INSIDE"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{inside}"})
        admin.create_topics([NewTopic("t", 2, 1)])["t"].result(60)
        with RawConnection(f"127.0.0.1:{outside}") as out, RawConnection(f"127.0.0.1:{inside}") as into:
            wait_until(lambda: "t" in described(metadata(out, None)), "the topic listed")
            for _ in range(2):  # the second answers from kept entries
                for conn, address in ((out, ("localhost", outside)), (into, ("127.0.0.1", inside))):
                    response = metadata(conn, None)
                    assert [(b.host, int(b.port)) for b in response.brokers] == [address]
                    assert described(response)["t"][1:] == (2, 0)
    finally:
        broker.stop()
