"""librdkafka's debug log in a copier's log: what a wedged transactional call waits for.

A confluent-kafka copier runs with librdkafka's ``debug`` contexts ``DEBUG`` (its lines, which
start with ``%7|<time>|<tag>|<handle>|``, go to the copier's stderr, i.e. its log). When one of
its calls hangs, ``explain_wedge`` reads that instance's lines and says which coordinator request
is waiting and on which broker handle.

The one wedge seen so far (CI, and here under load): librdkafka 2.10+ decommissions a broker that
a Metadata response leaves out (a killed broker whose ZooKeeper session expired and which has not
registered again; Apache Kafka's Metadata leaves it out alike) but keeps the handle in its
coordinator cache. ``send_offsets_to_transaction``'s TxnOffsetCommit then waits for that handle
to come up, which it never does, and re-looks the coordinator up only when some other broker
connection goes up or down (librdkafka issues #5511, and #5456: the call's timeout is not
applied). ``tests/chaos/coordinator_decommission.py`` reproduces it on eoslog and on Kafka.

``sequence_desync`` finds librdkafka's fatal "sequence desynchronization": its
abort_transaction() skips the sequences of every purged message, also of a batch in flight when
its leader died, so when that batch was in fact written the next transaction's first batch
repeats its sequences in the same epoch. eoslog refuses it (OUT_OF_ORDER_SEQUENCE_NUMBER, where
Kafka 4.4 answers it as a retry of the aborted batch and never writes it) and librdkafka fails
the producer: the application must start a new one.
"""

from __future__ import annotations

import re
from pathlib import Path

DEBUG = "eos,broker,metadata,protocol"
LINE = re.compile(r"%\d\|(?P<t>\d+\.\d+)\|(?P<tag>[A-Z_]+)\|rdkafka#(?P<handle>[a-z]+-\d+)\| "
                  r"\[thrd:(?P<thread>[^\]]*)\]: (?P<text>.*)")
# the tags and phrases that tell a coordinator request's course
TELLING = re.compile(r"ADDOFFSETS|TXNCOORD|COORD|Decommissioning this broker|Received CONNECT op"
                     r"|TxnOffsetCommit|FindCoordinator response|APIRESULT|\d+ brokers, \d+ topics")
EXCERPT_LINES = 25


def instance_lines(log_path: Path, instance: int) -> list[str]:
    """The lines one instance wrote to a copier log (the harness heads each with a marker)."""
    marker = f"--- instance {instance} ---"
    with open(log_path, errors="replace") as f:
        text = f.read()
    start = text.find(marker)
    if start < 0:
        return []
    end = text.find("--- instance ", start + len(marker))
    return text[start + len(marker): end if end >= 0 else len(text)].lstrip("\n").splitlines()


def explain_wedge(lines: list[str]) -> str:
    """What the producer's last coordinator request waits for, from its librdkafka lines: a
    verdict when the group coordinator lookup waits on a decommissioned broker handle, and the
    telling lines (a decommissioned handle's once-a-millisecond spin left out)."""
    producer = [m for m in map(LINE.match, lines) if m is not None and m["handle"].startswith("producer")]
    if not producer:
        return "no librdkafka debug lines (is the copier's --debug set?)"
    excerpt = [m.group(0)[:220] for m in producer if TELLING.search(m.group(0))][-EXCERPT_LINES:]
    verdict = _decommissioned_coordinator(producer)
    return "\n".join(([verdict] if verdict else []) + excerpt)


def _decommissioned_coordinator(producer: list[re.Match[str]]) -> str | None:
    added = [i for i, m in enumerate(producer) if m["tag"] == "ADDOFFSETS" and "NO_ERROR" in m["text"]]
    if not added:
        return None
    after = producer[added[-1] + 1:]
    waits = [m for m in after if "Received CONNECT op" in m["text"]]
    if not waits or any("TxnOffsetCommit" in m["text"] for m in after):
        return None
    broker = waits[0]["thread"]
    decommissioned = [m for m in producer if m["thread"] == broker and "Decommissioning this broker" in m["text"]]
    terminating = any(m["thread"] == broker and "Handle is terminating" in m["text"] for m in after)
    if not (decommissioned and terminating):
        return None
    return (f"librdkafka #5511: AddOffsetsToTxn succeeded at {producer[added[-1]]['t']}; the "
            f"TxnOffsetCommit then waits for group coordinator handle {broker}, decommissioned at "
            f"{decommissioned[-1]['t']} (a Metadata response left that broker out), which never comes up; "
            f"no TxnOffsetCommit was sent")


def sequence_desync(lines: list[str]) -> str | None:
    """librdkafka's fatal error for a Produce refused at the sequence it expected next, if any."""
    return next((line[:400] for line in lines if "failed due to sequence desynchronization" in line), None)
