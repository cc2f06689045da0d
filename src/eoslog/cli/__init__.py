"""The ``eoslog`` command line. Each command family is a module that registers itself on the
shared typer app (``common.app``) when imported; ``run`` imports only the module of the command
asked for (all of them for ``eoslog --help`` or an unknown command), so ``eoslog broker`` does
not load the client commands' admin client, tables and Markdown: a quarter of a broker's start."""

from __future__ import annotations

import importlib
import sys

# Each top-level command and the modules that register it and its subcommands (``configs`` adds
# ``topics alter-config``, ``partitions`` adds ``cluster rebalance``), in ``eoslog --help``'s order.
COMMANDS: dict[str, tuple[str, ...]] = {
    "broker": ("broker_command",),
    "topics": ("topics", "configs"),
    "produce": ("produce_consume",),
    "consume": ("produce_consume",),
    "dump-log": ("dump_log",),
    "groups": ("groups",),
    "share-groups": ("share_groups",),
    "transactions": ("transactions",),
    "configs": ("configs",),
    "features": ("features",),
    "cluster": ("cluster", "partitions"),
    "leader-election": ("cluster",),
    "partitions": ("partitions",),
    "console": ("console",),
    "certs": ("certs",),
    "acls": ("acls",),
    "users": ("users",),
}


def run() -> None:
    """The ``eoslog`` console script (and ``python -m eoslog``)."""
    name = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if name in COMMANDS:
        for module in COMMANDS[name]:
            importlib.import_module(f"{__name__}.{module}")
        from eoslog.cli.common import app
    else:
        from eoslog.cli.main import app
    app()
