"""A SparkSession set up for eoslog, with what otherwise takes an afternoon to find.

What it owns: checking for Java 17 before Spark tries (and fails with a page of JVM
output), the session settings a run needs, and a probe of what the executors import:

- ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` (and ``spark.pyspark.python``) set to this
  interpreter — without them Spark starts workers with whatever ``python3`` is on PATH,
  which lacks eoslog and pyarrow, and tasks die with "Python worker failed to connect back".
  On a cluster ``conf["spark.pyspark.python"]`` names the executors' Python instead (a path
  on the executors' machines);
- every directory the driver writes to inside one work directory (default ``./.spark``):
  ``spark.local.dir`` (shuffle and worker scratch), the SQL warehouse, the JVM's
  ``java.io.tmpdir`` and the default root for streaming checkpoints — and, with a local
  master only, the executors' too (a cluster's executors use their workers' directories);
- a small ``spark.sql.shuffle.partitions`` (200 tasks per shuffle is for clusters), the UI
  and the console progress bar off, log level WARN from the JVM's first line, UTC as the
  session time zone, Arrow on, ``SPARK_LOCAL_IP`` on loopback;
- ``py_files`` shipped to every executor (``SparkContext.addPyFile``: what ``spark-submit
  --py-files`` does, which a session built in plain Python does not do for
  ``spark.submit.pyFiles``);
- format ``"eoslog"`` registered.

What it must never do: change a session it did not create beyond registering the data
source, or point a cluster's executors at directories of the driver's machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17
DEFAULT_WORK_DIR = Path(".spark")
JAVA_INSTALL_HINT = (
    "Install it with: sudo apt-get install -y openjdk-17-jre-headless (macOS: brew install openjdk@17), "
    "or point JAVA_HOME at a Java 17 or newer."
)

def log4j2_properties(writer: str, root_level: str, quiet: Mapping[str, str], pattern: str, extra: str = "") -> str:
    """A log4j2.properties for Spark's JVMs: everything to stderr at ``root_level``, the
    loggers in ``quiet`` (name → level) turned down, then ``extra`` lines as they are."""
    lines = [f"# Written by {writer}.", f"rootLogger.level = {root_level}",
             "rootLogger.appenderRef.stderr.ref = console", "appender.console.type = Console",
             "appender.console.name = console", "appender.console.target = SYSTEM_ERR",
             "appender.console.layout.type = PatternLayout", f"appender.console.layout.pattern = {pattern}"]
    for i, (name, level) in enumerate(quiet.items()):
        lines += [f"logger.q{i}.name = {name}", f"logger.q{i}.level = {level}"]
    return "\n".join(lines) + "\n" + extra


# The driver's log: WARN from the JVM's first line, without the noise a local run always
# prints and nobody can act on: the native Hadoop library, the spark.local.dir note (local
# mode honours it), "AQE is not supported in streaming", the job-group cancel race when a
# query stops, and "falling behind the trigger interval", which a laptop shared by a
# broker, Spark and its Python workers always is (the query progress reports batch
# durations).
_LOG4J2 = log4j2_properties("eoslog.spark.session", "warn", {
    "org.apache.hadoop.util.NativeCodeLoader": "error",
    "org.apache.spark.SparkConf": "error",
    "org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream": "error",
    "org.apache.spark.scheduler.DAGScheduler": "error",
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor": "error",
}, "%d{HH:mm:ss} %p %c{1}: %m%n%ex", """\
# "Disabling AQE since AQE is not supported in stateful workloads", at every query start;
# the other warnings of the streaming engine stay.
logger.microbatch.name = org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution
logger.microbatch.filter.aqe.type = RegexFilter
logger.microbatch.filter.aqe.regex = Disabling AQE since AQE is not supported.*
logger.microbatch.filter.aqe.onMatch = DENY
logger.microbatch.filter.aqe.onMismatch = NEUTRAL
""")


class SparkSetupError(RuntimeError):
    """Spark cannot run here (no Java 17, …); the message says what to install."""


def java_command() -> str | None:
    """The java Spark's launcher uses: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return str(candidate) if candidate.exists() else None
    return shutil.which("java")


def java_major_version(java: str) -> int | None:
    """17 for 'openjdk version "17.0.15"', 8 for '"1.8.0_392"'; None if it cannot be told."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def require_java() -> str:
    """The java command, or SparkSetupError saying what is missing and how to install it."""
    java = java_command()
    if java is None:
        where = f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java" if os.environ.get("JAVA_HOME") \
            else "java is not on PATH"
        raise SparkSetupError(f"Spark needs Java {MIN_JAVA} or newer and none was found ({where}). "
                              + JAVA_INSTALL_HINT)
    major = java_major_version(java)
    if major is None or major < MIN_JAVA:
        found = "of unknown version" if major is None else str(major)
        raise SparkSetupError(f"Spark needs Java {MIN_JAVA} or newer; {java} is Java {found}. " + JAVA_INSTALL_HINT)
    return java


def is_local(master: str) -> bool:
    """True for ``local``, ``local[N]``, ``local[N,F]``, ``local[*]``: driver and executor
    in one JVM."""
    return master == "local" or master.startswith("local[")


def spark_session(
    app_name: str = "eoslog",
    *,
    master: str = "local[2]",
    work_dir: Path | str | None = None,
    shuffle_partitions: int = 2,
    conf: Mapping[str, str] | None = None,
    py_files: Sequence[Path | str] = (),
) -> SparkSession:
    """A SparkSession with format ``"eoslog"`` registered (see the module docstring):
    ``local[...]``, or a cluster's master URL (``spark://HOST:PORT``).

    ``work_dir`` (default ``./.spark``) holds the driver's scratch space, warehouse, temp
    files and default checkpoint root. ``conf`` adds or overrides settings. ``py_files``
    (.zip, .egg, .py) go to every executor's Python path. Raises SparkSetupError when Java
    17 is missing."""
    require_java()
    root = Path(work_dir if work_dir is not None else DEFAULT_WORK_DIR).resolve()
    dirs = {name: root / name for name in ("local", "warehouse", "tmp", "checkpoints")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    log4j = root / "log4j2.properties"
    if not log4j.exists() or log4j.read_text() != _LOG4J2:
        log4j.write_text(_LOG4J2)

    python = sys.executable
    # PySpark sends the executors the path in PYSPARK_PYTHON as their Python's.
    executor_python = (conf or {}).get("spark.pyspark.python", python)
    os.environ["PYSPARK_PYTHON"] = executor_python
    os.environ["PYSPARK_DRIVER_PYTHON"] = python
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_options = f"-Djava.io.tmpdir={dirs['tmp']} -Dlog4j2.configurationFile=file:{log4j}"
    settings = {
        "spark.pyspark.python": executor_python,
        "spark.pyspark.driver.python": python,
        "spark.local.dir": str(dirs["local"]),
        "spark.sql.warehouse.dir": str(dirs["warehouse"]),
        "spark.sql.streaming.checkpointLocation": str(dirs["checkpoints"]),
        "spark.driver.extraJavaOptions": java_options,
        # A cluster's executors run elsewhere: the driver's paths are not theirs.
        **({"spark.executor.extraJavaOptions": java_options} if is_local(master) else {}),
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.faulthandler.enabled": "true",
        "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
        **dict(conf or {}),
    }
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    for path in py_files:
        spark.sparkContext.addPyFile(str(path))
    _quiet_dropped_accumulator_connections(spark)
    register(spark)
    return spark


def _quiet_dropped_accumulator_connections(spark: SparkSession) -> None:
    """When a streaming query stops, the JVM side of pyspark's accumulator connection is
    interrupted and closed; the driver's accumulator server then prints an EOFError
    traceback that looks like a failure and is not one. Ignore just that error."""
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is None:
        return
    print_traceback = server.handle_error

    def handle_error(request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], EOFError):
            print_traceback(request, client_address)

    server.handle_error = handle_error


def register(spark: SparkSession) -> None:
    """Make ``format("eoslog")`` known to ``spark`` (safe to call again)."""
    from eoslog.spark.datasource import EoslogDataSource

    spark.dataSource.register(EoslogDataSource)


@dataclass(frozen=True)
class ExecutorPython:
    """What one Python worker of an executor runs: where, which interpreter, which eoslog."""

    host: str
    pid: int
    python: str
    eoslog: str  # eoslog/__init__.py it imported, or "cannot import eoslog: ..."
    cwd: str  # a standalone executor's work dir (work/<app id>/<executor id>)

    @property
    def has_eoslog(self) -> bool:
        return not self.eoslog.startswith("cannot import")


def probe_executors(spark: SparkSession, tasks: int | None = None) -> list[ExecutorPython]:
    """Run ``tasks`` small tasks (default: twice the default parallelism) and report each
    distinct Python worker that ran one: the check that every executor can import eoslog
    (and which copy) before a query fails on it. The probe itself needs no eoslog."""

    def probe(_: Iterable[int]) -> Iterator[tuple[str, int, str, str, str]]:
        # Defined here, so it is pickled by value: executors need not import this module.
        import os as os_
        import socket
        import sys as sys_

        try:
            import eoslog

            where = str(eoslog.__file__)
        except ImportError as e:
            where = f"cannot import eoslog: {e}"
        yield socket.gethostname(), os_.getpid(), sys_.executable, where, os_.getcwd()

    n = tasks or 2 * spark.sparkContext.defaultParallelism
    found = spark.sparkContext.parallelize(range(n), n).mapPartitions(probe).collect()
    return sorted({ExecutorPython(*row) for row in found}, key=lambda e: (e.host, e.pid))
