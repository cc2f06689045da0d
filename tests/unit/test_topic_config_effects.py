"""Kafka 4.4's topic configs that eoslog honours beyond the classic ones, on a real partition
log and cleaner (no broker): segment.jitter.ms, max.compaction.lag.ms (cleaning and the
active segment's roll, KIP-354), file.delete.delay.ms, preallocate, max.decompressed.message.bytes;
and the values and relations CreateTopics/AlterConfigs refuse, with Kafka 4.4's messages
(tests/conformance's configs sessions hold them against a Kafka broker)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_group_compaction import Clock, append, open_logs, read_all

from eoslog.config import ConfigError, check_topic_config
from eoslog.errors import Errors
from eoslog.records import CompressionType, InvalidRecordError, build_batch
from eoslog.storage.cleaner import LogCleaner
from support.leader_log import append as leader_append

KB = 1024


def test_segment_jitter_takes_a_random_part_off_each_segments_roll_age(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    logs = open_logs(tmp_path, clock)
    drawn: list[int] = []

    def draw(bound: int) -> int:
        drawn.append(bound)
        return 400

    monkeypatch.setattr("eoslog.storage.log.random.randrange", draw)
    logs.create_topic("j", 1, {"segment.ms": "1000", "segment.jitter.ms": "5000"})
    plog = logs.get_log("j", 0)
    assert plog is not None and drawn == [1000]  # min(jitter, segment.ms), as Kafka's randomSegmentJitter
    t0 = clock.now
    leader_append(plog, build_batch([(None, b"a", ())], timestamp=t0))
    leader_append(plog, build_batch([(None, b"b", ())], timestamp=t0 + 600))  # 600 = 1000 - 400: not yet
    assert len(plog.segments) == 1
    leader_append(plog, build_batch([(None, b"c", ())], timestamp=t0 + 601))
    assert len(plog.segments) == 2


def test_max_compaction_lag_cleans_below_the_dirty_ratio(tmp_path: Path) -> None:
    clock = Clock()
    logs = open_logs(tmp_path, clock)
    logs.create_topic("m", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.99",
                               "max.compaction.lag.ms": "60000", "segment.bytes": str(KB)})
    plog = logs.get_log("m", 0)
    assert plog is not None
    cleaner = LogCleaner(logs, clock, 1 << 20)
    for i in range(40):
        append(plog, clock, [(b"k%d" % (i % 8), b"v%d" % i + b"x" * 60)])
    assert cleaner.run() != []  # all of it dirty: ratio 1
    for i in range(20):
        append(plog, clock, [(b"k0", b"w%d" % i + b"x" * 60)])
    assert 0 < cleaner.dirty_ratio(plog) < 0.99
    clock.now += 59_000
    assert cleaner.run() == []  # within the lag: the ratio decides
    clock.now += 2_000
    assert cleaner.run() != []  # the oldest dirty record is past max.compaction.lag.ms
    k0 = [v.split(b"x")[0] for _, k, v, _ in read_all(plog) if k == b"k0" and v is not None]
    assert b"w0" not in k0 and k0[-1] == b"w19"  # superseded values below the active segment gone


def test_max_compaction_lag_rolls_the_active_segment_of_a_compacted_topic(tmp_path: Path) -> None:
    """KIP-354: the active segment is never cleaned, so it rolls at max.compaction.lag.ms."""
    clock = Clock()
    logs = open_logs(tmp_path, clock)
    for topic, policy in (("r", "compact"), ("s", "delete")):
        logs.create_topic(topic, 1, {"cleanup.policy": policy, "max.compaction.lag.ms": "60000",
                                     "segment.ms": "3600000"})
        plog = logs.get_log(topic, 0)
        assert plog is not None
        append(plog, clock, [(b"k", b"a")])
        clock.now += 60_001
        append(plog, clock, [(b"k", b"b")])
        assert len(plog.segments) == (2 if policy == "compact" else 1)


def test_file_delete_delay_keeps_deleted_segments_as_dot_deleted_until_it_passes(tmp_path: Path) -> None:
    clock = Clock()
    logs = open_logs(tmp_path / "data", clock)
    logs.create_topic("d", 1, {"segment.bytes": str(KB), "retention.bytes": str(KB), "file.delete.delay.ms": "5000"})
    plog = logs.get_log("d", 0)
    assert plog is not None
    for i in range(30):
        append(plog, clock, [(None, b"v%d" % i + b"x" * 60)])
    assert logs.run_retention() > 0
    retired = sorted(p.name for p in plog.dir.iterdir() if p.name.endswith(".deleted"))
    assert any(n.endswith(".log.deleted") for n in retired)
    clock.now += 4_999
    logs.delete_due_files()
    assert all((plog.dir / n).exists() for n in retired)
    clock.now += 1
    logs.delete_due_files()
    assert not any(p.name.endswith(".deleted") for p in plog.dir.iterdir())


def test_files_of_a_delayed_delete_left_by_a_crash_go_at_start_up(tmp_path: Path) -> None:
    clock = Clock()
    logs = open_logs(tmp_path / "data", clock)
    logs.create_topic("d", 1, {"segment.bytes": str(KB), "retention.bytes": str(KB)})  # Kafka's 60 s delay
    plog = logs.get_log("d", 0)
    assert plog is not None
    for i in range(30):
        append(plog, clock, [(None, b"v%d" % i + b"x" * 60)])
    logs.run_retention()
    assert any(p.name.endswith(".deleted") for p in plog.dir.iterdir())
    kept = read_all(plog)
    logs.shutdown()
    again = open_logs(tmp_path / "data", clock)
    reopened = again.get_log("d", 0)
    assert reopened is not None and read_all(reopened) == kept
    assert not any(p.name.endswith(".deleted") for p in reopened.dir.iterdir())


def test_preallocate_reserves_the_segment_without_changing_its_size_and_gives_it_back_at_roll(
        tmp_path: Path) -> None:
    clock = Clock()
    logs = open_logs(tmp_path, clock)
    logs.create_topic("p", 1, {"preallocate": "true", "segment.bytes": str(4 * 1024 * KB)})
    plog = logs.get_log("p", 0)
    assert plog is not None
    append(plog, clock, [(None, b"x" * 100)])
    path = plog.active_segment.log_path
    st = os.stat(path)
    assert st.st_size == plog.active_segment.size  # readers and recovery never see preallocated zeros
    if st.st_blocks * 512 < 4 * 1024 * KB:
        pytest.fail(f"{tmp_path} did not reserve 4 MiB (fallocate KEEP_SIZE unsupported here?)")
    plog.roll()
    assert os.stat(path).st_blocks * 512 < 64 * KB


def test_a_compressed_record_over_max_decompressed_message_bytes_is_refused_by_the_log(tmp_path: Path) -> None:
    clock = Clock()
    logs = open_logs(tmp_path, clock)
    logs.create_topic("z", 1, {"max.decompressed.message.bytes": "100"})
    plog = logs.get_log("z", 0)
    assert plog is not None
    with pytest.raises(InvalidRecordError) as refused:
        leader_append(plog, build_batch([(None, b"x" * 94, ())], timestamp=clock.now, compression=CompressionType.GZIP))
    assert refused.value.error is Errors.INVALID_RECORD
    leader_append(plog, build_batch([(None, b"x" * 93, ())], timestamp=clock.now, compression=CompressionType.GZIP))


@pytest.mark.parametrize(("overrides", "message"), [
    ({"message.downconversion.enable": "true"}, "Unknown topic config name: message.downconversion.enable"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker. "
                                        "Topic cannot be configured with remote log storage."),
    ({"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"},
     "conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)"),
    ({"compression.gzip.level": "12"},
     "Invalid value 12 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ({"compression.type": "none"}, "Invalid value none for configuration compression.type: String must be one "
                                   "of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ({"segment.jitter.ms": "-1"}, "Invalid value -1 for configuration segment.jitter.ms: Value must be at least 0"),
    ({"max.compaction.lag.ms": "0"},
     "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1"),
    ({"segment.bytes": "x"}, "Invalid value x for configuration segment.bytes: Not a number of type INT"),
    ({"leader.replication.throttled.replicas": "x"}, "Invalid value [x] for configuration "
     "leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a "
     "list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
])
def test_refused_topic_configs_get_kafkas_messages(tmp_path: Path, overrides: dict[str, str], message: str) -> None:
    defaults = open_logs(tmp_path, Clock()).topic_defaults
    with pytest.raises(ConfigError) as refused:
        check_topic_config(defaults, overrides)
    assert str(refused.value) == message


def test_accepted_configs_with_nothing_to_act_on_are_kept(tmp_path: Path) -> None:
    """Kafka 4.4 with remote storage off accepts these and keeps them; so does eoslog."""
    defaults = open_logs(tmp_path, Clock()).topic_defaults
    kept = {"local.retention.ms": "1000", "local.retention.bytes": "1000", "remote.log.copy.disable": "true",
            "remote.copy.lag.ms": "10", "remote.copy.lag.bytes": "10", "remote.log.delete.on.disable": "true",
            "remote.storage.enable": "false", "leader.replication.throttled.replicas": "0:1,1:2",
            "follower.replication.throttled.replicas": "*", "errors.deadletterqueue.group.enable": "true",
            "compression.zstd.level": "5", "compression.lz4.level": "17", "unclean.leader.election.enable": "true"}
    assert check_topic_config(defaults, kept).overrides.keys() == kept.keys()


def test_overrides_an_earlier_eoslog_stored_still_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """compression.type=none (accepted before Kafka's values were enforced) loads as Kafka's
    uncompressed; a value now out of range is dropped for the default, with a warning."""
    import json

    clock = Clock()
    logs = open_logs(tmp_path / "data", clock)
    logs.create_topic("old", 1, {"retention.ms": "1000"})
    logs.shutdown()
    topics = tmp_path / "data" / "topics.json"
    doc = json.loads(topics.read_text())
    doc["topics"][0]["config"] = {"compression.type": "none", "segment.ms": "0", "retention.ms": "1000"}
    topics.write_text(json.dumps(doc))
    again = open_logs(tmp_path / "data", clock)
    plog = again.get_log("old", 0)
    assert plog is not None
    assert plog.config.overrides == {"compression.type": "uncompressed", "retention.ms": 1000}
    assert "ignoring its stored segment.ms='0'" in caplog.text
