"""Security, below the broker and the cluster that use it: listeners and TLS (``listeners``),
a connection's principal and SASL state (``session``), SCRAM and PLAIN on the server side
(``scram``; the wire's side is ``protocol.scram``), the stored credentials (``credentials``),
Kafka's ACL model and decision (``acls``), the authenticator and authorizer every request
passes (``authorizer``), and the ZooKeeper encoding of credentials and ACLs a cluster shares
(``zk_codec``; the watches and writes are ``cluster/security_store.py``)."""
