"""The broker's CPU per request, without sockets or clients: A against B in one run.

    python bench/request_path.py --a-src /tmp/eoslog-A/src [--b-src src] [--rounds 5]
        [--a-config KEY=VALUE ...] [--b-config KEY=VALUE ...] [--profile DIR]

Each build runs in its own subprocess (``PYTHONPATH`` = its ``src``) that builds a broker
in-process on a fresh data directory (``tests/unit/test_protocol.py``'s way: no listener),
creates a 3-partition topic through CreateTopics and then times, with the process's CPU
clock, request frames handed straight to ``Dispatcher.handle``: Produce v9 acks=1 with one
small batch per partition (what a request costs beyond its bytes), the same with 1 MB of
1 KB records per request (ab.py's records), and Fetch v12 of 1 MB per partition from the
start; and the small Produce once more through a connection (``KafkaProtocol`` on
tests/support/fake_transport.py's transport, one request out at a time, the response awaited by
turning the loop): what the connection adds per request. Rounds alternate A and B, the best
round counts. Unlike ``ab.py`` the client's CPU
and the socket are out of the figure, so a per-request cost added to the dispatcher, the
handlers or the codec shows undiluted. ``--profile DIR`` also writes each build's cProfile
of one extra round (``DIR/<A|B>.prof``; ``python -m pstats``). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
TOPIC = "request-path"  # 1 MB requests, fetched; the small produces go to their own topic
SMALL_TOPIC = "request-path-small"
PARTITIONS = 3
# case → (requests per round, records per partition per request, record size)
CASES: dict[str, tuple[int, int, int]] = {"produce-small": (4000, 1, 100), "produce-1MB": (300, 341, 1024),
                                          "fetch-1MB": (300, 0, 0), "produce-small-conn": (4000, 1, 100)}
THROUGH_CONNECTION = "produce-small-conn"


def child(config: list[str], rounds: int, profile: Path | None) -> None:
    """Runs inside the build under test: prints {case: [µs CPU per request per round]}."""
    from kio.schema.create_topics.v5 import request as ct
    from kio.schema.fetch.v12 import request as fr
    from kio.schema.produce.v9 import request as pr
    from kio.static.primitive import i16, i32, i64

    from eoslog.broker.connection import KafkaProtocol
    from eoslog.broker.server import Broker
    from eoslog.config import BrokerConfig
    from eoslog.protocol.codec import encode_request
    from eoslog.records.batch import build_batch

    work = Path(tempfile.mkdtemp(prefix="eoslog-request-path-"))
    overrides = {"log.dirs": str(work / "data"), **dict(kv.partition("=")[::2] for kv in config)}
    broker = Broker(BrokerConfig.load(overrides=overrides))
    broker.logs.startup()
    state = broker.state
    if hasattr(state, "serving"):
        state.serving.set()
    dispatcher = broker.dispatcher
    # The third argument: a Session since the security work, a Principal before it.
    if "session" in inspect.signature(dispatcher.handle).parameters:
        from eoslog.security.listeners import Listener, SecurityProtocol

        who: Any = state.security.new_session(Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, "", 0),
                                              "127.0.0.1", None)
    else:
        who = dispatcher.authorizer.authenticate("127.0.0.1:1")

    async def call(frame: bytes) -> Any:
        return await dispatcher.handle(frame[4:], who, "127.0.0.1:1")

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from support.fake_transport import FakeTransport

    async def through_connection(frame: bytes, n: int) -> None:
        transport = FakeTransport()
        protocol = KafkaProtocol(dispatcher, 1 << 20, set())
        protocol.connection_made(transport)  # type: ignore[arg-type]
        for _ in range(n):
            protocol.data_received(frame)
            while not transport.written:
                await asyncio.sleep(0)
            transport.written.clear()
        protocol.connection_lost(None)

    def produce_frame(topic: str, records: int, size: int, cid: int) -> bytes:
        batch = build_batch([(None, b"x" * size, ())] * records, timestamp=int(time.time() * 1000))
        parts = tuple(pr.PartitionProduceData(index=i32(p), records=batch) for p in range(PARTITIONS))
        req = pr.ProduceRequest(acks=i16(1), timeout=datetime.timedelta(seconds=30),
                                topic_data=(pr.TopicProduceData(name=topic, partition_data=parts),))
        return encode_request(cid, req, "request-path")

    def fetch_frame(cid: int) -> bytes:
        parts = tuple(fr.FetchPartition(partition=i32(p), fetch_offset=i64(0), partition_max_bytes=i32(1 << 20))
                      for p in range(PARTITIONS))
        req = fr.FetchRequest(replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(1),
                              max_bytes=i32(50 << 20), isolation_level=i16(0), session_id=i32(0),
                              session_epoch=i32(-1), topics=(fr.FetchTopic(topic=TOPIC, partitions=parts),),
                              forgotten_topics_data=(), rack_id="")
        return encode_request(cid, req, "request-path")

    async def main() -> dict[str, list[float]]:
        create = ct.CreateTopicsRequest(topics=tuple(ct.CreatableTopic(
            name=name, num_partitions=i32(PARTITIONS), replication_factor=i16(1), assignments=(), configs=())
            for name in (TOPIC, SMALL_TOPIC)), timeout=datetime.timedelta(seconds=30), validate_only=False)
        await call(encode_request(1, create, "request-path"))
        frames = {case: produce_frame(SMALL_TOPIC if size < 1024 else TOPIC, records, size, 7)
                  for case, (_, records, size) in CASES.items() if records}
        frames["fetch-1MB"] = fetch_frame(8)
        await call(frames["produce-1MB"])  # something to fetch from offset 0
        out: dict[str, list[float]] = {case: [] for case in CASES}

        async def one_round() -> None:
            for case, (n, _, _) in CASES.items():
                frame = frames[case]
                t0 = time.process_time()
                if case == THROUGH_CONNECTION:
                    await through_connection(frame, n)
                for _ in range(0 if case == THROUGH_CONNECTION else n):
                    await call(frame)
                out[case].append((time.process_time() - t0) / n * 1e6)

        for _ in range(rounds):
            await one_round()
        if profile is not None:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
            await one_round()
            prof.disable()
            prof.dump_stats(str(profile))
        return out

    try:
        result = asyncio.run(main())
    finally:
        broker.logs.shutdown()
        shutil.rmtree(work, ignore_errors=True)  # ~600 MB per build and round otherwise
    print(json.dumps(result))


def run_build(src: Path, config: list[str], rounds: int, profile: Path | None) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    cmd = [sys.executable, __file__, "--child", *(f"--config={c}" for c in config), "--rounds", str(rounds)]
    cmd += [f"--profile={profile}"] if profile else []
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{src}: {out.stderr[-3000:]}")
    result: dict[str, list[float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--config", action="append", default=[], help=argparse.SUPPRESS)
    p.add_argument("--profile", type=Path)
    p.add_argument("--a-src", type=Path)
    p.add_argument("--b-src", type=Path, default=REPO_ROOT / "src")
    p.add_argument("--a-config", metavar="KEY=VALUE", action="append", default=[])
    p.add_argument("--b-config", metavar="KEY=VALUE", action="append", default=[])
    p.add_argument("--rounds", type=int, default=5, help="alternations of A and B (each build a subprocess)")
    args = p.parse_args()
    if args.child:
        child(args.config, 1, args.profile)
        return
    if args.a_src is None:
        p.error("--a-src is required")
    builds: dict[str, tuple[Path, list[str]]] = {"A": (args.a_src, args.a_config), "B": (args.b_src, args.b_config)}
    runs: dict[str, dict[str, list[float]]] = {name: {case: [] for case in CASES} for name in builds}
    for rnd in range(args.rounds):
        for name in (("A", "B") if rnd % 2 == 0 else ("B", "A")):
            src, config = builds[name]
            profile = args.profile / f"{name}.prof" if args.profile and rnd == args.rounds - 1 else None
            if profile:
                profile.parent.mkdir(parents=True, exist_ok=True)
            for case, values in run_build(src, config, 1, profile).items():
                runs[name][case] += values
    best: Callable[[list[float]], float] = min
    print(f"A = {args.a_src} {' '.join(args.a_config)}\nB = {args.b_src} {' '.join(args.b_config)}\n"
          f"{args.rounds} rounds, load average {os.getloadavg()[0]:.2f} at the end; µs of CPU per request, best round")
    print(f"{'case':<15}{'A µs':>10}{'B µs':>10}{'B/A':>8}{'A/B (throughput)':>19}")
    for case in CASES:
        a, b = best(runs["A"][case]), best(runs["B"][case])
        print(f"{case:<15}{a:>10.1f}{b:>10.1f}{b / a:>8.2f}{a / b:>19.2f}")


if __name__ == "__main__":
    main()
