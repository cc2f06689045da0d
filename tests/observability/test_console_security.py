"""The console logs people in with the cluster's own identities and serves them over TLS
(issue 24, acceptance 1 and 3).

One broker with ACLs (tests/support/security_harness.py: User:admin is the super user) and a
console for its SASL_SSL listener, itself served over HTTPS with ``eoslog certs dev``'s
certificate, driven in headless Chromium. User:alice holds DELETE on ``ledger-a`` only:

- each person logs in with their SCRAM credentials and sees only what the broker lets them
  describe (admin both topics, alice ``ledger-a``); alice's delete-records on ``ledger-a`` is done
  and the broker's audit line names her; on ``ledger-b`` (a form she tampered with, past the
  console's own checks: CSRF token, confirmation) the broker refuses it, the page shows Kafka's
  error and the log start does not move;
- the session cookie is HttpOnly, Secure and SameSite=Strict; after logout it opens no page and
  drives no action; a wrong password is refused after a delay and logged without the password;
- a console on a non-loopback address refuses plain HTTP without --insecure-http, and --no-auth
  anywhere but on loopback.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from support.console_harness import ConsoleProcess, chromium_page, confirm, screenshot
from support.harness import free_port
from support.security_harness import USERS, SecuredBroker


class SecuredConsole:
    def __init__(self, secured: SecuredBroker, console: ConsoleProcess, page: Any) -> None:
        self.secured, self.console, self.page = secured, console, page
        self.admin = AdminClient(secured.rdkafka("SASL_SSL", user="admin"))

    def log_start(self, topic: str) -> int:
        c = Consumer({**self.secured.rdkafka("SASL_SSL", user="admin"), "group.id": "console-security-check"})
        try:
            low, _ = c.get_watermark_offsets(RdTopicPartition(topic, 0), timeout=30)
        finally:
            c.close()
        return int(low)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredConsole]:
    root = tmp_path_factory.mktemp("console-security")
    secured = SecuredBroker(root)
    secured.broker.start()
    config = root / "console.properties"
    config.write_text(f"security.protocol=SASL_SSL\nssl.ca.location={secured.certs / 'ca.pem'}\n"
                      "sasl.mechanism=SCRAM-SHA-512\n")
    console = None
    try:
        console = ConsoleProcess(secured.address("SASL_SSL"), root / "console.log", no_auth=False,
                                 tls=(secured.certs / "broker-cert.pem", secured.certs / "broker-key.pem"),
                                 extra_args=("--command-config", str(config)))
        with chromium_page() as page:
            stack = SecuredConsole(secured, console, page)
            for topic in ("ledger-a", "ledger-b"):
                for f in stack.admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=30).values():
                    f.result()
            p = Producer(secured.rdkafka("SASL_SSL", user="admin"))
            for topic in ("ledger-a", "ledger-b"):
                for i in range(6):
                    p.produce(topic, value=f"{topic}-{i}".encode(), partition=0)
            assert p.flush(60) == 0
            grant = AclBinding(ResourceType.TOPIC, "ledger-a", ResourcePatternType.LITERAL, "User:alice", "*",
                               AclOperation.DELETE, AclPermissionType.ALLOW)
            for f in stack.admin.create_acls([grant], request_timeout=30).values():
                f.result()
            yield stack
    finally:
        if console is not None:
            console.stop()
        secured.broker.stop()


def log_in(page: Any, url: str, user: str, password: str) -> None:
    page.goto(url + "/login")
    page.fill("input[name=user]", user)
    page.fill("input[name=password]", password)
    page.select_option("select[name=mechanism]", "SCRAM-SHA-512")
    page.click("#log-in")


def shown_topics(page: Any, url: str) -> set[str]:
    page.goto(url + "/partitions")
    assert page.locator("#error").count() == 0, page.locator("#error").inner_text()
    rows = page.locator("#partitions tr[data-partition]")
    return {str(rows.nth(i).get_attribute("data-partition")).rsplit("-", 1)[0] for i in range(rows.count())}


def https(console: ConsoleProcess, method: str, path: str, headers: dict[str, str],
          body: str | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPSConnection("127.0.0.1", console.port, timeout=30,
                                       context=ssl._create_unverified_context())
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def test_each_person_sees_and_does_what_the_brokers_acls_allow_and_logout_ends_the_session(
        stack: SecuredConsole) -> None:
    url, page, broker = stack.console.url, stack.page, stack.secured.broker
    log_in(page, url, "admin", USERS["admin"])
    page.wait_for_selector("#principal")
    assert page.locator("#principal").inner_text() == "User:admin"
    assert {"ledger-a", "ledger-b"} <= shown_topics(page, url)
    screenshot(page, "secured-partitions-admin")
    page.click("#logout")
    page.wait_for_url("**/login")

    log_in(page, url, "alice", USERS["alice"])
    page.wait_for_selector("#principal")
    assert shown_topics(page, url) == {"ledger-a"}  # DELETE implies DESCRIBE on ledger-a; nothing on ledger-b
    screenshot(page, "secured-partitions-alice")
    cookie = next(c for c in page.context.cookies() if c["name"] == "eoslog_console_session")
    assert (cookie["httpOnly"], cookie["secure"], cookie["sameSite"]) == (True, True, "Strict")

    form = page.locator("#partitions tr[data-partition='ledger-a-0'] form.delete-records")
    form.locator("input[name=offset]").fill("2")
    form.locator("button").click()
    confirm(page, "Delete the records of ledger-a-0 before offset 2?")
    assert "log start now 2" in page.locator("#message").inner_text()
    assert stack.log_start("ledger-a") == 2
    assert any("eoslog.audit: DeleteRecords by client.id=eoslog-console principal=User:alice" in line
               and "ledger-a-0 before offset 2: NONE" in line for line in broker.log_text().splitlines())

    # A form she changed to name ledger-b passes the console's checks; the broker refuses it.
    page.goto(url + "/partitions")
    form = page.locator("#partitions tr[data-partition='ledger-a-0'] form.delete-records")
    form.locator("input[name=topic]").evaluate("input => input.value = 'ledger-b'")
    form.locator("input[name=offset]").fill("3")
    form.locator("button").click()
    confirm(page, "Delete the records of ledger-b-0 before offset 3?")
    message = page.locator("#message").inner_text()
    assert "failed" in message and "TopicAuthorizationFailed" in message, message
    screenshot(page, "secured-delete-refused-alice")
    assert stack.log_start("ledger-b") == 0

    # After logout the cookie opens nothing and drives nothing.
    page.goto(url + "/partitions")
    csrf = page.locator("form.delete-records input[name=csrf_token]").first.get_attribute("value")
    page.click("#logout")
    page.wait_for_url("**/login")
    old = {"Cookie": f"eoslog_console_session={cookie['value']}", "Origin": url,
           "Content-Type": "application/x-www-form-urlencoded"}
    assert https(stack.console, "GET", "/partitions", old).status == 303  # to the login page
    refused = https(stack.console, "POST", "/partitions/delete-records", old,
                    f"csrf_token={csrf}&topic=ledger-a&partition=0&offset=5")
    assert refused.status == 403
    assert stack.log_start("ledger-a") == 2


def test_a_wrong_password_is_refused_after_a_delay_and_logged_without_it(stack: SecuredConsole) -> None:
    page, wrong = stack.page, "not-alices-password-3c9e"
    started = time.monotonic()
    log_in(page, stack.console.url, "alice", wrong)
    page.wait_for_selector("#login-failed")
    assert time.monotonic() - started >= 1.0
    assert "refused the user name or password" in page.locator("#login-failed").inner_text()
    assert page.locator("#principal").count() == 0
    log = stack.console.log_path.read_text()
    assert "failed login of user 'alice' with SCRAM-SHA-512" in log
    assert wrong not in log and wrong not in stack.secured.broker.log_text()
    assert https(stack.console, "GET", "/partitions", {}).status == 303


def test_serving_the_console_off_loopback_needs_tls_and_a_login(tmp_path: Path) -> None:
    """--listen 0.0.0.0 without TLS (and without --insecure-http) refuses to start, and so does
    --no-auth on a non-loopback address, even over TLS; nothing is then listening."""
    sasl = tmp_path / "sasl.properties"
    sasl.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n")
    certs = tmp_path / "certs"
    made = subprocess.run([sys.executable, "-m", "eoslog", "certs", "dev", str(certs)], capture_output=True,
                          text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    tls = ["--certfile", str(certs / "broker-cert.pem"), "--keyfile", str(certs / "broker-key.pem")]
    for args, words in (
            (["--command-config", str(sasl)], ("without TLS", "--certfile", "--insecure-http")),
            (["--no-auth"], ("--no-auth on 0.0.0.0", "loopback")),
            (["--no-auth", "--insecure-http"], ("--no-auth on 0.0.0.0", "loopback")),
            (["--no-auth", *tls], ("--no-auth on 0.0.0.0", "loopback"))):
        port = free_port()
        result = subprocess.run([sys.executable, "-m", "eoslog", "console", "--bootstrap-server",
                                 f"127.0.0.1:{free_port()}", "--listen", f"0.0.0.0:{port}", *args],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, (args, result)
        assert all(w in result.stderr for w in words), (args, result.stderr)
        assert "Traceback" not in result.stderr
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    # On loopback --no-auth is served, with a warning (scripts/first_look.sh); something must
    # take the console's reachability check's connection.
    with socket.create_server(("127.0.0.1", 0)) as listening:
        started = ConsoleProcess(f"127.0.0.1:{listening.getsockname()[1]}", tmp_path / "loopback.log")
        started.stop()
    assert "WARNING: --no-auth" in started.log_path.read_text()

