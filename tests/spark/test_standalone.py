"""The exactly-once sink and the payments pipeline on a real Spark standalone cluster
(issue 18): a master and two workers as processes of their own (``eoslog.spark.standalone``
from the project's PySpark), one executor JVM of one core per worker, the executors' Python
the venv's, importing the eoslog under test (the workers pass this process's PYTHONPATH on).

Drivers run in subprocesses (``sink_driver.py``, ``payments_pipeline.py``): a process has one
SparkContext, and this run's local one may live in the pytest process. One cluster serves the
module; a test that kills a worker gets a new one in its place before the next test.

Where tasks ran is taken from Spark's own record — the driver's event log (task → executor
id) and the workers' executor directories (executor id → worker, JVM pid) — and what they
left in the broker from the admin API and ``eoslog transactions find-hanging``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import spark_jvm
from cluster_support import ClusterDriver, all_decisions, assert_nothing_left_open
from sink_support import (
    WAIT_S,
    assert_exactly_once,
    committed_output,
    create_topics,
    kill_session,
    open_transactions,
    produce_input,
    raw_output,
)

import eoslog
from eoslog.client.admin import Admin, TransactionDescription
from eoslog.client.types import TopicPartition
from eoslog.spark.sink_options import DEFAULT_TRANSACTIONAL_ID_PREFIX
from eoslog.spark.standalone import StandaloneCluster
from support.deps import require_java
from support.harness import BrokerProcess, wait_until

REPO = Path(__file__).resolve().parents[2]
TWO_PHASE_TIMEOUT_MS = 2**31 - 1  # KIP-939: a two-phase transaction never times out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    require_java()
    c = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2, cores=1, memory="1g",
                          env=spark_jvm.DAEMON_ENV).start()
    yield c
    c.stop()


@pytest.fixture
def standalone(cluster: StandaloneCluster) -> StandaloneCluster:
    """The module's cluster with both workers alive and no application left running."""
    cluster.restart_dead_workers()
    cluster.wait_for(lambda: not cluster.status()["activeapps"], "the last application to end", WAIT_S)
    return cluster


def state_of(d: TransactionDescription) -> str:
    """A described transaction as a decision names it ("producerId:epoch")."""
    return f"{d.producer_id}:{d.producer_epoch}"


def test_exactly_once_with_tasks_in_two_executor_processes(standalone: StandaloneCluster,
                                                           spark_broker: BrokerProcess, topic_name: str,
                                                           tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(b, (src, 4), (dst, 3))
    expected = produce_input(b, src, 400, 4)
    driver = ClusterDriver(standalone, b, src, dst, tmp_path, "--max-per-trigger", "100")
    driver.finish()
    assert_exactly_once(committed_output(b, dst), expected)
    assert_nothing_left_open(b, dst)

    # Spark's record: which executor ran each write task; the workers': which process each executor was.
    tasks = [t for t in driver.write_tasks() if t.succeeded]
    assert {t.batch_id for t in tasks} == {0, 1, 2, 3} and len(tasks) == 16
    per_executor = Counter(t.executor_id for t in tasks)
    executors = {e.executor_id: e for e in standalone.executor_history(driver.app_id)}
    assert len(per_executor) >= 2, per_executor
    pids = {executors[x].pid for x in per_executor}
    workers = {executors[x].worker for x in per_executor}
    assert None not in pids and len(pids) == len(per_executor) and len(workers) == len(per_executor), executors
    assert driver.proc.pid not in pids
    # The executors' Python workers imported this eoslog, each in its executor's work dir.
    python = driver.executors_python()
    assert {p["eoslog"] for p in python} == {eoslog.__file__}, python
    assert {Path(p["cwd"]) for p in python} <= {e.work_dir for e in executors.values()}, python


def test_worker_killed_mid_batch_after_tasks_prepared(standalone: StandaloneCluster, spark_broker: BrokerProcess,
                                                      topic_name: str, tmp_path: Path) -> None:
    """Batch 1 has four write tasks on two one-core executors; partition 3's first attempt
    writes and flushes its rows, then pauses. It can only have started once two of the other
    three finished — each prepared its transaction — and its executor ran one of them. That
    executor's worker is killed with everything under it: Spark runs partition 3 again on the
    other executor; the driver commits the prepared transactions of the dead executor's
    finished tasks (the decision names them) and aborts the paused attempt's (a zombie)."""
    b = spark_broker.bootstrap
    src, dst, decisions = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-decisions"
    create_topics(b, (src, 4), (dst, 2))
    expected = produce_input(b, src, 240, 4)
    marker = tmp_path / "paused"
    driver = ClusterDriver(standalone, b, src, dst, tmp_path, "--max-per-trigger", "80",
                           "--fail-at", f"task-pause@1/3:{marker}",
                           "--sink-option", f"eoslog.sink.decisions.topic={decisions}")
    wait_until(lambda: marker.exists() or driver.proc.poll() is not None, "partition 3 of batch 1 to pause", 300)
    assert driver.proc.poll() is None, driver.log()[-4000:]
    victim = standalone.worker_of(int(marker.read_text()))
    assert victim is not None, "the paused task does not run under a worker"
    (victim_executor,) = [e.executor_id for e in standalone.executors(driver.app_id) if e.worker == victim]
    prefix = f"{DEFAULT_TRANSACTIONAL_ID_PREFIX}{driver.query_id}."

    # Before the kill, through the admin API: the query's open transactions as the
    # coordinators describe them, and the partitions' open transactions (checked below, once
    # the event log tells which tasks had finished by then).
    with Admin({"bootstrap.servers": b}) as admin:
        listed = admin.list_transactions(states=["Ongoing"], transactional_id_pattern=re.escape(prefix) + ".*")
        before = admin.describe_transactions(sorted(t.transactional_id for t in listed))
        producers = admin.describe_producers([TopicPartition(dst, p) for p in range(2)])
    (run_id,) = {tid[len(prefix):].split(".")[0] for tid in before}
    zombie = f"{prefix}{run_id}.3.0"
    assert zombie in before and len(before) >= 3, sorted(before)

    killed = standalone.kill_worker(victim)
    assert len(killed) >= 3  # the worker, its executor JVM, the executor's Python daemon and workers
    driver.finish()

    assert_exactly_once(committed_output(b, dst), expected)
    assert len(raw_output(b, dst)) > len(expected)  # the zombie's rows are in the log, aborted
    assert_nothing_left_open(b, dst)
    with Admin({"bootstrap.servers": b}) as admin:
        assert admin.list_transactions(states=["Ongoing"], transactional_id_pattern=re.escape(prefix) + ".*") == []

    # Spark's record of batch 1: partition 3's first attempt was lost with the executor and
    # ran again elsewhere; the dead executor had finished other tasks of the batch first.
    batch1 = [t for t in driver.write_tasks() if t.batch_id == 1]
    lost = [t for t in batch1 if t.partition == 3 and t.attempt == 0]
    assert [(t.executor_id, t.reason) for t in lost] == [(victim_executor, "ExecutorLostFailure")], batch1
    (rerun,) = [t for t in batch1 if t.partition == 3 and t.succeeded]
    assert rerun.attempt > 0 and rerun.executor_id != victim_executor
    finished_on_victim = {f"{prefix}{run_id}.{t.partition}.{t.attempt}" for t in batch1
                          if t.succeeded and t.executor_id == victim_executor}
    assert finished_on_victim, batch1
    # Those tasks' transactions, and the zombie's, were open before the kill as two-phase
    # transactions, their records in the output partitions.
    open_in_log = {s.producer_id for states in producers.values() for s in states
                   if s.current_transaction_start_offset is not None}
    for tid in [*finished_on_victim, zombie]:
        assert tid in before, f"{tid} was not open before the kill"
        d = before[tid]
        assert d.state == "Ongoing" and d.transaction_timeout_ms == TWO_PHASE_TIMEOUT_MS and d.topic_partitions, d
        assert d.producer_id in open_in_log, (d, producers)

    # The decision of batch 1 commits the dead executor's prepared transactions as they were
    # before the kill; no decision names the zombie's transaction (its id comes back in later
    # batches — same run, partition and attempt number — under a new epoch).
    decisions_of_query = [d for d in all_decisions(b, decisions) if d.key == driver.query_id]
    (decision,) = [d for d in decisions_of_query if d.batch_id == 1]
    decided = {tid: state.to_string() for tid, state in decision.transactions}
    assert zombie not in decided and f"{prefix}{run_id}.3.{rerun.attempt}" in decided
    for tid in finished_on_victim:
        assert decided[tid] == state_of(before[tid])
    assert all((zombie, state_of(before[zombie])) not in [(t, s.to_string()) for t, s in d.transactions]
               for d in decisions_of_query)


def test_driver_killed_and_restarted_from_checkpoint(standalone: StandaloneCluster, spark_broker: BrokerProcess,
                                                     topic_name: str, tmp_path: Path) -> None:
    """The whole application killed in its commit of batch 1 just after the decision — the
    driver's process group with kill -9; the master then stops its executors — and started
    again on the same checkpoint: a new application whose executors replay batch 1, find the
    decision and write nothing; its driver commits the dead run's prepared transactions.
    (Just before the decision, the other moment, is test_sink_driver_kill's in local mode: a
    cluster adds nothing to it but minutes.)"""
    moment = "pause-after-decision"
    b = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(b, (src, 4), (dst, 2))
    expected = produce_input(b, src, 240, 4)
    marker = tmp_path / "paused"
    first = ClusterDriver(standalone, b, src, dst, tmp_path, "--max-per-trigger", "80",
                          "--fail-at", f"{moment}@1:{marker}")
    wait_until(lambda: marker.exists() or first.proc.poll() is not None, "the commit of batch 1 to pause", 300)
    assert first.proc.poll() is None, first.log()[-4000:]
    app = first.app_id
    assert len(standalone.executors(app)) == 2
    kill_session(first.proc)
    standalone.wait_for(lambda: not standalone.executors(app), "the dead application's executors to stop", WAIT_S)
    visible = committed_output(b, dst)
    assert_exactly_once(visible, set(visible))
    assert 0 < len(visible) < len(expected)
    assert open_transactions(b, dst), "batch 1's prepared transactions are left open"
    standalone.wait_for(lambda: not standalone.status()["activeapps"], "the master to drop the application", WAIT_S)

    second = ClusterDriver(standalone, b, src, dst, tmp_path, "--max-per-trigger", "80", log_name="restart.log")
    second.finish()
    assert second.app_id != app
    assert_exactly_once(committed_output(b, dst), expected)
    assert_nothing_left_open(b, dst)
    assert len(raw_output(b, dst)) == len(expected)  # nothing written twice, not even aborted


def test_payments_pipeline_on_the_cluster(standalone: StandaloneCluster, spark_broker: BrokerProcess,
                                          tmp_path: Path) -> None:
    """``payments_pipeline.py --master spark://...`` (what ``scripts/main.sh --master`` runs,
    without its setup step) with eoslog shipped to the executors as a zip (``--py-files``):
    its own verifier recomputes every balance and dead letter and must find them exactly once."""
    package = tmp_path / "eoslog.zip"  # as docs/spark.md builds it
    subprocess.run([sys.executable, "-m", "zipfile", "-c", str(package), str(Path(eoslog.__file__).parent)],
                   check=True)
    conf = [a for k, v in {**standalone.driver_conf(), **spark_jvm.CONF}.items() for a in ("--conf", f"{k}={v}")]
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "payments_pipeline.py"), "--bootstrap", spark_broker.bootstrap,
         "--master", standalone.master_url, *conf, "--py-files", str(package), "--events", "1500",
         "--seconds", "10", "--work-dir", str(tmp_path / "spark")],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env={**os.environ, "COLUMNS": "400"})  # rich: one line per line, unwrapped
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    assert "pipeline OK" in out, out[-6000:]
    assert "stopping the Spark job half-way" in out, out[-6000:]  # restarted once its queries had run
    # Every executor's Python worker took eoslog from the shipped zip, not an installed copy.
    executors = [line for line in out.splitlines() if line.startswith("executor")]
    assert executors and all(f"{package.name}/eoslog/__init__.py" in line for line in executors), out[-6000:]
