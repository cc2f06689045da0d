"""Whole batches of a segment file, not read yet (Kafka's ``FileRecords`` slice).

A Fetch answers with these instead of bytes so that a plaintext connection can hand them to
the kernel with ``sendfile`` (``broker/connection.py``): the records then go from the page
cache to the socket without entering the process. Anything that needs the bytes calls
``read()``: TLS connections, a response that has to wait behind another, old Fetch versions'
zstd check, and the part of a response the socket did not take at once.

A slice is only valid until the event loop runs anything else: the segment may then be
rolled away, closed or truncated. Whoever receives one sends or reads it before yielding.
"""

from __future__ import annotations

import os


class FileRecords:
    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __repr__(self) -> str:
        return f"FileRecords(fd={self.fd}, position={self.position}, size={self.size})"

    def read(self, skip: int = 0, size: int | None = None) -> bytes:
        """The bytes of the slice from ``skip`` on: ``size`` of them, or all the rest."""
        want = self.size - skip if size is None else size
        data = os.pread(self.fd, want, self.position + skip)
        if len(data) != want:  # the file shrank under us: never send a short frame
            raise OSError(f"short read of a segment: {len(data)} of {want} bytes at {self.position + skip}")
        return data
