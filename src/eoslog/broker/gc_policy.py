"""The broker's garbage-collector setting, and the collector's pauses measured.

Young objects are collected less often: every request allocates short-lived objects (frames,
futures, records), so CPython's default threshold (a young collection every 700 net allocations,
an older one every 10 of those) ran collections all the time: under 100 transactional producers
the collector was 7 % of the event loop's time. With a young threshold of 20,000 a collection
looks at more objects at once but at far fewer survivors, less often (and the older generations
follow, 10 to 1).

Not ``gc.freeze()`` after start-up, which would also spare the full collections the walk over
every partition's objects: frozen objects are never collected, so the cyclic objects of a topic
deleted later would never be freed.

Every collection's pause is observed in ``stats.GC_PAUSES`` (one histogram per generation): a
collection stops the event loop, and a full one walks every live object — with many partitions
or connections, the pause a client's p99 feels (``eoslog_gc_pause_seconds``; the JVM's
collector pauses are the same kind of figure for Kafka).
"""

from __future__ import annotations

import gc
import time
from typing import Any

from eoslog.stats import GC_PAUSES

# gen0 collections every YOUNG_THRESHOLD net allocations; gen1 / gen2 after 10 of the younger.
YOUNG_THRESHOLD = 20_000

_started: list[float] = [0.0]  # collections never overlap: each holds the GIL throughout


def _observe(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
    else:
        GC_PAUSES[info["generation"]].observe(time.perf_counter() - _started[0])


def after_startup() -> None:
    gc.set_threshold(YOUNG_THRESHOLD, 10, 10)
    if _observe not in gc.callbacks:
        gc.callbacks.append(_observe)
