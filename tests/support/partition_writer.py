"""A writer for the network-partition tests, run as its own process (inside a broker's network
namespace when the test needs a client on the isolated side).

    python partition_writer.py BOOTSTRAP TOPIC PREFIX OUT_FILE STOP_FILE [--transactional-id ID]

Sends PREFIX-0, PREFIX-1, ... to partition 0 with acks=all (an idempotent producer; with
``--transactional-id``, transactions of 5 records each, committed) until STOP_FILE exists, and
appends one JSON line per send or transaction outcome to OUT_FILE for tests/support/history.py:
{"send": value, "outcome": ok|fail|info, "txn": name|null} and {"txn": name, "outcome": ...},
each with the time ``t`` the outcome was known.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from eoslog.client import Producer
from eoslog.client.errors import KafkaError, KafkaTimeoutError, NotEnoughReplicasError

SETTINGS = {"acks": "all", "enable.idempotence": True, "request.timeout.ms": 5000,
            "delivery.timeout.ms": 20000, "retry.backoff.ms": 200, "max.in.flight.requests.per.connection": 1}


def _outcome(error: BaseException | None) -> str:
    if error is None:
        return "ok"
    if isinstance(error, NotEnoughReplicasError):
        return "fail"  # refused before the append
    return "info"  # a timeout or a lost connection: written or not, nobody knows


def main() -> None:
    args = argparse.ArgumentParser()
    for name in ("bootstrap", "topic", "prefix", "out", "stop"):
        args.add_argument(name)
    args.add_argument("--transactional-id")
    a = args.parse_args()
    out, stop = Path(a.out), Path(a.stop)
    settings = {"bootstrap.servers": a.bootstrap, **SETTINGS}
    if a.transactional_id:
        settings["transactional.id"] = a.transactional_id
        settings["transaction.timeout.ms"] = 10000
    with out.open("a") as log, Producer(settings) as producer:
        def record(doc: dict[str, object]) -> None:
            log.write(json.dumps({**doc, "t": time.time()}) + "\n")
            log.flush()

        if a.transactional_id:
            producer.init_transactions(120)
        i = 0
        while not stop.exists():
            if a.transactional_id:
                name = f"{a.prefix}-txn-{i}"
                values = [f"{a.prefix}-{i + k}" for k in range(5)]
                i += 5
                try:
                    producer.begin_transaction()
                    for v in values:
                        producer.send(a.topic, v.encode(), partition=0)
                    producer.commit_transaction(30)
                    outcome = "commit"
                except KafkaTimeoutError:
                    outcome = "info"
                except KafkaError:
                    outcome = "info"
                    try:
                        producer.abort_transaction(30)
                        outcome = "abort"
                    except KafkaError:
                        pass
                for v in values:
                    record({"send": v, "outcome": "ok", "txn": name})
                record({"txn": name, "outcome": outcome})
                if outcome == "info":
                    return  # the producer's state is unknown: a new instance would fence this one
            else:
                value = f"{a.prefix}-{i}"
                i += 1
                future = producer.send(a.topic, value.encode(), partition=0)
                try:
                    future.result(30)
                    error: BaseException | None = None
                except KafkaError as e:
                    error = e
                record({"send": value, "outcome": _outcome(error), "txn": None})
            time.sleep(0.01)


if __name__ == "__main__":
    main()
