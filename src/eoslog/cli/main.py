"""The ``eoslog`` command: broker, topics, produce, consume, dump-log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eoslog.config import BrokerConfig, ConfigError

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
    """Run a single-node broker (embedded default: ./eoslog-data, 127.0.0.1:9092)."""
    from eoslog.broker.server import run_broker

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
    run_broker(cfg)


def _register_subcommands() -> None:
    """Sub-command groups live in their own modules; each registers itself on ``app``."""
    import importlib

    for name in ("topics", "produce_consume", "dump_log"):
        try:
            importlib.import_module(f"eoslog.cli.{name}")
        except ModuleNotFoundError as e:  # pragma: no cover - during bring-up only
            if e.name != f"eoslog.cli.{name}":
                raise


_register_subcommands()

if __name__ == "__main__":
    app()
