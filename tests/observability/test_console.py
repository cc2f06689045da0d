"""``eoslog console`` against a real eoslog broker, driven in headless Chromium.

One broker (with its metrics endpoint), one console process and one browser for the module.
What an operator must be able to trust on each page is checked against the admin client
and against what consumers really read:

- a hanging transaction (coordinator state lost, tests/hanging.py) is flagged on the
  transactions page with the partition and offset it pins; aborting it from the page moves
  that partition's LSO, and a read_committed consumer then reads the records behind it;
- an open transaction a coordinator owns shows its owner, pins the LSO, has no abort
  button, and leaves the page when committed;
- a group's lag on the page equals the admin client's numbers and what its consumer then
  reads; the partitions page shows ListOffsets' LSO and high watermark and the metrics'
  log end offset.

Screenshots of every page go to test-artifacts/console/.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as RdTopicPartition
from console_harness import ConsoleProcess, cell, chromium_page, screenshot

from eoslog.client import Admin, IsolationLevel, NewTopic, OffsetSpec, TopicPartition
from hanging import lose_coordinator_state, open_transactions_app
from harness import BrokerProcess, free_port, wait_until


class Stack:
    def __init__(self, broker: BrokerProcess, console: ConsoleProcess, page: Any) -> None:
        self.broker, self.console, self.page = broker, console, page

    def open(self, path: str) -> Any:
        self.page.goto(self.console.url + path)
        error = self.page.locator("#error")
        assert error.count() == 0, error.inner_text()
        return self.page

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(last stable offset, high watermark) by the admin client."""
        tp = TopicPartition(topic, partition)
        with Admin({"bootstrap.servers": self.broker.bootstrap}) as admin:
            hw = admin.list_offsets({tp: OffsetSpec.latest()})[tp].offset
            lso = admin.list_offsets({tp: OffsetSpec.latest()},
                                     isolation_level=IsolationLevel.READ_COMMITTED)[tp].offset
        return lso, hw


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("console")
    metrics_port = free_port()
    broker = BrokerProcess(root / "data", overrides={"metrics.listener": f"http://127.0.0.1:{metrics_port}"}).start()
    console = ConsoleProcess(broker.bootstrap, root / "console.log", f"http://127.0.0.1:{metrics_port}/metrics")
    try:
        with chromium_page() as page:
            yield Stack(broker, console, page)
    finally:
        console.stop()
        broker.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def transactional(bootstrap: str, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(60)
    return p


def read_committed(bootstrap: str, topic: str, partition: int, group: str | None = None,
                   expect: int | None = None) -> list[bytes]:
    """Every record a read_committed consumer gets from the partition (or from the group's
    committed offset) until it reaches the partition's end, having got at least ``expect``;
    then one more poll, for anything past what it should get."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"reader-{topic}",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        c.assign([RdTopicPartition(topic, partition)] if group is None
                 else c.committed([RdTopicPartition(topic, partition)], timeout=30))
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if expect is None or len(got) >= expect:
                    break  # the partition's end
                continue
            got.append(bytes(m.value() or b""))
        extra = c.poll(2.0)
        if extra is not None and not extra.error():
            got.append(bytes(extra.value() or b""))
    finally:
        c.close()
    return got


def test_hanging_transaction_is_flagged_and_aborted_from_the_page(stack: Stack) -> None:
    bootstrap, topic = stack.broker.bootstrap, "orders"
    create_topic(bootstrap, topic, 1)
    ids = {0: "console-orders-app"}
    lose_coordinator_state(stack.broker, open_transactions_app(bootstrap, topic, ids), ids)
    # Another application commits 4 records behind the hanging transaction (offsets 3-6, marker 7).
    other = transactional(bootstrap, "console-orders-other")
    other.begin_transaction()
    for i in range(4):
        other.produce(topic, value=f"committed-{i}".encode(), partition=0)
    other.commit_transaction(60)
    wait_until(lambda: stack.offsets(topic, 0)[1] == 8, "the committed transaction's marker")
    assert stack.offsets(topic, 0) == (0, 8)  # pinned at the hanging transaction's first offset

    page = stack.open("/transactions")
    row = "#open-transactions tr[data-partition='orders-0']"
    assert page.locator(row).count() == 1
    assert page.locator(row).get_attribute("data-status") == "hanging"
    assert cell(page, row, "start-offset") == "0"
    assert cell(page, row, "pins") == "yes"
    assert (cell(page, row, "lso"), cell(page, row, "hw"), cell(page, row, "held")) == ("0", "8", "8")
    assert cell(page, row, "owner") == "—"
    screenshot(page, "transactions-hanging")

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"{row} button.abort").click()
    page.wait_for_url("**/transactions?message=*")
    assert "aborted the hanging transaction" in page.locator("#message").inner_text()
    screenshot(page, "transactions-after-abort")
    lso, hw = stack.offsets(topic, 0)
    assert lso == hw == 9  # the ABORT marker moved the LSO to the end
    assert read_committed(bootstrap, topic, 0) == [f"committed-{i}".encode() for i in range(4)]
    assert stack.open("/transactions").locator(row).count() == 0


def test_open_transaction_shows_its_owner_and_pins_the_lso(stack: Stack) -> None:
    bootstrap, topic = stack.broker.bootstrap, "payments"
    create_topic(bootstrap, topic, 2)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        plain.produce(topic, value=f"p-{i}".encode(), partition=1)
    assert plain.flush(30) == 0
    live = transactional(bootstrap, "console-payments-app")
    live.begin_transaction()
    for i in range(3):
        live.produce(topic, value=f"t-{i}".encode(), partition=1)
    assert live.flush(30) == 0
    lso, hw = stack.offsets(topic, 1)
    assert (lso, hw) == (5, 8)

    page = stack.open("/transactions")
    row = "#open-transactions tr[data-partition='payments-1']"
    assert page.locator(row).get_attribute("data-status") == "open"
    assert cell(page, row, "owner") == "console-payments-app (Ongoing)"
    assert (cell(page, row, "start-offset"), cell(page, row, "lso"), cell(page, row, "hw")) == ("5", str(lso), str(hw))
    assert cell(page, row, "pins") == "yes"
    assert page.locator(f"{row} button.abort").count() == 0  # a coordinator owns it: no abort here
    ids = "#transactional-ids tr[data-transactional-id='console-payments-app']"
    assert cell(page, ids, "state") == "Ongoing"
    screenshot(page, "transactions-open")

    partitions = stack.open("/partitions")
    prow = "#partitions tr[data-partition='payments-1']"
    assert (cell(partitions, prow, "lso"), cell(partitions, prow, "hw")) == (str(lso), str(hw))
    assert cell(partitions, prow, "held") == str(hw - lso)
    assert cell(partitions, prow, "leo") == str(hw)  # from the metrics endpoint: one node, LEO = HW
    screenshot(partitions, "partitions")
    producers = stack.open("/producers")
    assert producers.locator("#producers tr[data-partition='payments-1'] .open-from").all_inner_texts().count("5") == 1
    screenshot(producers, "producers")

    live.commit_transaction(60)
    wait_until(lambda: stack.offsets(topic, 1)[0] == 9, "the COMMIT marker")
    assert stack.open("/transactions").locator(row).count() == 0


def test_group_lag_equals_the_admin_client_and_what_the_consumer_reads(stack: Stack) -> None:
    bootstrap, topic, group = stack.broker.bootstrap, "lagged", "console-billing"
    create_topic(bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": bootstrap})
    for partition, n in ((0, 10), (1, 6)):
        for i in range(n):
            p.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committer.commit(offsets=[RdTopicPartition(topic, 0, 4), RdTopicPartition(topic, 1, 6)], asynchronous=False)
    committer.close()

    page = stack.open("/groups")
    section = f"section[data-group='{group}']"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets(group)
    page_lags = {}
    for partition in (0, 1):
        row = f"{section} tr[data-partition='{topic}-{partition}']"
        lso, hw = stack.offsets(topic, partition)
        admin_committed = committed[TopicPartition(topic, partition)].offset
        assert cell(page, row, "committed") == str(admin_committed)
        assert cell(page, row, "lag") == str(hw - admin_committed)
        assert cell(page, row, "lag-stable") == str(lso - admin_committed)
        page_lags[partition] = int(cell(page, row, "lag"))
    assert page_lags == {0: 6, 1: 0}
    assert page.locator(f"{section} .total-lag").inner_text() == "6"
    screenshot(page, "groups")
    # The group's consumer reads exactly the lag the page showed, and nothing more.
    assert len(read_committed(bootstrap, topic, 0, group, expect=page_lags[0])) == page_lags[0]


def test_cluster_page(stack: Stack) -> None:
    page = stack.open("/")
    with Admin({"bootstrap.servers": stack.broker.bootstrap}) as admin:
        cluster_id = admin.describe_cluster().cluster_id
    assert page.locator("#cluster-id").inner_text() == cluster_id
    assert page.locator("#brokers td").first.inner_text() == "0"
    screenshot(page, "cluster")
