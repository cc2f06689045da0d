"""The sink's commit protocol without Spark, against the real broker: the decision record
format, and the driver's commit/abort logic — idempotent, never undoing a decision, never
committing what no decision names — driven with the same task-side and driver-side calls
the Spark writers make."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections.abc import Iterator

import pytest
from sink_support import assert_exactly_once, committed_output, create_topics, open_transactions

from eoslog.client.errors import KafkaError
from eoslog.client.producer import Producer
from eoslog.client.types import PreparedTxnState
from eoslog.spark.commit import (
    ABORTED,
    COMMITTED,
    NOTHING_OPEN,
    LingeringTransactionError,
    PreparedTransactionLostError,
    TaskCommitMessage,
    TaskIdentity,
    abort_batch,
    finish_batch,
    key_of_transactional_id,
    prepare_task,
    recover,
    transactional_id,
    transactional_id_pattern,
)
from eoslog.spark.decisions import (
    Decider,
    Decision,
    DecisionFormatError,
    admin_client,
    ensure_decisions_topic,
    read_latest_decision,
)
from eoslog.spark.sink_options import FaultPoints, SinkOptions, parse_sink_options
from support.harness import BrokerProcess

_ids = itertools.count()


# -- the decision record -------------------------------------------------------------------------


def test_decision_record_format_round_trips() -> None:
    d = Decision("q-1", 7, "run-9", (("p.q-1.run-9.0.0", PreparedTxnState(4001, 3)),
                                      ("p.q-1.run-9.1.2", PreparedTxnState(4002, 0))), 1700000000000)
    key, value = d.encode()
    assert key == b"q-1"
    assert json.loads(value) == {
        "version": 1, "batch": 7, "run": "run-9", "decidedAt": 1700000000000,
        "transactions": [["p.q-1.run-9.0.0", "4001:3"], ["p.q-1.run-9.1.2", "4002:0"]],
    }
    assert Decision.decode(key, value) == d
    assert d.states() == {"p.q-1.run-9.0.0": PreparedTxnState(4001, 3), "p.q-1.run-9.1.2": PreparedTxnState(4002, 0)}
    empty = Decision("q", 0, "r", ())
    assert Decision.decode(*empty.encode()) == empty


@pytest.mark.parametrize("value", [
    b"not json",
    b"[]",
    b'{"version": 2, "batch": 1, "run": "r", "transactions": []}',
    b'{"version": 1, "run": "r", "transactions": []}',
    b'{"version": 1, "batch": -1, "run": "r", "transactions": []}',
    b'{"version": 1, "batch": "1", "run": "r", "transactions": []}',
    b'{"version": 1, "batch": 1, "run": "r", "transactions": [["t", ""]]}',
    b'{"version": 1, "batch": 1, "run": "r", "transactions": [["t", "1:2:3"]]}',
    b'{"version": 1, "batch": 1, "run": "r", "transactions": [["", "1:2"]]}',
    b'{"version": 1, "batch": 1, "run": "r", "transactions": [["t"]]}',
])
def test_malformed_decisions_are_refused(value: bytes) -> None:
    with pytest.raises(DecisionFormatError):
        Decision.decode(b"q", value)
    with pytest.raises(DecisionFormatError):
        Decision.decode(None, value)


def test_transactional_ids_and_their_pattern() -> None:
    import re

    options = parse_sink_options({"kafka.bootstrap.servers": "x:1", "topic": "t"})
    tid = transactional_id(options, TaskIdentity("q-1", "r-2", 5, 3, 1))
    assert tid == "eoslog-spark-q-1.r-2.3.1"
    assert key_of_transactional_id(options, tid) == "q-1"
    assert re.fullmatch(transactional_id_pattern(options, "q-1"), tid)
    assert re.fullmatch(transactional_id_pattern(options, None), tid)
    assert not re.fullmatch(transactional_id_pattern(options, "q-1"), "eoslog-spark-q-1.decider")
    assert not re.fullmatch(transactional_id_pattern(options, "q"), tid)


# -- the protocol against the broker ----------------------------------------------------------------


@pytest.fixture
def sink(spark_broker: BrokerProcess) -> Iterator[tuple[SinkOptions, str]]:
    topic = f"commit-logic-{next(_ids)}"
    create_topics(spark_broker.bootstrap, (topic, 2))
    yield parse_sink_options({"kafka.bootstrap.servers": spark_broker.bootstrap, "topic": topic}), topic


class ListRows:
    """A write task's input: ``values`` for one partition of the topic."""

    def __init__(self, topic: str, partition: int, values: list[bytes]) -> None:
        self.topic, self.partition, self.values = topic, partition, values
        self.sent = self.drained = False

    def is_empty(self) -> bool:
        return not self.values

    def send_all(self, producer: Producer) -> int:
        self.sent = True
        for v in self.values:
            producer.send(self.topic, v, partition=self.partition)
        return len(self.values)

    def drain(self) -> None:
        self.drained = True


def prepare(options: SinkOptions, key: str, batch: int, partition: int, values: list[bytes], *,
            run: str = "run-a", attempt: int = 0, replayable: bool = True) -> TaskCommitMessage:
    rows = ListRows(options.topic or "", partition, values)
    message = prepare_task(options, TaskIdentity(key, run, batch, partition, attempt, replayable), rows)
    assert rows.sent and not rows.drained, "the task was expected to write"
    return message


def decide_only(options: SinkOptions, batch: int, messages: list[TaskCommitMessage]) -> None:
    """The driver's commit, stopped by a fault right after it recorded the decision."""
    failing = dataclasses.replace(options, faults=FaultPoints(raise_after_decision=frozenset({batch})))
    with pytest.raises(RuntimeError, match="test fault"):
        finish_batch(failing, batch, messages)


def values(tag: str, n: int = 5) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def test_commit_is_idempotent_and_abort_never_undoes_a_decided_batch(sink: tuple[SinkOptions, str],
                                                                     spark_broker: BrokerProcess) -> None:
    options, topic = sink
    key = f"q{next(_ids)}"
    msgs = [prepare(options, key, 0, p, values(f"b0p{p}")) for p in range(2)]
    first = finish_batch(options, 0, msgs)
    assert first.decided_now and first.count(COMMITTED) == 2
    # When commit returns the markers are written: the whole batch is visible.
    assert open_transactions(spark_broker.bootstrap, topic) == {}
    again = finish_batch(options, 0, msgs)
    assert not again.decided_now and set(again.settled.values()) == {NOTHING_OPEN}
    undone = abort_batch(options, 0, msgs)
    assert undone.decision == first.decision and undone.count(ABORTED) == 0
    assert read_latest_decision(options, key) == first.decision
    assert_exactly_once(committed_output(spark_broker.bootstrap, topic), values("b0p0") + values("b0p1"))
    assert open_transactions(spark_broker.bootstrap, topic) == {}


def test_abort_without_a_decision_aborts_everything(sink: tuple[SinkOptions, str], spark_broker: BrokerProcess) -> None:
    options, topic = sink
    key = f"q{next(_ids)}"
    finish_batch(options, 0, [prepare(options, key, 0, 0, values("b0"))])
    msgs = [prepare(options, key, 1, p, values(f"b1p{p}")) for p in range(2)]
    outcome = abort_batch(options, 1, [msgs[0], None])  # the other task's message is lost: found by listing
    assert outcome.decision is None and outcome.count(ABORTED) == 2
    assert read_latest_decision(options, key).batch_id == 0  # type: ignore[union-attr]
    assert_exactly_once(committed_output(spark_broker.bootstrap, topic), values("b0"))
    assert open_transactions(spark_broker.bootstrap, topic) == {}


def test_abort_of_a_batch_write_without_messages_still_cleans_up(sink: tuple[SinkOptions, str],
                                                                 spark_broker: BrokerProcess) -> None:
    """Every task of a batch write failed (all messages None): the writer knows its key."""
    options, topic = sink
    key = f"batch-{next(_ids)}"
    leftovers = [prepare(options, key, 0, p, values(f"x{p}"), run="job", replayable=False) for p in range(2)]
    assert abort_batch(options, 0, [None, None]).settled == {}  # a stream's abort cannot know the query
    outcome = abort_batch(options, 0, [None, None], key)
    assert outcome.settled == {m.transactional_id: ABORTED for m in leftovers}
    assert committed_output(spark_broker.bootstrap, topic) == []
    assert open_transactions(spark_broker.bootstrap, topic) == {}


def test_replay_of_a_decided_batch_writes_nothing_and_finishes_the_decision(
        sink: tuple[SinkOptions, str], spark_broker: BrokerProcess) -> None:
    options, topic = sink
    key = f"q{next(_ids)}"
    decide_only(options, 3, [prepare(options, key, 3, p, values(f"b3p{p}")) for p in range(2)])
    # Decided but not completed: nothing visible, both transactions open.
    assert committed_output(spark_broker.bootstrap, topic) == []
    assert len(open_transactions(spark_broker.bootstrap, topic)) == 2

    # The restarted query (a new run) replays batch 3: its tasks find the decision.
    inputs = [ListRows(topic, p, values(f"replayed{p}")) for p in range(2)]
    replayed = [prepare_task(options, TaskIdentity(key, "run-b", 3, p, 0), inputs[p]) for p in range(2)]
    assert all(rows.drained and not rows.sent for rows in inputs)
    assert all(m.decided_batch == 3 and m.transactional_id is None for m in replayed)
    outcome = finish_batch(options, 3, replayed)
    assert not outcome.decided_now and outcome.count(COMMITTED) == 2
    assert_exactly_once(committed_output(spark_broker.bootstrap, topic), values("b3p0") + values("b3p1"))
    assert open_transactions(spark_broker.bootstrap, topic) == {}


def test_replay_that_missed_the_decision_is_settled_against_it(sink: tuple[SinkOptions, str],
                                                               spark_broker: BrokerProcess) -> None:
    """Tasks of a new run that wrote although the batch was decided (a decision they could
    not see yet) are aborted; the decided transactions of the old run are committed."""
    options, topic = sink
    key = f"q{next(_ids)}"
    decide_only(options, 0, [prepare(options, key, 0, p, values(f"old{p}")) for p in range(2)])

    # Tasks that skipped the decision check, as tasks that read before the decision landed.
    new = [prepare(options, key, 0, p, values(f"new{p}"), run="run-b", replayable=False) for p in range(2)]
    outcome = finish_batch(options, 0, new)
    assert not outcome.decided_now
    assert outcome.count(COMMITTED) == 2 and outcome.count(ABORTED) == 2
    assert_exactly_once(committed_output(spark_broker.bootstrap, topic), values("old0") + values("old1"))
    assert open_transactions(spark_broker.bootstrap, topic) == {}


def test_a_task_without_rows_starts_no_transaction(sink: tuple[SinkOptions, str],
                                                   spark_broker: BrokerProcess) -> None:
    options, topic = sink
    key = f"q{next(_ids)}"
    empty = prepare_task(options, TaskIdentity(key, "run-a", 0, 0, 0), ListRows(topic, 0, []))
    assert empty.transactional_id is None and empty.records == 0
    full = prepare(options, key, 0, 1, values("full"))
    outcome = finish_batch(options, 0, [empty, full])
    assert outcome.decision is not None and [t for t, _ in outcome.decision.transactions] == [full.transactional_id]
    assert_exactly_once(committed_output(spark_broker.bootstrap, topic), values("full"))


def test_a_lost_prepared_transaction_is_never_decided(sink: tuple[SinkOptions, str],
                                                      spark_broker: BrokerProcess) -> None:
    options, topic = sink
    key = f"q{next(_ids)}"
    msgs = [prepare(options, key, 0, p, values(f"b0p{p}")) for p in range(2)]
    # Someone fences the first task's id without keeping its transaction: it is aborted.
    assert msgs[0].transactional_id is not None
    intruder = Producer({"bootstrap.servers": spark_broker.bootstrap, "transactional.id": msgs[0].transactional_id,
                         "transaction.two.phase.commit.enable": True})
    intruder.init_transactions()
    intruder.close()
    with pytest.raises(PreparedTransactionLostError):
        finish_batch(options, 0, msgs)
    assert read_latest_decision(options, key) is None
    assert committed_output(spark_broker.bootstrap, topic) == []
    outcome = abort_batch(options, 0, msgs)
    assert outcome.count(COMMITTED) == 0
    assert open_transactions(spark_broker.bootstrap, topic) == {}


def test_a_task_never_ends_a_transaction_open_under_its_own_id(sink: tuple[SinkOptions, str],
                                                               spark_broker: BrokerProcess) -> None:
    options, topic = sink
    key = f"q{next(_ids)}"
    first = prepare(options, key, 0, 0, values("first"))
    with pytest.raises(LingeringTransactionError):
        prepare(options, key, 0, 0, values("second"))  # same query, run, partition and attempt
    outcome = finish_batch(options, 0, [first])
    assert outcome.count(COMMITTED) == 1
    assert_exactly_once(committed_output(spark_broker.bootstrap, topic), values("first"))


def test_only_the_attempt_whose_message_reaches_commit_is_committed(sink: tuple[SinkOptions, str],
                                                                    spark_broker: BrokerProcess) -> None:
    """A retried (or speculative) task: both attempts prepared, Spark hands the driver one."""
    options, topic = sink
    key = f"q{next(_ids)}"
    loser = prepare(options, key, 0, 0, values("attempt0"), attempt=0)
    winner = prepare(options, key, 0, 0, values("attempt1"), attempt=1)
    outcome = finish_batch(options, 0, [winner])
    assert outcome.settled == {winner.transactional_id: COMMITTED, loser.transactional_id: ABORTED}
    assert_exactly_once(committed_output(spark_broker.bootstrap, topic), values("attempt1"))
    assert open_transactions(spark_broker.bootstrap, topic) == {}


def test_a_fenced_decider_cannot_record(sink: tuple[SinkOptions, str]) -> None:
    options, _ = sink
    key = f"q{next(_ids)}"

    async def run() -> None:
        async with admin_client(options) as admin:
            partitions = await ensure_decisions_topic(options, admin)
        async with Decider(options, key, partitions) as old, Decider(options, key, partitions) as new:
            with pytest.raises(KafkaError):
                await old.record(Decision(key, 0, "old", ()))
            await new.record(Decision(key, 1, "new", ()))

    asyncio.run(run())
    decision = read_latest_decision(options, key)
    assert decision is not None and (decision.batch_id, decision.run_id) == (1, "new")


def test_recover_finishes_an_abandoned_query(sink: tuple[SinkOptions, str], spark_broker: BrokerProcess) -> None:
    options, topic = sink
    key = f"q{next(_ids)}"
    decided = [prepare(options, key, 0, p, values(f"decided{p}")) for p in range(2)]
    undecided = prepare(options, key, 0, 0, values("undecided"), attempt=1)  # an attempt Spark dropped
    decide_only(options, 0, decided)
    outcomes = recover(options)  # every key with open transactions
    assert outcomes[key].settled == {decided[0].transactional_id: COMMITTED, decided[1].transactional_id: COMMITTED,
                                     undecided.transactional_id: ABORTED}
    assert_exactly_once(committed_output(spark_broker.bootstrap, topic), values("decided0") + values("decided1"))
    assert open_transactions(spark_broker.bootstrap, topic) == {}
