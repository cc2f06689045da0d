"""``eoslog broker``: run a broker (a single node by default, a cluster member with
zookeeper.connect)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eoslog.cli.common import app
from eoslog.config import BrokerConfig, ConfigError
from eoslog.security.listeners import inter_broker_security, listeners


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
    from eoslog.broker.connection_quotas import check_connection_limits
    from eoslog.broker.server import run_broker
    from eoslog.cluster.errors import ClusterError

    # Each flag is a source of its own, in the order given, after the file: a later one wins,
    # except on a security setting two sources give differently (config.merge_sources).
    flags: list[tuple[str, dict[str, str]]] = []
    for item in override or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--override expects key=value, got {item!r}")
        flags.append((f"-o {item}", {key.strip(): value.strip()}))
    if data_dir is not None:
        flags.append((f"--data-dir {data_dir}", {"log.dirs": str(data_dir)}))
    if listen is not None:
        flags.append((f"--listen {listen}", {"listeners": listen}))
    try:
        cfg = BrokerConfig.load(config, flags=flags)
        listeners(cfg)
        check_connection_limits(cfg)
        if cfg.zookeeper_connect:
            inter_broker_security(cfg)
    except (ConfigError, OSError) as e:
        typer.echo(f"eoslog broker: {e}", err=True)
        raise typer.Exit(2) from None
    try:
        run_broker(cfg)
    except (OSError, ClusterError) as e:  # an unusable or locked data directory, a port in use,
        typer.echo(f"eoslog broker: {e}", err=True)  # ZooKeeper unreachable
        raise typer.Exit(2) from None
