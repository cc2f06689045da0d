"""Issue 26, acceptance test 4 with Kafka 4.4's tools against eoslog: three of Kafka's
VerifiableShareConsumer split one partition (no record to two of them), its RENEW/RELEASE/REJECT
acknowledgement pattern (ShareAcknowledge v2), the console share consumer, and
kafka-share-groups.sh (ShareGroupCommand) and ``eoslog share-groups`` listing, describing,
resetting, deleting a share group's offsets and the group itself. One eoslog broker for the
module; the JVMs are Kafka's own, from .reference/lib."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from share_support import BROKER_OVERRIDES, create_topic, group_configs, produce, share_offsets, until

from eoslog.protocol.messages import build, request_types
from support.harness import BrokerProcess
from support.kafka_harness import java_command, run_tool, write_log_config
from support.rawkafka import RawClient, api_versions_request

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
CONSOLE_SHARE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
VERIFIABLE_SHARE_CONSUMER = "org.apache.kafka.tools.VerifiableShareConsumer"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("share-tools") / "data", overrides=BROKER_OVERRIDES).start()
    yield b
    if b.alive():
        b.stop()


def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"t-{tag}", f"g-{tag}"


def share_groups_sh(broker: BrokerProcess, tmp_path: Path, *args: str) -> str:
    return run_tool(SHARE_GROUP_COMMAND, ["--bootstrap-server", broker.bootstrap, *args], tmp_path).stdout


def eoslog_cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([".venv/bin/eoslog", "share-groups", *args, "--bootstrap-server", broker.bootstrap],
                          capture_output=True, text=True, timeout=60, check=False,
                          cwd=Path(__file__).resolve().parents[2])


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip()]


def test_three_verifiable_share_consumers_split_one_partition(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    total = 300
    produce(broker.bootstrap, topic, (f"v{i}" for i in range(total)))
    log_config = write_log_config(tmp_path, "WARN")
    procs = [subprocess.Popen(
        java_command(VERIFIABLE_SHARE_CONSUMER, [
            "--bootstrap-server", broker.bootstrap, "--topic", topic, "--group-id", group, "--verbose",
            "--acknowledgement-mode", "sync", "--offset-reset-strategy", "earliest"], log_config=log_config),
        stdout=open(tmp_path / f"vsc-{i}.out", "w"), stderr=subprocess.STDOUT) for i in range(3)]  # noqa: SIM115
    try:
        def delivered() -> list[tuple[int, int]]:
            out = []
            for i in range(3):
                for line in (tmp_path / f"vsc-{i}.out").read_text().splitlines():
                    if line.startswith("{") and '"record_data"' in line:
                        out.append((i, json.loads(line)["offset"]))
            return out

        until(lambda: {o for _, o in delivered()} == set(range(total)), "every record consumed", timeout=120)
        until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == total, "every record accepted")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(60)
    counts = Counter(o for _, o in delivered())
    assert [o for o, n in counts.items() if n > 1] == []  # each once, to one consumer
    events = [json.loads(line) for i in range(3) for line in (tmp_path / f"vsc-{i}.out").read_text().splitlines()
              if line.startswith("{")]
    acked = [e for e in events if e["name"] == "offsets_acknowledged"]
    assert acked and all(e["success"] for e in acked)


def test_verifiable_share_consumer_renew_release_reject_pattern(broker: BrokerProcess, tmp_path: Path) -> None:
    """The pattern by offset % 4: accept, renew (then the next entry: release), release, reject. A
    released record comes back until share.delivery.count.limit (2 here) archives it; RENEW keeps a
    lock (ShareAcknowledge v2). In the end nothing is left in flight, every acknowledgement succeeded."""
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_delivery_count_limit=2)
    produce(broker.bootstrap, topic, (f"v{i}" for i in range(40)))
    out = tmp_path / "vsc.out"
    with open(out, "w") as sink:
        proc = subprocess.Popen(java_command(VERIFIABLE_SHARE_CONSUMER, [
            "--bootstrap-server", broker.bootstrap, "--topic", topic, "--group-id", group, "--verbose",
            "--acknowledgement-mode", "sync", "--ack-pattern", "accept,renew,release,reject",
            "--offset-reset-strategy", "earliest"], log_config=write_log_config(tmp_path, "WARN")),
            stdout=sink, stderr=subprocess.STDOUT)
    try:
        until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == 40, "nothing left in flight",
              timeout=120)
    finally:
        proc.terminate()
        proc.wait(60)
    events = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    acked = [e for e in events if e["name"] == "offsets_acknowledged"]
    assert acked and all(e["success"] for e in acked), out.read_text()[-2000:]
    kinds: Counter[str] = Counter()
    for e in acked:
        kinds.update(e["ackTypeCounts"])
    assert kinds["RENEW"] > 0 and kinds["RELEASE"] > 0 and kinds["REJECT"] > 0 and kinds["ACCEPT"] > 0
    deliveries = Counter(e["offset"] for e in events if e["name"] == "record_data")
    assert {deliveries[o] for o in range(40) if o % 4 == 2} == {2}  # released once, archived at the limit
    assert {deliveries[o] for o in range(40) if o % 4 in (0, 3)} == {1}


def test_console_share_consumer_reads_what_was_produced(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, ["a", "b", "c"])
    out = run_tool(CONSOLE_SHARE_CONSUMER, ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--group",
                                            group, "--max-messages", "3", "--timeout-ms", "60000"], tmp_path)
    assert sorted(out.stdout.split()) == ["a", "b", "c"]


def test_kafka_share_groups_sh_and_eoslog_share_groups_on_one_group(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, (f"v{i}" for i in range(6)))
    run_tool(CONSOLE_SHARE_CONSUMER, ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group,
                                      "--max-messages", "6", "--timeout-ms", "60000"], tmp_path)
    until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == 6, "every record accepted")
    assert group in share_groups_sh(broker, tmp_path, "--list").split()
    assert [group, "Empty"] in rows(eoslog_cli(broker, "list").stdout)
    described = rows(share_groups_sh(broker, tmp_path, "--describe", "--group", group))
    assert [group, topic, "0", "6", "0"] in described  # GROUP TOPIC PARTITION START-OFFSET LAG
    assert [topic, "0", "6", "0"] in rows(eoslog_cli(broker, "describe", group).stdout)
    state = share_groups_sh(broker, tmp_path, "--describe", "--group", group, "--state")
    assert "Empty" in state.split()
    # Kafka's tool resets the start offset; eoslog's describe shows it, and the records come again.
    reset = share_groups_sh(broker, tmp_path, "--reset-offsets", "--group", group, "--topic", topic,
                            "--to-earliest", "--execute")
    assert [group, topic, "0", "0"] in rows(reset)
    assert [topic, "0", "0", "6"] in rows(eoslog_cli(broker, "describe", group).stdout)
    # eoslog's reset, then Kafka's describe.
    cli = eoslog_cli(broker, "reset-offsets", group, "--topic", topic, "--to-offset", "4", "--execute")
    assert cli.returncode == 0, cli.stderr
    assert [group, topic, "0", "4", "2"] in rows(share_groups_sh(broker, tmp_path, "--describe", "--group", group))
    out = run_tool(CONSOLE_SHARE_CONSUMER, ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--group",
                                            group, "--max-messages", "2", "--timeout-ms", "60000"], tmp_path)
    assert sorted(out.stdout.split()) == ["v4", "v5"]
    deleted = share_groups_sh(broker, tmp_path, "--delete-offsets", "--group", group, "--topic", topic)
    assert [topic, "Successful"] in rows(deleted)
    assert share_offsets(broker.bootstrap, group, topic).start_offset == -1
    assert eoslog_cli(broker, "delete", group).returncode == 0
    assert group not in share_groups_sh(broker, tmp_path, "--list").split()
    missing = eoslog_cli(broker, "describe", group)
    assert missing.returncode == 1 and f"Share group '{group}' does not exist" in missing.stderr


def test_share_version_0_refuses_share_groups_as_kafka_does(broker: BrokerProcess, tmp_path: Path) -> None:
    """kafka-features.sh downgrades share.version to 0: the share APIs stay advertised (the broker
    supports them) and are answered UNSUPPORTED_VERSION, as Kafka 4.4 does; upgraded again, a share
    consumer reads."""
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    features = ["--bootstrap-server", broker.bootstrap]
    run_tool("org.apache.kafka.tools.FeatureCommand", [*features, "downgrade", "--feature", "share.version=0"],
             tmp_path)
    try:
        with RawClient(broker.bootstrap, timeout_s=10) as c:
            advertised = {int(k.api_key) for k in c.call(api_versions_request(3)).api_keys}
            m = request_types(76, 1)
            answer = c.call(build(m.ShareGroupHeartbeatRequest, group_id=group, member_id="m", member_epoch=0,
                                  rack_id=None, subscribed_topic_names=(topic,)))
        assert {76, 77, 78, 79, 90, 91, 92} <= advertised
        assert int(answer.error_code) == 35  # UNSUPPORTED_VERSION
    finally:
        run_tool("org.apache.kafka.tools.FeatureCommand", [*features, "upgrade", "--feature", "share.version=1"],
                 tmp_path)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, ["back"])
    out = run_tool(CONSOLE_SHARE_CONSUMER, ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--group",
                                            group, "--max-messages", "1", "--timeout-ms", "60000"], tmp_path)
    assert out.stdout.split() == ["back"]
