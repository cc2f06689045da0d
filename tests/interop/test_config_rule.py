"""Broker settings never fail open (issue 24, acceptance 5 and 6).

- Two sources (the properties file, ``-o``, ``--listen``, ``--data-dir``) that give a security
  setting differently refuse to start, naming both; nothing then answers on the port. Given
  alike, they combine: the broker starts with the security asked for, and an unauthenticated
  Metadata request is closed unanswered. Elsewhere a later flag still wins over the file.
- Settings that ask for protection they do not get (ACL settings without an authorizer,
  ``ssl.client.auth`` without TLS, SASL mechanisms without a SASL listener) print one WARNING
  each; a default single node prints none (its internal topics default to one replica).
- ``users set-password --data-dir`` on a directory that does not exist yet creates it, and a
  broker started on it lets that user log in.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from eoslog.protocol.scram import Mechanism
from support.harness import BrokerProcess, free_port
from support.rawkafka import ConnectionClosed, RawClient, metadata_request
from support.security_harness import STANDARD_AUTHORIZER, scram_login


def eoslog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eoslog", *args], capture_output=True, text=True, timeout=60)


def nothing_listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def conflicts(tmp_path: Path, port: int) -> dict[str, tuple[list[str], tuple[str, str]]]:
    """Each pair of sources that disagree on a security setting: (broker arguments, what the
    refusal must name)."""
    sasl = f"SASL_PLAINTEXT://127.0.0.1:{port}"
    secured_file = tmp_path / "secured.properties"
    secured_file.write_text(f"listeners={sasl}\nsasl.enabled.mechanisms=SCRAM-SHA-512\n"
                            f"authorizer.class.name={STANDARD_AUTHORIZER}\nlog.dirs={tmp_path / 'file-data'}\n")
    data = str(tmp_path / "data")
    return {
        "--listen vs -o listeners": (["--data-dir", data, "--listen", f"127.0.0.1:{port}", "-o", f"listeners={sasl}",
                                      "-o", "sasl.enabled.mechanisms=SCRAM-SHA-512"],
                                     (f"-o listeners={sasl}", f"--listen 127.0.0.1:{port}")),
        "file listeners vs --listen": (["--config", str(secured_file), "--listen", f"127.0.0.1:{port}"],
                                       (f"--config {secured_file}", f"--listen 127.0.0.1:{port}")),
        "file listeners vs -o listeners": (["--config", str(secured_file), "-o", f"listeners=127.0.0.1:{port}"],
                                           (f"--config {secured_file}", f"-o listeners=127.0.0.1:{port}")),
        "-o listeners twice": (["--data-dir", data, "-o", f"listeners={sasl}", "-o", f"listeners=127.0.0.1:{port}",
                                "-o", "sasl.enabled.mechanisms=SCRAM-SHA-512"],
                               (f"-o listeners={sasl}", f"-o listeners=127.0.0.1:{port}")),
        "--data-dir vs -o log.dirs": (["--listen", f"127.0.0.1:{port}", "-o", f"log.dirs={tmp_path / 'acls-here'}",
                                       "--data-dir", data],
                                      (f"-o log.dirs={tmp_path / 'acls-here'}", f"--data-dir {data}")),
        "file log.dirs vs --data-dir": (["--config", str(secured_file), "--data-dir", data],
                                        (f"--config {secured_file}", f"--data-dir {data}")),
        "file authorizer vs -o": (["--config", str(secured_file), "-o", "authorizer.class.name="],
                                  (f"--config {secured_file}", "-o authorizer.class.name=")),
    }


CASES = ["--listen vs -o listeners", "file listeners vs --listen", "file listeners vs -o listeners",
         "-o listeners twice", "--data-dir vs -o log.dirs", "file log.dirs vs --data-dir", "file authorizer vs -o"]


@pytest.mark.parametrize("case", CASES)
def test_two_sources_that_disagree_on_a_security_setting_refuse_to_start(tmp_path: Path, case: str) -> None:
    port = free_port()
    args, named = conflicts(tmp_path, port)[case]
    result = eoslog("broker", *args)
    assert result.returncode == 2, result
    assert "given twice, differently" in result.stderr and all(n in result.stderr for n in named), result.stderr
    assert "Traceback" not in result.stderr and "ready on" not in result.stdout
    assert nothing_listens(port)  # so an unauthenticated Metadata request gets no answer


def test_sources_that_agree_combine_and_keep_the_security_asked_for(tmp_path: Path) -> None:
    """The same SASL listener from the file, ``-o`` and ``--listen`` starts that listener only;
    a Metadata request before authenticating is closed unanswered (and ``log.retention.ms``,
    given by the file and by a flag, is not refused: the flag wins there)."""
    port = free_port()
    sasl = f"SASL_PLAINTEXT://127.0.0.1:{port}"
    (tmp_path / "server.properties").write_text(
        f"listeners={sasl}\nsasl.enabled.mechanisms=SCRAM-SHA-512\nlog.retention.ms=5000\n")
    broker = BrokerProcess(tmp_path / "data", port, {"listeners": sasl, "log.retention.ms": "7000"},
                           args=["--config", str(tmp_path / "server.properties"), "--listen", sasl]).start()
    try:
        with RawClient(f"127.0.0.1:{port}") as raw:
            raw.send(raw.frame(metadata_request(None))[1])
            assert raw.closed_by_peer()
        with RawClient(f"127.0.0.1:{port}") as raw, pytest.raises(ConnectionClosed):
            raw.call(metadata_request(None))
    finally:
        broker.stop()


def test_settings_that_protect_nothing_are_warned_about_once_and_a_default_node_warns_of_nothing(
        tmp_path: Path) -> None:
    default = BrokerProcess(tmp_path / "default").start()
    default.stop()
    start = default.log_text()
    assert "WARNING" not in start, start  # no offsets.topic.replication.factor warning on one node
    broker = BrokerProcess(tmp_path / "data", overrides={
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false",
        "ssl.client.auth": "required", "sasl.enabled.mechanisms": "SCRAM-SHA-512"}).start()
    broker.stop()
    lines = [line for line in broker.log_text().splitlines() if "WARNING" in line]
    for setting, advice in (("super.users=User:admin", "add authorizer.class.name="),
                            ("allow.everyone.if.no.acl.found=false", "add authorizer.class.name="),
                            ("ssl.client.auth=required", "use an SSL or SASL_SSL listener"),
                            ("sasl.enabled.mechanisms=SCRAM-SHA-512", "add a SASL_SSL")):
        found = [line for line in lines if setting in line]
        assert len(found) == 1 and advice in found[0], (setting, lines)
    assert len(lines) == 4, lines


def test_set_password_creates_a_new_data_dir_and_the_user_logs_in_there(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    done = eoslog("users", "set-password", "root", "--password", "r00t-secret", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert f"created {data}" in done.stdout and data.is_dir()
    port = free_port()
    broker = BrokerProcess(data, port, {"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
                                        "sasl.enabled.mechanisms": "SCRAM-SHA-512"}).start()
    try:
        with RawClient(f"127.0.0.1:{port}") as raw:
            assert int(scram_login(raw, "root", "r00t-secret", Mechanism.SCRAM_SHA_512).error_code) == 0
        with RawClient(f"127.0.0.1:{port}") as raw:
            assert int(scram_login(raw, "root", "wrong", Mechanism.SCRAM_SHA_512).error_code) == 58
    finally:
        broker.stop()


def test_a_cluster_broker_whose_first_listener_is_secured_must_name_its_inter_broker_listener(
        tmp_path: Path) -> None:
    """Without inter.broker.listener.name brokers reach each other on the first listener with a
    plaintext client: a SASL first listener refuses to start (before any ZooKeeper is asked)."""
    port = free_port()
    result = eoslog("broker", "--data-dir", str(tmp_path / "data"), "-o",
                    f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", "-o", "sasl.enabled.mechanisms=SCRAM-SHA-512",
                    "-o", f"zookeeper.connect=127.0.0.1:{free_port()}")
    assert result.returncode == 2, result
    assert "inter.broker.listener.name is empty" in result.stderr and "SASL_PLAINTEXT" in result.stderr
    assert "Traceback" not in result.stderr
    assert nothing_listens(port)
