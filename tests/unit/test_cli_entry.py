"""``eoslog`` (``eoslog.cli.run``) imports only the module of the command asked for: its table of
commands must name, for every top-level command of the whole app, the module that registers it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import typer

from eoslog.cli import COMMANDS
from eoslog.cli.main import app


def _module(cmd: Any) -> str:
    callback = getattr(cmd, "callback", None)
    if callback is None:  # a group: where its own commands come from
        return _module(next(iter(cmd.commands.values())))
    return str(callback.__module__)


def test_every_command_is_found_in_the_module_that_registers_it() -> None:
    whole = typer.main.get_command(app)
    assert {name: _module(cmd) for name, cmd in whole.commands.items()} == {  # type: ignore[attr-defined]
        name: f"eoslog.cli.{module}" for name, module in COMMANDS.items()}


def _loaded_by(*argv: str) -> set[str]:
    probe = ("import sys\nfrom eoslog.cli import run\nsys.argv = ['eoslog', *sys.argv[1:]]\n"
             "try:\n    run()\nexcept SystemExit:\n    pass\n"
             "print(' '.join(m for m in sys.modules if m.startswith('eoslog.')), file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60, check=True)
    return set(out.stderr.split()[-1000:])


def test_a_command_loads_its_own_module_and_help_loads_them_all() -> None:
    broker = _loaded_by("broker", "--help")
    assert "eoslog.cli.broker_command" in broker
    assert not {"eoslog.cli.topics", "eoslog.client.admin", "eoslog.client.producer"} & broker
    topics = _loaded_by("topics", "--help")
    assert "eoslog.cli.topics" in topics and "eoslog.cli.broker_command" not in topics
    assert {f"eoslog.cli.{m}" for m in COMMANDS.values()} <= _loaded_by("--help")
