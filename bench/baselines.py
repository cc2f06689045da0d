"""The machine's own limits, measured in the same run as the broker.

- ``plain_writer``: the same number of bytes written sequentially to a new file in the
  broker's data directory, in 1 MB chunks (the size of a full producer batch), with
  the broker's default flush policy: Kafka's ``flush.messages`` / ``flush.ms`` default
  to Long.MAX, so nothing is fsynced per write and the data sits in the page cache.
  Timed until the file is closed. The ``fsync_at_end`` variant adds one fsync.

  The file is kept until the run ends, as the broker keeps its log, so both write
  into memory the kernel had to find for them. This matters on a VM with free page
  reporting (virtio-balloon, as here): a page freed more than a second or two ago has
  gone back to the host, and touching it again costs a host fault; a file written and
  deleted just before is rewritten several times faster. ``recycled=True`` measures
  that fast case (a file overwrites the pages of one deleted just before); it is
  reported for information only, never as the limit.
- ``loopback_copy``: the same number of bytes through a TCP socket on 127.0.0.1 in
  1 MB chunks to a receiver in another process (so the GIL cannot cap the pair),
  which reads and discards them. Timed until the receiver confirms it has them all.

Each measurement also records the CPU seconds it used, so that rates can be compared
per CPU second too when other processes compete for the two cores.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import resource
import socket
import time
from pathlib import Path

from common import MB, Measurement

CHUNK = MB
_files = itertools.count()


def _write_file(path: Path, total: int, chunk: int, fsync_at_end: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds) to write ``total`` bytes to a new file and close it."""
    view = memoryview(os.urandom(chunk))
    written = 0
    cpu0 = time.process_time()
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while written < total:
            written += os.write(fd, view[: min(chunk, total - written)])
        if fsync_at_end:
            os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start, time.process_time() - cpu0


def plain_writer(directory: Path, total: int, *, fsync_at_end: bool = False, recycled: bool = False,
                 chunk: int = CHUNK) -> Measurement:
    path = directory / f"plain-writer-{next(_files)}.bin"
    if recycled:
        # Fill and free pages right before: the measured write reuses them while hot.
        scratch = directory / f"plain-writer-scratch-{next(_files)}.bin"
        _write_file(scratch, total, chunk, False)
        scratch.unlink()
    seconds, cpu = _write_file(path, total, chunk, fsync_at_end)
    if recycled:
        path.unlink()
    name = "plain writer" + (" + fsync at end" if fsync_at_end else "") + (" (recycled pages)" if recycled else "")
    return Measurement(name, total, seconds, extra={
        "chunk_bytes": chunk, "fsync_at_end": fsync_at_end, "recycled_pages": recycled, "cpu_s": round(cpu, 3),
    })


def _receive(listener: socket.socket, total: int, chunk: int) -> None:
    conn, _ = listener.accept()
    buf = bytearray(chunk)
    got = 0
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    with conn:
        while got < total:
            n = conn.recv_into(buf)
            if n == 0:
                break
            got += n
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu_us = round((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1e6)
        conn.sendall(got.to_bytes(8, "big") + cpu_us.to_bytes(8, "big"))


def loopback_copy(total: int, *, chunk: int = CHUNK) -> Measurement:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    # fork: the child inherits the listening socket and starts at once.
    receiver = mp.get_context("fork").Process(target=_receive, args=(listener, total, chunk), daemon=True)
    receiver.start()
    listener.close()
    data = memoryview(os.urandom(chunk))
    sent = 0
    ack = b""
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            cpu0 = time.process_time()
            start = time.perf_counter()
            while sent < total:
                n = min(chunk, total - sent)
                s.sendall(data[:n])
                sent += n
            while len(ack) < 16:
                part = s.recv(16 - len(ack))
                if not part:
                    break
                ack += part
            seconds = time.perf_counter() - start
            sender_cpu = time.process_time() - cpu0
    finally:
        receiver.join(30)
    if len(ack) != 16 or int.from_bytes(ack[:8], "big") != total:
        raise RuntimeError(f"loopback receiver did not confirm {total} bytes (got {ack!r})")
    receiver_cpu = int.from_bytes(ack[8:], "big") / 1e6
    return Measurement("loopback copy", total, seconds, extra={
        "chunk_bytes": chunk, "cpu_s": round(sender_cpu, 3), "sender_cpu_s": round(sender_cpu, 3),
        "receiver_cpu_s": round(receiver_cpu, 3),
    })

