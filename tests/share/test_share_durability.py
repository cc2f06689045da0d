"""Issue 26, acceptance test 4: share state survives ``kill -9`` of a single-node broker. Two
members (one confluent-kafka, one eoslog.client) accept records of one partition while the broker
is killed -9 twice and started again; in the end:

- no record whose acknowledgement the broker confirmed is ever delivered again (the share
  coordinator wrote the acknowledgement to ``__share_group_state`` before answering);
- no record is lost: every offset was delivered and acknowledged by the member that had it (an
  answer lost with the killed broker may leave an acknowledgement unconfirmed, yet done), and the
  share-partition's start offset is the partition's end.

Records acquired, or acknowledged without a confirmation, when the broker died may come again:
that is at-least-once, as Kafka's share groups promise.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from share_support import (
    BROKER_OVERRIDES,
    Member,
    create_topic,
    group_configs,
    produce,
    share_offsets,
    start_member,
    until,
)

from support.harness import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=BROKER_OVERRIDES).start()
    yield b
    if b.alive():
        b.stop()


def confirmed(members: list[Member]) -> int:
    return len({o for m in members for a in m.acks if a["ok"] for o in a["offsets"]})


def confirmed_then_redelivered(members: list[Member]) -> list[tuple[int, float, float]]:
    """(offset, confirmed at, delivered again at) of every record delivered after its
    acknowledgement was confirmed."""
    confirmed: dict[int, float] = {}
    for m in members:
        for a in m.acks:
            if a["ok"]:
                for o in a["offsets"]:
                    confirmed[o] = min(confirmed.get(o, a["t"]), a["t"])
    return [(r["offset"], confirmed[r["offset"]], r["t"]) for m in members for r in m.got()
            if r["offset"] in confirmed and r["t"] > confirmed[r["offset"]]]


def test_share_state_survives_broker_kill_9(broker: BrokerProcess, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group, total = f"d-{tag}", f"g-{tag}", 3000
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms=15000)
    produce(broker.bootstrap, topic, (f"v{i}" for i in range(total)))
    members = [start_member(broker.bootstrap, group, topic, name, tmp_path, client=client, max_records=20,
                            sleep_ms=1)
               for name, client in (("c", "confluent"), ("e", "eoslog"))]
    try:
        for fraction in (0.25, 0.6):
            until(lambda share=fraction: confirmed(members) >= total * share,  # type: ignore[misc]
                  f"{int(fraction * 100)}% of the records acknowledged", timeout=120)
            broker.kill()
            broker.start()
        until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == total,
              "every record done with", timeout=180, describe=lambda: share_offsets(broker.bootstrap, group, topic))
    finally:
        for m in members:
            m.close()
    assert confirmed_then_redelivered(members) == []
    delivered = {r["offset"] for m in members for r in m.got()}
    assert delivered == set(range(total))
    # Each record the broker is done with was acknowledged by a member that had it (an answer lost
    # with the killed broker leaves some unconfirmed, yet done).
    assert {o for m in members for a in m.acks for o in a["offsets"]} == set(range(total))
    # The kills hit records in flight: some were delivered again (not part of the guarantee; it
    # shows the test exercised the case it is about).
    deliveries = [r["offset"] for m in members for r in m.got()]
    print(f"{len(deliveries) - len(set(deliveries))} deliveries again after the kills;",
          "unconfirmed acknowledgements:", sum(1 for m in members for a in m.acks if not a["ok"]))
