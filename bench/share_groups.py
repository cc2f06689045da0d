"""Share groups' throughput (issue 26): 1, 3 and 10 share consumers on ONE partition, records/s
from the first poll until every record was delivered.

    python bench/share_groups.py                       # eoslog only
    python bench/share_groups.py --against kafka       # eoslog and Apache Kafka, interleaved rounds
    python bench/share_groups.py --records 20000 --consumers 1,3 --no-save   # a quick look

Per consumer count: a fresh topic of one partition holding ``--records`` records of 100 B
(librdkafka, idempotent), a fresh share group (``share.auto.offset.reset=earliest``), and that
many confluent-kafka ``ShareConsumer`` processes (librdkafka's KIP-932 client, implicit
acknowledgement: each poll accepts the previous one's records; ``max.poll.records`` 500).
Records/s: from the first record handed out until the consumers together have been handed every
record (each reports what each poll returned); apart, the seconds from the moment every consumer,
already subscribed, is told to start polling (all at once) to the first record (joining, and the
share-partition's state initialized: Kafka's share coordinator does it a heartbeat or more after
the join, eoslog's within it). Same clients on both brokers, Kafka's default share settings on both
(``share.record.lock.duration.ms`` 30 s,
``share.partition.max.record.locks`` 2000). A share-partition hands each record to one member at a
time, and its in-flight window (the record locks) bounds how many records all members together
hold: more members on one partition split that window; they do not widen it.

Output: a table; ``bench/results/share-groups-<timestamp>.json`` and ``share-groups-latest.json``
(with ``--against kafka``: ``share-groups-kafka-*``, the eoslog/Kafka ratios, and a plot).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import against
from common import RESULTS_DIR, prepare_run

CONSUMER = r"""
import json, signal, sys
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "client.id": sys.argv[4]})
c.subscribe([sys.argv[3]])
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
print("ready", flush=True)
sys.stdin.readline()  # "go": every consumer polls from the same moment
while not stop:
    got = [m for m in c.poll(0.5) if m.error() is None]
    if got:
        print(len(got), flush=True)
c.close()
"""


def produce(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise SystemExit("the records were not all produced")


def prepare(bootstrap: str, topic: str, group: str, records: int) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                             incremental_configs=[entry])]).values():
        f.result(60)
    produce(bootstrap, topic, records)


def one_case(bootstrap: str, consumers: int, records: int, timeout_s: float) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"share-bench-{consumers}-{tag}", f"share-bench-{tag}"
    prepare(bootstrap, topic, group, records)
    delivered = [0] * consumers
    first: list[float] = []  # when the first record was handed out
    ready = [threading.Event() for _ in range(consumers)]
    procs = [subprocess.Popen([sys.executable, "-c", CONSUMER, bootstrap, group, topic, f"c{i}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for i in range(consumers)]

    def follow(i: int) -> None:
        out = procs[i].stdout
        assert out is not None
        for line in out:
            if line.strip() == "ready":
                ready[i].set()
            else:
                if not first:
                    first.append(time.monotonic())
                delivered[i] += int(line)

    for i in range(consumers):
        threading.Thread(target=follow, args=(i,), daemon=True).start()
    try:
        for e in ready:
            if not e.wait(120):
                raise SystemExit("a share consumer did not start")
        started = time.monotonic()
        for p in procs:  # subscribed, none has polled yet: none joined the group before the others
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        while sum(delivered) < records:
            if time.monotonic() - started > timeout_s:
                raise SystemExit(f"{consumers} consumers: {sum(delivered)} of {records} records after {timeout_s} s")
            time.sleep(0.01)
        done = time.monotonic()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    seconds = done - first[0]
    return {"consumers": consumers, "records": records, "seconds": round(seconds, 3),
            "records_per_s": round(records / seconds), "first_record_s": round(first[0] - started, 3),
            "per_consumer": list(delivered)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    work, data_dir, facts = prepare_run(args.work_dir, "share-bench-", None)
    broker = against.broker_for(args, data_dir, {}).start()
    try:
        cases = [one_case(broker.bootstrap, n, args.records, args.timeout) for n in args.consumers]
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return {"benchmark": "share-groups", "side": getattr(args, "side", "eoslog"),
            "timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "load_avg_at_start": [round(x, 2) for x in os.getloadavg()], "machine": facts, "cases": cases}


def figures(result: dict[str, Any]) -> against.Figures:
    out: against.Figures = {}
    for c in result["cases"]:
        out[f"{c['consumers']} consumer(s), records/s"] = (float(c["records_per_s"]), True)
        out[f"{c['consumers']} consumer(s), s to the first record"] = (float(c["first_record_s"]), False)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--consumers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 3, 10])
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a case may take")
    p.add_argument("--work-dir", type=Path)
    p.add_argument("--no-save", action="store_true")
    against.add_flag(p)
    args = p.parse_args()
    if args.against:
        return against.main("share-groups", args, run, figures, print)
    result = run(args)
    for c in result["cases"]:
        print(f"{c['consumers']:>3} consumer(s): {c['records_per_s']:>8} records/s "
              f"({c['seconds']} s after the first record, {c['first_record_s']} s after subscribing; "
              f"per consumer {c['per_consumer']})")
    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stamp = result["timestamp"].replace(":", "").replace("-", "")[:15]
        for path in (RESULTS_DIR / f"share-groups-{stamp}.json", RESULTS_DIR / "share-groups-latest.json"):
            path.write_text(json.dumps(result, indent=1) + "\n")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
