"""What the ``eoslog`` client commands share: the typer app they register on, the
``--bootstrap-server`` option, user-facing errors, the reachability check and the admin client."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from eoslog.client.errors import KafkaError
from eoslog.client.settings import parse_bootstrap
from eoslog.tools import ToolError

if TYPE_CHECKING:
    from rich.console import Console

    from eoslog.client.admin import Admin

CONNECT_TIMEOUT_S = 10.0

app = typer.Typer(
    name="eoslog",
    help="eoslog: a Kafka-compatible broker with exactly-once transactions.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """eoslog: a Kafka-compatible broker with exactly-once transactions."""


# -- shared by the client commands (topics, produce, consume) ----------------------

DEFAULT_BOOTSTRAP_SERVER = "127.0.0.1:9092"

BootstrapServer = Annotated[
    str,
    typer.Option(
        "--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
        help="Broker(s) to connect to, like Kafka's CLI tools.",
    ),
]


class CommandError(ToolError):
    """A user-facing failure: printed as one line on stderr, no traceback (as the shared
    tools' ``ToolError``s are)."""


@contextmanager
def user_errors(command: str) -> Iterator[None]:
    """Turn expected failures (unreachable broker, Kafka error codes, bad input) into
    ``eoslog COMMAND: error: ...`` on stderr and a non-zero exit code."""
    try:
        yield
    except ToolError as e:
        typer.echo(f"eoslog {command}: error: {e}", err=True)
        raise typer.Exit(e.exit_code) from None
    except KafkaError as e:
        typer.echo(f"eoslog {command}: error: {e}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


CommandConfig = Annotated[
    Path | None,
    typer.Option("--command-config", metavar="FILE",
                 help="client settings (security.protocol, sasl.*, ssl.*) as a properties file, like Kafka's tools"),
]


def command_settings(command_config: Path | None) -> dict[str, str]:
    """The properties of ``--command-config`` (none without it)."""
    if command_config is None:
        return {}
    from eoslog.config import ConfigError, parse_properties

    try:
        return parse_properties(command_config.read_text())
    except (OSError, ConfigError) as e:
        raise CommandError(f"--command-config {command_config}: {e}", exit_code=2) from None


def check_reachable(bootstrap_server: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail at once, with one readable line, when no broker of ``--bootstrap-server`` takes a
    connection: the clients would keep retrying for their whole timeout."""
    try:
        servers = parse_bootstrap(bootstrap_server)
    except ValueError as e:
        raise CommandError(f"--bootstrap-server: {e}", exit_code=2) from None
    errors = []
    for host, port in servers:
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            return
        except OSError as e:
            errors.append(f"cannot connect to broker {host}:{port}: {e.strerror or e}")
    raise CommandError("; ".join(errors))


@contextmanager
def open_admin(bootstrap_server: str, timeout_s: float = 30.0, command_config: Path | None = None) -> Iterator[Admin]:
    """An admin client (``eoslog.client.Admin``) for ``--bootstrap-server``.

    The broker is tried first (``check_reachable``), so that an unreachable one is one
    readable error at once; the admin client alone would keep retrying for its whole timeout."""
    from eoslog.client.admin import Admin  # not at import: `eoslog broker` loads this module too

    check_reachable(bootstrap_server)
    admin = Admin({"bootstrap.servers": bootstrap_server, "client.id": "eoslog-cli",
                   "default.api.timeout.ms": int(timeout_s * 1000), **command_settings(command_config)})
    try:
        yield admin
    finally:
        admin.close()


def table_console() -> Console:
    """A console for tables, never cut to 80 columns when the output goes to a pipe or a file."""
    from rich.console import Console as RichConsole

    return RichConsole(soft_wrap=True, width=None if sys.stdout.isatty() else 1000)


def parse_properties(items: list[str] | None, option: str) -> dict[str, str]:
    """``["k=v", ...]`` → dict, rejecting items without ``=``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"{option} expects key=value, got {item!r}", exit_code=2)
        out[key.strip()] = value.strip()
    return out
