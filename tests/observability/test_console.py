"""``eoslog console`` against a real eoslog broker, driven in headless Chromium.

One broker (with its metrics endpoint), one console process and one browser for the module.
What an operator must be able to trust on each page is checked against the admin client
and against what consumers really read:

- a hanging transaction (coordinator state lost, tests/support/hanging.py) is flagged on the
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

import http.client
import http.server
import re
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as RdTopicPartition
from prometheus_client.parser import text_string_to_metric_families

import eoslog
from eoslog.client import Admin, NewTopic, OffsetSpec, TopicPartition
from support.console_harness import (
    ConsoleProcess,
    Stack,
    cell,
    check_actions,
    check_cluster_page,
    check_consumer_group,
    check_group_lag,
    check_owned_open_transaction,
    check_records_page,
    check_share_group,
    confirm,
    console_stack,
    create_topic,
    produce_plain,
    read_committed,
    screenshot,
    transactional,
)
from support.hanging import lose_coordinator_state, open_transactions_app
from support.harness import BrokerProcess, free_port, wait_until


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("console")
    metrics_port = free_port()
    # The coordinator's abort scan is slowed to an hour, so a transaction can be seen open past
    # its timeout (test_transaction_open_past_its_timeout_is_flagged).
    broker = BrokerProcess(root / "data", overrides={
        "metrics.listener": f"http://127.0.0.1:{metrics_port}",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "3600000"}).start()
    try:
        with console_stack("eoslog", broker, root, f"http://127.0.0.1:{metrics_port}/metrics") as stack:
            yield stack
    finally:
        broker.stop()


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
    screenshot(page, "transactions-hanging-eoslog")

    page.locator(f"{row} button.abort").click()
    assert confirm(page, "Abort the hanging transaction of producer") == "/transactions"
    assert "aborted the hanging transaction" in page.locator("#message").inner_text()
    screenshot(page, "transactions-after-abort-eoslog")
    lso, hw = stack.offsets(topic, 0)
    assert lso == hw == 9  # the ABORT marker moved the LSO to the end
    assert read_committed(bootstrap, topic, 0) == [f"committed-{i}".encode() for i in range(4)]
    assert stack.open("/transactions").locator(row).count() == 0
    assert_broker_logged(stack, "WriteTxnMarkers", "ABORT marker for producer", "on orders-0: NONE")


def test_cluster_page(stack: Stack) -> None:
    check_cluster_page(stack, eoslog.__version__)  # the console has this broker's --metrics


def test_open_transaction_shows_its_owner_and_pins_the_lso(stack: Stack) -> None:
    check_owned_open_transaction(stack, "payments", metrics=True)


def test_group_lag_equals_the_admin_client_and_what_the_consumer_reads(stack: Stack) -> None:
    check_group_lag(stack, "lagged", "console-billing")


def test_consumer_group_shows_its_type_and_epochs(stack: Stack) -> None:
    check_consumer_group(stack, "modern", "console-848")


def test_share_group_shows_its_start_offset_and_members(stack: Stack) -> None:
    check_share_group(stack, "queued", "console-workers", expect_start=6)


def test_records_page_flags_aborted_records_and_hides_them_under_read_committed(stack: Stack) -> None:
    check_records_page(stack, "ledger")


def test_delete_records_and_reset_a_group_offset_from_the_pages(stack: Stack) -> None:
    check_actions(stack, "trimmed", "console-trim")
    assert_broker_logged(stack, "DeleteRecords", "delete records trimmed-0 before offset 4: NONE")
    assert_broker_logged(stack, "OffsetCommit", "group console-trim (no generation) trimmed-0 to 7: NONE")


def assert_broker_logged(stack: Stack, api: str, *parts: str) -> None:
    """The broker's log has an audit line for ``api`` from the console carrying every part."""
    lines = [line for line in stack.broker.log_text().splitlines()
             if f"eoslog.audit: {api} by client.id=eoslog-console principal=User:ANONYMOUS peer=127.0.0.1:" in line]
    assert any(all(p in line for p in parts) for line in lines), (api, parts, lines)


def test_pages_refresh_in_place(stack: Stack, tmp_path: Path) -> None:
    """With --refresh, a page follows the broker without being reloaded: the high watermark
    cell changes after records arrive, in the same document (a marker set on it survives)."""
    bootstrap, topic = stack.broker.bootstrap, "refreshed"
    create_topic(bootstrap, topic, 1)
    live = ConsoleProcess(bootstrap, tmp_path / "console-refresh.log", refresh_s=1)
    try:
        page = stack.page
        page.goto(live.url + "/partitions")
        row = f"#partitions tr[data-partition='{topic}-0']"
        assert cell(page, row, "hw") == "0"
        page.evaluate("window.sameDocument = true")
        produce_plain(bootstrap, topic, {0: 3})
        page.wait_for_function(
            f"document.querySelector(\"{row} .hw\").innerText.trim() === '3'", timeout=60_000)
        assert page.evaluate("window.sameDocument") is True  # not reloaded
    finally:
        live.stop()


def test_transaction_open_past_its_timeout_is_flagged(stack: Stack) -> None:
    """A transaction older than its transaction.timeout.ms (the coordinator's abort scan has not
    come yet) is flagged on the page, and the metric the alert rule watches counts it."""
    bootstrap, topic, txn_id = stack.broker.bootstrap, "late", "console-late-app"
    create_topic(bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 5000,
                  "linger.ms": 0})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, value=b"late", partition=0)
    assert p.flush(30) == 0
    row = f"#transactional-ids tr[data-transactional-id='{txn_id}']"
    page = stack.open("/transactions")
    # Not yet 5 s old (margin for a slow machine's page load; the abort scan is off in this stack).
    assert "open past its timeout" not in page.locator(row).inner_text()
    wait_until(lambda: stack.open("/transactions").locator(row).get_attribute("class") == "late",
               "the transaction to be flagged once past its 5 s timeout", interval_s=0.5)
    assert "open past its timeout" in page.locator(row).inner_text()
    assert cell(page, row, "state") == "Ongoing"
    screenshot(page, "transactions-past-timeout-eoslog")
    assert scrape_value(stack.metrics_url, "eoslog_transaction_coordinator_open_past_timeout") == 1
    p.abort_transaction(60)
    wait_until(lambda: scrape_value(stack.metrics_url, "eoslog_transaction_coordinator_open_past_timeout") == 0,
               "the aborted transaction to leave the count")


def scrape_value(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=30) as r:
        families = text_string_to_metric_families(r.read().decode())
    return next(s.value for f in families for s in f.samples if s.name == name)


def test_command_config_reaches_the_admin_client_and_the_consumers(stack: Stack, tmp_path: Path) -> None:
    """--command-config: settings the admin client refuses stop the console with one readable
    line; accepted ones are used by its admin client and the records page's consumers."""
    bootstrap, topic = stack.broker.bootstrap, "configured"
    bad = tmp_path / "bad.properties"
    bad.write_text("no.such.setting=1\n")
    result = subprocess.run([sys.executable, "-m", "eoslog", "console", "--bootstrap-server", bootstrap,
                             "--command-config", str(bad), "--listen", f"127.0.0.1:{free_port()}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result
    assert "unknown admin client configuration 'no.such.setting'" in result.stderr
    assert "Traceback" not in result.stderr
    create_topic(bootstrap, topic, 1)
    produce_plain(bootstrap, topic, {0: 2})
    good = tmp_path / "good.properties"
    good.write_text("# the console's own client settings\nclient.id=ops-console\nrequest.timeout.ms=20000\n")
    configured = ConsoleProcess(bootstrap, tmp_path / "console-configured.log",
                                extra_args=("--command-config", str(good)))
    try:
        stack.page.goto(configured.url + f"/records?topic={topic}&partition=0&isolation=read_committed")
        assert stack.page.locator("#error").count() == 0
        assert stack.page.locator("#records tr[data-offset]").count() == 2
    finally:
        configured.stop()


def test_spark_page_shows_each_querys_latest_decision(stack: Stack) -> None:
    """The sink's decisions topic as the Spark page reads it: the latest decision per query,
    each transaction it names with its coordinator's state (written here as the sink writes
    them: Decision records in a transaction of the query's decider)."""
    from eoslog.client import PreparedTxnState
    from eoslog.spark.decisions import Decision

    bootstrap = stack.broker.bootstrap
    create_topic(bootstrap, "spark-out", 1)
    out = transactional(bootstrap, "spark-out-0")
    out.begin_transaction()
    out.produce("spark-out", value=b"row", partition=0)
    out.commit_transaction(60)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic("__eoslog_spark_commits", 1, 1, configs={"cleanup.policy": "compact"})])
        # The commit is answered before its markers and CompleteCommit are written.
        wait_until(lambda: admin.describe_transactions(["spark-out-0"])["spark-out-0"].state == "CompleteCommit",
                   "spark-out-0's CompleteCommit")
        [written] = admin.describe_transactions(["spark-out-0"]).values()
    decider = transactional(bootstrap, "q1.decider")
    decider.begin_transaction()
    for d in (Decision("q1", 1, "run-a", (("spark-out-0", PreparedTxnState(written.producer_id, 0)),), 111),
              Decision("q1", 2, "run-a", (("spark-out-0", PreparedTxnState(written.producer_id, 0)),
                                          ("spark-gone", PreparedTxnState(999, 3))), 222)):
        key, value = d.encode()
        decider.produce("__eoslog_spark_commits", key=key, value=value, partition=0)
    decider.commit_transaction(60)
    wait_until(lambda: stack.offsets("__eoslog_spark_commits", 0)[0] == 3, "the decider's COMMIT marker")

    page = stack.open("/spark")
    row = "#decisions tr[data-query='q1']"
    assert page.locator("#decisions tr[data-query]").count() == 1
    assert cell(page, row, "batch") == "2"  # the latest decision only
    states = {str(e.get_attribute("data-transactional-id")): e.locator(".state").inner_text()
              for e in page.locator(f"{row} .transactions div").all()}
    assert states == {"spark-out-0": "CompleteCommit", "spark-gone": "unknown to the coordinators"}
    assert cell(page, row, "done") == "no"
    screenshot(page, "spark-eoslog")


# -- no cross-site actions (issue 24, acceptance 2) ---------------------------------------------------


class Visitor:
    """A browser session of the console without a browser: its cookie and CSRF token, sending
    crafted requests (http.client: nothing added, nothing followed)."""

    def __init__(self, stack: Stack) -> None:
        self.port = stack.console.port
        self.origin = stack.console.url
        response, html = self.send("GET", "/partitions", {})
        cookie = response.getheader("set-cookie") or ""
        self.cookie = cookie.split(";", 1)[0]
        assert self.cookie.startswith("eoslog_console_session="), cookie
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict"), cookie
        self.csrf = csrf_of(html)

    def send(self, method: str, path: str, headers: dict[str, str], body: str | None = None
             ) -> tuple[http.client.HTTPResponse, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        return response, text

    def post(self, path: str, fields: dict[str, str], *, origin: str | None = "own", cookie: str | None = None
             ) -> tuple[int, str]:
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie or self.cookie}
        if origin is not None:
            headers["Origin"] = self.origin if origin == "own" else origin
        response, text = self.send("POST", path, headers, urllib.parse.urlencode(fields))
        return response.status, text


def topic_with_a_group(bootstrap: str, topic: str, records: int, group: str, committed: int) -> TopicPartition:
    """A one-partition topic with ``records`` records and ``group``'s committed offset on it."""
    create_topic(bootstrap, topic, 1)
    produce_plain(bootstrap, topic, {0: records})
    tp = TopicPartition(topic, 0)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_consumer_group_offsets(group, {tp: committed})
    return tp


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, html[:1000]
    return found.group(1)


def confirm_token_of(html: str) -> str:
    found = re.search(r'name="confirm" value="([^"]+)"', html)
    assert found, html[:1000]
    return found.group(1)


def test_no_action_can_be_driven_from_another_site(stack: Stack) -> None:
    """Each action, asked by a foreign Origin, without a token, with another session's token, with
    neither Origin nor Referer, and as a GET — even carrying a valid confirmation — gets 403 and
    changes nothing (log start offsets, group offsets, open transactions compared); the same
    POSTs from the session itself succeed. Then a form on a page served on another port,
    submitted by Chromium with the session's own cookie, token and confirmation, changes nothing."""
    bootstrap = stack.broker.bootstrap
    tp = topic_with_a_group(bootstrap, "guarded", 10, "guarded-group", 2)
    create_topic(bootstrap, "guarded-hang", 1)
    ids = {0: "guarded-hang-app"}
    lose_coordinator_state(stack.broker, open_transactions_app(bootstrap, "guarded-hang", ids), ids)

    def state() -> tuple[int, int, list[int | None]]:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            log_start = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].offset
            committed = admin.list_consumer_group_offsets("guarded-group")[tp].offset
            hang = TopicPartition("guarded-hang", 0)
            open_txns = [s.current_transaction_start_offset for s in admin.describe_producers([hang])[hang]]
        return log_start, committed, open_txns

    [hanging] = [p for p in stack.open("/transactions").locator(
        "#open-transactions tr[data-partition='guarded-hang-0']").all()]
    producer_id = str(hanging.get_attribute("data-producer"))
    actions = {"/partitions/delete-records": {"topic": "guarded", "partition": "0", "offset": "5"},
               "/groups/reset-offsets": {"group": "guarded-group", "topic": "guarded", "partition": "0",
                                         "offset": "8"},
               "/transactions/abort": {"topic": "guarded-hang", "partition": "0", "producer_id": producer_id}}
    me, other = Visitor(stack), Visitor(stack)
    before = state()
    assert before == (0, 2, [0])
    for path, fields in actions.items():
        status, page = me.post(path, {**fields, "csrf_token": me.csrf})  # the first step only asks
        assert status == 200 and "Yes, do it" in page
        token = confirm_token_of(page)
        query = urllib.parse.urlencode({**fields, "csrf_token": me.csrf, "confirm": token})
        for attempt, (status, _) in {
            "foreign Origin": me.post(path, {"csrf_token": me.csrf, "confirm": token}, origin="http://evil.example"),
            "no token": me.post(path, {"confirm": token}),
            "another session's token": me.post(path, {"csrf_token": other.csrf, "confirm": token}),
            "the other session's cookie": me.post(path, {"csrf_token": me.csrf, "confirm": token},
                                                  cookie=other.cookie),
            "no Origin, no Referer": me.post(path, {"csrf_token": me.csrf, "confirm": token}, origin=None),
            "a GET": (me.send("GET", f"{path}?{query}", {"Cookie": me.cookie, "Origin": me.origin})[0].status, ""),
        }.items():
            assert status == 403, (path, attempt, status)
        assert state() == before, path
        status, _ = me.post(path, {"csrf_token": me.csrf, "confirm": token})  # the session itself
        assert status == 303, path
        assert state() != before, path
        before = state()
    after = state()
    assert after == (5, 8, [None]), after  # the producer is still known, its transaction ended

    # A page of another origin (another port) posting the session's own form, with everything a
    # leak could give it: the browser sends the cookie (same site), the Origin says where it is from.
    page = stack.open("/partitions")
    form = page.locator("#partitions tr[data-partition='guarded-0'] form.delete-records")
    form.locator("input[name=offset]").fill("7")
    form.locator("button").click()
    page.wait_for_selector("#confirm")
    csrf = page.locator("#confirm-form input[name=csrf_token]").get_attribute("value")
    token = page.locator("#confirm-form input[name=confirm]").get_attribute("value")
    evil = (f'<form id="f" method="post" action="{stack.console.url}/partitions/delete-records">'
            f'<input name="csrf_token" value="{csrf}"><input name="confirm" value="{token}"></form>'
            '<script>document.getElementById("f").submit()</script>')
    with serve_page(evil) as evil_url:
        page.goto(evil_url)
        page.wait_for_url(f"{stack.console.url}/partitions/delete-records")
        assert "403" in page.content()
    assert state()[0] == 5
    # The same cookie, token and confirmation sent from the console's own page: done.
    page.goto(stack.console.url + "/partitions")
    page.evaluate("""([csrf, token]) => fetch("/partitions/delete-records", {method: "POST",
        headers: {"Content-Type": "application/x-www-form-urlencoded"},
        body: new URLSearchParams({csrf_token: csrf, confirm: token})}).then(r => r.status)""", [csrf, token])
    assert state()[0] == 7


@contextmanager
def serve_page(html: str) -> Iterator[str]:
    """``html`` served at / by a plain HTTP server on another port (another origin)."""
    body = html.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


# -- everything from the cluster is escaped (issue 24, acceptance 4) ---------------------------------

SCRIPT = "<script>window.xssRan=(window.xssRan||0)+1</script>"
IMG = "\"><img src=x onerror=\"window.xssRan=(window.xssRan||0)+1\">"


def test_keys_values_headers_group_client_and_transactional_ids_are_shown_escaped(stack: Stack) -> None:
    """Records, a group and its member's client id, a transactional id, each carrying a script
    and an attribute break-out: every page shows them as text, no element of theirs is in the
    DOM and no script of theirs ran (the tests' browser ignores the console's CSP, so escaping
    alone must hold)."""
    bootstrap, topic = stack.broker.bootstrap, "escaped"
    create_topic(bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, key=SCRIPT.encode(), value=IMG.encode(), partition=0,
              headers=[(SCRIPT, IMG.encode()), (IMG, SCRIPT.encode())])
    p.produce(topic, key=IMG.encode(), value=SCRIPT.encode(), partition=0)
    assert p.flush(30) == 0
    group, client_id = f"g{IMG}", f"c{SCRIPT}"
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    txn = transactional(bootstrap, f"t{SCRIPT}")
    try:
        member.subscribe([topic])
        wait_until(lambda: member.poll(0.5) is not None and bool(member.assignment()), "the member's assignment")
        member.commit(offsets=[RdTopicPartition(topic, 0, 1)], asynchronous=False)
        txn.begin_transaction()
        txn.produce(topic, value=b"open", partition=0)
        assert txn.flush(30) == 0
        shown = {
            f"/records?topic={topic}&partition=0&isolation=read_uncommitted&format=text": (SCRIPT, IMG),
            f"/records?topic={topic}&partition=0&isolation=read_uncommitted&format=json": (SCRIPT, IMG),
            "/groups": (group, client_id),
            "/transactions": (f"t{SCRIPT}",),
        }
        for path, texts in shown.items():
            page = stack.open(path)
            text = page.locator("main").inner_text()
            for t in texts:
                assert t in text, (path, t)
            assert page.evaluate("window.xssRan") is None, path
            assert page.locator("main img").count() == 0, path
            assert page.locator("main script").count() == 0, path
            screenshot(page, "escaped-" + path.strip("/").split("?")[0] + ("-json" if "json" in path else ""))
    finally:
        txn.abort_transaction(60)
        member.close()


def test_read_only_hides_and_refuses_every_action(stack: Stack, tmp_path: Path) -> None:
    """--read-only: the pages offer no action, and each action's POST, however well formed
    (the session's token, the console's origin), is refused with 403 and changes nothing."""
    bootstrap = stack.broker.bootstrap
    tp = topic_with_a_group(bootstrap, "read-only", 4, "read-only-group", 1)
    console = ConsoleProcess(bootstrap, tmp_path / "read-only.log", extra_args=("--read-only",))
    try:
        stack.page.goto(console.url + "/partitions")
        assert "read-only" in stack.page.locator("nav").inner_text()
        assert stack.page.locator("#partitions tr[data-partition='read-only-0']").count() == 1
        for path in ("/partitions", "/groups", "/transactions"):
            stack.page.goto(console.url + path)
            assert stack.page.locator("main form[method=post]").count() == 0, path
        visitor = Visitor(Stack(stack.name, stack.broker, console, stack.page))
        for path, fields in (("/partitions/delete-records", {"topic": "read-only", "partition": "0", "offset": "3"}),
                             ("/groups/reset-offsets", {"group": "read-only-group", "topic": "read-only",
                                                        "partition": "0", "offset": "3"})):
            status, text = visitor.post(path, {**fields, "csrf_token": visitor.csrf})
            assert status == 403 and "read-only" in text, (path, status, text)
    finally:
        console.stop()
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].offset == 0
        assert admin.list_consumer_group_offsets("read-only-group")[tp].offset == 1
