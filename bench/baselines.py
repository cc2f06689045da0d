"""The machine's own limits, measured in the same run as the broker.

- ``plain_writer``: the same number of bytes written sequentially to a new file in the
  broker's data directory, in 1 MB chunks (the size of a full producer batch), with
  the broker's default flush policy: Kafka's ``flush.messages`` / ``flush.ms`` default
  to Long.MAX, so nothing is fsynced per write and the data sits in the page cache.
  Timed until the file is closed. The ``fsync_at_end`` variant adds one fsync.

  Page state, and why every write here (and every produce case in core.py) starts
  with ``recycle_pages``: this VM has free page reporting (virtio-balloon). A page
  freed more than a second or two ago goes back to the host, and the next touch costs
  a host fault: writing into such "cold" memory runs at a few hundred MB/s, into
  pages freed a moment ago at several GB/s; which one a write gets depends on what
  other processes freed lately, so unmanaged figures swing by 10x between runs. So
  each measured write, the broker's included, is preceded by writing and deleting
  the same number of bytes, which leaves it a pool of recently freed pages. The
  measured file is kept until the run ends, as the broker keeps its log.
  ``recycle=False`` skips that (reported for information: it shows the VM effect).
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


def recycle_pages(directory: Path, nbytes: int, chunk: int = CHUNK) -> float:
    """Write and delete ``nbytes`` so that the next writes reuse pages still backed by
    the host (see the module docstring); returns the seconds it took."""
    scratch = directory / f"recycle-{next(_files)}.bin"
    seconds, _ = _write_file(scratch, nbytes, chunk, False)
    scratch.unlink()
    return seconds


def plain_writer(directory: Path, total: int, *, fsync_at_end: bool = False, recycle: bool = True,
                 chunk: int = CHUNK) -> Measurement:
    if recycle:
        recycle_pages(directory, total, chunk)
    seconds, cpu = _write_file(directory / f"plain-writer-{next(_files)}.bin", total, chunk, fsync_at_end)
    name = "plain writer" + (" + fsync at end" if fsync_at_end else "") + ("" if recycle else " (no recycling)")
    return Measurement(name, total, seconds, extra={
        "chunk_bytes": chunk, "fsync_at_end": fsync_at_end, "recycled_pages": recycle, "cpu_s": round(cpu, 3),
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

