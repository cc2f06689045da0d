"""The whole ``eoslog`` app, every command registered (``eoslog --help``, tests' CliRunner)."""

from __future__ import annotations

import importlib

from eoslog.cli import COMMANDS
from eoslog.cli.common import app

for _module in dict.fromkeys(m for modules in COMMANDS.values() for m in modules):
    importlib.import_module(f"eoslog.cli.{_module}")

__all__ = ["app"]


if __name__ == "__main__":
    app()
