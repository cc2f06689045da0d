"""``eoslog`` (``eoslog.cli.run``) imports only the module of the command asked for: its table of
commands must name, for every top-level command of the whole app, the module that registers it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import typer

from eoslog.cli import COMMANDS
from eoslog.cli.main import app


def _modules(cmd: Any) -> set[str]:
    """The modules whose functions are ``cmd``'s leaf commands (typer vendors click: duck-typed)."""
    if hasattr(cmd, "commands"):
        return set().union(*(_modules(sub) for sub in cmd.commands.values()))
    return {str(cmd.callback.__module__)}


def test_every_command_is_found_in_the_modules_that_register_it() -> None:
    whole = typer.main.get_command(app)
    assert {name: _modules(cmd) for name, cmd in whole.commands.items()} == {  # type: ignore[attr-defined]
        name: {f"eoslog.cli.{module}" for module in modules} for name, modules in COMMANDS.items()}


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
    assert {"eoslog.cli.topics", "eoslog.cli.configs"} <= topics and "eoslog.cli.broker_command" not in topics
    assert {f"eoslog.cli.{m}" for modules in COMMANDS.values() for m in modules} <= _loaded_by("--help")
