"""Group commit's fsync rounds per case, two builds interleaved: what a change does to how many
requests share a round, a count the machine's load moves far less than MB/s.

    python bench/fsync_rounds.py --a-src /tmp/eoslog-before/src [--b-src src] [--mb 100] [--rounds 2]

For each round, case and build (A first in even rounds, B first in odd ones) a fresh broker
(``log.flush.policy=group-commit``, the single node's default, 3 partitions) takes one case and
is stopped; its own count, logged at shutdown, gives the fsync rounds and the offsets they made
durable. Cases: librdkafka acks=all and idempotent produce of ``--mb`` MB of 1 KB records
(``load.py``) and a transactional producer committing every 100 ms for ``--txn-seconds``
(``transactions.py``, verified). Reported per case and build: offsets per fsync round (higher:
more requests shared a round) and MB/s, each round. Results in bench/results/fsync-rounds-*.json.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from common import MB, REPO_ROOT, RESULTS_DIR, BrokerProcess, git_commit
from durability import TXN, fsync_stats
from load import PRODUCE_CASES, RECORD_SIZE, produce
from transactions import prime_coordinator, run_case, verify

CASES = ("acksall", "idempotent", TXN.name)


def one(src: Path, work: Path, case: str, args: argparse.Namespace) -> dict[str, Any]:
    os.environ["PYTHONPATH"] = str(src)  # read by the broker subprocess at its start
    broker = BrokerProcess(work, overrides={"num.partitions": "3", "log.flush.policy": "group-commit"}).start()
    try:
        if case == TXN.name:
            prime_coordinator(broker.bootstrap)
            m, sent = run_case(broker.bootstrap, "f-txn", TXN, args.txn_seconds)
            problems = verify(broker.bootstrap, "f-txn", sent)["problems"]
            if problems:
                raise RuntimeError(f"{case}: {problems[:3]}")
        else:
            spec = next(c for c in PRODUCE_CASES if c.name == case)
            m = produce(broker.bootstrap, f"f-{case}", spec, args.mb * MB // RECORD_SIZE)
    finally:
        broker.stop()
    stats = fsync_stats(broker, m.seconds) or {}
    return {"mb_s": round(m.mb_s, 1), "fsync_rounds": stats.get("fsync_rounds"),
            "offsets_per_round": stats.get("records_per_round")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a-src", type=Path, required=True, help="src/ of build A (the one before)")
    p.add_argument("--b-src", type=Path, default=REPO_ROOT / "src", help="src/ of build B (default: this checkout)")
    p.add_argument("--mb", type=int, default=100, help="MB of record values per produce case")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--txn-seconds", type=float, default=5.0)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    builds = {"A": args.a_src.resolve(), "B": args.b_src.resolve()}
    work = Path(tempfile.mkdtemp(prefix="eoslog-fsync-rounds-"))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {c: {"A": [], "B": []} for c in CASES}
    load_start = os.getloadavg()[0]
    for rnd in range(args.rounds):
        for case in CASES:
            for name in ("A", "B") if rnd % 2 == 0 else ("B", "A"):
                r = one(builds[name], work / f"{name}-{rnd}-{case}", case, args)
                runs[case][name].append(r)
                print(f"round {rnd + 1}: {case} on {name}: {r}", flush=True)
    os.environ["PYTHONPATH"] = str(REPO_ROOT / "src")
    results = {"a": {"src": str(builds["A"]), "commit": git_commit(builds["A"])},
               "b": {"src": str(builds["B"]), "commit": git_commit(builds["B"])},
               "mb": args.mb, "rounds": args.rounds, "load_start": load_start, "load_end": os.getloadavg()[0],
               "runs": runs}
    table = Table(title=f"A {results['a']['commit']}, B {results['b']['commit']}: offsets per fsync round "
                        f"(MB/s), each round; load {load_start:.1f} → {results['load_end']:.1f}")
    for col in ("case", "A", "B"):
        table.add_column(col)
    for case in CASES:
        table.add_row(case, *(", ".join(f"{r['offsets_per_round']} ({r['mb_s']})" for r in runs[case][name])
                              for name in ("A", "B")))
    Console(width=140).print(table)
    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / f"fsync-rounds-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(json.dumps(results, indent=1))
        print(f"saved {path}")


if __name__ == "__main__":
    main()
