"""What security costs (issue 15): produce and fetch over SSL, SASL_SSL and SASL_PLAINTEXT
against PLAINTEXT, and the connection set-up rate with SCRAM, on one broker in one run.

    python bench/security.py [--mb 40] [--rounds 3] [--connections 100]
    python bench/security.py --a-src /tmp/tls-before/src [--b-src src] --listeners PLAINTEXT,SSL,SASL_SSL

One broker (tests/support/security_harness.py: a throw-away CA, SCRAM users, ACLs on) with every
listener; the principals used get ALLOW ALL on the benchmark's topics and groups, so the
authorizer's per-request checks are in every figure (its decisions logged at the default level,
DEBUG: not written). Each round runs librdkafka's acks=1
produce of ``--mb`` MB (1 KB records, 3 partitions) and a fetch of it back on every
listener, in a rotated order (a slow stretch of the shared machine hits all alike); the
best of the rounds is reported, with each listener's ratio to PLAINTEXT. Then
``--connections`` sequential connections per listener, each connected, negotiated
(ApiVersions) and, on SASL listeners, authenticated with SCRAM-SHA-512 (PBKDF2 at 4096
iterations on both sides) before the next: connections per second.

With ``--a-src`` two builds run (A from that ``src``, e.g. a ``git worktree add --detach`` of the
commit before a change; B from ``--b-src``, this checkout's by default), one broker each, and
every round measures both, in a rotated order: B/A per listener and case, from one run.
Besides MB/s each case records the broker's CPU seconds (psutil) and the client's (librdkafka's
threads, this process): CPU seconds per GB moved, less noisy than the wall clock on a shared machine.

Output: a table, bench/results/security-<timestamp>.json (``-ab-`` with two builds) and
security-latest.json, and security-latest.png. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from rich.console import Console
from rich.table import Table

from common import MB, REPO_ROOT, RESULTS_DIR, Measurement, git_commit, machine_facts
from load import PARTITIONS, RECORD_SIZE, ProduceCase, fetch, produce
from support.rawkafka import api_versions_request
from support.security_harness import USERS, SecuredBroker, scram_login

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PRINCIPALS = ("User:ANONYMOUS", "User:CN=client,OU=eoslog-dev", "User:alice")
ACKS1 = ProduceCase("acks1", "produce acks=1", {"acks": 1, "enable.idempotence": False})


def grant_all(sb: SecuredBroker) -> None:
    admin = AdminClient(sb.rdkafka("SASL_SSL", user="admin"))
    bindings = [AclBinding(rt, "sec-" if rt == ResourceType.TOPIC else "bench-", ResourcePatternType.PREFIXED,
                           p, "*", AclOperation.ALL, AclPermissionType.ALLOW)
                for p in PRINCIPALS for rt in (ResourceType.TOPIC, ResourceType.GROUP)]
    for f in admin.create_acls(bindings, request_timeout=30).values():
        f.result()


def create_topic(sb: SecuredBroker, name: str) -> None:
    admin = AdminClient(sb.rdkafka("SASL_SSL", user="admin"))
    for f in admin.create_topics([NewTopic(name, PARTITIONS, 1)], request_timeout=30).values():
        f.result()


def client_conf(sb: SecuredBroker, listener: str) -> dict[str, Any]:
    conf = sb.rdkafka(listener, user="alice", mechanism="SCRAM-SHA-512")
    conf.pop("bootstrap.servers")
    return conf


def connection_rate(sb: SecuredBroker, listener: str, count: int) -> float:
    """Connections per second, each set up completely before the next."""
    start = time.perf_counter()
    for _ in range(count):
        with sb.raw(listener, cert="client" if listener == "SSL" else None) as raw:
            raw.call(api_versions_request())
            if listener.startswith("SASL"):
                assert scram_login(raw, "alice", USERS["alice"]).error_code == 0
    return count / (time.perf_counter() - start)


def start_broker(root: Path, src: Path | None) -> SecuredBroker:
    """A SecuredBroker run from ``src`` (None: the installed eoslog), ACLs granted."""
    if src is not None:
        if not (src / "eoslog" / "__init__.py").exists():
            raise SystemExit(f"{src} has no eoslog package")
        os.environ["PYTHONPATH"] = str(src)  # read by the broker subprocess at its start
    # The broker's default authorizer.log.level (DEBUG: allowed decisions not logged); the tests'
    # harness logs them at INFO, a line per request, which is not what a deployment pays.
    sb = SecuredBroker(root, overrides={"authorizer.log.level": "DEBUG"})
    sb.broker.start()
    os.environ.pop("PYTHONPATH", None)
    grant_all(sb)
    return sb


def broker_cpu(sb: SecuredBroker) -> float:
    assert sb.broker.proc is not None
    t = psutil.Process(sb.broker.proc.pid).cpu_times()
    return float(t.user + t.system)


def measure(sb: SecuredBroker, listener: str, topic: str, records: int) -> dict[str, Measurement]:
    """acks=1 produce of ``records`` to ``topic``, then the fetch of them, with each one's broker CPU."""
    create_topic(sb, topic)
    conf = client_conf(sb, listener)
    case = ProduceCase(ACKS1.name, ACKS1.label, {**ACKS1.config, **conf})
    out = {}
    for kind in ("produce", "fetch"):
        cpu0 = broker_cpu(sb)
        m = (produce(sb.address(listener), topic, case, records) if kind == "produce"
             else fetch(sb.address(listener), topic, records, extra=conf))
        m.extra["broker_cpu_s"] = round(broker_cpu(sb) - cpu0, 3)
        out[kind] = m
    return out


def summary(cases: dict[str, list[Measurement]], base: dict[str, list[Measurement]]) -> dict[str, Any]:
    """Best and median MB/s, their ratio to PLAINTEXT's, and median CPU seconds per GB (broker, client)."""
    out: dict[str, Any] = {}
    for kind, ms in cases.items():
        rates = [m.mb_s for m in ms]
        base_rates = [m.mb_s for m in base[kind]]
        per_gb = {side: statistics.median(m.extra[f"{side}_cpu_s"] / (m.bytes / MB / 1024) for m in ms)
                  for side in ("broker", "client")}
        out[kind] = {"best_mb_s": round(max(rates), 1), "median_mb_s": round(statistics.median(rates), 1),
                     "best_over_plaintext": round(max(rates) / max(base_rates), 3),
                     "median_over_plaintext": round(statistics.median(rates) / statistics.median(base_rates), 3),
                     "broker_cpu_s_per_gb": round(per_gb["broker"], 2),
                     "client_cpu_s_per_gb": round(per_gb["client"], 2)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=40, help="MB produced (and fetched) per listener and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--connections", type=int, default=100, help="connections set up per listener (0: none)")
    p.add_argument("--listeners", default=",".join(LISTENERS), help="comma-separated; PLAINTEXT is always in")
    p.add_argument("--a-src", type=Path, help="src/ of build A (the one before): an A/B run")
    p.add_argument("--b-src", type=Path, default=REPO_ROOT / "src", help="src/ of build B (with --a-src)")
    args = p.parse_args()
    listeners = tuple(ls for ls in LISTENERS if ls == "PLAINTEXT" or ls in args.listeners.split(","))
    srcs: dict[str, Path | None] = ({"A": args.a_src.resolve(), "B": args.b_src.resolve()} if args.a_src
                                    else {"eoslog": None})
    records = args.mb * 1024 * 1024 // RECORD_SIZE
    console = Console(width=140)
    load = [os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="eoslog-bench-security-") as tmp:
        brokers: dict[str, SecuredBroker] = {}
        try:
            for name, src in srcs.items():
                brokers[name] = start_broker(Path(tmp) / name, src)
            runs = {name: {ls: {"produce": [], "fetch": []} for ls in listeners} for name in srcs}
            pairs = [(name, ls) for ls in listeners for name in srcs]
            for r in range(args.rounds):
                shift = r % len(pairs)
                for name, listener in pairs[shift:] + pairs[:shift]:  # a slow stretch hits all alike
                    got = measure(brokers[name], listener, f"sec-{listener.lower()}-{r}", records)
                    for kind, m in got.items():
                        runs[name][listener][kind].append(m)
                    console.print(f"round {r + 1} {name} {listener}: " + ", ".join(
                        f"{k} {m.mb_s:.1f} MB/s (broker {m.extra['broker_cpu_s']:.2f} s, "
                        f"client {m.extra['client_cpu_s']:.2f} s CPU)" for k, m in got.items()))
                load.append(os.getloadavg())
            rates = {name: {ls: connection_rate(sb, ls, args.connections) if args.connections else 0.0
                            for ls in listeners} for name, sb in brokers.items()}
        finally:
            for sb in brokers.values():
                sb.broker.stop()
        machine = machine_facts(Path(tmp))
    builds = {name: {"src": str(src) if src else None, "commit": git_commit(src or REPO_ROOT / "src"),
                     "summary": {ls: summary(runs[name][ls], runs[name]["PLAINTEXT"]) for ls in listeners},
                     "connections_per_s": rates[name]} for name, src in srcs.items()}
    shown = "B" if args.a_src else "eoslog"
    table = Table("build", "listener", "produce MB/s best/median", "/ PLAINTEXT", "fetch MB/s best/median",
                  "/ PLAINTEXT", "broker CPU s/GB prod/fetch", "client CPU s/GB prod/fetch", "conn/s",
                  title=f"security cost, {args.rounds} rounds, {args.mb} MB per case; ratios best (median)")
    for name in srcs:
        for ls in listeners:
            s, c = builds[name]["summary"][ls], rates[name]
            table.add_row(name, ls, *(x for kind in ("produce", "fetch") for x in (
                f"{s[kind]['best_mb_s']:.1f} / {s[kind]['median_mb_s']:.1f}",
                f"{s[kind]['best_over_plaintext']:.2f} ({s[kind]['median_over_plaintext']:.2f})")),
                f"{s['produce']['broker_cpu_s_per_gb']:.2f} / {s['fetch']['broker_cpu_s_per_gb']:.2f}",
                f"{s['produce']['client_cpu_s_per_gb']:.2f} / {s['fetch']['client_cpu_s_per_gb']:.2f}",
                f"{c[ls]:.1f}")
    console.print(table)
    if args.a_src:
        ab = Table("listener", "case", "B/A best MB/s", "B/A median MB/s", "B/A broker CPU per GB (median)",
                   title="B over A")
        for ls in listeners:
            for kind in ("produce", "fetch"):
                a, b = builds["A"]["summary"][ls][kind], builds["B"]["summary"][ls][kind]
                ab.add_row(ls, kind, f"{b['best_mb_s'] / a['best_mb_s']:.2f}",
                           f"{b['median_mb_s'] / a['median_mb_s']:.2f}",
                           f"{b['broker_cpu_s_per_gb'] / a['broker_cpu_s_per_gb']:.2f}")
        console.print(ab)
    console.print(f"load average (1, 5, 15 min) at the start and after each round: "
                  f"{[tuple(round(x, 1) for x in la) for la in load]}")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    results = {
        "timestamp": stamp, "machine": machine, "load_avg": [[round(x, 2) for x in la] for la in load],
        "workload": {"mb": args.mb, "rounds": args.rounds, "record_bytes": RECORD_SIZE, "partitions": PARTITIONS,
                     "connections": args.connections, "sasl": "SCRAM-SHA-512, 4096 iterations", "acls": True,
                     "listeners": list(listeners)},
        "best_mb_s": {ls: {k: v["best_mb_s"] for k, v in builds[shown]["summary"][ls].items()} for ls in listeners},
        "connections_per_s": rates[shown], "builds": builds,
        "runs": {name: {ls: {k: [m.to_json() for m in ms] for k, ms in cases.items()} for ls, cases in r.items()}
                 for name, r in runs.items()},
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    kind = "security-ab" if args.a_src else "security"
    for name in (f"{kind}-{stamp}.json", f"{kind}-latest.json"):
        (RESULTS_DIR / name).write_text(json.dumps(results, indent=1))
    plot(results, RESULTS_DIR / f"{kind}-latest.png")
    console.print(f"saved {RESULTS_DIR / f'{kind}-{stamp}.json'} and {kind}-latest.png")


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    best, rates = results["best_mb_s"], results["connections_per_s"]
    shown = list(best)
    for ax, values, title in ((axes[0], [best[ls]["produce"] for ls in shown], "produce acks=1, MB/s"),
                              (axes[1], [best[ls]["fetch"] for ls in shown], "fetch, MB/s"),
                              (axes[2], [rates[ls] for ls in shown], "connection set-up, per s")):
        ax.bar(shown, values, color=["#9e9e9e", "#1f77b4", "#ff7f0e", "#2ca02c"][:len(shown)])
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=20)
    fig.suptitle(f"eoslog security cost — {results['workload']['mb']} MB per case, best of "
                 f"{results['workload']['rounds']} rounds, ACLs on — {results['timestamp']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
