"""``eoslog console``: serve the web console (``eoslog.console``) for a cluster.

What it refuses, and why (docs/security.md, "Securing the console"): serving a non-loopback
address over plain HTTP (passwords and session cookies would cross the network in clear)
unless ``--insecure-http`` says so; ``--no-auth`` anywhere but on a loopback address (every
visitor acts with the console's own identity); logins against a cluster whose listener has
no SASL (there is nothing to check a password with).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import typer

from eoslog.cli.common import DEFAULT_BOOTSTRAP_SERVER, BootstrapServer, CommandError, app, check_reachable, user_errors
from eoslog.client.admin.config import admin_config
from eoslog.client.errors import ConfigException
from eoslog.config import ConfigError, parse_properties

LOOPBACK_NAMES = ("localhost",)


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise CommandError(f"--listen {value!r}: expected HOST:PORT", exit_code=2)
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str) -> tuple[str, ...]:
    """The Host headers the console answers: on loopback only its own names (a page of another
    site that DNS-rebinds its name to 127.0.0.1 is refused); elsewhere a login guards it."""
    if is_loopback(host):
        return tuple(dict.fromkeys((host, "localhost", "127.0.0.1", "::1", "[::1]")))
    return ("*",)


def _client_settings(path: Path | None) -> dict[str, str]:
    """The --command-config file's settings, checked as the admin client reads them."""
    if path is None:
        return {}
    try:
        settings = parse_properties(path.read_text())
        # Logins bring the user and password: the file may have none of its own.
        person = {"sasl.username": "checked", "sasl.password": "checked"} if not any(
            k in settings for k in ("sasl.username", "sasl.jaas.config")) else {}
        admin_config({"bootstrap.servers": "checked:9092", **settings, **person})
    except (OSError, ConfigError, ConfigException) as e:
        raise CommandError(f"--command-config {path}: {e}", exit_code=2) from None
    return settings


def check_serving(host: str, tls: bool, insecure_http: bool, no_auth: bool) -> None:
    """Refuse a console that would hand the cluster to whoever reaches it (exit 2)."""
    if no_auth and not is_loopback(host):
        raise CommandError(f"--no-auth on {host}: without logins every visitor acts with the console's own "
                           "identity, so it is served on a loopback address only (127.0.0.1, ::1, localhost)", 2)
    if not tls and not is_loopback(host) and not insecure_http:
        raise CommandError(f"--listen {host} without TLS: logins would send passwords and session cookies in "
                           "clear over the network; give --certfile and --keyfile (eoslog certs dev makes them), "
                           "or --insecure-http to serve plain HTTP anyway", 2)


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
        help="Client settings (properties) saying how to reach the cluster, as Kafka's tools take them: "
             "security.protocol, ssl.*, sasl.mechanism, timeouts; logins add each person's user and "
             "password. With --no-auth also the identity every visitor uses")] = None,
    certfile: Annotated[Path | None, typer.Option(
        "--certfile", metavar="PEM", help="Serve HTTPS with this certificate (chain)")] = None,
    keyfile: Annotated[Path | None, typer.Option("--keyfile", metavar="PEM", help="Its private key")] = None,
    insecure_http: Annotated[bool, typer.Option(
        "--insecure-http", help="Serve plain HTTP on a non-loopback address (passwords in clear)")] = False,
    no_auth: Annotated[bool, typer.Option(
        "--no-auth", help="No logins: every visitor uses the console's own identity (loopback only)")] = False,
    read_only: Annotated[bool, typer.Option(
        "--read-only", help="Show, never change: no action is offered or accepted")] = False,
    session_idle_minutes: Annotated[float, typer.Option(
        "--session-idle-minutes", min=1, help="A session ends this long after its last request")] = 30,
    session_max_hours: Annotated[float, typer.Option(
        "--session-max-hours", min=0.1, help="A session ends this long after its login, used or not")] = 8,
) -> None:
    """A web console: transactions (which one pins which partition's LSO, since when, whose),
    partitions, groups and their lag, producers. Works against any Kafka broker.

    People log in with their Kafka SASL credentials, and the cluster's ACLs decide what each
    sees and does."""
    with user_errors("console"):
        host, port = _host_port(listen)
        if (certfile is None) != (keyfile is None):
            raise CommandError("give --certfile and --keyfile together", 2)
        tls = certfile is not None
        check_serving(host, tls, insecure_http, no_auth)
        client_settings = _client_settings(command_config)
        from eoslog.console.login import uses_sasl

        if not no_auth and not uses_sasl(client_settings):
            raise CommandError("people log in with the cluster's SASL identities: give --command-config with "
                               "security.protocol=SASL_SSL (or SASL_PLAINTEXT) and its TLS settings; or, for a "
                               "cluster without SASL, --no-auth on a loopback address", 2)
        for path in (certfile, keyfile):
            if path is not None and not path.is_file():
                raise CommandError(f"{path}: no such file", 2)
        check_reachable(bootstrap_server)
    import uvicorn  # the web stack only for this command

    from eoslog.console.app import ConsoleSettings, create_app

    if no_auth:
        typer.echo("eoslog console: WARNING: --no-auth: no login; whoever reaches this address acts with the "
                   "console's own identity", err=True)
    app_ = create_app(ConsoleSettings(
        bootstrap_server, metrics, refresh, client_settings, auth=not no_auth, read_only=read_only, tls=tls,
        idle_s=session_idle_minutes * 60, max_s=session_max_hours * 3600, allowed_hosts=allowed_hosts(host)))
    scheme = "https" if tls else "http"
    where = f"[{host}]" if ":" in host else host
    typer.echo(f"eoslog console on {scheme}://{where}:{port} for {bootstrap_server}"
               + (" (read-only)" if read_only else ""))
    uvicorn.run(app_, host=host, port=port, log_level="warning",
                ssl_certfile=str(certfile) if certfile else None, ssl_keyfile=str(keyfile) if keyfile else None)
