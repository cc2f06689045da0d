"""The console as a process and headless Chromium driving it (Playwright with Debian's
``chromium``: Playwright's own browser downloads are not used)."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as RdTopicPartition

from eoslog.client import Admin, IsolationLevel, NewTopic, OffsetSpec, TopicPartition
from support.deps import require
from support.harness import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("EOSLOG_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "console"
CHROMIUM_HINT = "apt-get install -y chromium (scripts/setup.sh does it), or set EOSLOG_CHROMIUM=/path/to/chromium"
PLAYWRIGHT_HINT = "pip install playwright (in the test extras: scripts/setup.sh installs them)"


def chromium_path() -> str:
    path = os.environ.get("EOSLOG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    require("Chromium", path is not None, CHROMIUM_HINT)
    assert path is not None
    return path


class ConsoleProcess:
    """``eoslog console`` on a free loopback port. ``no_auth`` (the default here): no logins, as
    scripts/first_look.sh serves it; ``tls``: (certfile, keyfile), served over HTTPS."""

    def __init__(self, bootstrap: str, log_path: Path, metrics_url: str | None = None, refresh_s: float = 0,
                 extra_args: tuple[str, ...] = (), *, no_auth: bool = True,
                 tls: tuple[Path, Path] | None = None) -> None:
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "eoslog", "console", "--bootstrap-server", bootstrap,
               "--listen", f"127.0.0.1:{self.port}", "--refresh", str(refresh_s)]
        if metrics_url:
            cmd += ["--metrics", metrics_url]
        if no_auth:
            cmd += ["--no-auth"]
        if tls:
            cmd += ["--certfile", str(tls[0]), "--keyfile", str(tls[1])]
        cmd += extra_args
        self.log_path = log_path
        with open(log_path, "a") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        unverified = ssl._create_unverified_context() if tls else None  # a test CA's certificate
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/static/refresh.js", timeout=5, context=unverified).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"console not serving; log:\n{log_path.read_text()[-3000:]}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


@contextmanager
def chromium_page() -> Iterator[Any]:
    """One headless Chromium and one page, for a test module."""
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require("playwright", False, PLAYWRIGHT_HINT)
        raise
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            # bypass_csp: the tests evaluate their own scripts in the page, and an escaping mistake
            # must show even though the console's Content-Security-Policy would stop its script.
            # ignore_https_errors: a test CA's certificate.
            page = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True,
                                       ignore_https_errors=True).new_page()
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


@contextmanager
def console_stack(name: str, broker: Any, root: Path, metrics_url: str = "") -> Iterator[Stack]:
    """The set-up every console test module shares: a console for ``broker`` (eoslog's or
    Kafka's, started by the caller, who stops it after) and a Chromium page on it; the console
    is stopped on the way out."""
    console = ConsoleProcess(broker.bootstrap, root / "console.log", metrics_url or None)
    try:
        with chromium_page() as page:
            stack = Stack(name, broker, console, page)
            stack.metrics_url = metrics_url
            yield stack
    finally:
        console.stop()


def confirm(page: Any, expected: str) -> str:
    """On the console's confirmation page (the first POST of an action), which must say
    ``expected``: confirm, and return the path of the page the action went back to."""
    page.wait_for_selector("#confirm")
    summary = page.locator("#summary").inner_text()
    assert expected in summary, summary
    page.locator("#confirm").click()
    page.wait_for_selector("#message")
    return str(urllib.parse.urlsplit(page.url).path)


def screenshot(page: Any, name: str) -> Path:
    """A full-page screenshot kept as a test artefact (test-artifacts/console/NAME.png)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def cell(page: Any, row: str, column: str) -> str:
    """The text of the ``column`` cell of the row matched by the CSS selector ``row``."""
    return str(page.locator(f"{row} .{column}").inner_text()).strip()


class Stack:
    """A broker (eoslog's or Kafka's), the console for it, and a Chromium page."""

    def __init__(self, name: str, broker: Any, console: ConsoleProcess, page: Any) -> None:
        self.name, self.broker, self.console, self.page = name, broker, console, page
        self.metrics_url = ""  # the broker's metrics endpoint, where it has one

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


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def produce_plain(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    """``counts[p]`` non-transactional records to each partition ``p``."""
    p = Producer({"bootstrap.servers": bootstrap})
    for partition, n in counts.items():
        for i in range(n):
            p.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0


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


def check_owned_open_transaction(stack: Stack, topic: str, metrics: bool) -> None:
    """An open transaction a coordinator owns shows its owner, pins the LSO, has no abort
    button, and leaves the page when committed; partitions and producers pages agree."""
    bootstrap = stack.broker.bootstrap
    create_topic(bootstrap, topic, 2)
    produce_plain(bootstrap, topic, {1: 5})
    live = transactional(bootstrap, f"{topic}-app")
    live.begin_transaction()
    for i in range(3):
        live.produce(topic, value=f"t-{i}".encode(), partition=1)
    assert live.flush(30) == 0
    lso, hw = stack.offsets(topic, 1)
    assert (lso, hw) == (5, 8)

    page = stack.open("/transactions")
    row = f"#open-transactions tr[data-partition='{topic}-1']"
    assert page.locator(row).get_attribute("data-status") == "open"
    assert cell(page, row, "owner") == f"{topic}-app (Ongoing)"
    assert (cell(page, row, "start-offset"), cell(page, row, "lso"), cell(page, row, "hw")) == ("5", str(lso), str(hw))
    assert cell(page, row, "pins") == "yes"
    assert page.locator(f"{row} button.abort").count() == 0  # a coordinator owns it: no abort here
    ids = f"#transactional-ids tr[data-transactional-id='{topic}-app']"
    assert cell(page, ids, "state") == "Ongoing"
    screenshot(page, f"transactions-open-{stack.name}")

    partitions = stack.open("/partitions")
    prow = f"#partitions tr[data-partition='{topic}-1']"
    assert (cell(partitions, prow, "lso"), cell(partitions, prow, "hw")) == (str(lso), str(hw))
    assert cell(partitions, prow, "held") == str(hw - lso)
    # Log end offset from the metrics endpoint (one node: LEO = HW); none without one.
    assert cell(partitions, prow, "leo") == (str(hw) if metrics else "—")
    screenshot(partitions, f"partitions-{stack.name}")
    producers = stack.open("/producers")
    assert producers.locator(f"#producers tr[data-partition='{topic}-1'] .open-from").all_inner_texts().count("5") == 1
    screenshot(producers, f"producers-{stack.name}")

    live.commit_transaction(60)
    wait_until(lambda: stack.offsets(topic, 1)[0] == 9, "the COMMIT marker")
    assert stack.open("/transactions").locator(row).count() == 0


def check_group_lag(stack: Stack, topic: str, group: str) -> None:
    """A group's lag on the page equals the admin client's numbers and what its consumer then reads."""
    bootstrap = stack.broker.bootstrap
    create_topic(bootstrap, topic, 2)
    produce_plain(bootstrap, topic, {0: 10, 1: 6})
    with Admin({"bootstrap.servers": bootstrap}) as admin:  # retries while the coordinator loads
        admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 6})

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
    # Each view of the page is a point of the group's lag chart: two views, lag 6 both times.
    page = stack.open("/groups")
    assert page.locator(f"{section} .lag-chart desc.value").all_text_contents() == ["6"] * 4
    screenshot(page, f"groups-{stack.name}")
    # The group's consumer reads exactly the lag the page showed, and nothing more.
    assert len(read_committed(bootstrap, topic, 0, group, expect=page_lags[0])) == page_lags[0]


def check_consumer_group(stack: Stack, topic: str, group: str) -> None:
    """A KIP-848 consumer group on the groups page: its type, group epoch and its member's epoch as
    ConsumerGroupDescribe answers them (through the admin client), its committed offsets and lag."""
    bootstrap = stack.broker.bootstrap
    create_topic(bootstrap, topic, 2)
    produce_plain(bootstrap, topic, {0: 5, 1: 3})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "client.id": "console-848", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    read = 0

    def consume() -> bool:
        nonlocal read
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            read += 1
            consumer.commit(message=m, asynchronous=False)
        return read == 8

    try:
        wait_until(consume, "the consumer-protocol member reading and committing all eight records")
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            described = admin.describe_groups([group])[group]
        assert described.type == "consumer" and described.group_epoch is not None
        member = described.members[0]
        page = stack.open("/groups")
        section = f"section[data-group='{group}']"
        assert page.locator(f"{section} .group-type").inner_text() == "consumer"
        assert page.locator(f"{section} .group-epoch").inner_text() == str(described.group_epoch)
        epoch = page.locator(f"{section} .member-epoch[data-client='console-848']").inner_text().split()
        assert epoch == ["console-848", str(member.member_epoch)]
        for partition in (0, 1):
            row = f"{section} tr[data-partition='{topic}-{partition}']"
            assert cell(page, row, "lag") == "0" and cell(page, row, "member") == "console-848"
        screenshot(page, f"consumer-group-{stack.name}")
    finally:
        consumer.close()


def check_share_group(stack: Stack, topic: str, group: str, expect_start: int | None) -> None:
    """A share group on the groups page: its share-partition's start offset and lag as the admin
    client reads them, and the member holding the partition. ``expect_start``: the start offset
    once six records are accepted (6 on eoslog; Kafka persists a start offset one write late,
    docs/compatibility.md, so it is not checked there)."""
    from eoslog.client import AcknowledgeType, AlterConfigOp, ConfigResource, ConfigResourceType, ShareConsumer

    bootstrap = stack.broker.bootstrap
    create_topic(bootstrap, topic, 1)
    produce_plain(bootstrap, topic, {0: 10})
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.incremental_alter_configs({ConfigResource(ConfigResourceType.GROUP, group): [
            AlterConfigOp("share.auto.offset.reset", "earliest")]})
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"{group}-member",
                              "share.acknowledgement.mode": "explicit"})
    try:
        consumer.subscribe([topic])
        got: list[Any] = []
        wait_until(lambda: bool(got.extend(consumer.poll(0.5))) or len(got) >= 10, "the share group's records")
        for r in got:  # the first six done with, the rest back to the queue
            consumer.acknowledge(r, AcknowledgeType.ACCEPT if r.offset < 6 else AcknowledgeType.RELEASE)
        assert all(e is None for e in consumer.commit_sync().values())
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            tp = TopicPartition(topic, 0)
            wanted = (lambda start: start >= 0) if expect_start is None else (lambda start: start == expect_start)
            wait_until(lambda: wanted(admin.list_share_group_offsets(group, [tp])[tp].start_offset),
                       "the share-partition's start offset")
            info = admin.list_share_group_offsets(group, [tp])[tp]
        page = stack.open("/groups")
        row = f"section[data-share-group='{group}'] tr[data-partition='{topic}-0']"
        assert cell(page, row, "start-offset") == str(info.start_offset)
        assert cell(page, row, "lag") == ("-" if info.lag is None else str(info.lag))
        assert cell(page, row, "hw") == "10"
        assert cell(page, row, "members") == f"{group}-member"
        screenshot(page, f"share-groups-{stack.name}")
    finally:
        consumer.close()


def check_records_page(stack: Stack, topic: str) -> None:
    """Committed, aborted and marker offsets as the records page shows them under each isolation
    level: aborted records flagged under read_uncommitted, hidden under read_committed."""
    bootstrap = stack.broker.bootstrap
    create_topic(bootstrap, topic, 1)
    p = transactional(bootstrap, f"{topic}-writer")
    for values, commit, headers in ((("c-0", "c-1"), True, None), (("a-0", "a-1"), False, None),
                                    (('{"amount": 5, "account": "x"}',), True, [("source", b"test")])):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v.encode(), partition=0, headers=headers)
        assert p.flush(30) == 0  # librdkafka's abort drops what it has not sent
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
    wait_until(lambda: stack.offsets(topic, 0) == (8, 8), "the last COMMIT marker")

    def statuses(isolation: str, fmt: str = "text") -> dict[int, str]:
        page = stack.open(f"/records?topic={topic}&partition=0&offset=0&isolation={isolation}&format={fmt}")
        rows = page.locator("#records tr[data-offset]")
        return {int(rows.nth(i).get_attribute("data-offset")): str(rows.nth(i).get_attribute("data-status"))
                for i in range(rows.count())}

    got = statuses("read_uncommitted")
    assert got == {0: "committed", 1: "committed", 2: "no record", 3: "aborted", 4: "aborted", 5: "no record",
                   6: "committed", 7: "no record"}, got
    screenshot(stack.page, f"records-read-uncommitted-{stack.name}")
    got = statuses("read_committed", "json")
    assert got == {0: "committed", 1: "committed", 6: "committed"}, got
    page = stack.page
    assert '"amount": 5' in cell(page, "#records tr[data-offset='6']", "value")
    assert "source=test" in page.locator("#records tr[data-offset='6'] td").nth(5).inner_text()
    screenshot(page, f"records-read-committed-{stack.name}")
    statuses("read_uncommitted", "hex")
    assert cell(page, "#records tr[data-offset='3']", "value") == "61 2d 30"  # "a-0"


def check_cluster_page(stack: Stack, version: str) -> None:
    """The cluster page shows the admin client's cluster id, and for the broker its advertised
    endpoint, listeners (the bootstrap port among them) and ``version``."""
    page = stack.open("/")
    with Admin({"bootstrap.servers": stack.broker.bootstrap}) as admin:
        cluster = admin.describe_cluster()
    assert page.locator("#cluster-id").inner_text() == cluster.cluster_id
    (node,) = cluster.nodes
    row = f"#brokers tr[data-broker='{node.id}']"
    host, port = stack.broker.bootstrap.rsplit(":", 1)
    assert (cell(page, row, "host"), cell(page, row, "port")) == (host, port)
    assert f"{host}:{port}" in cell(page, row, "listeners")
    assert f"{host}:{port}" in cell(page, row, "advertised-listeners")
    assert cell(page, row, "version") == version
    screenshot(page, f"cluster-{stack.name}")


def check_actions(stack: Stack, topic: str, group: str) -> None:
    """Deleting records before an offset (partitions page) and resetting a group's offset (groups
    page), each confirmed in the browser, take effect as the admin client then reads them."""
    bootstrap = stack.broker.bootstrap
    create_topic(bootstrap, topic, 1)
    produce_plain(bootstrap, topic, {0: 10})
    tp = TopicPartition(topic, 0)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_consumer_group_offsets(group, {tp: 2})

    page = stack.open("/partitions")
    form = page.locator(f"#partitions tr[data-partition='{topic}-0'] form.delete-records")
    form.locator("input[name=offset]").fill("4")
    form.locator("button").click()
    assert confirm(page, f"Delete the records of {topic}-0 before offset 4?") == "/partitions"
    assert "log start now 4" in page.locator("#message").inner_text()
    assert cell(page, f"#partitions tr[data-partition='{topic}-0']", "log-start") == "4"

    page = stack.open("/groups")
    row = f"section[data-group='{group}'] tr[data-partition='{topic}-0']"
    page.locator(f"{row} form.reset-offset input[name=offset]").fill("7")
    page.locator(f"{row} form.reset-offset button").click()
    assert confirm(page, f"Reset the committed offset of group {group} on {topic}-0 to 7?") == "/groups"
    assert "reset to 7" in page.locator("#message").inner_text()
    assert (cell(page, row, "committed"), cell(page, row, "lag")) == ("7", "3")
    screenshot(page, f"groups-after-reset-{stack.name}")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].offset == 4
        assert admin.list_consumer_group_offsets(group)[tp].offset == 7
