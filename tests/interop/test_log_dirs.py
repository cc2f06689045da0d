"""Issue 27, acceptance test 5 (its first part): a broker with two ``log.dirs`` (JBOD, KIP-112)
spreads partitions over them, and Kafka 4.4's ``kafka-log-dirs.sh --describe``
(org.apache.kafka.tools.LogDirsCommand) lists each directory with exactly the partitions on its
disk and their sizes, before and after a restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from support.harness import BrokerProcess
from support.kafka_harness import run_tool
from support.rawkafka import RawClient, create_topic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = Path(tmp_path_factory.mktemp("jbod"))
    b = BrokerProcess(root / "disk-a", more_log_dirs=[root / "disk-b"]).start()
    yield b
    if b.alive():
        b.stop()


def on_disk(directory: Path, topic: str) -> dict[str, int]:
    """Partition directory name -> bytes of its segments, as found in ``directory``."""
    return {d.name: sum(f.stat().st_size for f in d.glob("*.log"))
            for d in directory.iterdir() if d.is_dir() and d.name.startswith(f"{topic}-")}


def described(broker: BrokerProcess, work: Path, topic: str) -> dict[str, dict[str, int]]:
    out = run_tool(LOG_DIRS, ["--bootstrap-server", broker.bootstrap, "--describe", "--topic-list", topic],
                   work).stdout
    doc = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    [only] = doc["brokers"]
    assert all(d["error"] is None for d in only["logDirs"]), only
    return {d["logDir"]: {p["partition"]: p["size"] for p in d["partitions"]} for d in only["logDirs"]}


def test_kafka_log_dirs_describes_the_partitions_each_directory_holds(broker: BrokerProcess, tmp_path: Path) -> None:
    with RawClient(broker.bootstrap) as raw:
        assert create_topic(raw, "jbod", 6) == 0
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(600):
        p.produce("jbod", b"x" * (100 + i % 7), partition=i % 6)
    assert p.flush(30) == 0
    disks = [d.resolve() for d in broker.log_dirs]
    expected = {str(d): on_disk(d, "jbod") for d in disks}
    assert sorted(len(v) for v in expected.values()) == [3, 3], expected  # spread: the fewest partitions first
    assert described(broker, tmp_path, "jbod") == expected
    broker.stop()
    broker.start()
    assert {str(d): on_disk(d, "jbod") for d in disks} == expected  # each partition stayed on its disk
    assert described(broker, tmp_path, "jbod") == expected
