"""The ``eoslog`` command: broker, topics, produce, consume, dump-log."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from eoslog.config import BrokerConfig, ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from eoslog.client.admin import Admin
    from eoslog.client.connection import BrokerConnection

app = typer.Typer(
    name="eoslog",
    help="eoslog: a Kafka-compatible broker with exactly-once transactions.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """eoslog: a Kafka-compatible broker with exactly-once transactions."""


@app.command()
def broker(
    config: Annotated[Path | None, typer.Option("--config", help="Kafka-style properties file")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="log.dirs (default ./eoslog-data)")] = None,
    listen: Annotated[str | None, typer.Option("--listen", help="HOST:PORT (default 127.0.0.1:9092)")] = None,
    override: Annotated[
        list[str] | None, typer.Option("--override", "-o", help="extra property key=value")
    ] = None,
) -> None:
    """Run a broker: a single node by default (./eoslog-data, 127.0.0.1:9092), a cluster
    member when the config sets zookeeper.connect (docs/cluster.md)."""
    from eoslog.broker.server import run_broker
    from eoslog.cluster.errors import ClusterError

    overrides: dict[str, str] = {}
    for item in override or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--override expects key=value, got {item!r}")
        overrides[key.strip()] = value.strip()
    if data_dir is not None:
        overrides["log.dirs"] = str(data_dir)
    if listen is not None:
        overrides["listeners"] = listen
    try:
        cfg = BrokerConfig.load(config, overrides)
        cfg.listener()
    except (ConfigError, OSError) as e:
        typer.echo(f"eoslog broker: {e}", err=True)
        raise typer.Exit(2) from None
    try:
        run_broker(cfg)
    except (OSError, ClusterError) as e:  # an unusable or locked data directory, a port in use,
        typer.echo(f"eoslog broker: {e}", err=True)  # ZooKeeper unreachable
        raise typer.Exit(2) from None


# -- shared by the client commands (topics, produce, consume) ----------------------

DEFAULT_BOOTSTRAP_SERVER = "127.0.0.1:9092"

BootstrapServer = Annotated[
    str,
    typer.Option(
        "--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
        help="Broker(s) to connect to, like Kafka's CLI tools.",
    ),
]


class CommandError(Exception):
    """A user-facing failure: printed as one line on stderr, no traceback."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextmanager
def user_errors(command: str) -> Iterator[None]:
    """Turn expected failures (unreachable broker, Kafka error codes, bad input) into
    ``eoslog COMMAND: error: ...`` on stderr and a non-zero exit code."""
    from eoslog.client.connection import KafkaError

    try:
        yield
    except CommandError as e:
        typer.echo(f"eoslog {command}: error: {e}", err=True)
        raise typer.Exit(e.exit_code) from None
    except KafkaError as e:
        typer.echo(f"eoslog {command}: error: {e}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def connect(bootstrap_server: str, timeout_s: float = 30.0) -> BrokerConnection:
    """A connection to the first reachable broker of ``--bootstrap-server``."""
    from eoslog.client.connection import bootstrap

    try:
        return bootstrap(bootstrap_server, client_id="eoslog-cli", timeout_s=timeout_s)
    except ValueError as e:
        raise CommandError(f"--bootstrap-server: {e}", exit_code=2) from None


@contextmanager
def open_admin(bootstrap_server: str, timeout_s: float = 30.0) -> Iterator[Admin]:
    """An admin client (``eoslog.client.Admin``) for ``--bootstrap-server``.

    A blocking connection is tried first so that an unreachable broker is one readable
    error at once; the admin client alone would keep retrying for its whole timeout."""
    from eoslog.client.admin import Admin

    with connect(bootstrap_server, timeout_s):
        pass
    admin = Admin({"bootstrap.servers": bootstrap_server, "client.id": "eoslog-cli",
                   "default.api.timeout.ms": int(timeout_s * 1000)})
    try:
        yield admin
    finally:
        admin.close()


def table_console() -> Console:
    """A console for tables, never cut to 80 columns when the output goes to a pipe or a file."""
    from rich.console import Console

    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else 1000)


def parse_properties(items: list[str] | None, option: str) -> dict[str, str]:
    """``["k=v", ...]`` → dict, rejecting items without ``=``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"{option} expects key=value, got {item!r}", exit_code=2)
        out[key.strip()] = value.strip()
    return out


def _register_subcommands() -> None:
    """Sub-command groups live in their own modules; each registers itself on ``app``."""
    import importlib

    for name in ("topics", "produce_consume", "dump_log", "groups", "transactions", "configs", "cluster"):
        try:
            importlib.import_module(f"eoslog.cli.{name}")
        except ModuleNotFoundError as e:  # pragma: no cover - during bring-up only
            if e.name != f"eoslog.cli.{name}":
                raise


_register_subcommands()

if __name__ == "__main__":
    app()
