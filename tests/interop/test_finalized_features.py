"""Finalized features (KIP-584) on a single node: what ApiVersions serves, ``eoslog features`` and
Kafka 4.4's own ``kafka-features.sh`` (FeatureCommand) changing them, the level surviving kill -9,
a new log directory finalizing Kafka 4's default and an older one finalizing nothing, and the
``__transaction_state`` records following the level (version 0 at transaction.version 0, Kafka's
flexible version 1 from 1 on), which Kafka's DumpLogSegments ``--transaction-log-decoder`` reads.

Mutant (not committed): ``FeatureFile.update`` publishing the new levels without writing the file
— test_levels_survive_kill_9 failed (the level was back at the default after the restart).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eoslog.client import Admin, NewTopic, Producer
from eoslog.features import FEATURES, GROUP_VERSION, SHARE_VERSION, TRANSACTION_VERSION
from support import rawkafka
from support.harness import BrokerProcess
from support.kafka_harness import run_tool

TV_MAX = FEATURES[TRANSACTION_VERSION].max_supported
SV_MAX = FEATURES[SHARE_VERSION].max_supported
GV_MAX = FEATURES[GROUP_VERSION].max_supported
FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"


def eoslog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eoslog", *args], capture_output=True, text=True, timeout=60)


def api_versions(bootstrap: str, version: int) -> object:
    with rawkafka.RawClient(bootstrap) as c:
        return c.call(rawkafka.api_versions_request(version))


def kafka_describe(bootstrap: str, work: Path) -> dict[str, tuple[str, ...]]:
    """kafka-features.sh describe: feature → (min, max, finalized, epoch)."""
    out = run_tool(FEATURE_COMMAND, ["--bootstrap-server", bootstrap, "describe"], work).stdout
    rows = re.findall(r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
                      r"FinalizedVersionLevel: (\S+)\s+Epoch: (\S+)", out)
    return {name: tuple(rest) for name, *rest in rows}


def commit_one(bootstrap: str, transactional_id: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    p.init_transactions()
    p.begin_transaction()
    p.send("features-t", b"v")
    p.commit_transaction()
    p.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data").start()
    with Admin({"bootstrap.servers": b.bootstrap}) as admin:
        admin.create_topics([NewTopic("features-t", 1)])
    yield b
    b.stop()


def test_a_new_log_directory_finalizes_the_default_and_api_versions_serves_it(broker: BrokerProcess) -> None:
    v4 = api_versions(broker.bootstrap, 4)
    # In Kafka 4.4's order (its HashMaps), measured: it supports group, kraft, metadata, share,
    # streams, transaction and eligible.leader.replicas versions, and finalizes group, streams,
    # transaction, eligible.leader.replicas, share and metadata versions (share.version at 2).
    assert [(f.name, int(f.min_version), int(f.max_version)) for f in v4.supported_features] == [
        (GROUP_VERSION, 0, GV_MAX), (SHARE_VERSION, 0, SV_MAX), (TRANSACTION_VERSION, 0, TV_MAX)]
    assert [(f.name, int(f.min_version_level), int(f.max_version_level)) for f in v4.finalized_features] == [
        (GROUP_VERSION, GV_MAX, GV_MAX), (TRANSACTION_VERSION, TV_MAX, TV_MAX), (SHARE_VERSION, SV_MAX, SV_MAX)]
    assert int(v4.finalized_features_epoch) == 0
    v3 = api_versions(broker.bootstrap, 3)  # KAFKA-17492: no supported range starting at 0 below v4
    assert list(v3.supported_features) == [] and len(v3.finalized_features) == 3


def test_eoslog_and_kafkas_tools_change_the_level_and_the_transaction_log_follows(
        broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    assert kafka_describe(bs, tmp_path)[TRANSACTION_VERSION] == ("0", str(TV_MAX), str(TV_MAX), "0")
    commit_one(bs, "at-default")
    refused = eoslog("features", "upgrade", "--feature", f"{TRANSACTION_VERSION}=0", "--bootstrap-server", bs)
    assert refused.returncode == 1 and "Can't downgrade the version of this feature" in refused.stdout
    dry = eoslog("features", "downgrade", "--feature", f"{TRANSACTION_VERSION}=0", "--dry-run",
                 "--bootstrap-server", bs)
    assert dry.stdout.strip() == f"{TRANSACTION_VERSION} can be downgraded to 0."
    assert kafka_describe(bs, tmp_path)[TRANSACTION_VERSION][2:] == (str(TV_MAX), "0")
    done = eoslog("features", "downgrade", "--feature", f"{TRANSACTION_VERSION}=0", "--bootstrap-server", bs)
    assert done.returncode == 0 and done.stdout.strip() == f"{TRANSACTION_VERSION} was downgraded to 0."
    assert kafka_describe(bs, tmp_path)[TRANSACTION_VERSION][2:] == ("0", "1")
    commit_one(bs, "at-level-0")
    out = run_tool(FEATURE_COMMAND, ["--bootstrap-server", bs, "upgrade", "--feature",
                                     f"{TRANSACTION_VERSION}={TV_MAX}"], tmp_path).stdout
    assert out.strip() == f"{TRANSACTION_VERSION} was upgraded to {TV_MAX}."
    described = eoslog("features", "describe", "--bootstrap-server", bs).stdout
    assert re.search(rf"FinalizedVersionLevel: {TV_MAX}\s+Epoch: 2$", described.strip()), described
    commit_one(bs, "upgraded-again")
    broker.stop()
    # Kafka's decoder reads every record eoslog wrote: version 0 at level 0, version 1 otherwise.
    versions: dict[str, set[str]] = {}
    for segment in sorted((broker.data_dir).glob("__transaction_state-*/*.log")):
        dumped = run_tool("org.apache.kafka.tools.DumpLogSegments",
                          ["--files", str(segment), "--transaction-log-decoder", "--print-data-log"], tmp_path).stdout
        for key, payload in re.findall(r"key: (\{.*?\}) payload: (\{.*\})$", dumped, re.MULTILINE):
            decoded = json.loads(payload)
            versions.setdefault(json.loads(key)["data"]["transactionalId"], set()).add(decoded["version"])
            assert decoded["data"]["transactionStatus"] in {"Empty", "Ongoing", "PrepareCommit", "CompleteCommit"}
    assert versions == {"at-default": {"1"}, "at-level-0": {"0"}, "upgraded-again": {"1"}}
    broker.start()
    commit_one(bs, "at-default")  # the coordinator loads both versions back


def test_levels_survive_kill_9(broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    assert eoslog("features", "downgrade", "--feature", f"{TRANSACTION_VERSION}=0", "--bootstrap-server", bs
                  ).returncode == 0
    broker.restart(kill=True)
    assert kafka_describe(bs, tmp_path)[TRANSACTION_VERSION][2:] == ("0", "1")
    assert eoslog("features", "upgrade", "--feature", f"{TRANSACTION_VERSION}={TV_MAX}", "--bootstrap-server", bs
                  ).returncode == 0
    broker.restart(kill=True)
    assert kafka_describe(bs, tmp_path)[TRANSACTION_VERSION][2:] == (str(TV_MAX), "2")


def test_a_log_directory_of_an_eoslog_without_features_keeps_nothing_finalized(broker: BrokerProcess,
                                                                               tmp_path: Path) -> None:
    broker.stop()
    (broker.data_dir / "finalized-features.json").unlink()  # as an older eoslog left it: data, no file
    broker.start()
    v4 = api_versions(broker.bootstrap, 4)
    assert list(v4.finalized_features) == [] and int(v4.finalized_features_epoch) == 0
    commit_one(broker.bootstrap, "old-dir")
    assert eoslog("features", "upgrade", "--feature", f"{TRANSACTION_VERSION}={TV_MAX}", "--bootstrap-server",
                  broker.bootstrap).returncode == 0
    assert int(api_versions(broker.bootstrap, 4).finalized_features_epoch) == 1
