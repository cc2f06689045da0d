"""Shared pieces of the benchmarks: the broker subprocess, machine facts, the broker's
memory/CPU sampler, units, and where results go.

Nothing here measures throughput; ``baselines.py`` (the machine's limits) and
``load.py`` (Kafka clients against the broker) do.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"

# Reuse the tests' broker launcher (free port, ready line, clean stop) rather than a copy.
sys.path.insert(0, str(REPO_ROOT / "tests"))
from support.harness import BrokerProcess  # noqa: E402

__all__ = ["MB", "RESULTS_DIR", "BrokerProcess", "Measurement", "RssSampler", "machine_facts"]

MIN_SLOPE_S = 2.0  # shortest stretch of load over which an RSS slope is reported

# MB means MiB throughout, as Kafka's perf tools count it (bytes / 1024 / 1024).
MB = 1 << 20


@dataclass
class Measurement:
    """One timed transfer of ``bytes`` (and ``records``, when there are records)."""

    name: str
    bytes: int
    seconds: float
    records: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mb_s(self) -> float:
        return self.bytes / MB / self.seconds if self.seconds > 0 else 0.0

    @property
    def records_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["mb_s"] = round(self.mb_s, 2)
        out["records_s"] = round(self.records_s, 1)
        out["seconds"] = round(self.seconds, 4)
        return out


def best(runs: list[Measurement]) -> Measurement:
    """The fastest of repeated runs: a machine limit is what the machine *can* do;
    noise from other processes only ever slows a run down."""
    return max(runs, key=lambda m: m.mb_s)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of a few values: the nearest of them (p99 of ten is the largest)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- the broker's resources ------------------------------------------------------


@dataclass
class Sample:
    t: float  # seconds since the sampler started
    rss: int  # bytes
    cpu: float  # broker CPU seconds (user + system) so far
    phase: str


class RssSampler:
    """Samples a process's resident set size and CPU time every ``interval`` seconds
    on a thread, labelling each sample with the current phase."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.proc = psutil.Process(pid)
        self.interval = interval
        self.samples: list[Sample] = []
        self.phase = "idle"
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> RssSampler:
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def _take(self) -> Sample | None:
        try:
            with self.proc.oneshot():
                rss = self.proc.memory_info().rss
                cpu = self.proc.cpu_times()
        except psutil.Error:
            return None
        s = Sample(time.monotonic() - self._t0, rss, cpu.user + cpu.system, self.phase)
        self.samples.append(s)
        return s

    def _run(self) -> None:
        while not self._stop.is_set():
            self._take()
            self._stop.wait(self.interval)

    def set_phase(self, phase: str) -> float:
        """Start a phase (with a sample at its edge); returns the broker's CPU seconds so far."""
        self.phase = phase
        s = self._take()
        return s.cpu if s else 0.0

    def cpu_seconds(self) -> float:
        try:
            c = self.proc.cpu_times()
        except psutil.Error:
            return 0.0
        return float(c.user + c.system)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def summary(self, load_phases: set[str], warmup_s: float = 1.0) -> dict[str, Any]:
        """Start/peak/end RSS over the load phases, and two ways to see growth.

        RSS jumps once when the first requests arrive (receive buffers, the first
        index pages, the first full-size frames) and then moves up and down by a few
        MB with the requests in flight. So the slope (least squares) is taken after
        the first ``warmup_s`` seconds of load, and ``half_peak_growth_mb`` compares
        the peak of the second half of the load with the peak of the first half: a
        per-record leak of a few bytes over a million records shows up in both."""
        loaded = [s for s in self.samples if s.phase in load_phases]
        if not loaded:
            return {}
        steady = [s for s in loaded if s.t >= loaded[0].t + warmup_s] or loaded
        mid = loaded[0].t + (loaded[-1].t - loaded[0].t) / 2
        first_half = [s.rss for s in loaded if s.t <= mid]
        second_half = [s.rss for s in loaded if s.t > mid] or first_half
        idle = [s for s in self.samples if s.t < loaded[0].t]
        return {
            "idle_mb": round(idle[-1].rss / MB, 1) if idle else None,
            "start_mb": round(loaded[0].rss / MB, 1),
            "peak_mb": round(max(s.rss for s in loaded) / MB, 1),
            "end_mb": round(loaded[-1].rss / MB, 1),
            # Over a few seconds a slope only measures the noise of requests in flight.
            "slope_mb_per_min": (
                round(_slope([s.t for s in steady], [s.rss / MB for s in steady]) * 60, 2)
                if steady[-1].t - steady[0].t >= MIN_SLOPE_S else None
            ),
            "slope_after_s": warmup_s,
            "half_peak_growth_mb": round((max(second_half) - max(first_half)) / MB, 1),
            "samples": len(loaded),
            "seconds": round(loaded[-1].t - loaded[0].t, 1),
        }

    def series(self) -> list[list[Any]]:
        return [[round(s.t, 2), round(s.rss / MB, 2), round(s.cpu, 2), s.phase] for s in self.samples]


def _slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


# -- the machine -------------------------------------------------------------------


def _disk_of(path: Path) -> dict[str, Any]:
    """Mount point, device and file system holding ``path``."""
    best_mount: Any = None
    real = str(path.resolve())
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and (
            best_mount is None or len(mp) > len(best_mount.mountpoint)
        ):
            best_mount = part
    usage = shutil.disk_usage(path)
    info: dict[str, Any] = {
        "path": real,
        "free_gb": round(usage.free / 1e9, 1),
        "total_gb": round(usage.total / 1e9, 1),
    }
    if best_mount is not None:
        info.update(device=best_mount.device, mountpoint=best_mount.mountpoint, fstype=best_mount.fstype)
        name = Path(best_mount.device).name
        rotational = Path(f"/sys/block/{name}/queue/rotational")
        if rotational.exists():
            info["rotational"] = rotational.read_text().strip() == "1"
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def git_commit(src: Path) -> str | None:
    """Short commit of the checkout holding ``src``, with ``+dirty`` when ``src`` has
    uncommitted changes (other work in progress ends up in the measurement)."""
    marker = src.parent / "COMMIT"  # an export (``git archive``) says where it came from
    if marker.exists():
        return marker.read_text().strip()
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=src,
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=src,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def use_broker_src(src: Path | None) -> Path:
    """Make broker subprocesses import eoslog from ``src``: another checkout's ``src``
    directory, or an export of a fixed commit (``git archive HEAD src | tar -x -C DIR``
    plus ``DIR/COMMIT`` holding the commit id). Returns the source in use."""
    if src is None:  # PYTHONPATH's first entry when it holds eoslog (brokers inherit it)
        first = Path(os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or REPO_ROOT / "src")
        return first.resolve() if (first / "eoslog" / "__init__.py").exists() else REPO_ROOT / "src"
    src = src.resolve()
    if not (src / "eoslog" / "__init__.py").exists():
        raise SystemExit(f"{src} has no eoslog package")
    # PYTHONPATH comes before the editable install's .pth entry on sys.path.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))
    return src


def machine_facts(data_dir: Path, broker_src: Path = REPO_ROOT / "src") -> dict[str, Any]:
    import confluent_kafka

    mem = psutil.virtual_memory()
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": round(mem.total / 1e9, 1),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "broker_src": str(broker_src),
        "eoslog_commit": git_commit(broker_src),
        "disk": _disk_of(data_dir),
    }


def dir_bytes(path: Path, suffix: str = ".log") -> int:
    return sum(p.stat().st_size for p in path.rglob(f"*{suffix}") if p.is_file())


def prepare_run(work_dir: Path | None, prefix: str, broker_src: Path | None) -> tuple[Path, Path, dict[str, Any]]:
    """A fresh work directory (under ``work_dir`` if given) with an empty ``data`` dir for
    the broker, and the machine facts of that disk: (work, data_dir, facts)."""
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=work_dir))
    data_dir = work / "data"
    data_dir.mkdir()
    return work, data_dir, machine_facts(data_dir, use_broker_src(broker_src))
