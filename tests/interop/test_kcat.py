"""kcat (its own, older librdkafka) against the broker: metadata listing, a produce and
consume round trip under each codec, and offsets by timestamp.

kcat is a system tool: the project's set-up script installs it; here a missing kcat fails
the tests saying how to install it (tests/support/deps.py).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence

import pytest

from interop import clients as C
from support.deps import require_kcat
from support.harness import BrokerProcess


@pytest.fixture(scope="module", autouse=True)
def _kcat_present() -> None:
    """Checked before the module's broker starts."""
    require_kcat()


NUM_PARTITIONS = 3
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TIMEOUT_S = 120


def kcat(broker: BrokerProcess, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([require_kcat(), "-b", broker.bootstrap, *args], input=stdin,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"kcat {' '.join(args)} failed:\n{proc.stderr}"
    return proc.stdout


def test_kcat_lists_topic(shared_broker: BrokerProcess) -> None:
    topic = "kcat-listed"
    assert C.ensure_topic(shared_broker.bootstrap, topic, NUM_PARTITIONS) == NUM_PARTITIONS
    text = kcat(shared_broker, "-L")
    assert f'topic "{topic}" with {NUM_PARTITIONS} partitions' in text
    assert f"broker 0 at 127.0.0.1:{shared_broker.port} (controller)" in text
    md = json.loads(kcat(shared_broker, "-L", "-J", "-t", topic))
    assert md["brokers"] == [{"id": 0, "name": shared_broker.bootstrap}]
    [listed] = md["topics"]
    assert listed["topic"] == topic and "error" not in listed
    assert [(p["partition"], p["leader"], p["replicas"], p["isrs"]) for p in listed["partitions"]] == [
        (p, 0, [{"id": 0}], [{"id": 0}]) for p in range(NUM_PARTITIONS)]


def _lines(n: int) -> list[tuple[str, str]]:
    """(key, value) text records: 50 keys, values of varied length, some non-ASCII."""
    return [(f"key-{i % 50}", f"value {i} " + "é" * (i % 7) + "x" * (i % 300)) for i in range(n)]


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_kcat_produce_consume(shared_broker: BrokerProcess, codec: str) -> None:
    topic = f"kcat-roundtrip-{codec}"
    assert C.ensure_topic(shared_broker.bootstrap, topic, NUM_PARTITIONS) == NUM_PARTITIONS
    sent = _lines(2_000)
    kcat(shared_broker, "-P", "-t", topic, "-K", "\t", "-H", "origin=kcat", "-H", "codec=" + codec,
         "-X", f"compression.codec={codec}", "-X", "acks=all",
         stdin="".join(f"{k}\t{v}\n" for k, v in sent))
    out = kcat(shared_broker, "-C", "-t", topic, "-e", "-q", "-J")
    got = [json.loads(line) for line in out.splitlines()]
    assert len(got) == len(sent)
    by_partition: dict[int, list[dict[str, object]]] = {}
    for m in got:
        assert m["headers"] == ["origin", "kcat", "codec", codec]
        assert m["tstype"] == "create"
        by_partition.setdefault(int(m["partition"]), []).append(m)  # type: ignore[call-overload]
    key_partition: dict[object, int] = {}
    for p, msgs in by_partition.items():
        assert [m["offset"] for m in msgs] == list(range(len(msgs))), f"partition {p}"
        for m in msgs:
            assert key_partition.setdefault(m["key"], p) == p, f"key {m['key']} on two partitions"
    # Per partition, the records are the sent ones in send order.
    for p, msgs in by_partition.items():
        expected = [(k, v) for k, v in sent if key_partition.get(k) == p]
        assert [(m["key"], m["payload"]) for m in msgs] == expected, f"partition {p}"
    # Stored as asked (batches too small to gain may stay uncompressed).
    codecs = {int(h.compression) for p in by_partition
              for h in C.stored_batches(shared_broker.data_dir, topic, p)}
    wanted = CODEC_IDS[codec]
    assert codecs <= {wanted, 0} and wanted in codecs, codecs


def _query(broker: BrokerProcess, topic: str, partitions: Sequence[int], ts: int) -> dict[int, int]:
    """kcat -Q: the first offset at or after ``ts`` per partition (-1 when none)."""
    args = ["-Q"]
    for p in partitions:
        args += ["-t", f"{topic}:{p}:{ts}"]
    offsets = {}
    for line in kcat(broker, *args).splitlines():
        # "<topic> [<partition>] offset <offset>"
        name, part, _, offset = line.split()
        assert name == topic
        offsets[int(part.strip("[]"))] = int(offset)
    return offsets


def test_kcat_offsets_by_timestamp(shared_broker: BrokerProcess) -> None:
    topic = "kcat-times"
    assert C.ensure_topic(shared_broker.bootstrap, topic, NUM_PARTITIONS) == NUM_PARTITIONS
    t0 = int(time.time() * 1000) - 100_000
    stamps = [t0 + 10 * i for i in range(20)]
    C.produce(C.CONFLUENT, shared_broker.bootstrap, topic,
              [C.Record(b"k", b"%d" % i, (), ts, partition=1) for i, ts in enumerate(stamps)])
    assert _query(shared_broker, topic, [0, 1, 2], t0 - 1) == {0: -1, 1: 0, 2: -1}
    assert _query(shared_broker, topic, [1], t0 + 55) == {1: 6}
    assert _query(shared_broker, topic, [1], stamps[-1]) == {1: 19}
    assert _query(shared_broker, topic, [1], stamps[-1] + 1) == {1: -1}
