"""A streaming query stopped on purpose while its write task runs prints nothing that looks
like a failure (``eoslog.spark.quiet.stop_queries``; the main job's restart uses it), and the
loggers it silenced are back at WARN afterwards, so a query failing on its own still shows.

The job runs in a JVM of its own (``quiet_stop_job.py``): the shared session's JVM writes
to a stderr this process cannot capture. Its plain ``query.stop()`` twin shows what the
check catches: aborted writes as ERROR lines and killed tasks with stack traces.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eoslog.spark.quiet import _CANCELLATION_LOGGERS
from support.deps import require_java

JOB = Path(__file__).parent / "quiet_stop_job.py"


def run_job(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    require_java()
    done = subprocess.run([sys.executable, str(JOB), str(tmp_path / "work"), str(tmp_path / "started"), *extra],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr
    return done


def noise(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if " ERROR " in line or " WARN " in line or line.startswith(("\tat ", "org.apache.spark."))]


@pytest.mark.parametrize("plain", [False, True], ids=["stop_queries", "plain-stop"])
def test_stopping_a_busy_query_on_purpose_prints_no_failure(tmp_path: Path, plain: bool) -> None:
    done = run_job(tmp_path, *(["--plain"] if plain else []))
    levels = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("level ")]
    assert levels == ["WARN"] * len(_CANCELLATION_LOGGERS)
    if plain:
        assert any("Aborting task" in line for line in noise(done.stderr)), "the job's whole stderr:\n" + done.stderr
    else:
        assert noise(done.stderr) == [], "the job's whole stderr:\n" + done.stderr
