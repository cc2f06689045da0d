"""The metrics endpoint: ``GET /metrics`` on ``metrics.listener`` (``http://HOST:PORT``),
prometheus_client's ASGI app served by uvicorn on the broker's event loop, and ``GET /ready``,
the broker's readiness: 200 while it serves with every log directory online, 503 with the
reason otherwise (not serving yet, or a log directory offline after a failed fsync).

On the broker's loop, a scrape runs between two requests, so the collectors read state no
request is half-way through changing; uvicorn's signal handling is left out: the broker
owns SIGTERM and SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any
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


READY_PATH = "/ready"

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def metrics_app(registry: CollectorRegistry, not_ready: Callable[[], str | None]) -> Callable[
        [_Scope, _Receive, _Send], Awaitable[None]]:
    """The ASGI app: ``/ready`` answered from ``not_ready()`` (None: ready, else why not),
    every other path by prometheus_client's exposition."""
    metrics = make_asgi_app(registry)

    async def app(scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http" or scope["path"] != READY_PATH:
            await metrics(scope, receive, send)
            return
        reason = not_ready()
        body = ("ready\n" if reason is None else f"not ready: {reason}\n").encode()
        await send({"type": "http.response.start", "status": 200 if reason is None else 503,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
        await send({"type": "http.response.body", "body": body})

    return app


@dataclass
class MetricsServer:
    registry: CollectorRegistry
    host: str
    port: int
    not_ready: Callable[[], str | None] = lambda: None
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
        config = uvicorn.Config(metrics_app(self.registry, self.not_ready), lifespan="off", log_level="warning",
                                access_log=False)
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
