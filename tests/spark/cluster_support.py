"""What the standalone-cluster tests read to prove where things ran and what was left:

- ``ClusterDriver``: ``sink_driver.py`` against the cluster (its own process: one
  SparkContext per process), with Spark's event log on, and the lines it prints (application
  id, what the executors' Python workers import, the query id);
- ``write_tasks``: every task of the query's micro-batch jobs from the driver's event log
  (SparkListenerTaskEnd: batch, partition, attempt, executor id, outcome) — Spark's own
  record of which executor ran what;
- ``all_decisions``: every decision in a decisions topic (a test's own, never compacted:
  the active segment is never cleaned);
- ``find_hanging``: ``eoslog transactions find-hanging`` over a topic, every open
  transaction a candidate (``--max-transaction-timeout 0``); ``assert_nothing_left_open``:
  no open transaction in a topic, and find-hanging agrees.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from sink_support import open_transactions, start_driver

from eoslog.spark.decisions import Decision
from eoslog.spark.standalone import StandaloneCluster

BATCH_ID_PROPERTY = "streaming.sql.batchId"


def event_log_conf(directory: Path) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(directory),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}


class ClusterDriver:
    """``sink_driver.py`` on ``cluster`` with ``args``; event log under ``tmp_path/events``."""

    def __init__(self, cluster: StandaloneCluster, bootstrap: str, src: str, dst: str, tmp_path: Path,
                 *args: str, log_name: str = "driver.log") -> None:
        self.events = tmp_path / "events"
        self.log_path = tmp_path / log_name
        conf = {**cluster.driver_conf(), **event_log_conf(self.events)}
        conf_args = [a for k, v in conf.items() for a in ("--conf", f"{k}={v}")]
        self.proc = start_driver(bootstrap, src, dst, tmp_path, "--master", cluster.master_url, *conf_args, *args,
                                 log_name=log_name)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def line(self, prefix: str, timeout_s: float = 300.0) -> str:
        """The rest of the first output line starting with ``prefix``."""
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self.log().splitlines():
                if line.startswith(prefix + " "):
                    return line[len(prefix) + 1:]
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the driver printed no {prefix!r} line (exit {self.proc.poll()}):\n"
                                     + self.log()[-4000:])
            time.sleep(0.1)

    @property
    def app_id(self) -> str:
        return self.line("app")

    @property
    def query_id(self) -> str:
        return self.line("started")

    def executors_python(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = json.loads(self.line("executors"))
        return found

    def finish(self, timeout_s: float = 600.0) -> None:
        """Wait for the driver to exit, and fail with its log unless it exited 0."""
        code = self.proc.wait(timeout_s)
        assert code == 0, f"the driver exited {code}:\n{self.log()[-4000:]}"

    def write_tasks(self) -> list[TaskRun]:
        """From the event log (``<app id>``, or ``<app id>.inprogress`` if the driver died)."""
        logs = sorted(self.events.glob(f"{self.app_id}*"))
        assert logs, f"no event log of {self.app_id} in {self.events}"
        return write_tasks(logs[0])


@dataclass(frozen=True)
class TaskRun:
    batch_id: int
    partition: int
    attempt: int
    executor_id: str
    reason: str  # "Success", "ExecutorLostFailure", ...

    @property
    def succeeded(self) -> bool:
        return self.reason == "Success"


def write_tasks(event_log: Path) -> list[TaskRun]:
    """The tasks of the micro-batch jobs (those run under a ``streaming.sql.batchId``): in a
    pass-through query each reads one input partition and writes it with the sink."""
    batch_of_stage: dict[int, int] = {}
    out: list[TaskRun] = []
    for line in event_log.read_text().splitlines():
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            batch = (event.get("Properties") or {}).get(BATCH_ID_PROPERTY)
            if batch is not None:
                batch_of_stage.update({stage: int(batch) for stage in event["Stage IDs"]})
        elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in batch_of_stage:
            info = event["Task Info"]
            out.append(TaskRun(batch_of_stage[event["Stage ID"]], info["Index"], info["Attempt"],
                               info["Executor ID"], event["Task End Reason"]["Reason"]))
    return out


def all_decisions(bootstrap: str, topic: str) -> list[Decision]:
    """Every committed decision in ``topic`` (1 partition), in order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"decisions-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    out: list[Decision] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(f"consumer error: {error}")
            out.append(Decision.decode(msg.key(), msg.value()))
        raise AssertionError(f"did not reach the end of {topic}")
    finally:
        consumer.close()


def find_hanging(bootstrap: str, topic: str) -> tuple[list[Any], str]:
    """``eoslog transactions find-hanging --topic T --max-transaction-timeout 0 -O json``:
    (the hanging transactions, what it said on stderr — a prepared two-phase transaction it
    found open is reported there as "not hanging")."""
    done = subprocess.run([sys.executable, "-m", "eoslog", "transactions", "find-hanging", "--topic", topic,
                           "--max-transaction-timeout", "0", "--output", "json", "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    hanging: list[Any] = json.loads(done.stdout)
    return hanging, done.stderr


def assert_nothing_left_open(bootstrap: str, topic: str) -> None:
    """No transaction open in ``topic`` (LSO = HW everywhere), and find-hanging agrees: nothing
    hanging, no prepared transaction waiting for its coordinator."""
    assert open_transactions(bootstrap, topic) == {}
    hanging, said = find_hanging(bootstrap, topic)
    assert hanging == [] and "not hanging" not in said, said
