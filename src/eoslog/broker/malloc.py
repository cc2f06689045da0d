"""The broker process keeps the memory of freed request frames for the next ones (glibc's malloc).

A produce request of about 1 MB (librdkafka's batch.size, the Java client's max.request.size)
is read into a buffer of its own (``broker.connection``) and freed when it is answered. By
default glibc serves such a buffer from the heap only after its dynamic mmap threshold has
grown past that size, and it gives the top of the heap back to the kernel as soon as more
than twice that threshold lies free there. The pipelined acks wait frees the frames of one
group-commit round together, so the heap was trimmed after nearly every round and the next
frames faulted every page in again (zeroed and charged by the kernel): an idempotent
librdkafka producer of 400 MB caused about 90,000 minor faults instead of 30,000 before the
pipelining, and that system time made its broker CPU per MB about 20 % worse
(notes/idem22.md). Fixed thresholds end the churn (under 2,000 faults): buffers up to
``MMAP_THRESHOLD_BYTES`` come from the heap, and up to ``TRIM_THRESHOLD_BYTES`` of free heap
is kept. The cost is that much resident memory at most after a burst of large requests.
"""

from __future__ import annotations

import ctypes
import logging
import platform

log = logging.getLogger(__name__)

# mallopt's parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Larger than any frame a client sends by default (1 MB requests), so they come from the heap;
# glibc's own rule, once its threshold has adapted, keeps twice that free before trimming.
MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES


def keep_freed_memory() -> bool:
    """Set the thresholds in this process; False where the C library is not glibc (nothing changes)."""
    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)  # the C library this process already uses
    done: bool = (libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
                  and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1)
    log.debug("malloc: mmap threshold %d, trim threshold %d bytes: %s", MMAP_THRESHOLD_BYTES,
              TRIM_THRESHOLD_BYTES, "set" if done else "refused")
    return done
