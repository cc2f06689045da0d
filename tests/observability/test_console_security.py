"""The console logs people in with the cluster's own identities and serves them over TLS
(issue 24, acceptance 1 and 3).

A three-broker cluster on ZooKeeper whose only listener is SASL_SSL (clients, the tests'
harness and the brokers among themselves, SCRAM-SHA-512), ACLs on (User:admin and the
brokers' User:broker are super users; the users' credentials written into ZooKeeper before
the first start by ``eoslog users set-password --zookeeper``), and a console for it, itself
served over HTTPS with ``eoslog certs dev``'s certificate, driven in headless Chromium.
User:alice holds DELETE on ``ledger-a`` only:

- each person logs in with their SCRAM credentials and sees only what the brokers let them
  describe (admin both topics, alice ``ledger-a``); alice's delete-records on ``ledger-a`` is done
  at its leader and that broker's audit line names her; on ``ledger-b`` (a form she tampered
  with, past the console's own checks: CSRF token, confirmation) the broker refuses it, the
  page shows Kafka's error and the log start does not move;
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

from eoslog.cli.certs import make_dev_certs
from eoslog.cluster.zookeeper_server import ZooKeeperServer
from support.cluster_harness import Cluster, Connect, metadata
from support.console_harness import ConsoleProcess, chromium_page, confirm, screenshot
from support.harness import free_port, wait_until
from support.rawkafka import RawClient
from support.security_harness import STANDARD_AUTHORIZER, USERS, scram_login
from support.zk_harness import start_zookeeper

BROKER_PASSWORD = "broker-secret"


class SecuredConsole:
    def __init__(self, cluster: Cluster, certs: Path, console: ConsoleProcess, page: Any) -> None:
        self.cluster, self.certs, self.console, self.page = cluster, certs, console, page
        self.admin = AdminClient(self.client("admin"))

    def client(self, user: str) -> dict[str, Any]:
        """librdkafka's settings for ``user`` on the cluster's SASL_SSL listeners."""
        return {"bootstrap.servers": self.cluster.bootstrap, "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.certs / "ca.pem"), "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": USERS[user]}

    def log_start(self, topic: str) -> int:
        c = Consumer({**self.client("admin"), "group.id": "console-security-check"})
        try:
            low, _ = c.get_watermark_offsets(RdTopicPartition(topic, 0), timeout=30)
        finally:
            c.close()
        return int(low)

    def broker_logs(self) -> str:
        return "\n".join(b.log_text() for b in self.cluster.brokers.values())


def logged_in(certs: Path, user: str, password: str) -> Connect:
    """A raw client on a SASL_SSL listener, logged in as ``user`` (the harness's Metadata)."""
    def connect(bootstrap: str) -> RawClient:
        client = RawClient(bootstrap, timeout_s=10, tls=ssl.create_default_context(cafile=str(certs / "ca.pem")))
        if scram_login(client, user, password).error_code != 0:
            client.close()
            raise OSError(f"the login of {user} at {bootstrap} was refused")
        return client
    return connect


def sasl_ssl_cluster(root: Path, zookeeper: ZooKeeperServer, certs: Path) -> Cluster:
    """Three brokers with one SASL_SSL listener each, credentials seeded in ZooKeeper."""
    for user, password in (("broker", BROKER_PASSWORD), ("admin", USERS["admin"]), ("alice", USERS["alice"])):
        done = subprocess.run([sys.executable, "-m", "eoslog", "users", "set-password", user, "--password", password,
                               "--zookeeper", f"{zookeeper.connect_string}/{root.name}"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="broker" password="{BROKER_PASSWORD}";')
    return Cluster(root, zookeeper=zookeeper, connect=logged_in(certs, "broker", BROKER_PASSWORD),
                   per_broker=lambda _i, port: {"listeners": f"SASL_SSL://127.0.0.1:{port}"}, overrides={
                       "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
                       "inter.broker.listener.name": "SASL_SSL",
                       "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                       "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
                       "ssl.keystore.location": str(certs / "broker.pem"),
                       "ssl.truststore.location": str(certs / "ca.pem"),
                       "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin;User:broker"}).start()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredConsole]:
    root = tmp_path_factory.mktemp("console-security")
    certs = make_dev_certs(root / "certs")
    zookeeper = start_zookeeper(root / "zookeeper")
    cluster = console = None
    try:
        cluster = sasl_ssl_cluster(root / "cluster", zookeeper, certs)
        config = root / "console.properties"
        config.write_text(f"security.protocol=SASL_SSL\nssl.ca.location={certs / 'ca.pem'}\n"
                          "sasl.mechanism=SCRAM-SHA-512\n")
        console = ConsoleProcess(cluster.bootstrap, root / "console.log", no_auth=False,
                                 tls=(certs / "broker-cert.pem", certs / "broker-key.pem"),
                                 extra_args=("--command-config", str(config)))
        with chromium_page() as page:
            stack = SecuredConsole(cluster, certs, console, page)
            for topic in ("ledger-a", "ledger-b"):
                for f in stack.admin.create_topics([NewTopic(topic, 1, 3)], request_timeout=30).values():
                    f.result()
            p = Producer({**stack.client("admin"), "acks": "all"})
            for topic in ("ledger-a", "ledger-b"):
                for i in range(6):
                    p.produce(topic, value=f"{topic}-{i}".encode(), partition=0)
            assert p.flush(60) == 0
            grant = AclBinding(ResourceType.TOPIC, "ledger-a", ResourcePatternType.LITERAL, "User:alice", "*",
                               AclOperation.DELETE, AclPermissionType.ALLOW)
            for f in stack.admin.create_acls([grant], request_timeout=30).values():
                f.result()
            # Each broker applies the ACL from its own watch: until then alice sees nothing there.
            as_alice = logged_in(certs, "alice", USERS["alice"])
            for i, broker in cluster.brokers.items():
                wait_until(lambda b=broker: metadata(b.bootstrap, ["ledger-a"], as_alice).topic_errors["ledger-a"] == 0,
                           f"broker {i} letting alice describe ledger-a")
            yield stack
    finally:
        if console is not None:
            console.stop()
        if cluster is not None:
            cluster.stop()
        zookeeper.kill()


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
    url, page = stack.console.url, stack.page
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
               and "ledger-a-0 before offset 2: NONE" in line for line in stack.broker_logs().splitlines())

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
    assert wrong not in log and wrong not in stack.broker_logs()
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

