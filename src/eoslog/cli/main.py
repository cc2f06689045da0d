"""The ``eoslog`` command. Every command family lives in its own module and registers
itself on the shared app (``common.app``) when imported; the imports below are in the
order ``eoslog --help`` lists them."""

from __future__ import annotations

# isort: off
from eoslog.cli import broker_command  # noqa: F401
from eoslog.cli import topics  # noqa: F401
from eoslog.cli import produce_consume  # noqa: F401
from eoslog.cli import dump_log  # noqa: F401
from eoslog.cli import groups  # noqa: F401
from eoslog.cli import share_groups  # noqa: F401
from eoslog.cli import transactions  # noqa: F401
from eoslog.cli import configs  # noqa: F401
from eoslog.cli import features  # noqa: F401
from eoslog.cli import cluster  # noqa: F401
from eoslog.cli import partitions  # noqa: F401
from eoslog.cli import console  # noqa: F401
from eoslog.cli import certs  # noqa: F401
from eoslog.cli import acls  # noqa: F401
from eoslog.cli import users  # noqa: F401
# isort: on
from eoslog.cli.common import app

__all__ = ["app"]


@app.callback()
def main() -> None:
    """eoslog: a Kafka-compatible broker with exactly-once transactions."""


if __name__ == "__main__":
    app()
