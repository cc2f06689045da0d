"""Did the writes no fsync covered survive the last unclean stop? (issue 28)

A kill -9 of the broker keeps every write it made: the kernel's page cache holds them and
writes them back. A power cut does not: whatever no fsync covered may be gone, and in any
order (write-back does not keep the order of writes, across files or within one). Group
commit makes every write durable before it is acknowledged, with one exception on a single
node: a transaction's writes, made durable only before the PrepareCommit that decides them
(``TransactionCoordinator.commit_makes_durable``). After an unclean stop the coordinator must
know which of the two happened: after a kill -9 the open transactions lost nothing and may
go on (Kafka's behaviour); after a power cut any of them may have lost an acknowledged write
and none may commit.

The witness: a file in each log directory holding the kernel's boot id, written at start-up
and never fsynced. The page cache survived iff, in every log directory, the file is there
with this boot's id:

- a power cut restarts the machine: another boot id, whatever write-back kept of the file
  (it may well have written it back long before the cut, and not the transaction's writes);
- a file system that drops unsynced writes while the kernel runs on (a FUSE file system that
  restarts, tests/support/cutfs.py's cut) drops the file, or leaves it empty;
- a kill -9 keeps it as it was.

A missing or unreadable witness counts as a loss (fail closed: a fresh directory has open
transactions to abort no more than it has a witness). The witness is written again only once
the consequences of a loss are written (``write``'s caller: after the coordinators have
loaded and aborted), so a crash in between finds the loss again rather than a fresh witness.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

WITNESS_FILE = ".eoslog_unsynced_witness"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    """The running kernel's boot id (a new one at every boot); "" where there is none."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def survived(log_dirs: Iterable[Path]) -> bool:
    """Whether every unsynced write made before the last stop is still there: each log
    directory's witness holds this boot's id (module docstring)."""
    current = boot_id()
    if not current:
        return False  # nothing tells a power cut from a kill: assume the worse
    for d in log_dirs:
        try:
            found = (d / WITNESS_FILE).read_text().strip()
        except OSError:
            found = ""
        if found != current:
            log.warning("%s: unsynced writes before the last stop are lost (witness %r, boot %s)", d,
                        found or "missing", current)
            return False
    return True


def write(log_dirs: Iterable[Path]) -> None:
    """This boot's witness in each log directory; never fsynced (that is the point: only the
    page cache holds it)."""
    current = boot_id()
    for d in log_dirs:
        try:
            fd = os.open(d / WITNESS_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, f"{current}\n".encode())
            finally:
                os.close(fd)
        except OSError as e:  # fails closed: the next unclean start takes it for a loss
            log.warning("%s: no unsynced-writes witness written (%s)", d, e)
