"""Kafka's offset checkpoint files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``): a version line (0), a count
line, then ``topic partition offset`` lines; replaced atomically."""

from __future__ import annotations

import logging
from pathlib import Path

from eoslog.storage.fileio import atomic_write

log = logging.getLogger(__name__)


def write_checkpoint(path: Path, entries: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """A malformed file reads as empty (as Kafka resets its checkpoints): recovery then
    starts from offset 0, which is slow but safe."""
    if not path.exists():
        return {}
    try:
        lines = path.read_text().splitlines()
        if lines[0] != "0" or len(lines) != 2 + int(lines[1]):
            raise ValueError(f"version {lines[0]!r}, {len(lines) - 2} of {lines[1]} entries")
        out = {}
        for line in lines[2:]:
            topic, part, off = line.rsplit(" ", 2)
            out[(topic, int(part))] = int(off)
        return out
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        log.warning("ignoring malformed checkpoint %s: %s", path, e)
        return {}
