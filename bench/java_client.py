"""Kafka 4.4's Java producer as a bench client (``transactions.py --client java``), and the two
broker-side facts a transaction-version comparison needs: the finalized ``transaction.version``
(set between cases) and the producer epochs a partition has seen (which say which version a
producer actually used: version 2 bumps the epoch at every commit and abort, version 1 never
does on the happy path).

The producer loop is ``bench/java/TransactionalProduce.java``, compiled once per run with
``javac`` against the reference jars (``.reference/lib/kafka``, ``scripts/setup.sh``) and run in
a JVM of its own per case: JVM start-up, ``initTransactions()`` and a warm-up stay outside the
clock. It reports on stdout when its clock starts and stops (the broker's CPU is counted
between the two) and then a JSON line with what it committed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common  # noqa: F401  (puts tests/ on sys.path, for support.*)
from eoslog.client import Admin
from eoslog.client.types import TopicPartition
from eoslog.features import TRANSACTION_VERSION
from support.deps import require_java
from support.features import finalize
from support.kafka_harness import JVM_FLAGS, kafka_classpath, write_log_config

SOURCE = Path(__file__).resolve().parent / "java" / "TransactionalProduce.java"
MAIN_CLASS = SOURCE.stem
HEAP = ("-Xms256m", "-Xmx512m")  # the producer's buffer.memory is 128 MB
WARMUP_S = 1.0  # sending before the clock: the JIT compiles the send path
CASE_TIMEOUT_S = 600.0
# bench/load.py's PRODUCER_BASE and idempotent case, as far as the Java producer has them
# (buffer.memory: librdkafka's 1 GB queue would not fit the heap; send() blocks when it is full).
PRODUCER_SETTINGS = {
    "acks": "all",
    "enable.idempotence": "true",
    "linger.ms": "5",
    "batch.size": "1000000",
    "compression.type": "none",
    "buffer.memory": str(128 << 20),
    "transaction.timeout.ms": "60000",
}


def compile_producer(out: Path) -> Path:
    """``javac`` the producer loop into ``out``; returns the class directory."""
    javac = shutil.which("javac")
    if javac is None:
        raise SystemExit("--client java needs a JDK (javac): apt-get install -y openjdk-17-jdk-headless "
                         "(scripts/setup.sh does it)")
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([javac, "-d", str(out), "-cp", kafka_classpath(), str(SOURCE)], check=True,
                   capture_output=True, text=True, timeout=300)
    return out


def run_producer(classes: Path, bootstrap: str, topic: str, mode: str, interval_ms: int | None, seconds: float,
                 *, partitions: int, chunk: int, value: bytes, abort_value: bytes, abort_probe: int,
                 on_clock: Callable[[str], None]) -> dict[str, Any]:
    """One case in a fresh JVM: ``mode`` is ``idempotent``, ``txn`` or ``flush``; ``on_clock`` is
    called with ``start`` and ``end`` as the producer's clock starts and stops. Returns its RESULT."""
    log_config = write_log_config(classes, "ERROR")
    cmd = [require_java(), *JVM_FLAGS, *HEAP, f"-Dlog4j2.configurationFile={log_config}",
           "-cp", f"{classes}:{kafka_classpath()}", MAIN_CLASS,
           bootstrap, topic, mode, str(interval_ms or 0), str(seconds), str(WARMUP_S), str(partitions), str(chunk),
           value.hex(), abort_value.hex(), str(abort_probe), f"bench-{topic}",
           *(f"{k}={v}" for k, v in PRODUCER_SETTINGS.items())]
    other: list[str] = []
    result: dict[str, Any] | None = None
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        deadline = time.monotonic() + CASE_TIMEOUT_S + seconds
        for line in proc.stdout:
            if line.startswith("CLOCK "):
                on_clock(line.split()[1])
            elif line.startswith("RESULT "):
                result = json.loads(line.removeprefix("RESULT "))
            else:
                other.append(line.rstrip())
            if time.monotonic() > deadline:
                proc.kill()
        code = proc.wait(60)
    if code != 0 or result is None:
        raise RuntimeError(f"{MAIN_CLASS} {mode} on {topic} exited {code}: " + "\n".join(other[-30:]))
    result["log_lines"] = other[-20:]
    return result


def set_transaction_version(bootstrap: str, level: int, timeout_s: float = 60.0) -> None:
    """Finalize ``transaction.version`` at ``level`` (UpdateFeatures: upgrade or safe downgrade)
    and wait until the broker's ApiVersions says so: a producer started afterwards picks its
    transaction protocol from it. Kafka applies the change through its metadata log, a moment
    after UpdateFeatures returns."""
    finalize(bootstrap, level)
    deadline = time.monotonic() + timeout_s
    with Admin({"bootstrap.servers": bootstrap}, default_api_timeout_ms=30000) as admin:
        while admin.describe_features().finalized_features.get(TRANSACTION_VERSION, 0) != level:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{TRANSACTION_VERSION} not finalized at {level} after {timeout_s:g} s")
            time.sleep(0.05)


def producer_epochs(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The highest producer epoch each partition of ``topic`` has seen (DescribeProducers)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Admin({"bootstrap.servers": bootstrap}, default_api_timeout_ms=30000) as admin:
        found = admin.describe_producers(tps)
    return [max((s.producer_epoch for s in found.get(tp, [])), default=-1) for tp in tps]
