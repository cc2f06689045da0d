"""The producer end to end against the broker double (tests/support/broker_double.py), for answers
the real broker cannot be made to give: NOT_LEADER_OR_FOLLOWER, DUPLICATE_SEQUENCE_NUMBER,
UNKNOWN_PRODUCER_ID, a batch refused while later ones are in flight, coordinator errors
on every transactional request, a broker that stops answering Produce."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from eoslog.client.errors import (
    InvalidTxnStateError,
    KafkaTimeoutError,
    RecordListTooLargeError,
    TopicAuthorizationFailedError,
    UnresolvedSequenceError,
)
from eoslog.client.producer import AIOProducer, TransactionState
from eoslog.protocol.errors import ErrorCode
from support.broker_double import BrokerDouble

WAIT_S = 30.0  # bounds a hang, not a speed
PRODUCE, METADATA, FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = 0, 3, 10, 22, 24, 26


def run(scenario: Callable[[BrokerDouble], Awaitable[None]], topics: dict[str, int] | None = None) -> None:
    async def main() -> None:
        double = await BrokerDouble(topics or {"t": 1}).start()
        try:
            await asyncio.wait_for(scenario(double), 60)
        finally:
            await double.stop()

    asyncio.run(main())


def once(code: int, when: Callable[[Any], bool] = lambda _: True) -> Callable[..., int | None]:
    """A hook that answers ``code`` the first time ``when`` holds, then lets everything through."""
    fired = []

    def hook(*args: Any) -> int | None:
        if not fired and when(args[-1]):
            fired.append(1)
            return code
        return None

    return hook


def producer(double: BrokerDouble, **settings: Any) -> AIOProducer:
    return AIOProducer(bootstrap_servers=double.bootstrap, linger_ms=0, retry_backoff_ms=10, **settings)


def test_not_leader_refreshes_metadata_and_retries() -> None:
    async def scenario(double: BrokerDouble) -> None:
        double.produce_hook = once(ErrorCode.not_leader_or_follower)
        async with producer(double) as p:
            await (await p.send("t", b"v"))
            md = await p.send_and_wait("t", b"w")
            assert p.metrics()["record-retry-total"] == 1
        assert double.values("t") == [b"v", b"w"] and md.offset == 1
        assert double.count(METADATA) >= 2  # the error asked for fresh metadata

    run(scenario)


def test_duplicate_sequence_number_completes_the_batch() -> None:
    async def scenario(double: BrokerDouble) -> None:
        double.produce_hook = once(ErrorCode.duplicate_sequence_number)
        async with producer(double) as p:
            md = await p.send_and_wait("t", b"already there")
            assert md.offset == -1  # delivered, offset unknown
            assert (await p.send_and_wait("t", b"next")).offset == 0

    run(scenario)


def test_unknown_producer_id_bumps_the_idempotent_epoch() -> None:
    async def scenario(double: BrokerDouble) -> None:
        double.produce_hook = once(ErrorCode.unknown_producer_id)
        async with producer(double) as p:
            await p.send_and_wait("t", b"v")
        (appended,) = double.log[("t", 0)]
        assert (appended.epoch, appended.base_sequence) == (1, 0)

    run(scenario)


def test_a_refused_batch_bumps_the_epoch_and_the_batches_behind_it_restart_at_zero() -> None:
    async def scenario(double: BrokerDouble) -> None:
        # The second batch is refused for good while the next ones are already in flight
        # (pipelined once the first was acknowledged); they then fail
        # OUT_OF_ORDER_SEQUENCE_NUMBER at the broker (a gap), and must go again under a new
        # epoch from sequence 0 — in order, each once.
        double.produce_hook = once(ErrorCode.record_list_too_large, lambda h: h.base_sequence == 1)
        double.hold_produce = 0.05
        async with producer(double, batch_size=100) as p:
            futures = [await p.send("t", b"%03d" % i + b"." * 80) for i in range(6)]
            with pytest.raises(RecordListTooLargeError):
                await futures[1]
            offsets = [(await f).offset for f in (futures[0], *futures[2:])]
        assert double.values("t") == [b"%03d" % i + b"." * 80 for i in (0, 2, 3, 4, 5)]
        assert offsets == list(range(5))
        assert [(a.epoch, a.base_sequence) for a in double.log[("t", 0)]] == [(0, 0), *((1, i) for i in range(4))]
        assert double.count(PRODUCE) > 6  # batches behind the refused one were in flight and went again

    run(scenario)


def test_a_first_batch_refused_cannot_be_overtaken_by_the_next_one() -> None:
    async def scenario(double: BrokerDouble) -> None:
        # Right after a topic's creation, Kafka may answer NOT_LEADER_OR_FOLLOWER to a
        # partition's first batch while it accepts the next: it takes any first sequence from a
        # producer it holds no state for. Were a later batch in flight, it would land first
        # and every retry of sequence 0 would be OUT_OF_ORDER_SEQUENCE_NUMBER until
        # delivery.timeout.ms. Every record must land once, in order, under one epoch.
        double.produce_hook = once(ErrorCode.not_leader_or_follower, lambda h: h.base_sequence == 0)
        double.hold_produce = 0.05
        values = [b"%03d" % i + b"." * 80 for i in range(6)]
        async with producer(double, batch_size=100, request_timeout_ms=2000, delivery_timeout_ms=4000) as p:
            futures = [await p.send("t", v) for v in values]
            offsets = [(await f).offset for f in futures]
            assert p.metrics()["record-retry-total"] == 1
        assert double.values("t") == values and offsets == list(range(6))
        assert [(a.epoch, a.base_sequence) for a in double.log[("t", 0)]] == [(0, i) for i in range(6)]

    run(scenario)


def test_idempotent_batches_expired_after_being_sent_bump_the_epoch() -> None:
    async def scenario(double: BrokerDouble) -> None:
        p = producer(double, request_timeout_ms=300, delivery_timeout_ms=1000)
        await p.start()
        # Connected, with metadata and a producer id first: the timed batch is then sent at once
        # (under load, the start-up alone could outlast a short delivery timeout, and a batch that
        # expires unsent needs no new epoch).
        await p.send_and_wait("t", b"first")
        double.answer_produce = False
        with pytest.raises(KafkaTimeoutError):
            await p.send_and_wait("t", b"lost?")
        assert double.count(PRODUCE) >= 2  # it was sent, and never answered
        double.answer_produce = True
        md = await p.send_and_wait("t", b"after")
        await p.close()
        assert md.offset == 1
        first, after = double.log[("t", 0)]
        assert (first.epoch, first.base_sequence, first.values) == (0, 0, [b"first"])
        assert (after.epoch, after.base_sequence, after.values) == (1, 0, [b"after"])

    run(scenario)


def test_transactional_batches_expired_after_being_sent_are_fatal() -> None:
    async def scenario(double: BrokerDouble) -> None:
        p = producer(double, transactional_id="tx", request_timeout_ms=300, delivery_timeout_ms=400)
        await p.start()
        await p.init_transactions()
        p.begin_transaction()
        double.answer_produce = False
        with pytest.raises(KafkaTimeoutError):
            await p.send_and_wait("t", b"lost?")
        # The expiry makes the transaction fatal a moment after send_and_wait has raised.
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while p._tm is None or p._tm.state is not TransactionState.FATAL_ERROR:
            assert asyncio.get_running_loop().time() < deadline, "the transaction never became fatal"
            await asyncio.sleep(0.02)
        with pytest.raises(UnresolvedSequenceError) as info:
            await p.commit_transaction()
        assert info.value.fatal
        await p.close(timeout=0)

    run(scenario)


def test_coordinator_errors_on_every_transactional_request_are_retried() -> None:
    async def scenario(double: BrokerDouble) -> None:
        hooks = {
            FIND_COORDINATOR: once(ErrorCode.coordinator_not_available),
            INIT_PRODUCER_ID: once(ErrorCode.coordinator_load_in_progress),
            ADD_PARTITIONS: once(ErrorCode.concurrent_transactions),
            END_TXN: once(ErrorCode.not_coordinator),
        }
        double.txn_hook = lambda api_key, request: hooks[api_key](request) if api_key in hooks else None
        async with producer(double, transactional_id="tx") as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send("t", b"in txn")
            await p.commit_transaction()
        assert double.values("t") == [b"in txn"]
        assert double.count(FIND_COORDINATOR) >= 3  # first try, retry, lookup after NOT_COORDINATOR
        assert double.count(INIT_PRODUCER_ID) == 2 and double.count(ADD_PARTITIONS) == 2
        assert double.count(END_TXN) == 2

    run(scenario)


def test_invalid_txn_state_on_end_txn_is_fatal() -> None:
    async def scenario(double: BrokerDouble) -> None:
        double.txn_hook = lambda api_key, request: ErrorCode.invalid_txn_state if api_key == END_TXN else None
        p = producer(double, transactional_id="tx")
        await p.start()
        await p.init_transactions()
        p.begin_transaction()
        await p.send("t", b"v")
        with pytest.raises(InvalidTxnStateError) as info:
            await p.commit_transaction()
        assert info.value.fatal
        with pytest.raises(InvalidTxnStateError):
            p.begin_transaction()
        await p.close(timeout=0)

    run(scenario)


def test_an_abortable_produce_error_then_abort_bumps_the_epoch_for_the_next_transaction() -> None:
    async def scenario(double: BrokerDouble) -> None:
        double.produce_hook = once(ErrorCode.topic_authorization_failed)
        async with producer(double, transactional_id="tx") as p:
            await p.init_transactions()
            p.begin_transaction()
            with pytest.raises(TopicAuthorizationFailedError):
                await p.send_and_wait("t", b"refused")
            with pytest.raises(TopicAuthorizationFailedError) as info:
                await p.commit_transaction()
            assert info.value.txn_requires_abort and not info.value.fatal
            await p.abort_transaction()
            p.begin_transaction()
            await p.send("t", b"next")
            await p.commit_transaction()
        (appended,) = double.log[("t", 0)]
        # The abort bumped the epoch (InitProducerId with the current id, KIP-360): sequence 0 again.
        assert (appended.epoch, appended.base_sequence, appended.values) == (1, 0, [b"next"])
        assert double.count(INIT_PRODUCER_ID) == 2

    run(scenario)


def test_an_unreadable_produce_response_is_retried_not_left_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Produce answer the client cannot decode (seen once against Apache Kafka, issue 12)
    must not leave its batch pending, where a transaction's commit would wait for it forever:
    the batch fails as after a broken connection and is retried; the broker keeps the
    idempotent record once."""
    import eoslog.client.producer.sender as sender_module
    from eoslog.records.varint import VarintError

    decode = sender_module.decode_produce_response
    answers: list[int] = []

    def unreadable_first(frame: Any, version: int) -> Any:
        answers.append(version)
        if len(answers) == 1:
            raise VarintError("unsigned varint longer than 5 bytes")
        return decode(frame, version)

    monkeypatch.setattr(sender_module, "decode_produce_response", unreadable_first)

    async def scenario(double: BrokerDouble) -> None:
        async with producer(double, enable_idempotence=True) as p:
            md = await asyncio.wait_for(p.send_and_wait("t", b"once"), WAIT_S)
            assert p.metrics()["record-retry-total"] == 1 and md.offset == 0
        assert double.values("t") == [b"once"]

    run(scenario)
