"""A share-group member as a process of its own, for tests that kill or stop one: it polls a share
consumer (``--client confluent``: confluent-kafka's ShareConsumer; ``eoslog``: eoslog.client's),
prints one JSON line per record it gets (``{"offset", "partition", "count", "value", "member",
"t"}``) before acknowledging it, and after each commit ``{"ev": "acked", "offsets", "ok", "t"}``
(``ok``: the broker answered every acknowledgement of those records without an error). It
acknowledges as ``--ack`` says (accept, release, reject, or none: never, holding the records of its
first poll, and polling no more, until its locks run out or it dies). ``--max-records`` caps a poll;
``--sleep-ms`` is the time it spends per record. It exits after ``--limit`` records, or when
killed. ``{"ev": "ready"}`` is printed once it has subscribed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any


def _print(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class _Confluent:
    """A confluent-kafka Message with eoslog.client's attribute names."""

    def __init__(self, message: Any) -> None:
        self.message = message
        self.offset, self.partition = message.offset(), message.partition()
        self.delivery_count, self.value = message.delivery_count(), message.value()


def member(args: argparse.Namespace) -> tuple[Callable[[], list[Any]], Callable[[Any], None],
                                               Callable[[], bool], Callable[[], None]]:
    """poll, acknowledge, commit and close of the chosen client (eoslog.client's share consumer
    takes confluent-kafka's names)."""
    if args.client == "confluent":
        from confluent_kafka import AcknowledgeType, ShareConsumer
    else:
        from eoslog.client import AcknowledgeType, ShareConsumer  # type: ignore[assignment]

    consumer = ShareConsumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                              "share.acknowledgement.mode": "explicit", "max.poll.records": args.max_records,
                              "client.id": args.member})
    consumer.subscribe([args.topic])
    kind = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
            "reject": AcknowledgeType.REJECT}.get(args.ack)

    def poll() -> list[Any]:
        if args.client == "confluent":
            return [_Confluent(m) for m in consumer.poll(1.0) if m.error() is None]
        return list(consumer.poll(1.0))

    def ack(m: Any) -> None:
        if kind is not None:
            consumer.acknowledge(m.message if args.client == "confluent" else m, kind)

    def commit() -> bool:
        """True if every acknowledgement since the last commit was answered without an error."""
        if kind is None:
            return False
        try:
            results = consumer.commit_sync()
        except Exception:  # the broker unreachable for the whole commit: not acknowledged
            return False
        return all(error is None for error in results.values())

    return poll, ack, commit, consumer.close


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--member", default="member")
    p.add_argument("--client", choices=("confluent", "eoslog"), default="confluent")
    p.add_argument("--ack", choices=("accept", "release", "reject", "none"), default="accept")
    p.add_argument("--max-records", type=int, default=50)
    p.add_argument("--sleep-ms", type=float, default=0.0)
    p.add_argument("--limit", type=int, default=0, help="exit after this many records (0: never)")
    args = p.parse_args()
    poll, ack, commit, close = member(args)
    _print({"ev": "ready"})
    got = 0
    while not args.limit or got < args.limit:
        if args.ack == "none" and got:
            time.sleep(0.1)  # holding its records: an explicit-mode consumer may not poll again
            continue
        try:
            records = poll()
        except Exception as e:  # the broker restarting: the client says so; poll again
            _print({"ev": "poll-error", "error": str(e)})
            time.sleep(0.2)
            continue
        for m in records:
            _print({"offset": m.offset, "partition": m.partition, "count": m.delivery_count,
                    "value": m.value.decode() if m.value is not None else None, "member": args.member,
                    "t": time.time()})
            time.sleep(args.sleep_ms / 1000)
            ack(m)
            got += 1
        if records:
            ok = commit()
            _print({"ev": "acked", "offsets": [m.offset for m in records], "ok": ok, "t": time.time()})
    close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
