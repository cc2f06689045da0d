"""The Spark job: committed payments in, balances and dead letters out, exactly once.

Two streaming queries read ``payments`` with ``format("eoslog")`` (read_committed: aborted
transactions never reach Spark) and write with ``format("eoslog")``, the exactly-once
sink, each with its own checkpoint:

- ``dead-letters``: every invalid event, with the reason and where it came from, to
  ``payments-dlq``;
- ``balances``: valid payments per account, currency and 5-minute event-time window,
  with a 2-minute watermark, in append mode — each window is written once, when the
  watermark has passed its end — to ``balances``.

The validation is the Spark SQL twin of ``events.classify``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from payments import events as ev

QUERIES = ("balances", "dead-letters")
_FIELDS = ("type", *ev.REQUIRED)


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _rejection(p: str, json_col: str) -> Column:
    """The reason an event is dead-lettered, NULL for a payment or the end-of-stream event."""
    cases = [
        (f"try_parse_json({json_col}) IS NULL OR NOT startswith(schema_of_variant(try_parse_json({json_col})), "
         f"'OBJECT')", ev.MALFORMED),
        (f"{p}.type <=> 'end-of-stream' AND NOT coalesce({p}.event_time rlike {_sql_string(ev.EVENT_TIME_PATTERN)}"
         f" AND try_cast({p}.event_time AS TIMESTAMP) IS NOT NULL, false)", ev.BAD_EVENT_TIME),
        (f"{p}.type <=> 'end-of-stream'", None),
        (f"NOT ({p}.type <=> 'payment')", ev.UNKNOWN_TYPE),
        *[(f"{p}.{name} IS NULL", ev.missing(name)) for name in ev.REQUIRED],
        (f"NOT {p}.amount rlike {_sql_string(ev.AMOUNT_PATTERN)}", ev.BAD_AMOUNT),
        (f"CAST({p}.amount AS DECIMAL(18,2)) <= 0", ev.NOT_POSITIVE),
        (f"NOT {p}.currency IN ({', '.join(map(_sql_string, ev.CURRENCIES))})", ev.BAD_CURRENCY),
        (f"NOT {p}.event_time rlike {_sql_string(ev.EVENT_TIME_PATTERN)} "
         f"OR try_cast({p}.event_time AS TIMESTAMP) IS NULL", ev.BAD_EVENT_TIME),
    ]
    sql = "CASE " + " ".join(f"WHEN {cond} THEN {'NULL' if reason is None else _sql_string(reason)}"
                             for cond, reason in cases) + " ELSE NULL END"
    return F.expr(sql)


def parsed_events(spark: SparkSession, bootstrap: str, topic: str, max_offsets_per_trigger: int) -> DataFrame:
    """The payments stream with each event's fields, event time and dead-letter reason."""
    schema = ", ".join(f"{name} STRING" for name in _FIELDS)
    raw = (spark.readStream.format("eoslog")
           .option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic)
           .option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
           .load())
    return (raw.select("key", "partition", "offset", F.col("value").cast("string").alias("json"))
            .withColumn("p", F.from_json("json", schema))
            .withColumn("reason", _rejection("p", "json"))
            .withColumn("event_ts", F.expr("try_cast(p.event_time AS TIMESTAMP)")))


def balances(events: DataFrame) -> DataFrame:
    """Per account, currency and window: the total and the number of payments (Kafka sink columns)."""
    window = f"{int(ev.WINDOW.total_seconds())} seconds"
    delay = f"{int(ev.WATERMARK_DELAY.total_seconds())} seconds"
    valid = F.col("reason").isNull() & (F.col("p.type") == "payment")
    # Every event with an event time feeds the watermark, the end-of-stream one included;
    # only valid payments are counted. (A filter before the aggregation would be pushed
    # below the watermark and hide the end-of-stream event from it.)
    totals = (events.where(F.col("event_ts").isNotNull())
              .withWatermark("event_ts", delay)
              .groupBy(F.window("event_ts", window).alias("window"),
                       F.when(valid, F.col("p.account")).alias("account"),
                       F.when(valid, F.col("p.currency")).alias("currency"))
              .agg(F.sum(F.when(valid, F.col("p.amount").cast("decimal(18,2)"))).alias("total"),
                   F.count_if(valid).alias("payments"))
              .where(F.col("payments") > 0))
    return totals.select(
        F.concat_ws("|", "account", "currency", F.date_format("window.start", "yyyy-MM-dd'T'HH:mm'Z'")).alias("key"),
        F.to_json(F.struct(
            "account", "currency", F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"), "total", "payments",
        )).alias("value"),
    )


def dead_letters(events: DataFrame) -> DataFrame:
    """Invalid events with the reason, the original payload and where it was in ``payments``."""
    return events.where(F.col("reason").isNotNull()).select(
        "key",
        F.to_json(F.struct("reason", F.col("json").alias("payload"), F.col("partition").alias("source_partition"),
                           F.col("offset").alias("source_offset"))).alias("value"),
    )


def start(spark: SparkSession, bootstrap: str, *, source: str, balances_topic: str, dlq_topic: str,
          checkpoints: Path, max_offsets_per_trigger: int, trigger_s: float) -> dict[str, Any]:
    """Start both queries (resuming from their checkpoints when these exist)."""
    events = parsed_events(spark, bootstrap, source, max_offsets_per_trigger)
    outputs = {"balances": (balances(events), balances_topic, "append"),
               "dead-letters": (dead_letters(events), dlq_topic, "append")}
    queries: dict[str, Any] = {}
    for name, (df, topic, mode) in outputs.items():
        queries[name] = (df.writeStream.format("eoslog")
                         .queryName(name)
                         .outputMode(mode)
                         .option("kafka.bootstrap.servers", bootstrap)
                         .option("topic", topic)
                         .option("checkpointLocation", str(checkpoints / name))
                         .trigger(processingTime=f"{trigger_s} seconds")
                         .start())
    return queries
