"""``eoslog users``: SCRAM credentials, as ``kafka-configs.sh --entity-type users`` manages them.

``set-password NAME --password P [--mechanism SCRAM-SHA-512] [--iterations 4096]`` sends
AlterUserScramCredentials to ``--bootstrap-server`` (the salted password only: the
password never leaves this process). With ``--data-dir DIR`` it writes the credential
into a stopped broker's data directory instead, as ``kafka-storage format --add-scram``
does, so the first super user exists before the first start; with ``--zookeeper
HOST:PORT[/chroot]`` it writes it where cluster mode keeps credentials (``/config/users/<user>``
and a change notification, as ``kafka-configs.sh --zookeeper`` did), for a cluster's first
super user before its first start (or a running cluster's brokers, which follow the
notification). ``list`` and ``delete``
speak DescribeUserScramCredentials / AlterUserScramCredentials.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from eoslog.cli.common import BootstrapServer, CommandConfig, CommandError, app, open_admin, table_console, user_errors
from eoslog.protocol.scram import MIN_ITERATIONS, Mechanism, salted_password
from eoslog.security.scram import make_credential

users_app = typer.Typer(help="SCRAM user credentials (as kafka-configs.sh --entity-type users).",
                        no_args_is_help=True)
app.add_typer(users_app, name="users")

MechanismOption = Annotated[str, typer.Option("--mechanism", help="SCRAM-SHA-256 or SCRAM-SHA-512")]


def _mechanism(name: str) -> Mechanism:
    try:
        mech = Mechanism(name.upper())
    except ValueError:
        mech = Mechanism.PLAIN
    if mech is Mechanism.PLAIN:
        raise CommandError(f"--mechanism {name}: use SCRAM-SHA-256 or SCRAM-SHA-512", exit_code=2)
    return mech


@users_app.command("set-password")
def set_password(
    name: Annotated[str, typer.Argument(help="user name (the principal is User:NAME)")],
    password: Annotated[str | None, typer.Option("--password", help="the password (default: $EOSLOG_PASSWORD)")] = None,
    mechanism: MechanismOption = "SCRAM-SHA-512",
    iterations: Annotated[int, typer.Option("--iterations", min=MIN_ITERATIONS, max=16384)] = MIN_ITERATIONS,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="write into a stopped broker's log.dirs")] = None,
    zookeeper: Annotated[str | None, typer.Option(
        "--zookeeper", help="write into a cluster's ZooKeeper (HOST:PORT[/chroot], its zookeeper.connect)")] = None,
    bootstrap_server: BootstrapServer = "127.0.0.1:9092",
    command_config: CommandConfig = None,
) -> None:
    """Create or change a user's SCRAM credential."""
    with user_errors("users set-password"):
        secret = password if password is not None else os.environ.get("EOSLOG_PASSWORD")
        if not secret:
            raise CommandError("give --password or set EOSLOG_PASSWORD", exit_code=2)
        mech = _mechanism(mechanism)
        if data_dir is not None and zookeeper is not None:
            raise CommandError("give --data-dir or --zookeeper, not both", exit_code=2)
        if zookeeper is not None:
            import asyncio
            import logging

            from kazoo.exceptions import KazooException
            from kazoo.handlers.threading import KazooTimeoutError

            from eoslog.cluster.security_store import ZK_TIMEOUT_MS, set_user_credential

            logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # one line below, not each retry's warning
            try:
                asyncio.run(set_user_credential(zookeeper, name, mech, make_credential(mech, secret, iterations)))
            except KazooTimeoutError:
                raise CommandError(
                    f"--zookeeper {zookeeper}: no ZooKeeper answered in {ZK_TIMEOUT_MS // 1000} s") from None
            except KazooException as e:
                raise CommandError(f"--zookeeper {zookeeper}: {type(e).__name__} {e}") from None
            typer.echo(f"stored {mech.value} credential of User:{name} in ZooKeeper {zookeeper}")
            return
        if data_dir is not None:
            from eoslog.security.credentials import CredentialStore

            if data_dir.exists() and not data_dir.is_dir():
                raise CommandError(f"--data-dir {data_dir} is not a directory", exit_code=2)
            if not data_dir.exists():  # the first start's case, as kafka-storage format makes its log.dirs
                try:
                    data_dir.mkdir(parents=True)
                except OSError as e:
                    raise CommandError(f"--data-dir {data_dir}: cannot create it: {e.strerror or e}") from None
                typer.echo(f"created {data_dir}")
            CredentialStore(data_dir).apply([(name, mech, make_credential(mech, secret, iterations))], [])
            typer.echo(f"stored {mech.value} credential of User:{name} in {data_dir} (offline)")
            return
        salt = os.urandom(32)
        with open_admin(bootstrap_server, command_config=command_config) as admin:
            admin.alter_user_scram_credentials(
                upsertions=[(name, mech.kafka_type, iterations, salt, salted_password(mech, secret, salt, iterations))],
                deletions=[])
        typer.echo(f"set {mech.value} credential of User:{name}")


@users_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="user name")],
    mechanism: MechanismOption = "SCRAM-SHA-512",
    bootstrap_server: BootstrapServer = "127.0.0.1:9092",
    command_config: CommandConfig = None,
) -> None:
    """Remove one of a user's SCRAM credentials."""
    with user_errors("users delete"), open_admin(bootstrap_server, command_config=command_config) as admin:
        mech = _mechanism(mechanism)
        admin.alter_user_scram_credentials(upsertions=[], deletions=[(name, mech.kafka_type)])
        typer.echo(f"deleted {mech.value} credential of User:{name}")


@users_app.command("list")
def list_users(
    bootstrap_server: BootstrapServer = "127.0.0.1:9092",
    command_config: CommandConfig = None,
) -> None:
    """Every user with a SCRAM credential, and its mechanisms and iterations."""
    from rich.table import Table

    with user_errors("users list"), open_admin(bootstrap_server, command_config=command_config) as admin:
        users = admin.describe_user_scram_credentials()
    table = Table("USER", "MECHANISM", "ITERATIONS")
    for user, creds in sorted(users.items()):
        for mech_type, iterations in creds:
            table.add_row(user, Mechanism.from_kafka_type(mech_type).value, str(iterations))
    table_console().print(table)
