"""Share groups on the partition leaders (KIP-932): share-partitions and their in-flight records
(``partition``, the record states in ``record_state``), share sessions (``session``), the
fetch/acknowledge orchestration (``manager``) and the way to the share coordinator
(``persister``). The group membership of share groups is the group coordinator's
(``coordinator.group.share``); their durable state the share coordinator's (``coordinator.share``).
"""
