"""Finishing a segment replacement that a crash interrupted (the log cleaner's swap).

The cleaner writes a cleaned segment as ``<base>.log.cleaned``, renames it to
``<base>.log.swap`` (the commit point), deletes the segments it replaces and renames the
swap to ``<base>.log``. A partition that loads runs ``complete_interrupted_swaps`` first.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from eoslog.records.batch import iter_batch_headers
from eoslog.storage.fileio import fsync_dir
from eoslog.storage.segment import parse_segment_base, segment_file_name

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# A committed swap leaves the old segments' txn indexes stale: they are deleted, and the
# partition log rebuilds transaction state from the log when one is missing.
_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def _next_offset(path: Path, base: int) -> int:
    data = path.read_bytes()
    end = base
    for _, h in iter_batch_headers(data):
        end = h.next_offset
    return end


def complete_interrupted_swaps(directory: Path) -> None:
    """Finish or discard a segment replacement that a crash interrupted.

    ``*.cleaned`` files never reached the commit point: they go. A ``<base>.log.swap``
    did: every segment it replaces (bases in [base, its next offset)) is deleted and the
    swap becomes ``<base>.log``.
    """
    for leftover in directory.glob(f"*{CLEANED_SUFFIX}"):
        log.info("discarding unfinished cleaning output %s", leftover)
        leftover.unlink()
    for swap in sorted(directory.glob(f"*.log{SWAP_SUFFIX}")):
        base = parse_segment_base(Path(swap.name.removesuffix(SWAP_SUFFIX)))
        if base is None:
            continue
        end = max(_next_offset(swap, base), base + 1)
        for path in list(directory.iterdir()):
            if path.suffix in (".log", *_INDEX_SUFFIXES):
                b = parse_segment_base(path)
                if b is not None and base <= b < end:
                    path.unlink()
        os.replace(swap, directory / segment_file_name(base, ".log"))
        fsync_dir(directory)
        log.warning("completed an interrupted segment swap in %s at offset %d", directory, base)
