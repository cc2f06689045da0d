"""The broker process itself: one broker per data directory, readable start-up errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.harness import free_port


def run_broker(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eoslog", "broker", "--data-dir", str(data_dir),
         "--listen", f"127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=60,
    )


def test_second_broker_on_the_same_data_dir_is_refused(broker) -> None:
    result = run_broker(broker.data_dir)
    assert result.returncode == 2
    assert "in use by another broker" in result.stderr
    assert "Traceback" not in result.stderr
    assert broker.alive()
    # The running broker's data was not touched: no clean-shutdown marker appeared under it.
    assert not (broker.data_dir / ".eoslog_cleanshutdown").exists()


def test_unusable_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run_broker(blocker / "data")
    assert result.returncode == 2
    assert result.stderr.startswith("eoslog broker:") or "eoslog broker:" in result.stderr
    assert "Traceback" not in result.stderr
