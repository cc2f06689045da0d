"""Idempotent produce: every sequence and epoch rule, eoslog against Apache Kafka.

Producer ids are compared as symbols (observe.py): pid#1 is whatever each broker allocated first.
A sequence wrap-around past Int.MaxValue needs 2^31 records from one producer, which no session
can send; the unit tests of storage.producer_state cover it.
"""

from __future__ import annotations

from conformance.session import Broker, Catalogue, Target, i16, i64, ms
from conformance.steps import INIT_PRODUCER_ID, PRODUCE, batch, call, create_topic, fetch, produce

CATALOGUE = Catalogue("idempotence")
session = CATALOGUE.session


def test_session(session_name: str, brokers: tuple[Broker, Broker]) -> None:
    CATALOGUE.run(session_name, brokers)


def init_pid(t, *, pid: int = -1, epoch: int = -1, version: int | None = None, label: str | None = None):
    resp = call(t, INIT_PRODUCER_ID, "InitProducerIdRequest", version=version, label=label,
                transactional_id=None, transaction_timeout=ms(60000), producer_id=i64(pid),
                producer_epoch=i16(epoch))
    return int(resp.producer_id), int(resp.producer_epoch)


def send(t, topic: str, pid: int, epoch: int, seq: int, n: int = 1, *, version: int | None = None,
         label: str | None = None):
    values = [f"{seq}+{i}".encode() for i in range(n)]
    return produce(t, topic, 0, batch(values, pid=pid, epoch=epoch, seq=seq), version=version, label=label)


@session("in-order", "sequences from 0, batches of several records, fetched back with producer fields")
def _in_order(t: Target) -> None:
    create_topic(t, "idem-order")
    pid, epoch = init_pid(t)
    send(t, "idem-order", pid, epoch, 0, 3)
    send(t, "idem-order", pid, epoch, 3, 2)
    fetch(t, "idem-order", 0, 0)


@session("duplicate-in-last-five", "a retried batch among the last five answers its first offsets")
def _dup_recent(t: Target) -> None:
    create_topic(t, "idem-dup")
    pid, epoch = init_pid(t)
    for seq in range(5):
        send(t, "idem-dup", pid, epoch, seq)
    send(t, "idem-dup", pid, epoch, 0, label="retry of seq 0 (5th latest)")
    send(t, "idem-dup", pid, epoch, 4, label="retry of seq 4 (latest)")
    fetch(t, "idem-dup", 0, 0)


@session("duplicate-older-than-five", "a retried batch older than the last five")
def _dup_old(t: Target) -> None:
    create_topic(t, "idem-old")
    pid, epoch = init_pid(t)
    for seq in range(7):
        send(t, "idem-old", pid, epoch, seq)
    send(t, "idem-old", pid, epoch, 0, label="retry of seq 0 (7th latest)")
    send(t, "idem-old", pid, epoch, 1, label="retry of seq 1 (6th latest)")
    fetch(t, "idem-old", 0, 0)


@session("sequence-gap", "a batch after a gap, and one overlapping the last batch")
def _gap(t: Target) -> None:
    create_topic(t, "idem-gap")
    pid, epoch = init_pid(t)
    send(t, "idem-gap", pid, epoch, 0, 2)
    send(t, "idem-gap", pid, epoch, 5, label="gap: seq 5 after 1")
    send(t, "idem-gap", pid, epoch, 1, 2, label="overlap: seq 1-2 after 0-1")
    send(t, "idem-gap", pid, epoch, 2, label="next: seq 2")
    fetch(t, "idem-gap", 0, 0)


@session("unknown-producer-id", "a producer id the broker has no state for, with seq 0 and seq > 0")
def _unknown_pid(t: Target) -> None:
    create_topic(t, "idem-unknown")
    send(t, "idem-unknown", 424242, 0, 7, label="unknown pid, seq 7")
    send(t, "idem-unknown", 424242, 0, 0, label="unknown pid, seq 0")
    send(t, "idem-unknown", 424242, 0, 1, label="then seq 1")
    fetch(t, "idem-unknown", 0, 0)


@session("epoch-bump", "a higher epoch must start at seq 0; the old epoch is then refused at every "
         "Produce version")
def _epoch_bump(t: Target) -> None:
    create_topic(t, "idem-epoch")
    pid, epoch = init_pid(t)
    send(t, "idem-epoch", pid, epoch, 0, 2)
    send(t, "idem-epoch", pid, epoch + 1, 2, label="new epoch, seq 2")
    send(t, "idem-epoch", pid, epoch + 1, 0, label="new epoch, seq 0")
    for v in range(3, t.v(PRODUCE) + 1):
        send(t, "idem-epoch", pid, epoch, 2, version=v, label=f"old epoch, Produce v{v}")
    init_pid(t, pid=pid, epoch=epoch, label="InitProducerId naming the id and its epoch")
    fetch(t, "idem-epoch", 0, 0)


@session("init-producer-id-versions", "a non-transactional InitProducerId at every version")
def _init_versions(t: Target) -> None:
    for v in range(0, t.v(INIT_PRODUCER_ID) + 1):
        init_pid(t, version=v, label=f"InitProducerId v{v}")


@session("producer-fields-without-id", "a batch with a sequence but no producer id, and the reverse")
def _fields(t: Target) -> None:
    create_topic(t, "idem-fields")
    produce(t, "idem-fields", 0, batch([b"x"], seq=0), label="sequence without a producer id")
    produce(t, "idem-fields", 0, batch([b"x"], pid=5, epoch=0), label="producer id without a sequence")
    fetch(t, "idem-fields", 0, 0)
