"""The controller (Kafka's ZooKeeper-era ``KafkaController``): one broker, elected through
ZooKeeper, decides partition leadership. ``states`` holds the partition state table,
``election`` the leader-election rules, ``assignment`` the replica placement of new topics,
``events`` the events and ``controller`` the one task that handles them in order."""
