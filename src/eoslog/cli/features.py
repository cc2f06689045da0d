"""``eoslog features describe|upgrade|downgrade``, like Kafka's kafka-features.sh
(``org.apache.kafka.tools.FeatureCommand``), with its output lines.

- ``describe``: every feature the broker supports, its supported range, the finalized level
  (0: off) and the epoch of the finalized levels (ApiVersions).
- ``upgrade --feature NAME=LEVEL`` / ``downgrade --feature NAME=LEVEL [--unsafe]``:
  UpdateFeatures, ``--dry-run`` only asks whether the broker would accept. The broker checks
  the change (the level must be supported; a downgrade must say so) and keeps the new level
  durably; every broker of a cluster takes it over.

Through the admin client (``eoslog.client.Admin``); this module parses and prints.
"""

from __future__ import annotations

from typing import Annotated

import typer

from eoslog.cli.common import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    CommandError,
    app,
    open_admin,
    user_errors,
)
from eoslog.client.admin import FeatureUpdate, UpgradeType
from eoslog.client.errors import KafkaProtocolError

features_app = typer.Typer(
    help="Describe, upgrade and downgrade the cluster's finalized features (kafka-features.sh).",
    no_args_is_help=True,
)
app.add_typer(features_app, name="features")

FeatureOption = Annotated[list[str] | None, typer.Option(
    "--feature", metavar="NAME=LEVEL", help="A feature and the level to finalize it at; repeatable")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Validate only: change nothing")]


@features_app.command("describe")
def describe_command(
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Describe the supported and finalized features."""
    with user_errors("features describe"), open_admin(bootstrap_server, command_config=command_config) as admin:
        metadata = admin.describe_features()
    epoch = "-" if metadata.finalized_features_epoch is None else str(metadata.finalized_features_epoch)
    for name in sorted(metadata.supported_features):
        low, high = metadata.supported_features[name]
        level = metadata.finalized_features.get(name, 0)
        typer.echo(f"Feature: {name:<40}  SupportedMinVersion: {low:<15}  SupportedMaxVersion: {high:<15}  "
                   f"FinalizedVersionLevel: {level:<15}  Epoch: {epoch}")


def _parse(items: list[str] | None, op: str) -> dict[str, int]:
    if not items:
        raise CommandError(f"You must specify at least one feature to {op}", exit_code=2)
    levels: dict[str, int] = {}
    for item in items:
        name, sep, level = item.partition("=")
        if not sep or not name.strip():
            raise CommandError(f"Can't parse feature={item!r}: expected NAME=LEVEL", exit_code=2)
        if name.strip() in levels:
            raise CommandError(f"Feature {name.strip()} was specified more than once.", exit_code=2)
        try:
            levels[name.strip()] = int(level)
        except ValueError:
            raise CommandError(f"Can't parse feature={item!r}: the level is not a number", exit_code=2) from None
    return levels


def _update(op: str, levels: dict[str, int], upgrade_type: UpgradeType, dry_run: bool,
            bootstrap_server: str, command_config: CommandConfig) -> None:
    """Kafka's FeatureCommand.update: one line per feature, then the count of failures."""
    updates = {name: FeatureUpdate(level, upgrade_type) for name, level in levels.items()}
    with user_errors(f"features {op}"), open_admin(bootstrap_server, command_config=command_config) as admin:
        try:
            admin.update_features(updates, validate_only=dry_run)
            failure: str | None = None
        except KafkaProtocolError as e:  # the broker refuses all or nothing, with Kafka's message
            failure = e.message or e.describe()
    for name in sorted(levels):
        if failure is not None:
            typer.echo(f"{'Can not' if dry_run else 'Could not'} {op} {name} to {levels[name]}. "
                       f"{failure}")
        else:
            typer.echo(f"{name}{' can be ' if dry_run else ' was '}{op}d to {levels[name]}.")
    if failure is not None:
        typer.echo(f"{len(levels)} out of {len(levels)} operation(s) failed.", err=True)
        raise typer.Exit(1)


@features_app.command("upgrade")
def upgrade_command(
    feature: FeatureOption = None,
    dry_run: DryRun = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Raise finalized feature levels (UpdateFeatures, UPGRADE)."""
    with user_errors("features upgrade"):
        levels = _parse(feature, "upgrade")
    _update("upgrade", levels, UpgradeType.UPGRADE, dry_run, bootstrap_server, command_config)


@features_app.command("downgrade")
def downgrade_command(
    feature: FeatureOption = None,
    unsafe: Annotated[bool, typer.Option(
        "--unsafe", help="Perform this downgrade even if it may irreversibly destroy metadata")] = False,
    dry_run: DryRun = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Lower finalized feature levels (UpdateFeatures, SAFE_DOWNGRADE, or UNSAFE_DOWNGRADE)."""
    with user_errors("features downgrade"):
        levels = _parse(feature, "downgrade")
    _update("downgrade", levels, UpgradeType.UNSAFE_DOWNGRADE if unsafe else UpgradeType.SAFE_DOWNGRADE,
            dry_run, bootstrap_server, command_config)
