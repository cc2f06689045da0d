"""Client benchmark (issue 6): eoslog.client against kafka-python, aiokafka and
confluent-kafka, producing and consuming, against one eoslog broker in one run.

    python bench/clients.py                        # both roles, 100 B and 1 KB, 2 rounds
    python bench/clients.py --quick                # fewer records, 1 round (noisier)
    python bench/clients.py --roles produce --clients eoslog,confluent --sizes 1024
    python bench/clients.py --profile              # where eoslog's producer spends its time (py-spy)
    python bench/clients.py --roles consume --isolation read_committed --tag rc   # issue 17, transactional data

Every case runs in a fresh process: one client, one role, one record size (no key, no
compression), with either the client's own **defaults** or the **equal** settings that
give every client the same batching (producers: acks=all, idempotence, linger.ms=5,
batch.size=1,000,000; consumers: fetch.max.bytes 50 MiB, max.partition.fetch.bytes
1 MiB, fetch.min.bytes 1, fetch.max.wait.ms 500, 500 records per poll). Rounds
interleave the cases, each round starting one case later; the best round counts (other
processes only slow a run down); every round is in the JSON.

- **produce**: N records to a fresh 3-partition topic, timed from the first send to
  ``flush()`` returning, after one warm-up record (connections, metadata, producer id are
  not timed). Afterwards the high watermarks must add up to N + 1 (eoslog's admin client
  asks). Before each case ``baselines.recycle_pages`` writes and deletes as many bytes as
  the case will produce, as the core benchmark does.
- **consume**: a consumer without a group assigns the 3 partitions of a topic holding N
  records (filled once, by librdkafka) at offset 0 and reads them all, touching every
  value; timed from ``assign()`` to the last record, after reading one record of a
  warm-up topic (connections are not timed). ``eoslog-pure`` is eoslog's blocking consumer
  with its optional C record decoder turned off (``EOSLOG_NO_EXTENSIONS=1``). With
  ``--isolation read_committed`` every consumer reads read_committed and the topics are
  filled by a transactional librdkafka producer (a transaction per 10,000 records, every
  tenth of them aborted: the aborted records are in the log, not in the count read).

MB/s counts record values (MB = 2^20 B). Client CPU seconds (user + system, all threads)
are reported too (and the broker's, over the child's whole life: an upper bound): on two
shared cores they move much less than wall-clock rates. Goals of
issue 6, printed and saved, from the equal rows: eoslog ≥ 2x the fastest other
pure-Python client; eoslog ≥ 0.5x confluent-kafka at 1 KB.

Output: ``bench/results/clients-<timestamp>.json``, ``clients-latest.json`` and
``clients-latest.png``. Supersedes ``producer_quick.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

import against
from baselines import recycle_pages
from common import MB, RESULTS_DIR, BrokerProcess, prepare_run

PRODUCERS = ["eoslog", "eoslog-asyncio", "confluent", "aiokafka", "kafka-python"]
CONSUMERS = ["eoslog", "eoslog-asyncio", "eoslog-pure", "confluent", "aiokafka", "kafka-python"]
PURE_PYTHON = ("aiokafka", "kafka-python")
EOSLOG = ("eoslog", "eoslog-asyncio")  # eoslog-pure has its own ratio
PARTITIONS = 3
RECORDS = {100: 300_000, 1024: 150_000}
QUICK_RECORDS = {100: 100_000, 1024: 50_000}
WARMUP_TOPIC = "bench-warmup"

EQUAL_BATCH = 1_000_000
EQUAL_PRODUCE: dict[str, dict[str, Any]] = {
    "eoslog": {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": EQUAL_BATCH},
    "confluent": {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": EQUAL_BATCH},
    "kafka-python": {"acks": "all", "enable_idempotence": True, "linger_ms": 5, "batch_size": EQUAL_BATCH},
    "aiokafka": {"acks": "all", "enable_idempotence": True, "linger_ms": 5, "max_batch_size": EQUAL_BATCH},
}
EQUAL_PRODUCE["eoslog-asyncio"] = EQUAL_PRODUCE["eoslog"]
_FETCH = {"fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1048576, "fetch.min.bytes": 1}
EQUAL_CONSUME: dict[str, dict[str, Any]] = {
    "eoslog": {**_FETCH, "fetch.max.wait.ms": 500, "max.poll.records": 500},
    "confluent": {**_FETCH, "fetch.wait.max.ms": 500, "poll_batch": 500},
    "kafka-python": {**{k.replace(".", "_"): v for k, v in _FETCH.items()}, "fetch_max_wait_ms": 500,
                     "max_poll_records": 500},
    "aiokafka": {**{k.replace(".", "_"): v for k, v in _FETCH.items()}, "fetch_max_wait_ms": 500, "poll_batch": 500},
}
EQUAL_CONSUME["eoslog-asyncio"] = EQUAL_CONSUME["eoslog-pure"] = EQUAL_CONSUME["eoslog"]
# --isolation read_committed, in each client's spelling.
READ_COMMITTED: dict[str, dict[str, Any]] = {
    "eoslog": {"isolation.level": "read_committed"}, "confluent": {"isolation.level": "read_committed"},
    "kafka-python": {"isolation_level": "read_committed"}, "aiokafka": {"isolation_level": "read_committed"},
}
READ_COMMITTED["eoslog-asyncio"] = READ_COMMITTED["eoslog-pure"] = READ_COMMITTED["eoslog"]
TXN_RECORDS = 10_000  # records per transaction of the read_committed fill; every tenth aborted


# -- the cases, run in a child process ----------------------------------------------------------


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def produce_child(client: str, bootstrap: str, topic: str, n: int, size: int, settings: dict[str, Any]
                  ) -> tuple[float, float]:
    """Send ``n`` records of ``size`` bytes; (seconds, CPU seconds) from the first send to
    flush() returning."""
    value = b"x" * size
    if client == "eoslog":
        from eoslog.client.producer import Producer

        p = Producer({"bootstrap.servers": bootstrap, **settings})
        p.send(topic, value).result(60)
        c0, t0 = _cpu(), time.perf_counter()
        send = p.send
        for _ in range(n):
            send(topic, value)
        p.flush()
        t, c = time.perf_counter() - t0, _cpu() - c0
        p.close()
        return t, c
    if client == "eoslog-asyncio":
        import uvloop

        from eoslog.client.producer import AIOProducer

        async def run_eoslog() -> tuple[float, float]:
            p = AIOProducer({"bootstrap.servers": bootstrap, **settings})
            await p.start()
            await p.send_and_wait(topic, value)
            c0, t0 = _cpu(), time.perf_counter()
            send = p.send
            for _ in range(n):
                await send(topic, value)
            await p.flush()
            t, c = time.perf_counter() - t0, _cpu() - c0
            await p.close()
            return t, c

        return uvloop.run(run_eoslog())
    if client == "confluent":
        from confluent_kafka import Producer as RdProducer

        rp = RdProducer({"bootstrap.servers": bootstrap, **settings})
        rp.produce(topic, value)
        rp.flush(60)
        c0, t0 = _cpu(), time.perf_counter()
        for i in range(n):
            while True:
                try:
                    rp.produce(topic, value)
                    break
                except BufferError:  # librdkafka's queue is full: serve it, then retry
                    rp.poll(0.001)
            if i % 10000 == 0:
                rp.poll(0)
        if rp.flush(600) != 0:
            raise RuntimeError("librdkafka did not deliver every record")
        return time.perf_counter() - t0, _cpu() - c0
    if client == "kafka-python":
        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=bootstrap, **settings)
        kp.send(topic, value).get(60)
        c0, t0 = _cpu(), time.perf_counter()
        for _ in range(n):
            kp.send(topic, value)
        kp.flush()
        t, c = time.perf_counter() - t0, _cpu() - c0
        kp.close()
        return t, c
    if client == "aiokafka":
        import uvloop
        from aiokafka import AIOKafkaProducer

        async def run_aiokafka() -> tuple[float, float]:
            ap = AIOKafkaProducer(bootstrap_servers=bootstrap, **settings)
            await ap.start()
            await ap.send_and_wait(topic, value)
            c0, t0 = _cpu(), time.perf_counter()
            for _ in range(n):
                await ap.send(topic, value)
            await ap.flush()
            t, c = time.perf_counter() - t0, _cpu() - c0
            await ap.stop()
            return t, c

        return uvloop.run(run_aiokafka())
    raise ValueError(f"unknown producer {client!r}")


def consume_child(client: str, bootstrap: str, topic: str, n: int, size: int, settings: dict[str, Any]
                  ) -> tuple[float, float]:
    """Read the ``n`` records of ``topic`` from offset 0; (seconds, CPU seconds) from
    assign() to the last record. Every value's length is checked."""
    settings = dict(settings)
    poll_batch = int(settings.pop("poll_batch", 10000))
    count = 0

    def take(values: list[bytes]) -> None:
        nonlocal count
        for v in values:
            if len(v) != size:
                raise RuntimeError(f"a {len(v)}-byte value in a topic of {size}-byte records")
        count += len(values)

    if client in ("eoslog", "eoslog-pure"):  # eoslog-pure: EOSLOG_NO_EXTENSIONS=1 (run_child)
        from eoslog.client.consumer import Consumer

        c = Consumer({"bootstrap.servers": bootstrap, **settings})
        c.assign([(WARMUP_TOPIC, 0)])
        c.seek((WARMUP_TOPIC, 0), 0)
        while not c.poll(1.0):
            pass
        c0, t0 = _cpu(), time.perf_counter()
        c.assign([(topic, p) for p in range(PARTITIONS)])
        for p in range(PARTITIONS):
            c.seek((topic, p), 0)
        while count < n:
            take([r.value for r in c.poll(1.0)])
        t, cpu = time.perf_counter() - t0, _cpu() - c0
        c.close()
        return t, cpu
    if client == "eoslog-asyncio":
        import uvloop

        from eoslog.client.consumer import AIOConsumer

        async def run_eoslog() -> tuple[float, float]:
            ac = AIOConsumer({"bootstrap.servers": bootstrap, **settings})
            await ac.start()
            ac.assign([(WARMUP_TOPIC, 0)])
            ac.seek((WARMUP_TOPIC, 0), 0)
            while not await ac.poll(1.0):
                pass
            c0, t0 = _cpu(), time.perf_counter()
            ac.assign([(topic, p) for p in range(PARTITIONS)])
            for p in range(PARTITIONS):
                ac.seek((topic, p), 0)
            while count < n:
                take([r.value for r in await ac.poll(1.0)])
            t, cpu = time.perf_counter() - t0, _cpu() - c0
            await ac.close()
            return t, cpu

        return uvloop.run(run_eoslog())
    if client == "confluent":
        from confluent_kafka import Consumer as RdConsumer
        from confluent_kafka import TopicPartition as RdTP

        rc = RdConsumer({"bootstrap.servers": bootstrap, "group.id": "bench-clients", "enable.auto.commit": False,
                         **settings})
        rc.assign([RdTP(WARMUP_TOPIC, 0, 0)])
        while not [m for m in rc.consume(1, 1.0) if m.error() is None]:
            pass
        c0, t0 = _cpu(), time.perf_counter()
        rc.assign([RdTP(topic, p, 0) for p in range(PARTITIONS)])
        while count < n:
            take([m.value() for m in rc.consume(poll_batch, 1.0) if m.error() is None])
        t, cpu = time.perf_counter() - t0, _cpu() - c0
        rc.close()
        return t, cpu
    if client == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KpTP

        kc = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **settings)
        kc.assign([KpTP(WARMUP_TOPIC, 0)])
        kc.seek_to_beginning()
        while not kc.poll(timeout_ms=1000):
            pass
        c0, t0 = _cpu(), time.perf_counter()
        kc.assign([KpTP(topic, p) for p in range(PARTITIONS)])
        kc.seek_to_beginning()
        while count < n:
            for records in kc.poll(timeout_ms=1000).values():
                take([r.value for r in records])
        t, cpu = time.perf_counter() - t0, _cpu() - c0
        kc.close()
        return t, cpu
    if client == "aiokafka":
        import uvloop
        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as AkTP

        async def run_aiokafka() -> tuple[float, float]:
            ak = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **settings)
            await ak.start()
            ak.assign([AkTP(WARMUP_TOPIC, 0)])
            await ak.seek_to_beginning()
            while not await ak.getmany(timeout_ms=1000):
                pass
            c0, t0 = _cpu(), time.perf_counter()
            ak.assign([AkTP(topic, p) for p in range(PARTITIONS)])
            await ak.seek_to_beginning()
            while count < n:
                batches = await ak.getmany(timeout_ms=1000, max_records=poll_batch)
                for records in batches.values():
                    take([r.value for r in records])
            t, cpu = time.perf_counter() - t0, _cpu() - c0
            await ak.stop()
            return t, cpu

        return uvloop.run(run_aiokafka())
    raise ValueError(f"unknown consumer {client!r}")


def child(spec: dict[str, Any]) -> None:
    run = produce_child if spec["role"] == "produce" else consume_child
    seconds, cpu = run(spec["client"], spec["bootstrap"], spec["topic"], spec["n"], spec["size"], spec["settings"])
    print(json.dumps({"seconds": seconds, "cpu": cpu}), flush=True)


# -- the parent: broker, rounds, checks, results ----------------------------------------------------


def case_settings(role: str, client: str, equal: bool, isolation: str = "read_uncommitted") -> dict[str, Any]:
    settings = dict(READ_COMMITTED[client]) if role == "consume" and isolation == "read_committed" else {}
    if equal:
        settings.update((EQUAL_PRODUCE if role == "produce" else EQUAL_CONSUME)[client])
    return settings


def child_command(spec: dict[str, Any]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]


def child_env(spec: dict[str, Any]) -> dict[str, str] | None:
    """eoslog-pure: eoslog's consumer without its optional C decoder."""
    return {**os.environ, "EOSLOG_NO_EXTENSIONS": "1"} if spec["client"] == "eoslog-pure" else None


def run_child(spec: dict[str, Any], timeout_s: float = 1800) -> dict[str, float]:
    out = subprocess.run(child_command(spec), capture_output=True, text=True, timeout=timeout_s, env=child_env(spec))
    if out.returncode != 0:
        raise RuntimeError(f"{spec['client']} {spec['role']} {spec['size']} B failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def fill(bootstrap: str, topic: str, n: int, size: int, transactional: bool = False) -> None:
    """``n`` records of ``size`` bytes spread over the topic's partitions (librdkafka); with
    ``transactional``, in transactions of TXN_RECORDS committed records, each tenth
    transaction followed by an aborted one as large."""
    from confluent_kafka import Producer as RdProducer

    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": EQUAL_BATCH}
    if transactional:
        settings["transactional.id"] = f"bench-fill-{topic}"
    p = RdProducer(settings)

    def send(count: int) -> None:
        for i in range(count):
            while True:
                try:
                    p.produce(topic, value, partition=i % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.01)

    value = b"x" * size
    if not transactional:
        send(n)
        if p.flush(600) != 0:
            raise RuntimeError(f"cannot fill {topic}")
        return
    p.init_transactions(60)
    for t, start in enumerate(range(0, n, TXN_RECORDS)):
        p.begin_transaction()
        send(min(TXN_RECORDS, n - start))
        p.commit_transaction(600)
        if t % 10 == 9:
            p.begin_transaction()
            send(TXN_RECORDS)
            p.abort_transaction(600)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from eoslog.client import Admin, NewTopic, OffsetSpec
    from eoslog.client.errors import UnknownTopicOrPartitionError
    from eoslog.client.types import TopicPartition

    started = datetime.datetime.now(datetime.UTC)
    records = {k: int(v * args.scale) for k, v in (QUICK_RECORDS if args.quick else RECORDS).items()}
    work, data_dir, facts = prepare_run(args.work_dir, "eoslog-clients-", args.broker_src)
    broker = against.broker_for(args, data_dir, {"num.partitions": str(PARTITIONS)}).start()
    assert broker.proc is not None
    broker_cpu = psutil.Process(broker.proc.pid)
    cases = [(role, client, size, equal) for role in args.roles for size in args.sizes for equal in (False, True)
             for client in (args.producers if role == "produce" else args.consumers)]
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
            if "consume" in args.roles:
                admin.create_topics([NewTopic(WARMUP_TOPIC, 1)]
                                    + [NewTopic(f"bench-read-{s}", PARTITIONS) for s in args.sizes])
                fill(broker.bootstrap, WARMUP_TOPIC, 1, 10)
                for s in args.sizes:
                    fill(broker.bootstrap, f"bench-read-{s}", records[s], s, args.isolation == "read_committed")
            for r in range(args.rounds):
                shift = r % len(cases)
                for role, client, size, equal in cases[shift:] + cases[:shift]:
                    key = case_key(role, client, size, equal)
                    n = records[size]
                    topic = f"bench-read-{size}" if role == "consume" else f"bench-{r}-{key.replace('/', '-')}"
                    if role == "produce":
                        recycle_pages(data_dir, n * size)
                    spec = {"role": role, "client": client, "bootstrap": broker.bootstrap, "topic": topic, "n": n,
                            "size": size, "settings": case_settings(role, client, equal, args.isolation)}
                    b0 = broker_cpu.cpu_times()
                    try:
                        res: dict[str, Any] = {"round": r + 1, **run_child(spec)}
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        # One failing client must not cost the others' figures: recorded, not fatal.
                        print(f"round {r + 1} {key:<38} FAILED: {str(e).strip().splitlines()[-1]}", flush=True)
                        runs.setdefault(key, []).append({"round": r + 1, "verified": False, "error": str(e)[-3000:]})
                        if role == "produce":
                            with contextlib.suppress(UnknownTopicOrPartitionError):
                                admin.delete_topics([topic])
                        continue
                    b1 = broker_cpu.cpu_times()
                    # Over the child's whole life (start-up and warm-up included): an upper bound.
                    res["broker_cpu"] = b1.user + b1.system - b0.user - b0.system
                    if role == "produce":
                        tps = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
                        written = sum(o.offset for o in admin.list_offsets(tps).values())
                        res["verified"] = written == n + 1
                        admin.delete_topics([topic])
                    else:
                        res["verified"] = True  # the child read exactly n values of the right size
                    res["records_s"] = n / res["seconds"]
                    res["mb_s"] = n * size / MB / res["seconds"]
                    res["cpu_us_per_record"] = res["cpu"] / n * 1e6
                    res["broker_cpu_us_per_record"] = res["broker_cpu"] / n * 1e6
                    runs.setdefault(key, []).append(res)
                    print(f"round {r + 1} {key:<38} {res['records_s']:>10,.0f} rec/s {res['mb_s']:7.1f} MB/s  "
                          f"client CPU {res['cpu']:5.2f} s  broker CPU {res['broker_cpu']:5.2f} s"
                          + ("" if res["verified"] else "  NOT VERIFIED"),
                          flush=True)
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return assemble(started, facts, args, records, runs)


def case_key(role: str, client: str, size: int, equal: bool) -> str:
    return f"{role}/{client}/{size}/{'equal' if equal else 'defaults'}"


def goal_ratios(best: dict[str, Any], clients: dict[str, list[str]], sizes: list[int]) -> list[dict[str, Any]]:
    """Issue 6's and 17's ratios from the best rounds, per role, size and settings (issue 17's
    consumer goals: 2x the fastest pure-Python client at 100 B, 1.5x at 1 KB)."""
    ratios: list[dict[str, Any]] = []
    for role, names in clients.items():
        for size in sizes:
            for settings in ("equal", "defaults"):
                def rate(c: str, role: str = role, size: int = size, settings: str = settings) -> float | None:
                    b = best.get(f"{role}/{c}/{size}/{settings}")
                    return None if b is None else float(b["records_s"])

                ours = [r for c in names if c in EOSLOG and (r := rate(c)) is not None]
                python = [r for c in names if c in PURE_PYTHON and (r := rate(c)) is not None]
                kafka_python = rate("kafka-python") if "kafka-python" in names else None
                confluent = rate("confluent") if "confluent" in names else None
                common = {"role": role, "size": size, "settings": settings}
                if ours and python:
                    goal = 1.5 if role == "consume" and size >= 1024 else 2.0
                    ratios.append({**common, "label": "eoslog / fastest pure-Python", "value": max(ours) / max(python),
                                   "goal": goal})
                cpu = {c: float(b["cpu_us_per_record"]) for c in names
                       if (b := best.get(f"{role}/{c}/{size}/{settings}")) is not None}
                ours_cpu = [cpu[c] for c in EOSLOG if c in cpu]
                python_cpu = [cpu[c] for c in PURE_PYTHON if c in cpu]
                if ours_cpu and python_cpu:
                    # Client CPU per record moves much less than wall-clock rates on shared cores.
                    ratios.append({**common, "label": "eoslog / fastest pure-Python, per CPU",
                                   "value": min(python_cpu) / min(ours_cpu), "goal": None})
                pure = rate("eoslog-pure") if "eoslog-pure" in names else None
                if pure and python:
                    ratios.append({**common, "label": "eoslog-pure / fastest pure-Python",
                                   "value": pure / max(python), "goal": None})
                if ours and kafka_python:
                    # aiokafka decodes and encodes records in Cython (aiokafka.record._crecords).
                    ratios.append({**common, "label": "eoslog / kafka-python (no C)", "value": max(ours) / kafka_python,
                                   "goal": None})
                if ours and confluent:
                    ratios.append({**common, "label": "eoslog / confluent", "value": max(ours) / confluent,
                                   "goal": 0.5 if size == 1024 else None})
    return ratios


def assemble(started: datetime.datetime, facts: dict[str, Any], args: argparse.Namespace,
             records: dict[int, int], runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    best = {k: max((x for x in v if x["verified"]), key=lambda x: x["records_s"], default=None)
            for k, v in runs.items()}
    facts = {**facts, "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}
    clients = {"produce": args.producers if "produce" in args.roles else [],
               "consume": args.consumers if "consume" in args.roles else []}
    return {
        "benchmark": "clients", "timestamp": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": facts,
        "workload": {"partitions": PARTITIONS, "records": {str(k): v for k, v in records.items()},
                     "sizes": args.sizes, "rounds": args.rounds, "equal_produce": EQUAL_PRODUCE,
                     "equal_consume": EQUAL_CONSUME, "isolation": args.isolation},
        "clients": clients, "best": best, "runs": runs, "tag": args.tag,
        "ratios": goal_ratios(best, {r: c for r, c in clients.items() if c}, args.sizes),
    }


def render(results: dict[str, Any]) -> None:
    sizes = results["workload"]["sizes"]
    for role in ("produce", "consume"):
        clients = results["clients"][role]
        if not clients:
            continue
        print(f"\n{role}: records/s, MB/s, client and broker CPU µs per record (best round)")
        header = f"{'client':<16}{'settings':<10}" + "".join(
            f"{f'{s} B rec/s':>14}{'MB/s':>8}{'client':>8}{'broker':>8}" for s in sizes)
        print(header)
        for client in clients:
            for settings in ("defaults", "equal"):
                cells = []
                for s in sizes:
                    b = results["best"].get(f"{role}/{client}/{s}/{settings}")
                    cells.append(f"{'-':>14}{'-':>8}{'-':>8}{'-':>8}" if b is None else
                                 f"{b['records_s']:>14,.0f}{b['mb_s']:>8.1f}{b['cpu_us_per_record']:>8.1f}"
                                 f"{b.get('broker_cpu_us_per_record', 0):>8.1f}")
                print(f"{client:<16}{settings:<10}" + "".join(cells))
    print()
    for r in results["ratios"]:
        goal = "" if r["goal"] is None else f" (goal >= {r['goal']})"
        print(f"{r['role']:<8} {r['size']:>5} B {r['settings']:<9} {r['label']:<30} {r['value']:5.2f}{goal}")


def save(results: dict[str, Any]) -> list[Path]:
    from plot import plot_clients

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = results["timestamp"].replace("-", "").replace(":", "")
    name = "clients" + (f"-{results['tag']}" if results.get("tag") else "")
    paths = [RESULTS_DIR / f"{name}-{stamp}.json", RESULTS_DIR / f"{name}-latest.json"]
    for p in paths:
        p.write_text(json.dumps(results, indent=1))
    png = RESULTS_DIR / f"{name}-latest.png"
    plot_clients(results, png)
    return [*paths, png]


# -- --profile: where eoslog's producer or consumer spends its time ----------------------------------------


def profile(args: argparse.Namespace) -> int:
    from hotspots import analyse, py_spy

    spy = py_spy()
    if spy is None:
        print("py-spy not found: pip install py-spy", file=sys.stderr)
        return 2
    size = args.sizes[-1]
    n = int((QUICK_RECORDS if args.quick else RECORDS)[size] * args.scale)
    work, data_dir, _ = prepare_run(args.work_dir, "eoslog-clients-profile-", args.broker_src)
    broker = BrokerProcess(data_dir, overrides={"num.partitions": str(PARTITIONS)}).start()
    out: dict[str, Any] = {}
    role = "consume" if args.roles == ["consume"] else "produce"
    try:
        if role == "consume":
            from eoslog.client import Admin, NewTopic

            with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
                admin.create_topics([NewTopic(WARMUP_TOPIC, 1), NewTopic("bench-profile-read", PARTITIONS)])
            fill(broker.bootstrap, WARMUP_TOPIC, 1, 10)
            fill(broker.bootstrap, "bench-profile-read", n, size, args.isolation == "read_committed")
        for client in [c for c in (args.consumers if role == "consume" else args.producers)
                       if c in (*EOSLOG, "eoslog-pure")]:
            raw = work / f"{client}.txt"
            spec = {"role": role, "client": client, "bootstrap": broker.bootstrap,
                    "topic": "bench-profile-read" if role == "consume" else f"bench-profile-{client}", "n": n,
                    "size": size,
                    "settings": case_settings(role, client, args.profile_settings == "equal", args.isolation)}
            cmd = [spy, "record", "--rate", "250", "--format", "raw", "--output", str(raw), "--threads", "--",
                   *child_command(spec)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=child_env(spec))
            if done.returncode != 0 or not raw.exists():
                raise RuntimeError(f"py-spy failed: {done.stderr[-2000:]}")
            timing = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
            found = analyse(raw, args.top)
            out[client] = {"role": role, "settings": args.profile_settings, "size": size, "records": n,
                           "records_s": n / timing["seconds"], "cpu_s": timing["cpu"], **found}
            print(f"\n{client}, {n} records of {size} B, {args.profile_settings} settings: "
                  f"{n / timing['seconds']:,.0f} rec/s "
                  f"(slowed by the profiler); {found['samples']} busy samples over every thread (py-spy "
                  "drops idle ones; 'Thread.run' is the I/O thread inside uvloop's C code)")
            for row in found["self"]:
                print(f"  self {row['share']:6.1%}  {row['function']}")
            for row in found["total"]:
                print(f"  total {row['share']:6.1%}  {row['function']}")
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"clients-{role}-hotspots-latest.json" if role == "consume" else
     RESULTS_DIR / "clients-hotspots-latest.json").write_text(json.dumps(out, indent=1))
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--roles", default="produce,consume", type=lambda s: s.split(","))
    p.add_argument("--clients", default=None, help="both roles' clients (default: all)")
    p.add_argument("--producers", default=",".join(PRODUCERS), type=lambda s: s.split(","))
    p.add_argument("--consumers", default=",".join(CONSUMERS), type=lambda s: s.split(","))
    p.add_argument("--sizes", default="100,1024", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--rounds", type=int, default=None, help="default 2 (1 with --quick)")
    p.add_argument("--quick", action="store_true", help=f"records per case {QUICK_RECORDS} instead of {RECORDS}")
    p.add_argument("--scale", type=float, default=1.0, help="multiply the records per case (a consumer at 1M "
                   "records/s reads the default 300,000 in 0.3 s: too short to time on a loaded machine)")
    p.add_argument("--profile", action="store_true", help="profile eoslog's producers with py-spy instead")
    p.add_argument("--top", type=int, default=25, help="rows of the profile")
    p.add_argument("--profile-settings", choices=("defaults", "equal"), default="defaults",
                   help="the producer settings --profile runs with")
    p.add_argument("--work-dir", type=Path, default=None)
    p.add_argument("--broker-src", type=Path, default=None)
    p.add_argument("--keep", action="store_true", help="keep the data directory")
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--isolation", choices=("read_uncommitted", "read_committed"), default="read_uncommitted",
                   help="consumers' isolation.level (read_committed: transactional fill, some aborted)")
    p.add_argument("--tag", default="", help="results as clients-<tag>-latest.json / .png")
    p.add_argument("--render", type=Path, help="print and plot a saved results JSON again (ratios recomputed)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    against.add_flag(p)
    args = p.parse_args(argv)
    if args.clients:
        args.producers = [c for c in args.clients.split(",") if c in PRODUCERS]
        args.consumers = [c for c in args.clients.split(",") if c in CONSUMERS]
    if args.rounds is None:
        args.rounds = 1 if args.quick else 2
    return args


def figures(results: dict[str, Any]) -> against.Figures:
    """What ``--against kafka`` compares, per client case: records/s and the broker's CPU per record."""
    out: against.Figures = {}
    for key, b in results["best"].items():
        if b is None:  # no verified round
            continue
        out[f"{key} records/s"] = (b["records_s"], True)
        out[f"{key} broker CPU us/record"] = (round(b["broker_cpu_us_per_record"], 2), False)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    if args.profile:
        return profile(args)
    if args.render:
        saved = json.loads(args.render.read_text())
        saved["ratios"] = goal_ratios(saved["best"], {r: c for r, c in saved["clients"].items() if c},
                                      saved["workload"]["sizes"])
        render(saved)
        if not args.no_save:
            args.render.write_text(json.dumps(saved, indent=1))
            from plot import plot_clients

            name = "clients" + (f"-{saved['tag']}" if saved.get("tag") else "")
            plot_clients(saved, RESULTS_DIR / f"{name}-latest.png")
        return 0
    if args.against:
        return against.main("clients", args, run, figures, print)
    results = run(args)
    render(results)
    if not args.no_save:
        for path in save(results):
            print(f"saved {path}")
    return 0 if all(x["verified"] for v in results["runs"].values() for x in v) else 1


if __name__ == "__main__":
    sys.exit(main())
