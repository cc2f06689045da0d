"""eoslog: Kafka's exactly-once machinery in Python.

Packages, from the wire inwards: ``protocol`` (kio glue, versions, error codes),
``records`` (record batch v2, shared by storage and clients), ``storage`` (segmented
log), ``coordinator`` (group and transaction coordinators), ``broker`` (asyncio server
and one handler module per Kafka API family), ``client``, ``spark`` and ``cli``.
"""

__version__ = "0.1.0"
