"""Issue 27, acceptance test 3: client quotas (KIP-546) set with Kafka 4.4's ``kafka-configs.sh
--entity-type clients|users`` and enforced as Kafka enforces them (rate windows, throttle_time_ms,
the connection muted).

Producers and consumers of librdkafka and of Kafka's Java clients, each with a client id that has
a byte-rate quota, run at full speed: after a warm-up (a quota lets its first windows' worth
through at once), what each moves over 20 s is within 10 % of its quota. The broker measures
over ``quota.window.num=2`` windows of a second: with Kafka's 11, a client at full speed sends a
burst of ten windows' worth each time the window holding its previous burst expires, about every
11 s, and then trickles (Kafka's Rate forgets a burst all at once), so 20 s hold one burst or two
and what a client moves over them is half its quota or all of it; with two windows the cycle is
two seconds and 20 s average it out. Producers send requests of 16 kB (Java's default
``batch.size``; librdkafka's 1 MB would make each request two seconds of quota), the data is in
batches of 16 kB (a fetch returns at least one whole batch, and one larger than a window's worth
is throttled however it is asked for), and consumers fetch 16 kB per partition: a fetch over the
quota is answered empty, as Kafka answers it, and its throttle time is lost to the consumer. An unthrottled
producer on the same broker meanwhile moves several times as much. A transactional producer under
a quota commits its transactions (and aborts the ones it means to), and a read_committed consumer
reads exactly the committed ones. The metrics endpoint shows the throttling.
"""

from __future__ import annotations

import datetime
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.static.primitive import i32

from support.deps import require
from support.harness import BrokerProcess, free_port, wait_until
from support.kafka_harness import JVM_FLAGS, class_data_flags, kafka_classpath, run_tool, write_log_config
from support.rawkafka import (
    RawClient,
    create_topic,
    create_topics_request,
    metadata_request,
    produce_request,
    request_module,
    simple_batch,
)
from support.txn_batches import produce, write_transactions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LIMIT = 512_000  # bytes/s
WARMUP_S, MEASURE_S = 12, 20
RECORD = b"x" * 1000
TOPIC = "quota-data"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
THROTTLING_QUOTA_EXCEEDED = 89
JAVA_SOURCE = Path(__file__).parents[1] / "reference" / "java" / "QuotaRate.java"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    metrics_port = free_port()
    b = BrokerProcess(Path(tmp_path_factory.mktemp("quotas")) / "data",
                      overrides={"metrics.listener": f"http://127.0.0.1:{metrics_port}", "quota.window.num": "2"})
    b.metrics_port = metrics_port  # type: ignore[attr-defined]
    b.start()
    with RawClient(b.bootstrap) as c:
        assert create_topic(c, TOPIC, 1) == 0
        assert create_topic(c, "quota-free", 1) == 0
        assert create_topic(c, "quota-txn", 1) == 0
    # Enough for a consumer to read at the quota for the whole run, written unthrottled.
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 16384, "client.id": "filler"})
    for _ in range(LIMIT * (WARMUP_S + MEASURE_S + 12) // len(RECORD)):
        produce(p, TOPIC, RECORD)
    assert p.flush(120) == 0
    yield b
    b.stop()


def configs(broker: BrokerProcess, work: Path, *args: str) -> str:
    return run_tool(CONFIGS, ["--bootstrap-server", broker.bootstrap, *args], work).stdout


def _quota(broker: BrokerProcess, work: Path, client_id: str, key: str, value: int = LIMIT) -> None:
    out = configs(broker, work, "--alter", "--entity-type", "clients", "--entity-name", client_id,
                  "--add-config", f"{key}={value}")
    assert f"Completed updating config for client {client_id}." in out, out


class Measured(threading.Thread):
    """One librdkafka client at full speed; ``rate`` is what it moved per second after the warm-up."""

    def __init__(self, broker: BrokerProcess, client_id: str, mode: str, topic: str = TOPIC) -> None:
        super().__init__(daemon=True)
        self.broker, self.client_id, self.mode, self.topic = broker, client_id, mode, topic
        self.rate = -1.0
        self.throttled_ms = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.rate = self._produce() if self.mode == "produce" else self._consume()
        except BaseException as e:
            self.error = e

    def _stats(self, stats: str) -> None:
        import json

        doc = json.loads(stats)
        self.throttled_ms = max([self.throttled_ms, *[int(b.get("throttle", {}).get("max", 0))
                                                      for b in doc.get("brokers", {}).values()]])

    def _produce(self) -> float:
        acked = [0]

        def delivered(err: object, msg: object) -> None:
            if err is None:
                acked[0] += len(RECORD)

        p = Producer({"bootstrap.servers": self.broker.bootstrap, "client.id": self.client_id, "linger.ms": 5,
                      "batch.size": 16384, "statistics.interval.ms": 1000, "stats_cb": self._stats})
        start = time.monotonic()
        at_from = None
        while time.monotonic() < start + WARMUP_S + MEASURE_S:
            produce(p, self.topic, RECORD, on_delivery=delivered)
            p.poll(0)
            if at_from is None and time.monotonic() >= start + WARMUP_S:
                at_from = acked[0]
        moved = acked[0] - (at_from or 0)
        p.purge()  # what is still queued was never meant to be measured
        p.flush(30)
        return moved / MEASURE_S

    def _consume(self) -> float:
        c = Consumer({"bootstrap.servers": self.broker.bootstrap, "client.id": self.client_id,
                      "group.id": f"g-{self.client_id}", "enable.auto.commit": False,
                      "max.partition.fetch.bytes": 16384,
                      "statistics.interval.ms": 1000, "stats_cb": self._stats})
        c.assign([TopicPartition(self.topic, 0, 0)])
        start = time.monotonic()
        moved = 0
        while (now := time.monotonic()) < start + WARMUP_S + MEASURE_S:
            for m in c.consume(500, 0.1):
                if m.error() is None and now >= start + WARMUP_S:
                    moved += len(m.value() or b"")
        c.close()
        return moved / MEASURE_S


def _java(broker: BrokerProcess, work: Path, mode: str, client_id: str, topic: str = TOPIC) -> subprocess.Popen[str]:
    require("a JDK (javac; Java's single-file source launcher needs its compiler)", shutil.which("javac") is not None,
            "apt-get install -y openjdk-17-jdk-headless (scripts/setup.sh does it)")
    return subprocess.Popen(
        ["java", *JVM_FLAGS, *class_data_flags(),
         "-Xmx256m", f"-Dlog4j2.configurationFile={write_log_config(work, 'ERROR')}",
         "-cp", kafka_classpath(), str(JAVA_SOURCE), mode, broker.bootstrap, topic, client_id, str(WARMUP_S),
         str(MEASURE_S)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _java_rate(proc: subprocess.Popen[str]) -> tuple[float, int]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err[-3000:]
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return float(lines["RATE"]), int(lines["THROTTLED"])


def _within(rate: float, what: str) -> None:
    assert abs(rate - LIMIT) <= 0.1 * LIMIT, f"{what} moved {rate:.0f} B/s, not within 10 % of its quota {LIMIT}"


def test_kafka_configs_sets_and_describes_quotas_of_users_and_clients(broker: BrokerProcess, tmp_path: Path) -> None:
    configs(broker, tmp_path, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
            "clients", "--entity-name", "app", "--add-config", "request_percentage=150,controller_mutation_rate=10")
    configs(broker, tmp_path, "--alter", "--entity-type", "users", "--entity-default",
            "--add-config", "consumer_byte_rate=1048576")
    assert "Quota configs for user-principal 'alice', client-id 'app' are controller_mutation_rate=10.0, " \
           "request_percentage=150.0" in configs(broker, tmp_path, "--describe", "--entity-type", "users",
                                                  "--entity-name", "alice", "--entity-type", "clients")
    assert "Quota configs for the default user-principal are consumer_byte_rate=1048576.0" in configs(
        broker, tmp_path, "--describe", "--entity-type", "users")
    refused = run_tool(CONFIGS, ["--bootstrap-server", broker.bootstrap, "--alter", "--entity-type", "clients",
                                 "--entity-name", "x", "--add-config", "producer_byte_rate=1.5"], tmp_path, check=False)
    assert refused.returncode != 0 and "Configuration producer_byte_rate must be a LONG value" in refused.stderr
    for args in (["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name",
                  "app", "--delete-config", "request_percentage,controller_mutation_rate"],
                 ["--entity-type", "users", "--entity-default", "--delete-config", "consumer_byte_rate"]):
        configs(broker, tmp_path, "--alter", *args)
    assert "Quota configs" not in configs(broker, tmp_path, "--describe", "--entity-type", "users")


def test_librdkafka_producer_and_consumer_hold_to_their_quotas_and_others_are_unaffected(
        broker: BrokerProcess, tmp_path: Path) -> None:
    _quota(broker, tmp_path, "rdkafka-producer", "producer_byte_rate")
    _quota(broker, tmp_path, "rdkafka-consumer", "consumer_byte_rate")
    clients = [Measured(broker, "rdkafka-producer", "produce"), Measured(broker, "rdkafka-consumer", "consume"),
               Measured(broker, "unthrottled", "produce", "quota-free")]
    for c in clients:
        c.start()
    for c in clients:
        c.join(300)
        assert c.error is None, c.error
    producer, consumer, free = clients
    print({c.client_id: (round(c.rate), c.throttled_ms) for c in clients})
    _within(producer.rate, "librdkafka's producer")
    _within(consumer.rate, "librdkafka's consumer")
    assert producer.throttled_ms > 0 and consumer.throttled_ms > 0, "the broker reported no throttle time"
    assert free.rate > 3 * LIMIT and free.throttled_ms == 0, f"the unthrottled producer moved {free.rate:.0f} B/s"
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"  # type: ignore[attr-defined]
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    throttled = [line for line in text.splitlines() if line.startswith("kafka_server_quota_throttle_time_ms_total{")]
    assert any('client_id="rdkafka-producer"' in line and 'quota="producer_byte_rate"' in line
               and float(line.rsplit(" ", 1)[1]) > 0 for line in throttled), throttled


def test_java_producer_and_consumer_hold_to_their_quotas(broker: BrokerProcess, tmp_path: Path) -> None:
    _quota(broker, tmp_path, "java-producer", "producer_byte_rate")
    _quota(broker, tmp_path, "java-consumer", "consumer_byte_rate")
    producer, consumer = _java(broker, tmp_path, "produce", "java-producer"), _java(broker, tmp_path, "consume",
                                                                                      "java-consumer")
    (produced, produce_throttle), (consumed, fetch_throttle) = _java_rate(producer), _java_rate(consumer)
    print({"java-producer": (produced, produce_throttle), "java-consumer": (consumed, fetch_throttle)})
    _within(produced, "Kafka's Java producer")
    _within(consumed, "Kafka's Java consumer")
    assert produce_throttle > 0 and fetch_throttle > 0


def test_transactions_under_a_quota_commit_and_abort_correctly(broker: BrokerProcess, tmp_path: Path) -> None:
    _quota(broker, tmp_path, "txn-producer", "producer_byte_rate", 200_000)
    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "txn-producer", "transactional.id": "quota-tx",
                  "linger.ms": 5})
    p.init_transactions(30)
    committed = write_transactions(p, "quota-txn", 12, 200, lambda n: n % 3 == 2, lambda n, i: RECORD)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "quota-txn-reader", "isolation.level":
                  "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition("quota-txn", 0, 0)])
    keys: list[bytes] = []
    wait_until(lambda: keys.extend(m.key() for m in c.consume(500, 0.5) if m.error() is None) or len(keys) >= committed,
               "the committed records read", 120)
    c.close()
    assert len(keys) == committed == len(set(keys)), (len(keys), committed)
    assert all(int(k.split(b"-")[0]) % 3 != 2 for k in keys), "a record of an aborted transaction was read"


def test_a_client_that_ignores_throttle_time_is_held_back_by_its_muted_connection(broker: BrokerProcess,
                                                                                  tmp_path: Path) -> None:
    """KIP-219: the broker answers at once with the throttle time and then reads nothing more from
    the connection until it has passed. A raw client sends its next produce as soon as it has the
    answer, never waiting: the broker still holds it to its quota. (Mutant, not committed: the
    connection's mute made a no-op — the client moved 3.8 MB/s, 7.5 times its quota, and the test failed.)"""
    _quota(broker, tmp_path, "ignores-throttle", "producer_byte_rate")
    batch = simple_batch([RECORD] * 16)
    throttled = 0
    with RawClient(broker.bootstrap, client_id="ignores-throttle") as raw:
        start = time.monotonic()
        moved = 0
        while (now := time.monotonic()) < start + 3 + 8:
            answer = raw.call(produce_request(TOPIC, 0, batch))
            assert int(answer.responses[0].partition_responses[0].error_code) == 0
            throttled = max(throttled, int(answer.throttle_time.total_seconds() * 1000))
            if now >= start + 3:  # a quota's first window's worth passes at once
                moved += len(batch)
    rate = moved / 8
    print({"ignores-throttle": (round(rate), throttled)})
    assert throttled > 0, "no response carried a throttle time"
    assert rate <= 1.1 * LIMIT, f"a client that ignored its throttle time moved {rate:.0f} B/s (quota {LIMIT})"


def _mutation(broker: BrokerProcess, api: int, version: int, **fields: object) -> Any:
    """One request of ``api`` from a client with id "mutator", on a connection of its own (a
    throttled answer mutes the connection it came on)."""
    with RawClient(broker.bootstrap, client_id="mutator") as raw:
        m = request_module(api, version)
        cls = {19: "CreateTopicsRequest", 20: "DeleteTopicsRequest", 37: "CreatePartitionsRequest"}[api]
        return raw.call(getattr(m, cls)(**fields))


def _create(broker: BrokerProcess, version: int, name: str, partitions: int) -> tuple[int, int]:
    """(error code, throttle ms) of a CreateTopics of one topic."""
    with RawClient(broker.bootstrap, client_id="mutator") as raw:
        answer = raw.call(create_topics_request(name, partitions, version=version))
    return int(answer.topics[0].error_code), int(answer.throttle_time.total_seconds() * 1000)


def _throttle(answer: Any) -> int:
    return int(answer.throttle_time.total_seconds() * 1000)


def test_controller_mutation_rate_refuses_strict_versions_and_throttles_older_ones(
        broker: BrokerProcess, tmp_path: Path) -> None:
    """KIP-599: controller_mutation_rate=1 lets a burst of 11 partitions (controller.quota.window.num
    11 windows of 1 s) through, and the strict request that takes the bucket below zero too (Kafka
    checks before it records); while it is below zero CreateTopics v6+, DeleteTopics v5+ and
    CreatePartitions v3+ refuse each topic THROTTLING_QUOTA_EXCEEDED, with the time the bucket takes
    to refill to zero, and leave it as it was; the older versions do what was asked and are
    throttled for as long. Another client id is not held back."""
    configs(broker, tmp_path, "--alter", "--entity-type", "clients", "--entity-name", "mutator",
            "--add-config", "controller_mutation_rate=1")
    assert _create(broker, 7, "mut-a", 8) == (0, 0)
    assert _create(broker, 7, "mut-b", 8) == (0, 0)  # 3 tokens left: allowed (now 5 below zero)
    error, throttle = _create(broker, 7, "mut-c", 1)
    assert error == THROTTLING_QUOTA_EXCEEDED and 3000 < throttle <= 5000, (error, throttle)
    with RawClient(broker.bootstrap) as raw:
        listed = raw.call(metadata_request(["mut-a", "mut-b", "mut-c"]))
        assert {t.name: int(t.error_code) for t in listed.topics} == {"mut-a": 0, "mut-b": 0, "mut-c": 3}
    error, throttle = _create(broker, 5, "mut-d", 1)  # permissive: created, throttled longer
    assert error == 0 and throttle > 4000, (error, throttle)

    timeout = datetime.timedelta(seconds=10)
    refused = _mutation(broker, 20, 5, topic_names=("mut-a",), timeout=timeout)
    assert int(refused.responses[0].error_code) == THROTTLING_QUOTA_EXCEEDED and _throttle(refused) > 0
    m = request_module(37, 3)
    grown = _mutation(broker, 37, 3, timeout=timeout, validate_only=False,
                      topics=(m.CreatePartitionsTopic(name="mut-a", count=i32(9), assignments=None),))
    assert int(grown.results[0].error_code) == THROTTLING_QUOTA_EXCEEDED and _throttle(grown) > 0
    deleted = _mutation(broker, 20, 4, topic_names=("mut-a",), timeout=timeout)
    assert int(deleted.responses[0].error_code) == 0 and _throttle(deleted) > 10000
    with RawClient(broker.bootstrap, client_id="another") as raw:
        answer = raw.call(create_topics_request("mut-e", 8))
        assert int(answer.topics[0].error_code) == 0 and _throttle(answer) == 0


def test_eoslog_client_holds_its_requests_for_the_throttle_time(broker: BrokerProcess, tmp_path: Path) -> None:
    """KIP-219 on eoslog.client's side: after a response carrying a throttle time the connection
    holds the next requests until it has passed (the broker would not read them sooner), and
    times them from then. A 600 kB produce against a 100 kB/s quota earns about 5 s; a Metadata
    request sent right after, with a 2 s request timeout, is answered. (Mutant, not committed: the
    throttle ignored -> the Metadata request timed out and the test failed.)"""
    import asyncio

    from eoslog.client.aio_connection import open_connection
    from eoslog.client.errors import KafkaTimeoutError

    _quota(broker, tmp_path, "eoslog-kip219", "producer_byte_rate", 100_000)
    host, port = broker.bootstrap.rsplit(":", 1)

    async def run() -> tuple[int, float]:
        conn = await open_connection(host, int(port), client_id="eoslog-kip219", request_timeout_s=2.0)
        try:
            produced = await conn.request(produce_request(TOPIC, 0, simple_batch([RECORD] * 600)))
            throttle_ms = int(produced.throttle_time.total_seconds() * 1000)
            started = time.monotonic()
            try:
                await conn.request(metadata_request([TOPIC]))
            except KafkaTimeoutError as e:
                raise AssertionError(f"the request after a {throttle_ms} ms throttle timed out: {e}") from None
            return throttle_ms, time.monotonic() - started
        finally:
            conn.close()

    throttle_ms, waited_s = asyncio.run(run())
    assert throttle_ms > 3000, throttle_ms
    assert waited_s >= throttle_ms / 1000 - 0.5, (throttle_ms, waited_s)  # held, not sent at once


def test_request_percentage_bounds_the_handler_time_a_client_takes(broker: BrokerProcess, tmp_path: Path) -> None:
    """``request_percentage`` (ClientRequestQuotaManager): the time the broker spends handling a
    client's requests, as percent of one thread. A client holding to 1 % (10 ms of handling a
    second) that sends Metadata requests back to back, ignoring the throttle times it is given, is
    held by its muted connection to a small part of what an unthrottled client gets done in the
    same time on the same broker; each throttle is at most one window (1 s here). Seen: 820
    requests against 26999 in 6 s. (Mutant, not committed: the request time not recorded -> 15029
    against 22054, no throttle, the test failed.)"""
    configs(broker, tmp_path, "--alter", "--entity-type", "clients", "--entity-name", "busy",
            "--add-config", "request_percentage=1")

    def hammer(client_id: str, seconds: float) -> tuple[int, int]:
        done = longest = 0
        with RawClient(broker.bootstrap, client_id=client_id) as raw:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                answer = raw.call(metadata_request(None))
                longest = max(longest, int(answer.throttle_time.total_seconds() * 1000))
                done += 1
        return done, longest

    throttled, longest = hammer("busy", 6)
    free, free_longest = hammer("not-busy", 6)
    print({"busy": (throttled, longest), "not-busy": (free, free_longest)})
    assert 0 < longest <= 1000 and free_longest == 0, (longest, free_longest)
    assert throttled * 4 < free, f"the client held to 1 % made {throttled} requests, an unthrottled one {free}"
