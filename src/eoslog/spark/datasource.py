"""The data source Spark knows as format ``"eoslog"``: reads (``source``) and writes (``sink``).

What it owns: the one ``DataSource`` class registered with ``spark.dataSource.register``,
its fixed schema and which reader or writer each Spark call gets. Options are checked
when a reader is created, so a mistake fails ``load()`` with a readable message rather
than a task. What it must never do: hold state — Spark creates and pickles instances.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, cast

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from eoslog.spark.options import parse_options
from eoslog.spark.schema import source_schema
from eoslog.spark.source import EoslogBatchReader, EoslogStreamReader

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter

FORMAT = "eoslog"


class EoslogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return source_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return EoslogBatchReader(parse_options(self.options, "batch"), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return EoslogStreamReader(parse_options(self.options, "stream"), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return cast("DataSourceWriter", _sink().EoslogBatchWriter(self.options, schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return cast("DataSourceStreamWriter", _sink().EoslogStreamWriter(self.options, schema, overwrite))


def _sink() -> ModuleType:
    """``eoslog.spark.sink``, imported only when writing (it is written separately)."""
    try:
        return importlib.import_module("eoslog.spark.sink")
    except ModuleNotFoundError as e:
        if e.name != "eoslog.spark.sink":
            raise
        raise NotImplementedError(
            f"writing to format {FORMAT!r} needs eoslog.spark.sink (EoslogBatchWriter, EoslogStreamWriter), "
            f"which is not available: {e}"
        ) from e
