"""Bad input over real sockets: the broker answers with the right error code or closes
that one connection, keeps serving everyone else, and never changes the stored log.

Each case opens a fresh "attacker" connection, sends the bad bytes, then (when the
connection is still open) an ApiVersions ping: responses come in request order, so the
ping's answer proves the bad input was fully processed. After every case a "witness"
connection, open since the start, does a real produce + fetch round trip, the broker
process must be alive, and the victim partition's segment files and log end offset
must be exactly as before.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from eoslog.broker.handlers.registry import REGISTRY
from eoslog.protocol.codec import decode_response, encode_request
from eoslog.records import build_batch, decode_records
from support.harness import BrokerProcess
from support.rawkafka import (
    LATEST,
    ConnectionClosed,
    RawClient,
    api_versions_request,
    create_topic,
    create_topics_request,
    fetch,
    fetch_request,
    list_offset,
    list_offsets_request,
    produce,
    produce_request,
    simple_batch,
)

MAX_REQUEST_BYTES = 256 * 1024
PING_CORRELATION_ID = 2_000_000_000
VICTIM, WITNESS = "victim", "witness"

NONE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 2, 3
MESSAGE_TOO_LARGE, UNSUPPORTED_VERSION, INVALID_RECORD = 10, 35, 87

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@dataclass
class Outcome:
    frames: list[bytes]  # responses that arrived before the ping's (or the close)
    closed: bool


class Scene:
    """The broker, the witness connection, and the victim log's fingerprint."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.witness = RawClient(broker.bootstrap)
        self.round_trips = 0
        for topic in (VICTIM, WITNESS):
            assert create_topic(self.witness, topic, 2, {"max.message.bytes": "20000"}) == NONE
        for i in range(3):
            err, _ = produce(self.witness, VICTIM, 0, simple_batch([b"victim-%d" % i] * (i + 1)))
            assert err == NONE
        self.fingerprint = self.victim_state()

    def victim_state(self) -> tuple[dict[str, bytes], int, int]:
        files = {p.name: p.read_bytes()
                 for p in sorted((self.broker.data_dir / f"{VICTIM}-0").glob("*.log"))}
        return (files, list_offset(self.witness, VICTIM, 0, LATEST)[1],
                list_offset(self.witness, VICTIM, 1, LATEST)[1])

    def attack(self, data: bytes, *, ping: bool = True, half_close: bool = False,
               timeout_s: float = 20.0) -> Outcome:
        frames: list[bytes] = []
        with RawClient(self.broker.bootstrap) as attacker:
            try:
                attacker.send(data)
                if ping:
                    attacker.send(encode_request(PING_CORRELATION_ID, api_versions_request(0)))
                if half_close:
                    attacker.sock.shutdown(socket.SHUT_WR)
            except OSError:
                return Outcome(frames, True)
            attacker.sock.settimeout(timeout_s)
            try:
                while True:
                    frame = attacker.read_frame()
                    if ping and struct.unpack_from(">i", frame)[0] == PING_CORRELATION_ID:
                        return Outcome(frames, False)
                    frames.append(frame)
            except (ConnectionClosed, ConnectionResetError):
                return Outcome(frames, True)
            except TimeoutError:
                # Still waiting for the rest of a frame: end it from our side.
                attacker.sock.shutdown(socket.SHUT_WR)
                return Outcome(frames, attacker.closed_by_peer())

    def check(self) -> None:
        """The witness round trip works, the broker lives, the victim log is untouched."""
        assert self.broker.alive(), self.broker.log_text()[-3000:]
        self.round_trips += 1
        value = b"witness-%d-%d" % (self.round_trips, time.monotonic_ns())
        err, offset = produce(self.witness, WITNESS, 0, simple_batch([value]))
        assert err == NONE
        part = fetch(self.witness, WITNESS, 0, offset)
        assert part.error_code == NONE
        assert [r.value for r in decode_records_all(part.records) if r.offset == offset] == [value]
        assert self.victim_state() == self.fingerprint


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    broker = BrokerProcess(
        tmp_path_factory.mktemp("bad-input") / "data",
        overrides={"socket.request.max.bytes": str(MAX_REQUEST_BYTES),
                   "auto.create.topics.enable": "false"},
    ).start()
    s = Scene(broker)
    yield s
    s.witness.close()
    log = broker.log_text()
    assert broker.stop() == 0
    # A handler that raised means some input was not understood; report it.
    assert "Traceback" not in log, log[log.index("Traceback") - 500 :][:4000]


def with_size(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def frame_of(request: Any, correlation_id: int = 1) -> bytes:
    return encode_request(correlation_id, request, "attacker")


def produce_frame(records: bytes | None, topic: str = VICTIM, partition: int = 0,
                  version: int = 9, acks: int = -1) -> bytes:
    return frame_of(produce_request(topic, partition, records, version=version, acks=acks))


def produce_error(outcome: Outcome, version: int = 9) -> int:
    assert not outcome.closed and len(outcome.frames) == 1
    _, body = decode_response(outcome.frames[0], 0, version)
    return int(body.responses[0].partition_responses[0].error_code)


def good_batch(n: int = 3) -> bytes:
    return simple_batch([b"value-%d" % i for i in range(n)])


# -- raw bytes ---------------------------------------------------------------------------


@SETTINGS
@given(data=st.binary(min_size=1, max_size=2000))
def test_random_bytes(scene: Scene, data: bytes) -> None:
    scene.attack(data)
    scene.check()


@SETTINGS
@given(api_key=st.sampled_from(sorted(REGISTRY)), version=st.integers(-2, 20),
       body=st.binary(max_size=600))
def test_random_frames_for_every_api(scene: Scene, api_key: int, version: int,
                                     body: bytes) -> None:
    """A correct size prefix and request header prefix, then noise."""
    outcome = scene.attack(with_size(struct.pack(">hhi", api_key, version, 77) + body))
    spec = REGISTRY[api_key]
    if not spec.min_version <= version <= spec.max_version and api_key != 18:
        assert outcome.closed and not outcome.frames
    scene.check()


@SETTINGS
@given(request_index=st.integers(0, 5), cut=st.integers(0, 10_000), reframe=st.booleans())
def test_truncated_frames(scene: Scene, request_index: int, cut: int, reframe: bool) -> None:
    requests = [
        produce_request(VICTIM, 0, good_batch()),
        produce_request(VICTIM, 1, good_batch(), version=3),
        fetch_request(VICTIM, 0, 0),
        list_offsets_request(VICTIM, 0, LATEST),
        create_topics_request("never-created", 1),
        api_versions_request(3),
    ]
    full = frame_of(requests[request_index])
    body = full[4:]
    keep = 8 + cut % (len(body) - 8)  # at least api key, version, correlation id
    if reframe:
        # The size prefix agrees with the cut body: the frame is complete but short.
        outcome = scene.attack(with_size(body[:keep]))
        assert outcome.closed and not outcome.frames
    else:
        # The size promises more than is sent; the client then goes away.
        outcome = scene.attack(full[: 4 + keep], ping=False, half_close=True)
        assert outcome.closed and not outcome.frames
    scene.check()


@pytest.mark.parametrize("size", [-1, -(2**31), MAX_REQUEST_BYTES + 1, 2**31 - 1])
def test_frame_size_outside_socket_request_max_bytes(scene: Scene, size: int) -> None:
    outcome = scene.attack(struct.pack(">i", size) + b"\x00\x12\x00\x00" * 4, ping=False)
    assert outcome.closed and not outcome.frames
    scene.check()


def test_largest_allowed_frame_of_garbage(scene: Scene) -> None:
    outcome = scene.attack(with_size(b"\x00\x00\x00\x09" + b"\xff" * (MAX_REQUEST_BYTES - 4)))
    assert outcome.closed and not outcome.frames
    scene.check()


def test_empty_frame(scene: Scene) -> None:
    assert scene.attack(with_size(b"")).closed
    scene.check()


# -- API keys and versions ---------------------------------------------------------------------


@SETTINGS
@given(api_key=st.integers(-(2**15), 2**15 - 1).filter(lambda k: k not in REGISTRY),
       version=st.integers(-(2**15), 2**15 - 1))
def test_unknown_api_keys_close_the_connection(scene: Scene, api_key: int, version: int) -> None:
    outcome = scene.attack(with_size(struct.pack(">hhi", api_key, version, 5) + b"\x00\x01x"))
    assert outcome.closed and not outcome.frames
    scene.check()


@pytest.mark.parametrize("api_key", sorted(REGISTRY))
def test_unknown_versions_of_every_api(scene: Scene, api_key: int) -> None:
    spec = REGISTRY[api_key]
    for version in sorted({spec.min_version - 1, spec.max_version + 1, spec.max_version + 7,
                           -1, 2**15 - 1}):
        frame = with_size(struct.pack(">hhi", api_key, version, 4242) + b"\x00\x01x\x00" * 3)
        outcome = scene.attack(frame)
        if api_key == 18 and version >= 0:
            # Kafka: a v0 ApiVersions response with UNSUPPORTED_VERSION and the list.
            assert not outcome.closed and len(outcome.frames) == 1
            correlation_id, body = decode_response(outcome.frames[0], 18, 0)
            assert correlation_id == 4242 and body.error_code == UNSUPPORTED_VERSION
            advertised = scene.witness.call(api_versions_request(3)).api_keys
            assert {(k.api_key, k.min_version, k.max_version) for k in body.api_keys} == {
                (k.api_key, k.min_version, k.max_version) for k in advertised}
            assert (18, 0, spec.max_version) in {
                (k.api_key, k.min_version, k.max_version) for k in body.api_keys}
        elif api_key != 18 or version < 0:
            if api_key == 18:
                # Kafka's answer to a negative version is its choice; either is fine.
                assert outcome.closed or len(outcome.frames) == 1
            else:
                assert outcome.closed and not outcome.frames, (api_key, version)
        scene.check()


# -- produce with bad record sets -----------------------------------------------------------------


def _set(batch: bytes, pos: int, fmt: str, value: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, pos, value)
    return bytes(out)


def _flip(batch: bytes, pos: int) -> bytes:
    out = bytearray(batch)
    out[pos] ^= 0x5A
    return bytes(out)


BAD_RECORD_SETS = {
    "bad CRC in the records": (lambda b: _flip(b, len(b) - 2), CORRUPT_MESSAGE),
    "bad CRC field": (lambda b: _flip(b, 18), CORRUPT_MESSAGE),
    "truncated batch": (lambda b: b[:-9], CORRUPT_MESSAGE),
    "header only": (lambda b: b[:61], CORRUPT_MESSAGE),
    "half a header": (lambda b: b[:30], CORRUPT_MESSAGE),
    "negative batch length": (lambda b: _set(b, 8, ">i", -20), CORRUPT_MESSAGE),
    "huge batch length": (lambda b: _set(b, 8, ">i", 2**31 - 1), CORRUPT_MESSAGE),
    "magic 0": (lambda b: _set(b, 16, ">b", 0), INVALID_RECORD),
    "magic 1": (lambda b: _set(b, 16, ">b", 1), INVALID_RECORD),
    "magic 7": (lambda b: _set(b, 16, ">b", 7), INVALID_RECORD),
    "two batches": (lambda b: b + b, INVALID_RECORD),
    "base offset set": (lambda b: _set(b, 0, ">q", 1000), INVALID_RECORD),
    "larger than max.message.bytes": (
        lambda b: simple_batch([b"x" * 25_000]), MESSAGE_TOO_LARGE),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORD_SETS))
@pytest.mark.parametrize("version", [3, 9])
def test_produce_with_a_bad_record_set(scene: Scene, case: str, version: int) -> None:
    mutate, expected = BAD_RECORD_SETS[case]
    outcome = scene.attack(produce_frame(mutate(good_batch()), version=version))
    assert produce_error(outcome, version) == expected
    scene.check()


@pytest.mark.parametrize("records", [None, b""])
def test_produce_with_null_or_empty_records(scene: Scene, records: bytes | None) -> None:
    # Kafka answers INVALID_RECORD ("at least one record batch per partition").
    outcome = scene.attack(produce_frame(records))
    assert produce_error(outcome) in (CORRUPT_MESSAGE, INVALID_RECORD)
    scene.check()


@pytest.mark.parametrize(("topic", "partition"), [("no-such-topic", 0), (VICTIM, 2),
                                                  (VICTIM, -1), (VICTIM, 2**31 - 1)])
def test_produce_to_an_unknown_topic_or_partition(scene: Scene, topic: str,
                                                  partition: int) -> None:
    outcome = scene.attack(produce_frame(good_batch(), topic=topic, partition=partition))
    assert produce_error(outcome) == UNKNOWN_TOPIC_OR_PARTITION
    scene.check()


@pytest.mark.parametrize("length", [-2, -1000, 2**31 - 1])
def test_produce_with_a_negative_or_huge_records_length(scene: Scene, length: int) -> None:
    """The records field's own int32 length (Produce v3, not flexible) is corrupted."""
    batch = good_batch()
    frame = bytearray(produce_frame(batch, version=3))
    at = bytes(frame).index(batch) - 4
    assert struct.unpack_from(">i", frame, at)[0] == len(batch)
    struct.pack_into(">i", frame, at, length)
    outcome = scene.attack(bytes(frame))
    assert outcome.closed and not outcome.frames
    scene.check()


@SETTINGS
@given(flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1,
                      max_size=5),
       codec_batch=st.sampled_from(["plain", "many", "gzip", "zstd"]))
def test_produce_with_randomly_damaged_batches(scene: Scene, flips: list[tuple[int, int]],
                                               codec_batch: str) -> None:
    from eoslog.records import CompressionType

    records = [(b"key", b"value-%d" % i, (("h", b"v"),)) for i in range(20 if codec_batch == "many"
                                                                         else 2)]
    codec = {"gzip": CompressionType.GZIP, "zstd": CompressionType.ZSTD}.get(
        codec_batch, CompressionType.NONE)
    original = build_batch(records, timestamp=int(time.time() * 1000), compression=codec)
    damaged = bytearray(original)
    for pos, mask in flips:
        # Every byte but partitionLeaderEpoch (12-15), which the CRC does not cover and
        # the broker does not check: damage there leaves a valid batch.
        i = pos % (len(original) - 4)
        damaged[i if i < 12 else i + 4] ^= mask
    assume(damaged != original)  # two flips of one byte can cancel out
    outcome = scene.attack(produce_frame(bytes(damaged)))
    assert produce_error(outcome) in (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE)
    scene.check()


def test_acks_zero_bad_produce_changes_nothing(scene: Scene) -> None:
    outcome = scene.attack(produce_frame(_flip(good_batch(), 70), acks=0))
    # Kafka closes the connection after a failed acks=0 produce; answering nothing
    # (and then the ping) is also safe: the log is what matters.
    assert outcome.closed or not outcome.frames
    scene.check()


def test_the_victim_still_serves_its_original_records(scene: Scene) -> None:
    part = fetch(scene.witness, VICTIM, 0, 0)
    assert part.error_code == NONE
    values = [r.value for r in decode_records_all(part.records)]
    assert values == [b"victim-0", b"victim-1", b"victim-1", b"victim-2", b"victim-2",
                      b"victim-2"]


def decode_records_all(data: bytes) -> list[Any]:
    from eoslog.records import iter_batch_headers

    out = []
    for pos, h in iter_batch_headers(data, verify_crc=True):
        out += decode_records(data[pos : pos + h.size])
    return out
