"""eoslog's PySpark connector: format ``"eoslog"`` for ``spark.read``/``readStream`` and writes.

Modules: ``datasource`` (the ``DataSource`` registered as ``eoslog``), ``source`` (batch and
streaming readers), ``sink`` (the exactly-once writers), ``options`` (option parsing with
Spark's Kafka source names), ``offsets`` (offsets JSON, rate limit, range splits),
``schema`` (the Kafka source schema and Arrow batches), ``log_reader`` (the client calls
the source makes), ``session`` (a local SparkSession set up for eoslog).
"""

from eoslog.spark.datasource import FORMAT, EoslogDataSource

__all__ = ["FORMAT", "EoslogDataSource"]
