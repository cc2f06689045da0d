"""Consumer groups as members join and leave (issue 26, KIP-848's half of the benchmark): the classic
protocol against the consumer protocol, rebalance time and records/s during the changes.

    python bench/consumer_groups.py                       # eoslog only
    python bench/consumer_groups.py --against kafka       # eoslog and Apache Kafka, interleaved rounds
    python bench/consumer_groups.py --protocols consumer --no-save          # a quick look

Per protocol: a fresh topic of ``--partitions`` partitions holding a backlog of 100 B records
(librdkafka, idempotent) and a fresh group, then confluent-kafka ``Consumer`` processes (librdkafka,
the same client on both brokers) joining one at a time up to ``--members`` and leaving one at a
time down to one (each leave a clean close: LeaveGroup, or a heartbeat with epoch -1). ``classic``
is librdkafka's default assignment (``range,roundrobin``: eager, every member gives everything up
at each rebalance); ``consumer`` is KIP-848 with the broker's default assignor (``uniform``). Each
member reads at most ``--member-rate`` records/s (a consumer with work to do, and the machine's two
shared cores not spent on reading as fast as possible), commits automatically, and reports every
0.1 s what it owns and has read.

Figures per protocol:
- rebalance time of each change: from the joining member subscribed (or the leaving one told to
  close) until every partition is owned again, the owners differing by at most one partition, the
  new member among them;
- records/s during the changes (everything read from each trigger to its end, over those
  seconds) against records/s between them (``--dwell`` seconds of a stable group after each),
  and each change's rate as a share of the stable group's just before it, averaged (1 = the
  group read on as before): a stop-the-world rebalance shows as a share well below 1. A member
  does not catch up after a pause, so a pause is records not read.

Broker settings on both sides: heartbeats every 500 ms for both protocols (``group.consumer.
heartbeat.interval.ms`` and its minimum; the classic members' ``heartbeat.interval.ms``), no
initial rebalance delay; the rest their defaults. Output: a table;
``bench/results/consumer-groups-<timestamp>.json`` and ``consumer-groups-latest.json`` (with
``--against kafka``: ``consumer-groups-kafka-*`` with the eoslog/Kafka ratios and a plot).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import against
from common import RESULTS_DIR, prepare_run

BROKER_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
}
MEMBER = r"""
import json, signal, sys, time
from confluent_kafka import Consumer
boot, group, topic, name, protocol, rate = sys.argv[1:7]
conf = {"bootstrap.servers": boot, "group.id": group, "client.id": name, "group.protocol": protocol,
        "auto.offset.reset": "earliest", "enable.auto.commit": True}
if protocol == "classic":
    conf.update({"heartbeat.interval.ms": 500, "session.timeout.ms": 10000})
c = Consumer(conf)
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
def out(**kw):
    print(json.dumps({"t": time.time(), **kw}), flush=True)
c.subscribe([topic])
out(subscribed=1)
# At most `rate` records/s, and no catching up after a pause: a stall shows as records not read.
per_poll, count, next_at, last = max(1, int(rate) // 20), 0, 0.0, 0.0
while not stop:
    got = sum(1 for m in c.consume(per_poll, 0.05) if m.error() is None)
    count += got
    next_at = max(next_at, time.monotonic()) + got / float(rate)
    if next_at > time.monotonic():
        time.sleep(next_at - time.monotonic())
    if time.monotonic() - last >= 0.1:
        last = time.monotonic()
        out(consumed=count, owned=len(c.assignment()))
c.close()
out(closed=1, consumed=count)
"""


@dataclass
class Member:
    name: str
    proc: subprocess.Popen[str]
    subscribed: threading.Event = field(default_factory=threading.Event)
    consumed: int = 0
    owned: int = 0
    live: bool = True

    def follow(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            if "subscribed" in event:
                self.subscribed.set()
            if "consumed" in event:
                self.consumed = max(self.consumed, int(event["consumed"]))
            if "owned" in event:
                self.owned = int(event["owned"])


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    if p.flush(300) != 0:
        raise SystemExit("the backlog was not all produced")


def one_protocol(bootstrap: str, protocol: str, args: argparse.Namespace) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"cg-bench-{protocol}-{tag}", f"cg-bench-{protocol}-{tag}"
    produce(bootstrap, topic, args.partitions, args.records)
    members: list[Member] = []

    def live() -> list[Member]:
        return [m for m in members if m.live]

    def total() -> int:
        return sum(m.consumed for m in members)

    def settled(must_own: Member | None) -> bool:
        owned = [m.owned for m in live()]
        return (sum(owned) == args.partitions and max(owned) - min(owned) <= 1
                and (must_own is None or must_own.owned > 0))

    def wait_settled(must_own: Member | None, what: str) -> float:
        deadline = time.monotonic() + args.timeout
        while not settled(must_own):
            if time.monotonic() > deadline:
                raise SystemExit(f"{protocol}: {what} not settled after {args.timeout} s: "
                                 f"{[(m.name, m.owned) for m in live()]}")
            time.sleep(0.01)
        return time.time()

    changes: list[dict[str, Any]] = []
    dwell_records, dwell_seconds, rate_before = 0, 0.0, 0.0

    def change(kind: str, start: float, before: int, member: Member | None) -> None:
        nonlocal dwell_records, dwell_seconds, rate_before
        done = wait_settled(member, kind)
        during = total() - before
        rate = during / max(done - start, 1e-3)
        changes.append({"change": kind, "members_after": len(live()), "rebalance_s": round(done - start, 3),
                        "records_during": during, "records_per_s_during": round(rate),
                        "share_of_rate_before": round(rate / rate_before, 3) if rate_before else None})
        at, n = time.time(), total()
        time.sleep(args.dwell)
        dwell_records += total() - n
        dwell_seconds += time.time() - at
        rate_before = (total() - n) / (time.time() - at)

    def join() -> None:
        name = f"m{len(members) + 1}"
        proc = subprocess.Popen([sys.executable, "-c", MEMBER, bootstrap, group, topic, name, protocol,
                                 str(args.member_rate)], stdout=subprocess.PIPE, text=True)
        m = Member(name, proc)
        members.append(m)
        threading.Thread(target=m.follow, daemon=True).start()
        if not m.subscribed.wait(120):
            raise SystemExit(f"{name} did not start")
        start, before = time.time(), total()
        change("join", start, before, m if len(live()) > 1 else None)

    def leave() -> None:
        m = live()[0]  # the oldest
        start, before = time.time(), total()
        m.live = False
        m.proc.terminate()
        change("leave", start, before, None)

    try:
        join()  # the first member: not a change between members, left out of the figures below
        first = changes.pop()
        for _ in range(args.members - 1):
            join()
        for _ in range(args.members - 1):
            leave()
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.proc.terminate()
        for m in members:
            try:
                m.proc.wait(30)
            except subprocess.TimeoutExpired:
                m.proc.kill()
    if total() >= args.records:
        print(f"warning: {protocol}: the backlog ran out ({args.records} records): raise --records")
    joins = [c["rebalance_s"] for c in changes if c["change"] == "join"]
    leaves = [c["rebalance_s"] for c in changes if c["change"] == "leave"]
    during_records = sum(c["records_during"] for c in changes)
    during_seconds = sum(c["rebalance_s"] for c in changes)
    return {
        "protocol": protocol, "partitions": args.partitions, "members": args.members,
        "member_rate": args.member_rate, "first_member_s": first["rebalance_s"], "changes": changes,
        "join_s_mean": round(sum(joins) / len(joins), 3), "join_s_max": max(joins),
        "leave_s_mean": round(sum(leaves) / len(leaves), 3), "leave_s_max": max(leaves),
        "records_per_s_during_changes": round(during_records / max(during_seconds, 1e-3)),
        "records_per_s_between_changes": round(dwell_records / max(dwell_seconds, 1e-3)),
        # Each change's records/s over the stable group's just before it: 1 = no pause at all.
        "share_of_rate_during_changes": round(sum(c["share_of_rate_before"] for c in changes) / len(changes), 3),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work, data_dir, facts = prepare_run(args.work_dir, "cg-bench-", None)
    broker = against.broker_for(args, data_dir, dict(BROKER_SETTINGS)).start()
    try:
        cases = [one_protocol(broker.bootstrap, p, args) for p in args.protocols]
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return {"benchmark": "consumer-groups", "side": getattr(args, "side", "eoslog"),
            "timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "load_avg_at_start": [round(x, 2) for x in os.getloadavg()], "machine": facts, "cases": cases}


def figures(result: dict[str, Any]) -> against.Figures:
    out: against.Figures = {}
    for c in result["cases"]:
        p = c["protocol"]
        out[f"{p}: join, s (mean)"] = (float(c["join_s_mean"]), False)
        out[f"{p}: leave, s (mean)"] = (float(c["leave_s_mean"]), False)
        out[f"{p}: records/s during changes"] = (float(c["records_per_s_during_changes"]), True)
        out[f"{p}: records/s between changes"] = (float(c["records_per_s_between_changes"]), True)
        out[f"{p}: records/s kept during changes (share)"] = (float(c["share_of_rate_during_changes"]), True)
    return out


def show(result: dict[str, Any]) -> None:
    for c in result["cases"]:
        print(f"{c['protocol']:>8}: join {c['join_s_mean']} s mean ({c['join_s_max']} max), leave "
              f"{c['leave_s_mean']} s mean ({c['leave_s_max']} max); records/s during changes "
              f"{c['records_per_s_during_changes']}, between {c['records_per_s_between_changes']}; kept "
              f"{c['share_of_rate_during_changes']:.0%} of the rate before each change")
        for ch in c["changes"]:
            print(f"          {ch['change']:>5} -> {ch['members_after']} members: {ch['rebalance_s']} s, "
                  f"{ch['records_per_s_during']} records/s meanwhile ({ch['share_of_rate_before']:.0%} of before)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--protocols", type=lambda s: s.split(","), default=["classic", "consumer"])
    p.add_argument("--partitions", type=int, default=12)
    p.add_argument("--members", type=int, default=4, help="joining one at a time up to this, then leaving")
    p.add_argument("--member-rate", type=int, default=2000, help="records/s each member reads at most")
    p.add_argument("--records", type=int, default=400_000, help="the backlog (100 B records)")
    p.add_argument("--dwell", type=float, default=3.0, help="seconds of a stable group after each change")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a change may take to settle")
    p.add_argument("--work-dir", type=Path)
    p.add_argument("--no-save", action="store_true")
    against.add_flag(p)
    args = p.parse_args()
    if args.against:
        return against.main("consumer-groups", args, run, figures, print)
    result = run(args)
    show(result)
    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stamp = result["timestamp"].replace(":", "").replace("-", "")[:15]
        for path in (RESULTS_DIR / f"consumer-groups-{stamp}.json", RESULTS_DIR / "consumer-groups-latest.json"):
            path.write_text(json.dumps(result, indent=1) + "\n")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
