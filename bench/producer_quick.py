"""Quick producer throughput comparison: eoslog.client vs aiokafka, kafka-python, confluent-kafka.

Not the benchmark of issue 6 (that one comes with the consumer); a quick, honest look, in one
run against one broker: each client sends N records of 100 B and of 1 KB (no key, no
compression) to a fresh 3-partition topic, idempotent (acks=all), linger.ms=5, its own
default batch size unless ``--batch-size`` sets one for all; timed from the first send to
flush() returning, after one warm-up record. Every case runs in a fresh process, in rounds
that interleave the clients; the best round counts (other processes can only slow a run
down). The client's own CPU seconds are reported too: on two shared cores they move less
than wall-clock rates.

    python bench/producer_quick.py                 # all clients, 100 B and 1 KB
    python bench/producer_quick.py --clients eoslog,confluent --sizes 1024 --rounds 3
    python bench/producer_quick.py --batch-size 1000000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import BrokerProcess

CLIENTS = ["eoslog", "eoslog-asyncio", "confluent", "aiokafka", "kafka-python"]
RECORDS = {100: 500_000, 1024: 200_000}

# One case, run in a child process: prints {"seconds": ..., "cpu": ...} on its last line.
CHILD = r'''
import asyncio, json, resource, sys, time
client, bootstrap, topic, n, size, batch_size = sys.argv[1:7]
n, size, batch_size = int(n), int(size), int(batch_size)
value = b"x" * size

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

def report(seconds, cpu_s):
    print(json.dumps({"seconds": seconds, "cpu": cpu_s}))

extra = {"batch.size": batch_size} if batch_size else {}
if client == "eoslog":
    from eoslog.client.producer import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **extra})
    p.send(topic, value).result(60)
    c0, t0 = cpu(), time.perf_counter()
    send = p.send
    for _ in range(n):
        send(topic, value)
    p.flush()
    report(time.perf_counter() - t0, cpu() - c0)
    p.close()
elif client == "eoslog-asyncio":
    import uvloop
    from eoslog.client.producer import AIOProducer

    async def main():
        p = AIOProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, **extra})
        await p.start()
        await p.send_and_wait(topic, value)
        c0, t0 = cpu(), time.perf_counter()
        send = p.send
        for _ in range(n):
            await send(topic, value)
        await p.flush()
        report(time.perf_counter() - t0, cpu() - c0)
        await p.close()

    uvloop.run(main())
elif client == "confluent":
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **extra})
    p.produce(topic, value)
    p.flush(60)
    c0, t0 = cpu(), time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(600)
    report(time.perf_counter() - t0, cpu() - c0)
elif client == "kafka-python":
    from kafka import KafkaProducer
    kw = {"batch_size": batch_size} if batch_size else {}
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, enable_idempotence=True, acks="all", **kw)
    p.send(topic, value).get(60)
    c0, t0 = cpu(), time.perf_counter()
    for _ in range(n):
        p.send(topic, value)
    p.flush()
    report(time.perf_counter() - t0, cpu() - c0)
    p.close()
elif client == "aiokafka":
    import uvloop
    from aiokafka import AIOKafkaProducer

    async def main():
        kw = {"max_batch_size": batch_size} if batch_size else {}
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, enable_idempotence=True, acks="all", **kw)
        await p.start()
        await p.send_and_wait(topic, value)
        c0, t0 = cpu(), time.perf_counter()
        for _ in range(n):
            await p.send(topic, value)
        await p.flush()
        report(time.perf_counter() - t0, cpu() - c0)
        await p.stop()

    uvloop.run(main())
'''


def run_case(bootstrap: str, client: str, size: int, n: int, batch_size: int, tag: str) -> dict[str, float]:
    topic = f"bench-{client}-{size}-{tag}"
    out = subprocess.run([sys.executable, "-c", CHILD, client, bootstrap, topic, str(n), str(size), str(batch_size)],
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{client} {size} B failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["records_per_s"] = n / result["seconds"]
    result["mb_per_s"] = n * size / result["seconds"] / 2**20
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=0, help="batch.size for every client (0: each one's default)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    clients = args.clients.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="eoslog-bench-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", overrides={"num.partitions": "3"}).start()
        try:
            runs: dict[tuple[str, int], list[dict[str, float]]] = {}
            for r in range(args.rounds):
                for size in sizes:
                    for client in clients:
                        tag = f"{r}-{time.time_ns()}"
                        res = run_case(broker.bootstrap, client, size, RECORDS[size], args.batch_size, tag)
                        runs.setdefault((client, size), []).append(res)
                        print(f"round {r + 1} {client:>15} {size:>5} B: {res['records_per_s']:>10,.0f} rec/s "
                              f"{res['mb_per_s']:7.1f} MB/s  client CPU {res['cpu']:.2f} s", flush=True)
        finally:
            broker.stop()
    print()
    best = {k: max(v, key=lambda x: x["records_per_s"]) for k, v in runs.items()}
    print(f"{'client':>15} " + " ".join(f"{f'{s} B rec/s':>14} {'MB/s':>7} {'CPU µs/rec':>10}" for s in sizes))
    for client in clients:
        cells = []
        for s in sizes:
            b = best[(client, s)]
            cells.append(f"{b['records_per_s']:>14,.0f} {b['mb_per_s']:>7.1f} {b['cpu'] / RECORDS[s] * 1e6:>10.1f}")
        print(f"{client:>15} " + " ".join(cells))
    for s in sizes:
        ours = max(best[(c, s)]["records_per_s"] for c in clients if c.startswith("eoslog")) if any(
            c.startswith("eoslog") for c in clients) else None
        python = [best[(c, s)]["records_per_s"] for c in ("aiokafka", "kafka-python") if c in clients]
        line = [f"{s} B:"]
        if ours and python:
            line.append(f"eoslog / fastest pure-Python = {ours / max(python):.2f} (goal >= 2)")
        if ours and "confluent" in clients:
            ratio = ours / best[("confluent", s)]["records_per_s"]
            line.append(f"eoslog / confluent = {ratio:.2f} (goal >= 0.5 at 1 KB)")
        print("  ".join(line))
    if args.json:
        args.json.write_text(json.dumps({f"{c}/{s}": v for (c, s), v in runs.items()}, indent=1))


if __name__ == "__main__":
    main()
