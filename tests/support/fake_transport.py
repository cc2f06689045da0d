"""An asyncio transport double for driving a broker connection (``KafkaProtocol``) in-process:
it records what the connection writes, whether it closed and whether reading is paused, so
a test can look at the bytes written at any moment (tests/unit/test_protocol.py,
test_connection_pipelining.py)."""

from __future__ import annotations

import struct
from typing import Any


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False
        self.paused = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.written += data

    def writelines(self, chunks: list[bytes]) -> None:
        for chunk in chunks:
            self.write(chunk)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else None

    def frames(self) -> list[bytes]:
        out, pos = [], 0
        while pos + 4 <= len(self.written):
            (size,) = struct.unpack_from(">i", self.written, pos)
            out.append(bytes(self.written[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        return out
