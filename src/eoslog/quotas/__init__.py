"""Quotas as Kafka measures them: rates over sampled windows (``rate``), replication throttles
(``replication``: ``leader/follower.replication.throttled.rate`` and the topics'
``*.replication.throttled.replicas``)."""
