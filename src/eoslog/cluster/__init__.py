"""Cluster mode: brokers coordinated through Apache ZooKeeper, as Kafka ≤ 3.x did.

Owns the znode layout and its JSON (``znodes``), the kazoo client bridged to the broker's
event loop (``zk``), producer-id blocks from ZooKeeper (``producer_ids``), and the local
ZooKeeper launcher for development and tests (``zookeeper_server``). Must never be imported
by the single-node path unless ``zookeeper.connect`` is set: kazoo is loaded only here.
See docs/cluster.md for the design.
"""
