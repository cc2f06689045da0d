"""What the tests share, imported as ``support.<module>``: tests/conftest.py puts tests/ on
sys.path, and so do the programs the tests and bench/ start that need these helpers.

- processes: an eoslog broker (``harness``), a cluster with its ZooKeeper (``cluster_harness``,
  ``zk_harness``), Apache Kafka (``kafka_harness``), a broker with every listener
  (``security_harness``), the console in Chromium (``console_harness``);
- faults: the TCP proxy (``faults``), the power-cut file system and a broker on it (``cutfs``,
  ``power_cut``), network namespaces (``netns``, with ``partition_writer`` as the client
  inside), group commit's fsync held closed (``fsync_gate``), a hanging transaction
  (``hanging``);
- clients and checks: bytes on the wire (``rawkafka``), a scripted broker (``broker_double``),
  an in-process transport (``fake_transport``), the transactional clients behind one interface
  (``txn_clients``), kafka-python's dropped requests (``kafka_python_drops``), the history
  checker (``history``), a leader's appends to a ``PartitionLog`` (``leader_log``);
- ``deps``: a missing system dependency fails a test, naming how to install it.
"""
