"""Reproduce librdkafka #5511 on eoslog's cluster or on Apache Kafka's (not part of the suite).

    PYTHONPATH=src python tests/chaos/coordinator_decommission.py eoslog|kafka [--restart] [--idle-ms N]

A transactional librdkafka producer copies a few records with send_offsets_to_transaction (which
caches the group's coordinator), the group coordinator is killed (-9), and the producer reads
Metadata once the live brokers have left the dead one out (its session expired: Kafka's KRaft
fences it, eoslog's ZooKeeper registration expires). librdkafka 2.10+ decommissions the broker
but keeps the handle as the group's cached coordinator; the next send_offsets_to_transaction
waits for that handle to come up and never looks the coordinator up again until another
connection of the producer goes up or down (#5511), past its own timeout (#5456). Prints HUNG
when the call has not returned 30 s after its 10 s timeout; with ``--restart`` the killed
broker is back in the metadata before the call; with ``--idle-ms`` the producer closes idle
connections (``connections.max.idle.ms``), a client-side workaround: the closes re-run the lookup.
librdkafka's debug log: ``rdkafka.log``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.rawkafka import coordinator_id

TIMEOUT_S = 10.0
GRACE_S = 30.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("kind", choices=["eoslog", "kafka"])
    p.add_argument("--restart", action="store_true", help="restart the killed broker before the call")
    p.add_argument("--idle-ms", type=int, default=0, help="the producer's connections.max.idle.ms (0: never)")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix=f"decommission-{args.kind}-"))
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"{time.monotonic() - t0:7.2f}s {msg}", flush=True)

    nodes: dict[int, Any]
    if args.kind == "eoslog":
        from support.cluster_harness import Cluster
        cluster: Any = Cluster(root).start()
        nodes = dict(cluster.brokers)
    else:
        from support.kafka_harness import KafkaCluster
        cluster = KafkaCluster(root).start()
        nodes = {n.node_id: n for n in cluster.nodes}
    bootstrap = cluster.bootstrap
    say(f"{args.kind} cluster at {bootstrap}; librdkafka's log: {root / 'rdkafka.log'}")
    sys.stderr.flush()
    os.dup2(os.open(root / "rdkafka.log", os.O_WRONLY | os.O_CREAT), 2)  # librdkafka logs to stderr
    hung = True
    try:
        hung = run(bootstrap, nodes, args.restart, args.idle_ms, say)
    finally:
        for n in nodes.values():
            n.kill()
        if args.kind == "eoslog":
            cluster.zookeeper.kill()
        os._exit(1 if hung else 0)  # the hung call's thread would keep the interpreter alive


def run(bootstrap: str, nodes: dict[int, Any], restart: bool, idle_ms: int, say: Any) -> bool:
    """True when the second send_offsets_to_transaction hung."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("in", 1, 3), NewTopic("out", 3, 3)]).values():
        f.result(30)
    seed = Producer({"bootstrap.servers": bootstrap})
    for i in range(100):
        seed.produce("in", b"v%d" % i, b"k%d" % i)
    seed.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("in", 0, 0)])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t", "acks": "all",
                         "connections.max.idle.ms": idle_ms, "debug": "eos,broker,metadata,protocol"})
    producer.init_transactions(30)
    position = 0

    def copy(n: int) -> float:
        """One transaction copying n records; the seconds send_offsets_to_transaction took."""
        nonlocal position
        producer.begin_transaction()
        got = 0
        while got < n:
            for m in consumer.consume(n - got, 1.0):
                producer.produce("out", m.value(), m.key())
                got += 1
        position += got
        start = time.monotonic()
        producer.send_offsets_to_transaction([TopicPartition("in", 0, position)],
                                             consumer.consumer_group_metadata(), TIMEOUT_S)
        took = time.monotonic() - start
        producer.commit_transaction(30)
        return took

    say(f"transaction 1: send_offsets_to_transaction took {copy(10):.2f} s")
    coordinator = coordinator_id(bootstrap.split(",")[0], "g", 0)
    assert coordinator is not None
    say(f"kill -9 of broker {coordinator}, the group's coordinator")
    nodes[coordinator].kill()
    live = AdminClient({"bootstrap.servers": ",".join(n.bootstrap for i, n in nodes.items() if i != coordinator)})
    while coordinator in live.list_topics(timeout=10).brokers:
        time.sleep(0.2)
    say(f"the live brokers' Metadata leaves broker {coordinator} out")
    say(f"the producer's Metadata lists brokers {sorted(producer.list_topics(timeout=10).brokers)}")
    if restart:
        nodes[coordinator].start()
        while coordinator not in live.list_topics(timeout=10).brokers:
            time.sleep(0.2)
        say(f"broker {coordinator} is back in the Metadata")
    result: list[str] = []

    def second() -> None:
        try:
            result.append(f"send_offsets_to_transaction took {copy(10):.2f} s (timeout {TIMEOUT_S:.0f} s)")
        except Exception as e:
            result.append(f"raised {e!r}")

    thread = threading.Thread(target=second, daemon=True)
    thread.start()
    thread.join(TIMEOUT_S + GRACE_S)
    say("transaction 2: " + (result[0] if result else
                             f"HUNG: send_offsets_to_transaction has not returned after {TIMEOUT_S + GRACE_S:.0f} s"))
    return not result


if __name__ == "__main__":
    main()
