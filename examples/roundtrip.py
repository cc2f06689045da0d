"""The main job (run by ``scripts/main.sh``): a produce/consume round trip through eoslog.

1. Start ``eoslog broker`` as a subprocess (``local_broker.py``) on the embedded default: data in
   ``./eoslog-data``, listening on 127.0.0.1:9092. If that port is taken, say so, pick a
   free port and a throw-away data directory (a second broker must never share a data
   directory with one that may be running), and say which.
2. Create the topic (or reuse it), produce keyed records with headers through
   confluent-kafka (librdkafka) with acks=all.
3. Consume them back from the offsets the producer was given and check that every
   record came back byte-identical and in order within its partition.
4. Print what happened, then stop the broker with SIGTERM (a clean shutdown).

Later issues turn this job into the Spark pipeline; the shape stays: broker up, the work,
a report, broker down. ``--bootstrap HOST:PORT`` skips steps 1 and 4 and uses a broker
that is already running.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka import libversion as librdkafka_version
from confluent_kafka.admin import AdminClient, NewTopic
from local_broker import (
    DEFAULT_DATA_DIR,
    DEFAULT_LISTEN,
    JobError,
    LocalBroker,
    exit_status,
    plan_broker,
    print_verdict,
)
from rich.console import Console
from rich.markup import escape
from rich.table import Table

SAMPLE_ROWS = 5

console = Console(highlight=False)


# -- the round trip -------------------------------------------------------------------


@dataclass
class Sent:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    seq: int


@dataclass
class RoundTrip:
    topic: str
    partitions: int = 0
    topic_origin: str = ""  # how the topic came to be there, for the report
    sent: dict[tuple[int, int], Sent] = field(default_factory=dict)  # (partition, offset)
    produce_errors: list[str] = field(default_factory=list)
    produce_s: float = 0.0
    received: list[tuple[int, int, bytes, bytes, list[tuple[str, bytes]]]] = field(
        default_factory=list
    )
    consume_s: float = 0.0
    mismatches: list[str] = field(default_factory=list)
    watermarks: dict[int, tuple[int, int]] = field(default_factory=dict)


def ensure_topic(bootstrap: str, job: RoundTrip, partitions: int) -> None:
    """Create the topic with CreateTopics; fall back to auto-creation through Metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log.connection.close": False})
    futures = admin.create_topics(
        [NewTopic(job.topic, num_partitions=partitions, replication_factor=1)],
        request_timeout=15, operation_timeout=15,
    )
    try:
        futures[job.topic].result(timeout=20)
        job.topic_origin = "created"
    except KafkaException as e:
        err = e.args[0]
        if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            job.topic_origin = "exists"
        else:
            job.topic_origin = "auto-created or existing"
            console.print(f"[yellow]CreateTopics failed ({err.str()}); relying on "
                          "auto.create.topics.enable instead")
    deadline = time.monotonic() + 20
    while True:
        md = admin.list_topics(job.topic, timeout=10)  # auto-creates when allowed
        topic_md = md.topics.get(job.topic)
        if topic_md is not None and topic_md.error is None and topic_md.partitions:
            job.partitions = len(topic_md.partitions)
            return
        if time.monotonic() > deadline:
            why = topic_md.error.str() if topic_md is not None and topic_md.error else "not listed"
            raise JobError(f"topic {job.topic!r} is not available: {why}")
        time.sleep(0.2)


def produce(bootstrap: str, job: RoundTrip, records: int, run_id: str) -> None:
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "client.id": "eoslog-roundtrip",
        "acks": "all",
        "linger.ms": 5,
        "log.connection.close": False,
    })

    def on_delivery(sent: Sent, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            job.produce_errors.append(f"record {sent.seq}: {err.str()}")
        else:
            job.sent[(msg.partition(), msg.offset())] = sent

    started = time.monotonic()
    for seq in range(records):
        key = f"key-{seq:06d}".encode()
        value = json.dumps({"run": run_id, "seq": seq})
        headers = [("run", run_id.encode()), ("seq", str(seq).encode())]
        sent = Sent(key, value.encode(), headers, seq)
        while True:
            try:
                producer.produce(job.topic, key=key, value=sent.value, headers=headers,
                                 on_delivery=functools.partial(on_delivery, sent))
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(30)
    job.produce_s = time.monotonic() - started
    if left:
        job.produce_errors.append(f"{left} records still unacknowledged after 30 s")


def consume(bootstrap: str, job: RoundTrip, timeout_s: float) -> None:
    """Read every partition from the first offset we wrote until all our records are back."""
    first: dict[int, int] = {}
    for partition, offset in job.sent:
        first[partition] = min(offset, first.get(partition, offset))
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "eoslog-roundtrip",  # required by librdkafka; nothing is committed
        "enable.auto.commit": False,
        "log.connection.close": False,
    })
    consumer.assign([TopicPartition(job.topic, p, o) for p, o in sorted(first.items())])
    wanted = set(job.sent)
    started = time.monotonic()
    try:
        while wanted and time.monotonic() - started < timeout_s:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is not None:
                    job.mismatches.append(f"consumer error: {msg.error().str()}")
                    continue
                where = (msg.partition(), msg.offset())
                if where in wanted:
                    wanted.discard(where)
                    job.received.append((*where, msg.key(), msg.value(), msg.headers() or []))
        job.consume_s = time.monotonic() - started
        for p in range(job.partitions):
            job.watermarks[p] = consumer.get_watermark_offsets(
                TopicPartition(job.topic, p), timeout=10
            )
    finally:
        consumer.close()
    if wanted:
        job.mismatches.append(f"{len(wanted)} acknowledged records did not come back "
                              f"within {timeout_s:.0f} s")


def verify(job: RoundTrip) -> None:
    """Every record byte-identical; per partition, offsets and production order increase."""
    last_seq: dict[int, int] = {}
    last_offset: dict[int, int] = {}
    for partition, offset, key, value, headers in job.received:
        sent = job.sent[(partition, offset)]
        if (key, value, headers) != (sent.key, sent.value, sent.headers):
            job.mismatches.append(f"{job.topic}-{partition}@{offset} differs from what was sent")
        if offset <= last_offset.get(partition, -1) or sent.seq <= last_seq.get(partition, -1):
            job.mismatches.append(f"{job.topic}-{partition}@{offset} arrived out of order")
        last_offset[partition] = offset
        last_seq[partition] = sent.seq


# -- the report -----------------------------------------------------------------------


def rate(count: float, seconds: float) -> str:
    return f"{count / seconds:,.0f}" if seconds > 0 else "-"


def report(job: RoundTrip) -> None:
    n_sent, n_back = len(job.sent), len(job.received)
    payload = sum(len(s.key) + len(s.value) for s in job.sent.values())
    console.print(
        f"[bold]produce[/]  {n_sent:,} records acknowledged ({payload / 1024:,.1f} KiB of keys "
        f"and values, with headers) to [cyan]{job.topic}[/], acks=all, in {job.produce_s:.2f} s "
        f"({rate(n_sent, job.produce_s)} records/s)"
    )
    console.print(
        f"[bold]consume[/]  {n_back:,} records back in {job.consume_s:.2f} s "
        f"({rate(n_back, job.consume_s)} records/s)"
    )

    table = Table(title=f"records of this run per partition of {job.topic}",
                  title_justify="left")
    for name in ("partition", "records", "first offset", "last offset", "log start",
                 "high watermark"):
        table.add_column(name, justify="right")
    by_partition: dict[int, list[int]] = defaultdict(list)
    for partition, offset in job.sent:
        by_partition[partition].append(offset)
    for p in range(job.partitions):
        offsets = by_partition.get(p, [])
        low, high = job.watermarks.get(p, (-1, -1))
        table.add_row(
            str(p), f"{len(offsets):,}",
            str(min(offsets)) if offsets else "-", str(max(offsets)) if offsets else "-",
            str(low), str(high),
        )
    table.add_section()
    table.add_row("all", f"{n_sent:,}", "", "", "", "")
    console.print(table)

    sample = Table(title=f"first {SAMPLE_ROWS} records read back", title_justify="left")
    for name in ("partition", "offset", "key", "value", "headers"):
        sample.add_column(name, overflow="fold")
    for partition, offset, key, value, headers in sorted(job.received)[:SAMPLE_ROWS]:
        sample.add_row(
            str(partition), str(offset), key.decode(), value.decode(),
            ", ".join(f"{k}={v.decode()}" for k, v in headers),
        )
    console.print(sample)


# -- the job --------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=10_000,
                    help="records to produce (default 10000)")
    ap.add_argument("--topic", default="roundtrip", help="topic name (default roundtrip)")
    ap.add_argument("--partitions", type=int, default=3,
                    help="partitions when the topic is created (default 3)")
    ap.add_argument("--data-dir", type=Path, default=None,
                    help=f"broker data directory (default ./{DEFAULT_DATA_DIR})")
    ap.add_argument("--listen", default=None, help=f"broker HOST:PORT (default {DEFAULT_LISTEN})")
    ap.add_argument("--bootstrap", default=None,
                    help="use a broker already running at HOST:PORT instead of starting one")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds to wait for the broker and for the records (default 60)")
    args = ap.parse_args(argv)
    if args.records < 1 or args.partitions < 1:
        ap.error("--records and --partitions must be at least 1")
    return args


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    run_id = uuid.uuid4().hex[:8]
    job = RoundTrip(args.topic)
    broker: LocalBroker | None = None
    error: str | None = None
    console.rule(f"[bold]eoslog round trip[/] (run {run_id}, librdkafka "
                 f"{librdkafka_version()[0]})")
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
            console.print(f"[bold]broker[/]   using the broker at {bootstrap}")
        else:
            broker = plan_broker(console, args.listen, args.data_dir, "eoslog-roundtrip-")
            took = broker.start(args.timeout)
            assert broker.proc is not None
            bootstrap = broker.bootstrap
            console.print(f"[bold]broker[/]   started (pid {broker.proc.pid}) in {took:.2f} s: "
                          f"{broker.ready_line}")
            console.print(f"           log: {broker.log_path}")

        ensure_topic(bootstrap, job, args.partitions)
        console.print(f"[bold]topic[/]    {job.topic}: {job.topic_origin}, "
                      f"{job.partitions} partition{'s' if job.partitions != 1 else ''}")
        produce(bootstrap, job, args.records, run_id)
        if job.sent:
            consume(bootstrap, job, args.timeout)
            verify(job)
        report(job)
    except (JobError, KafkaException) as e:
        error = str(e)
        console.print("[bold red]error:[/] " + escape(error))
    finally:
        if broker is not None:
            problem = broker.finish(console, failed=bool(error or job.produce_errors or job.mismatches))
            if problem:
                job.mismatches.append(problem)
    if error is not None:
        return 2

    problems = job.produce_errors + job.mismatches
    elapsed = time.monotonic() - started
    partitions = f"each of its {job.partitions} partitions" if job.partitions > 1 else "its partition"
    return print_verdict(
        console, problems, failed_title="round trip FAILED", ok_title="round trip OK",
        ok_text=f"{len(job.received):,} of {len(job.sent):,} records came back byte-identical "
                f"(key, value, headers), in order within {partitions}.\nTotal time {elapsed:.2f} s.",
    )


def main(argv: list[str] | None = None) -> int:
    return exit_status(lambda: run(parse_args(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
