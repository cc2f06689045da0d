"""A share-group worker as a process of its own (issue 26, acceptance test 6): it polls a share
group of ``--input`` with eoslog.client's ShareConsumer and copies each record's key and value to
``--output`` with a transactional producer (``--transactional-id``), one transaction per poll.

``--mode transactional`` (eoslog's extension): the poll's records are accepted inside the
transaction (``send_acknowledgements_to_transaction``), so its commit makes the copies visible and
the records acknowledged at once. ``--mode at-least-once`` (Kafka's share groups): the
transaction is committed, then the records are acknowledged (explicit mode, ``commit_sync``) —
two acts, with a window between them.

``--crash-at POINT --crash-in N``: the worker kills itself (SIGKILL, nothing flushed or closed)
at POINT of its Nth transaction: ``before-produce``, ``after-produce`` (the copies flushed to the
broker, not committed), ``after-ack`` (transactional: accepted in the transaction, not
committed), ``after-commit`` (committed; at-least-once: not yet acknowledged). Any error exits
the process (status 2): the test starts another, which fences this one's transactional id.

Prints JSON lines: ``{"ev": "ready"}`` once it has initialized, ``{"ev": "txn", "n", "values"}``
after each commit.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from typing import Any


def _print(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--transactional-id", required=True)
    p.add_argument("--mode", choices=("transactional", "at-least-once"), default="transactional")
    p.add_argument("--crash-at", choices=("none", "before-produce", "after-produce", "after-ack", "after-commit"),
                   default="none")
    p.add_argument("--crash-in", type=int, default=1)
    p.add_argument("--max-records", type=int, default=10)
    args = p.parse_args()

    from eoslog.client import AcknowledgeType, Producer, ShareConsumer

    transactional = args.mode == "transactional"
    consumer = ShareConsumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                              "share.acknowledgement.mode": "transactional" if transactional else "explicit",
                              "max.poll.records": args.max_records, "client.id": args.transactional_id})
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
                         "transaction.timeout.ms": 10000, "max.block.ms": 30000})
    producer.init_transactions()
    consumer.subscribe([args.input])
    _print({"ev": "ready"})
    count = 0

    def crash(point: str) -> None:
        if args.crash_at == point and count == args.crash_in:
            os.kill(os.getpid(), signal.SIGKILL)

    while True:
        records = consumer.poll(1.0)
        if not records:
            continue
        count += 1
        crash("before-produce")
        producer.begin_transaction()
        for r in records:
            producer.send(args.output, value=r.value, key=r.key)
        producer.flush()
        crash("after-produce")
        if transactional:
            producer.send_acknowledgements_to_transaction(consumer)
            crash("after-ack")
            producer.commit_transaction()
            crash("after-commit")
        else:
            producer.commit_transaction()
            crash("after-commit")
            for r in records:
                consumer.acknowledge(r, AcknowledgeType.ACCEPT)
            errors = consumer.commit_sync()
            if any(e is not None for e in errors.values()):
                raise RuntimeError(f"acknowledgements refused: {errors}")
        _print({"ev": "txn", "n": len(records), "values": [r.value.decode() for r in records]})


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        os._exit(2)  # no clean close: the next instance fences this one
