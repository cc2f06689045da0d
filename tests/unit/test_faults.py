"""eoslog.faults: points armed by a test fail the real process; unarmed ones do nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eoslog.faults import CRASH_ENV, CrashPoints, pause_until_released

POINTS = ("before_prepare", "after_prepare")


def test_crash_points_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CRASH_ENV, raising=False)
    assert CrashPoints.from_env(POINTS).armed == frozenset()
    monkeypatch.setenv(CRASH_ENV, "after_prepare")
    assert CrashPoints.from_env(POINTS).armed == {"after_prepare"}
    monkeypatch.setenv(CRASH_ENV, "no_such_point")
    assert CrashPoints.from_env(POINTS).armed == frozenset()
    CrashPoints(["after_prepare"]).reached("before_prepare")  # not armed: nothing happens


def test_an_armed_point_kills_the_process_with_sigkill() -> None:
    code = ("from eoslog.faults import CrashPoints\n"
            "CrashPoints(['after_prepare']).reached('after_prepare')\n"
            "print('survived')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ})
    assert done.returncode == -signal.SIGKILL and "survived" not in done.stdout


def test_pause_waits_until_the_marker_is_deleted(tmp_path: Path) -> None:
    marker = tmp_path / "paused"
    t = threading.Thread(target=pause_until_released, args=(marker,))
    t.start()
    deadline = time.monotonic() + 10
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.read_text() == str(os.getpid()) and t.is_alive()
    marker.unlink()
    t.join(5)
    assert not t.is_alive()
