"""librdkafka reuses the sequences of a batch whose answer it lost once it aborts the transaction:
the loss test_copy[cluster-confluent] saw in CI on ecb3437, on one broker through the tests' TCP
proxy.

A confluent-kafka transactional producer (transaction version 1) sends one batch of ten records;
the broker writes it, the proxy swallows the answer and closes the connection, and refuses new
connections (``refuse_after_drop``), as a leader killed before answering. The batch waits in
librdkafka's queue for a retry, abort_transaction() purges it and — counting it as never sent —
advances the epoch's base past its sequences (rdkafka_partition.c, "ADVBASE"); the proxy then
lets connections through again and the abort completes. The next
transaction's first batch, ten other records, then carries the same epoch and sequences 0-9.

Taken for a retry of the aborted batch (as Kafka 4.4 takes it) it is answered with that batch's
offsets, never written, and its transaction commits: read_committed would not see the ten records.
eoslog refuses it (OUT_OF_ORDER_SEQUENCE_NUMBER), librdkafka fails the producer with its fatal
"sequence desynchronization", the commit raises, and a new producer's init_transactions aborts
what was open: nothing committed, nothing lost silently.

Mutant (not committed): ``ProducerStateEntry.find_duplicate`` without the open-transaction check
(the code before the fix) — the commit succeeds and read_committed sees none of the new records.
"""

from __future__ import annotations

import pytest
from clients import ensure_topic, read_values
from confluent_kafka import KafkaException, Producer

from support.faults import PRODUCE, FaultPolicy, FaultProxy
from support.harness import BrokerProcess, free_port, wait_until

TOPIC = "sequence-reuse"
TXN_ID = "sequence-reuse"


def test_a_batch_repeating_the_sequences_of_an_aborted_unanswered_batch_fails_the_producer(tmp_path) -> None:
    proxy_port = free_port()
    broker = BrokerProcess(tmp_path / "data", overrides={
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"}).start()
    proxy = FaultProxy("127.0.0.1", broker.port, proxy_port).start()
    try:
        ensure_topic(proxy.address, TOPIC, 1)
        settings = {"bootstrap.servers": proxy.address, "transactional.id": TXN_ID, "linger.ms": 100}
        producer = Producer(settings)
        producer.init_transactions(30)

        proxy.set_policy(FaultPolicy(api_keys=frozenset(), drop_responses={PRODUCE: frozenset({1})},
                                     refuse_after_drop=True))
        producer.begin_transaction()
        for i in range(10):
            producer.produce(TOPIC, f"aborted-{i}".encode(), partition=0)
        wait_until(lambda: producer.poll(0.05) is not None and proxy.dropped[PRODUCE] == 1,
                   "the first batch written and its answer swallowed")
        # abort_transaction() purges the queued batch at once, then waits for the coordinator,
        # unreachable while the proxy refuses connections: the call times out (retriable) and,
        # the proxy healed, a second call resumes the abort (librdkafka's documented way).
        with pytest.raises(KafkaException) as unreachable:
            producer.abort_transaction(1)
        assert unreachable.value.args[0].retriable(), unreachable.value.args[0]
        assert proxy.refused > 0
        proxy.heal()
        producer.abort_transaction(30)

        producer.begin_transaction()
        for i in range(10):  # as many records as the aborted batch: the same sequence range
            producer.produce(TOPIC, f"new-{i}".encode(), partition=0)
        try:
            producer.commit_transaction(30)
        except KafkaException as failed:
            error = failed.args[0]
        else:
            pytest.fail(f"the commit succeeded, and read_committed reads {read_values(proxy.address, TOPIC)}: "
                        "the new batch was taken for a retry of the aborted one and never written")
        assert error.fatal(), f"expected librdkafka's fatal sequence desynchronization, got {error}"
        assert "sequence desynchronization" in error.str(), error.str()

        # The application's way out of a fatal error: a new producer, which fences the old one and
        # aborts its open transaction. Nothing of either transaction is committed.
        again = Producer(settings)
        again.init_transactions(30)
        again.begin_transaction()
        again.produce(TOPIC, b"after", partition=0)
        again.commit_transaction(30)
        assert read_values(proxy.address, TOPIC) == ["after"]
    finally:
        proxy.stop()
        broker.stop()
