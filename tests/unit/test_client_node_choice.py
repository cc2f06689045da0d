"""Which broker a client asks when any will do (``AioClient.least_loaded_node``)."""

from __future__ import annotations

import asyncio

import pytest

from eoslog.client.aio_client import AioClient
from eoslog.client.errors import KafkaConnectionError
from support.broker_double import BrokerDouble
from support.harness import free_port


def test_a_broker_that_refused_the_connection_is_asked_after_the_others() -> None:
    """A dead broker first in bootstrap.servers must not be picked again whenever its backoff
    ends: a call retried at that pace would never reach a live broker (found with a kill -9 of
    one of three Apache Kafka nodes, issue 12)."""

    async def main() -> None:
        double = await BrokerDouble({"t": 1}).start()
        client = AioClient(f"127.0.0.1:{free_port()},{double.bootstrap}", reconnect_backoff_ms=1,
                           reconnect_backoff_max_ms=1)
        try:
            assert client.least_loaded_node() == -1  # bootstrap order while nothing is known
            with pytest.raises(KafkaConnectionError):
                await client.connection(-1)
            await asyncio.sleep(0.05)  # its backoff is over
            assert client.least_loaded_node() == -2
            await client.connection(-2)
        finally:
            await client.close()
            await double.stop()

    asyncio.run(main())
