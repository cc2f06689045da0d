"""JVM options for the tests' Spark JVMs: drivers, executors and a standalone cluster's daemons.

A run starts many short-lived Spark JVMs on two shared cores, each for a few hundred
records. C2 compiling Spark's code costs more CPU than it ever pays back there, and a
concurrent collector's threads take the same two cores: C1 only and the serial collector
(as the ZooKeeper fixture and Kafka's tools run) change how fast the JVMs run, nothing
they do. test_standalone.py, back to back at load 5-7: 563 s (224 CPU-s) -> 316 s (111 CPU-s).
"""

from __future__ import annotations

FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# A driver's and its executors' default options: the session's own spark.*.extraJavaOptions
# (spark_session sets the driver's) are added after them, not replaced.
CONF = {"spark.driver.defaultJavaOptions": FLAGS, "spark.executor.defaultJavaOptions": FLAGS}

# A standalone master's and workers' (StandaloneCluster(env=...)).
DAEMON_ENV = {"SPARK_DAEMON_JAVA_OPTS": FLAGS}
