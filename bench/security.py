"""What security costs (issue 15): produce and fetch over SSL, SASL_SSL and SASL_PLAINTEXT
against PLAINTEXT, and the connection set-up rate with SCRAM, on one broker in one run.

    python bench/security.py [--mb 40] [--rounds 3] [--connections 100]

One broker (tests/support/security_harness.py: a throw-away CA, SCRAM users, ACLs on) with every
listener; the principals used get ALLOW ALL on the benchmark's topics and groups, so the
authorizer's per-request checks are in every figure. Each round runs librdkafka's acks=1
produce of ``--mb`` MB (1 KB records, 3 partitions) and a fetch of it back on every
listener, in a rotated order (a slow stretch of the shared machine hits all alike); the
best of the rounds is reported, with each listener's ratio to PLAINTEXT. Then
``--connections`` sequential connections per listener, each connected, negotiated
(ApiVersions) and, on SASL listeners, authenticated with SCRAM-SHA-512 (PBKDF2 at 4096
iterations on both sides) before the next: connections per second.

Output: a table, bench/results/security-<timestamp>.json and security-latest.json, and
security-latest.png. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

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

from common import RESULTS_DIR, Measurement, machine_facts
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=40, help="MB produced (and fetched) per listener and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--connections", type=int, default=100, help="connections set up per listener")
    args = p.parse_args()
    records = args.mb * 1024 * 1024 // RECORD_SIZE
    console = Console(width=120)
    with tempfile.TemporaryDirectory(prefix="eoslog-bench-security-") as tmp:
        sb = SecuredBroker(Path(tmp))
        sb.broker.start()
        try:
            grant_all(sb)
            runs: dict[str, dict[str, list[Measurement]]] = {ls: {"produce": [], "fetch": []} for ls in LISTENERS}
            for r in range(args.rounds):
                order = LISTENERS[r % len(LISTENERS):] + LISTENERS[:r % len(LISTENERS)]
                for listener in order:
                    topic = f"sec-{listener.lower()}-{r}"
                    create_topic(sb, topic)
                    conf = client_conf(sb, listener)
                    case = ProduceCase(ACKS1.name, ACKS1.label, {**ACKS1.config, **conf})
                    runs[listener]["produce"].append(produce(sb.address(listener), topic, case, records))
                    runs[listener]["fetch"].append(fetch(sb.address(listener), topic, records, extra=conf))
                    console.print(f"round {r + 1} {listener}: produce {runs[listener]['produce'][-1].mb_s:.1f} MB/s, "
                                  f"fetch {runs[listener]['fetch'][-1].mb_s:.1f} MB/s")
            rates = {ls: connection_rate(sb, ls, args.connections) for ls in LISTENERS}
        finally:
            sb.broker.stop()
        machine = machine_facts(Path(tmp))
    best = {ls: {k: max(m.mb_s for m in ms) for k, ms in cases.items()} for ls, cases in runs.items()}
    table = Table("listener", "produce MB/s", "/ PLAINTEXT", "fetch MB/s", "/ PLAINTEXT", "connections/s",
                  "/ PLAINTEXT", title=f"security cost, best of {args.rounds} rounds, {args.mb} MB per case")
    base = best["PLAINTEXT"]
    for ls in LISTENERS:
        table.add_row(ls, f"{best[ls]['produce']:.1f}", f"{best[ls]['produce'] / base['produce']:.2f}",
                      f"{best[ls]['fetch']:.1f}", f"{best[ls]['fetch'] / base['fetch']:.2f}",
                      f"{rates[ls]:.1f}", f"{rates[ls] / rates['PLAINTEXT']:.3f}")
    console.print(table)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    results = {
        "timestamp": stamp, "machine": machine,
        "workload": {"mb": args.mb, "rounds": args.rounds, "record_bytes": RECORD_SIZE, "partitions": PARTITIONS,
                     "connections": args.connections, "sasl": "SCRAM-SHA-512, 4096 iterations", "acls": True},
        "best_mb_s": best, "connections_per_s": rates,
        "runs": {ls: {k: [m.to_json() for m in ms] for k, ms in cases.items()} for ls, cases in runs.items()},
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    for name in (f"security-{stamp}.json", "security-latest.json"):
        (RESULTS_DIR / name).write_text(json.dumps(results, indent=1))
    plot(results, RESULTS_DIR / "security-latest.png")
    console.print(f"saved {RESULTS_DIR / 'security-latest.json'} and security-latest.png")


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    best, rates = results["best_mb_s"], results["connections_per_s"]
    for ax, values, title in ((axes[0], [best[ls]["produce"] for ls in LISTENERS], "produce acks=1, MB/s"),
                              (axes[1], [best[ls]["fetch"] for ls in LISTENERS], "fetch, MB/s"),
                              (axes[2], [rates[ls] for ls in LISTENERS], "connection set-up, per s")):
        ax.bar(LISTENERS, values, color=["#9e9e9e", "#1f77b4", "#ff7f0e", "#2ca02c"])
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=20)
    fig.suptitle(f"eoslog security cost — {results['workload']['mb']} MB per case, best of "
                 f"{results['workload']['rounds']} rounds, ACLs on — {results['timestamp']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
