"""examples/local_broker.py's plan_broker: ``--listen HOST:0`` means any free port, and the
broker the example plans (and its clients' bootstrap) gets that real port, never 0."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from local_broker import plan_broker


def test_listen_on_port_zero_gets_a_real_free_port(tmp_path: Path) -> None:
    broker = plan_broker(Console(file=None, quiet=True), "127.0.0.1:0", tmp_path / "data", "eoslog-test-")
    assert broker.port != 0
    assert broker.bootstrap == f"127.0.0.1:{broker.port}"
