"""``eoslog console``: serve the web console (``eoslog.console``) for a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eoslog.cli.common import DEFAULT_BOOTSTRAP_SERVER, BootstrapServer, CommandError, app, check_reachable, user_errors
from eoslog.client.admin.config import admin_config
from eoslog.client.errors import ConfigException
from eoslog.config import ConfigError, parse_properties


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise CommandError(f"--listen {value!r}: expected HOST:PORT", exit_code=2)
    return host.strip("[]"), int(port)


def _client_settings(path: Path | None) -> dict[str, str]:
    """The --command-config file's settings, checked as the admin client reads them."""
    if path is None:
        return {}
    try:
        settings = parse_properties(path.read_text())
        admin_config({"bootstrap.servers": "checked:9092", **settings})
    except (OSError, ConfigError, ConfigException) as e:
        raise CommandError(f"--command-config {path}: {e}", exit_code=2) from None
    return settings


@app.command("console")
def console_command(
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    listen: Annotated[str, typer.Option("--listen", metavar="HOST:PORT",
                                        help="Where the console serves its pages")] = "127.0.0.1:8080",
    metrics: Annotated[str | None, typer.Option(
        "--metrics", metavar="URL",
        help="A broker's metrics endpoint (metrics.listener), e.g. http://127.0.0.1:9644/metrics: "
             "log end offsets and sizes")] = None,
    refresh: Annotated[float, typer.Option("--refresh", min=0,
                                           help="Seconds between in-place page refreshes (0: none)")] = 5.0,
    command_config: Annotated[Path | None, typer.Option(
        "--command-config", metavar="FILE",
        help="Client settings (properties) for the console's admin client and consumers, as Kafka's "
             "tools take them: security, timeouts")] = None,
) -> None:
    """A web console: transactions (which one pins which partition's LSO, since when, whose),
    partitions, groups and their lag, producers. Works against any Kafka broker."""
    with user_errors("console"):
        host, port = _host_port(listen)
        client_settings = _client_settings(command_config)
        check_reachable(bootstrap_server)
    import uvicorn  # the web stack only for this command

    from eoslog.console.app import ConsoleSettings, create_app

    app_ = create_app(ConsoleSettings(bootstrap_server, metrics, refresh, client_settings))
    typer.echo(f"eoslog console on http://{host}:{port} for {bootstrap_server}")
    uvicorn.run(app_, host=host, port=port, log_level="warning")
