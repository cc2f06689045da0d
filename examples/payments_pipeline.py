"""The main job (run by ``scripts/main.sh``): an exactly-once payments pipeline on eoslog.

1. Start the embedded broker (``local_broker.py``: data in ``./eoslog-data``,
   127.0.0.1:9092, or a free port and a throw-away directory when that one is taken),
   with two-phase commit enabled for the exactly-once Spark sink.
2. Create the topics ``payments`` (3 partitions), ``payments-dlq`` and ``balances``
   (dropping what an earlier run left in them).
3. The upstream service (``payments/upstream.py``) writes payment events with eoslog's
   transactional producer, a share of its transactions aborted on purpose and retried,
   a share of its events invalid; it closes the stream with an end-of-stream event.
4. Meanwhile the Spark job (``payments/job.py``) reads the committed payments with
   ``format("eoslog")``, validates them (invalid → ``payments-dlq`` with the reason),
   totals valid ones per account, currency and 5-minute event-time window with a
   watermark, and writes the balances to ``balances`` with the exactly-once sink. Half-way
   through, the job is stopped and restarted from its checkpoints, as after a redeploy.
5. The verifier (``payments/verify.py``) recomputes the balances and dead letters from the
   committed input with a different client (librdkafka, read_committed) and compares them
   with what was written: one record per window, equal totals, no dead letter missing or
   doubled. A rich table shows expected vs written; any difference makes the exit status 1.

``--bootstrap HOST:PORT`` uses a running broker (it needs
``transaction.two.phase.commit.enable=true``) instead of step 1. ``--master
spark://HOST:PORT`` runs the Spark job on a standalone cluster instead of ``local[2]``
(docs/spark.md, "Running on a cluster": every executor needs eoslog — installed in its
Python, or shipped with ``--py-files``; ``--conf`` passes Spark settings such as
``spark.executor.memory``); the job first checks that every executor's Python can import
eoslog, and says which copy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from local_broker import JobError, LocalBroker, exit_status, plan_broker, print_verdict
from payments import events as ev
from payments.upstream import Upstream
from payments.verify import Verdict, report, verify
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(highlight=False)

SOURCE, DLQ, BALANCES = "payments", "payments-dlq", "balances"
TOPICS = {SOURCE: 3, DLQ: 1, BALANCES: 3}
BROKER_OVERRIDES = {"transaction.two.phase.commit.enable": "true"}


@dataclass
class QueryState:
    end: dict[str, int]  # offsets read so far (endOffset of the last batch), per partition
    batches: int
    watermark: str


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--events", type=int, default=3000, help="payment events to send (default 3000)")
    ap.add_argument("--seconds", type=float, default=25.0,
                    help="how long the upstream service takes to send them (default 25)")
    ap.add_argument("--txn-size", type=int, default=25, help="events per upstream transaction (default 25)")
    ap.add_argument("--abort-share", type=float, default=0.2,
                    help="share of upstream transactions aborted (and retried) on purpose (default 0.2)")
    ap.add_argument("--invalid-share", type=float, default=0.05, help="share of invalid events (default 0.05)")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=1500,
                    help="the Spark source's maxOffsetsPerTrigger (default 1500)")
    ap.add_argument("--no-restart", action="store_true", help="do not stop and restart the Spark job half-way")
    ap.add_argument("--seed", type=int, default=7, help="seed of the event generator (default 7)")
    ap.add_argument("--data-dir", type=Path, default=None, help="broker data directory (default ./eoslog-data)")
    ap.add_argument("--listen", default=None, help="broker HOST:PORT (default 127.0.0.1:9092)")
    ap.add_argument("--bootstrap", default=None,
                    help="use a broker already running at HOST:PORT (with two-phase commit enabled)")
    ap.add_argument("--work-dir", type=Path, default=Path(".spark"),
                    help="Spark's scratch, warehouse and checkpoint directory (default ./.spark; on a cluster the "
                         "checkpoints must be where every executor can write them too)")
    ap.add_argument("--master", default="local[2]",
                    help="Spark master: local[N] (default local[2]) or a standalone cluster's spark://HOST:PORT")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting, e.g. spark.executor.memory=512m (repeatable)")
    ap.add_argument("--py-files", default="",
                    help="comma-separated .zip/.egg/.py files shipped to every executor's Python path "
                         "(e.g. a zip of src/eoslog when the executors lack eoslog)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds the Spark job may take to catch up after the upstream is done (default 300)")
    args = ap.parse_args(argv)
    if args.events < 1 or args.txn_size < 1 or not 0 <= args.abort_share < 1 or not 0 <= args.invalid_share < 1:
        ap.error("--events and --txn-size must be at least 1, the shares in [0, 1)")
    if any("=" not in item for item in args.conf):
        ap.error("--conf takes KEY=VALUE")
    args.conf = dict(item.split("=", 1) for item in args.conf)
    args.py_files = [p for p in args.py_files.split(",") if p]
    return args


def start_spark(args: argparse.Namespace) -> Any:
    """The job's SparkSession; on a cluster, first checks that every executor imports eoslog."""
    from eoslog.spark.session import is_local, probe_executors, spark_session

    started = time.monotonic()
    spark = spark_session("payments-pipeline", master=args.master, work_dir=args.work_dir, conf=args.conf,
                          py_files=args.py_files)
    console.print(f"[bold]spark[/]    {spark.version} {args.master} started in {time.monotonic() - started:.1f} s "
                  f"(work dir {args.work_dir})")
    if not is_local(args.master):
        found = probe_executors(spark)
        for e in found:
            console.print(f"[bold]executor[/] Python worker {e.pid} on {e.host} ({e.python}): "
                          + ("eoslog from " if e.has_eoslog else "[bold red]") + escape(e.eoslog))
        if not all(e.has_eoslog for e in found):
            spark.stop()
            raise JobError("an executor cannot import eoslog: install it in the executors' Python "
                           "(spark.pyspark.python) or ship it with --py-files (docs/spark.md)")
    return spark


def reset_topics(bootstrap: str) -> None:
    """Drop what an earlier run left and create the pipeline's topics afresh."""
    # log_level 4: librdkafka's notices (such as purging its queue at close) are not the user's.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log.connection.close": False, "log_level": 4})
    existing = set(admin.list_topics(timeout=10).topics) & set(TOPICS)
    if existing:
        for future in admin.delete_topics(sorted(existing), operation_timeout=30).values():
            future.result(30)
        deadline = time.monotonic() + 30
        while set(admin.list_topics(timeout=10).topics) & existing:
            if time.monotonic() > deadline:
                raise JobError(f"topics {sorted(existing)} were not deleted within 30 s")
            time.sleep(0.2)
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()], operation_timeout=30)
    for future in futures.values():
        future.result(30)


def query_state(query: Any) -> QueryState | None:
    progress = query.lastProgress
    if not progress:
        return None
    source = progress["sources"][0]
    end = {f"{t}-{p}": o for t, ps in json.loads(source["endOffset"] or "{}").items() for p, o in ps.items()}
    return QueryState(end, int(progress["batchId"]) + 1, progress.get("eventTime", {}).get("watermark", ""))


def end_offsets(bootstrap: str) -> dict[str, int]:
    """The end of ``payments`` once the upstream is done (every transaction is complete, so
    the high watermark is the last stable offset)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "payments-pipeline", "log.connection.close": False})
    try:
        return {f"{SOURCE}-{p}": c.get_watermark_offsets(TopicPartition(SOURCE, p), timeout=10)[1]
                for p in range(TOPICS[SOURCE])}
    finally:
        c.close()


def run_pipeline(args: argparse.Namespace, bootstrap: str, verdict_out: list[Verdict]) -> None:
    from payments import job

    from eoslog.spark.quiet import stop_queries

    events = ev.plan_events(args.events, args.invalid_share, args.seed)
    closing = ev.classify(events[-1].value)
    assert isinstance(closing, ev.EndOfStream)
    final_watermark = ev.format_time(closing.event_time - ev.WATERMARK_DELAY)

    reset_topics(bootstrap)
    created = ", ".join(f"{t} ({n} partition{'s' if n > 1 else ''})" for t, n in TOPICS.items())
    console.print(f"[bold]topics[/]   {created} created")
    spark = start_spark(args)
    checkpoints = args.work_dir.resolve() / "checkpoints" / "payments-pipeline"
    shutil.rmtree(checkpoints, ignore_errors=True)  # the topics are new: so is the job

    def start_job() -> dict[str, Any]:
        return job.start(spark, bootstrap, source=SOURCE, balances_topic=BALANCES, dlq_topic=DLQ,
                         checkpoints=checkpoints, max_offsets_per_trigger=args.max_offsets_per_trigger,
                         trigger_s=1.0)

    upstream = Upstream(bootstrap, SOURCE, events, txn_size=args.txn_size, abort_share=args.abort_share,
                        seconds=args.seconds, seed=args.seed)
    queries = start_job()
    upstream.start()
    restarted = args.no_restart
    final_end: dict[str, int] | None = None
    deadline: float | None = None
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
               TimeElapsedColumn())
    try:
        with Progress(*columns, console=console) as progress:
            up_task = progress.add_task("upstream: committed events", total=len(events), note="")
            q_tasks = {name: progress.add_task(f"spark {name}: offsets read", total=None, note="")
                       for name in job.QUERIES}
            while True:
                stats = upstream.stats
                if stats.error is not None:
                    raise JobError(f"the upstream service failed: {stats.error!r}")
                progress.update(up_task, completed=stats.sent,
                                note=f"{stats.committed_txns} txns committed, {stats.aborted_txns} aborted")
                batches_done = True  # every query of this incarnation has finished a batch
                for name, query in queries.items():
                    if query.exception() is not None:
                        raise JobError(f"Spark query {name} failed: {query.exception()}")
                    state = query_state(query)
                    batches_done = batches_done and state is not None
                    if state is not None:
                        note = f"batch {state.batches}"
                        if name == "balances":
                            note += f", watermark {state.watermark}"
                        total = sum(final_end.values()) if final_end else None
                        progress.update(q_tasks[name], completed=sum(state.end.values()), total=total, note=note)
                # Not before each query has run a batch: on a slow machine the upstream reaches
                # half-way while the queries are still starting, and the restart would interrupt none.
                if not restarted and stats.sent >= len(events) // 2 and batches_done:
                    restarted = True
                    progress.console.print(
                        "[bold yellow]restart[/]  stopping the Spark job half-way, in the middle of its batches, and "
                        "starting it again from its checkpoints (the interrupted batches' writes are aborted; "
                        "the restarted job replays them over the same offsets)")
                    stop_queries(spark, queries.values())
                    queries = start_job()
                if stats.done and final_end is None:
                    final_end = end_offsets(bootstrap)
                    deadline = time.monotonic() + args.timeout
                if final_end is not None:
                    states = {name: query_state(q) for name, q in queries.items()}
                    caught_up = all(s is not None and s.end == final_end for s in states.values())
                    balances_state = states["balances"]
                    windows_closed = balances_state is not None and balances_state.watermark >= final_watermark
                    if caught_up and windows_closed:
                        break
                    assert deadline is not None
                    if time.monotonic() > deadline:
                        raise JobError(f"the Spark job did not catch up within {args.timeout:.0f} s of the upstream "
                                       f"finishing (read {states}, end {final_end})")
                time.sleep(0.25)
    finally:
        with contextlib.suppress(Exception):
            stop_queries(spark, queries.values())
        upstream.join(30)
        spark.stop()

    s = upstream.stats
    console.print(f"[bold]upstream[/] {s.sent:,} events in {s.committed_txns} committed transactions; "
                  f"{s.aborted_txns} transactions ({s.aborted_records:,} records) aborted on purpose and retried")
    console.print("[bold]verify[/]   reading payments, balances and payments-dlq with librdkafka, read_committed")
    verdict_out.append(verify(bootstrap, SOURCE, BALANCES, DLQ))


def run(args: argparse.Namespace) -> int:
    from eoslog.spark.session import SparkSetupError, require_java

    started = time.monotonic()
    console.rule("[bold]eoslog payments pipeline[/] (Spark, exactly once)")
    try:
        java = require_java()
    except SparkSetupError as e:
        console.print(f"[bold red]error:[/] {escape(str(e))}")
        return 2
    console.print(f"[bold]java[/]     {java}")
    broker: LocalBroker | None = None
    error: str | None = None
    verdict: list[Verdict] = []
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
            console.print(f"[bold]broker[/]   using the broker at {bootstrap}")
        else:
            broker = plan_broker(console, args.listen, args.data_dir, "eoslog-payments-", BROKER_OVERRIDES)
            took = broker.start(60)
            bootstrap = broker.bootstrap
            console.print(f"[bold]broker[/]   started in {took:.2f} s: {broker.ready_line} (log {broker.log_path})")
        run_pipeline(args, bootstrap, verdict)
    except (JobError, KafkaException, RuntimeError) as e:
        error = str(e)
        console.print("[bold red]error:[/] " + escape(error))
    finally:
        if broker is not None:
            problem = broker.finish(console, failed=error is not None)
            error = error or problem
    if error is not None or not verdict:
        return 2
    v = verdict[0]
    report(console, v)
    elapsed = time.monotonic() - started
    return print_verdict(
        console, v.problems, failed_title="pipeline FAILED: written differs from expected", ok_title="pipeline OK",
        ok_text=f"{v.input_records:,} committed input events ({v.payments:,} valid payments): all {len(v.expected)} "
                f"balances written exactly once and equal to the recomputed ones; all {len(v.expected_dlq)} invalid "
                f"events dead-lettered exactly once with the right reason.\nTotal time {elapsed:.1f} s.",
    )


def main(argv: list[str] | None = None) -> int:
    return exit_status(lambda: run(parse_args(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
