"""Test fault points: every place a test makes a real process fail on purpose, in one module.

Crash recovery is tested on real processes (kill -9, not mocks), so a few points in the
broker and the Spark sink can be armed to fail exactly there. The code at such a point calls
one function here; unarmed, that is a set look-up and nothing happens. Armed by:

- ``EOSLOG_TEST_CRASH_AT`` (environment of the broker process): the transaction coordinator
  SIGKILLs its broker at ``before_prepare`` | ``after_prepare`` | ``between_markers`` |
  ``after_markers`` | ``after_complete`` of a transaction it ends (``CrashPoints``);
  the log manager at ``log_dir_move_between_renames``, when it swaps a replica moved to another
  log directory (``LogManager.replace_current_with_future``);
- the Spark sink's ``eoslog.sink.test.failAt`` option (``spark.sink_options.FaultPoints``):
  the driver's commit raises or pauses (``pause_until_released``) around its decision, a write
  task's Python worker exits as a crash would (``exit_now``) or pauses with its transaction
  open (``pause_until_released``, for a test that kills its executor).

No other code of eoslog fails on a test's behalf.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import NoReturn

log = logging.getLogger(__name__)

CRASH_ENV = "EOSLOG_TEST_CRASH_AT"


def kill_self(reason: str) -> NoReturn:
    """SIGKILL this process, as a power cut or ``kill -9`` would end it: no cleanup at all."""
    log.warning("%s: killing this process (SIGKILL)", reason)
    logging.shutdown()
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(137)  # not reached: SIGKILL cannot be caught


def exit_now(code: int) -> NoReturn:
    """Leave the process at once, skipping every cleanup handler (a crashed Python worker)."""
    os._exit(code)


def pause_until_released(path: str | Path) -> None:
    """Write this process's id to ``path`` and wait until the test kills this process or
    deletes ``path`` to let it go on."""
    marker = Path(path)
    marker.write_text(str(os.getpid()))
    while marker.exists():
        time.sleep(0.1)


class CrashPoints:
    """Named points at which this process kills itself, when a test armed them."""

    def __init__(self, armed: Iterable[str] = ()) -> None:
        self.armed = frozenset(armed)

    @classmethod
    def from_env(cls, known: Collection[str]) -> CrashPoints:
        """The points ``EOSLOG_TEST_CRASH_AT`` names among ``known`` (others are ignored)."""
        wanted = os.environ.get(CRASH_ENV)
        return cls([wanted] if wanted is not None and wanted in known else [])

    def reached(self, point: str) -> None:
        if point in self.armed:
            kill_self(f"{CRASH_ENV}={point}")
