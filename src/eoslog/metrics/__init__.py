"""Broker metrics for Prometheus (``metrics.listener``), named after Kafka's JMX metrics.

- ``requests``: per-API request counts, latency histograms and error codes, observed by the
  dispatcher (the one per-request cost);
- ``broker``: the registry, with the fsync counts and latency storage observes in
  ``eoslog.stats.LOG_FLUSH`` (process-wide: one broker per process);
- ``collector``: everything else, read from the broker's state when Prometheus scrapes —
  partitions' offsets and sizes, open transactions, groups and their lag, coordinators,
  connections — plus the replica layer's and the transaction coordinator's plain counters;
- ``server``: the HTTP endpoint, served on the broker's own event loop so a scrape reads
  the state between two requests, never while one is half-way.

docs/operations.md lists every metric with its Kafka equivalent.
"""
