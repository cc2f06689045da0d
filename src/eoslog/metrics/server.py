"""The metrics endpoint: ``GET /metrics`` on ``metrics.listener`` (``http://HOST:PORT``),
prometheus_client's ASGI app served by uvicorn on the broker's event loop.

On the broker's loop, a scrape runs between two requests, so the collectors read state no
request is half-way through changing; uvicorn's signal handling is left out: the broker
owns SIGTERM and SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import uvicorn
from prometheus_client import CollectorRegistry, make_asgi_app

from eoslog.config import ConfigError

log = logging.getLogger(__name__)


def parse_metrics_listener(value: str) -> tuple[str, int]:
    """``http://HOST:PORT`` (or ``HOST:PORT``) → (host, port); ConfigError otherwise."""
    url = urlsplit(value if "//" in value else f"http://{value}")
    try:
        port = url.port
    except ValueError:
        port = None
    if url.scheme != "http" or not url.hostname or port is None or url.path not in ("", "/", "/metrics"):
        raise ConfigError(f"metrics.listener={value!r}: expected http://HOST:PORT")
    return url.hostname, port


class _EmbeddedServer(uvicorn.Server):
    """uvicorn inside the broker's loop: the broker owns SIGTERM/SIGINT, uvicorn must not."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class MetricsServer:
    registry: CollectorRegistry
    host: str
    port: int
    _server: uvicorn.Server | None = None
    _task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Bind (OSError when the address is taken) and serve; the port bound."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        config = uvicorn.Config(make_asgi_app(self.registry), lifespan="off", log_level="warning", access_log=False)
        self._server = _EmbeddedServer(config)
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[sock]))
        bound = int(sock.getsockname()[1])
        log.info("metrics on http://%s:%d/metrics", self.host, bound)
        return bound

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._server = self._task = None
