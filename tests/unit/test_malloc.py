"""The broker's malloc settings keep freed request frames for the next ones (broker/malloc.py).

Each case runs in a fresh interpreter (malloc's state is per process): bursts of four 1 MB
frames freed together, as a group-commit round answers several pipelined produces, then the
minor page faults of twenty more bursts. Counts, not times.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import eoslog

BURSTS = """
import resource, sys
from eoslog.broker.malloc import keep_freed_memory
if sys.argv[1] == "keep" and not keep_freed_memory():
    raise SystemExit("not applied")
def burst():
    frames = [bytearray(1_000_000) for _ in range(4)]
    del frames
burst()  # glibc's dynamic mmap threshold adapts to the size here
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    burst()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    src = str(Path(eoslog.__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", BURSTS, mode], env={**os.environ, "PYTHONPATH": src},
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def test_freed_frames_are_reused_instead_of_faulted_in_again() -> None:
    if platform.libc_ver()[0] != "glibc":
        from eoslog.broker.malloc import keep_freed_memory

        assert not keep_freed_memory()  # a no-op elsewhere
        return
    default, kept = faults("default"), faults("keep")
    # 20 bursts of ~1,000 pages: glibc's default trims the heap after each burst and faults it in again.
    assert default > 10_000, f"the default did not fault the frames in again ({default} faults): the test shows nothing"
    assert kept < default // 20, f"{kept} minor faults with the thresholds set, {default} without"
