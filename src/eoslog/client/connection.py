"""A blocking connection to one broker: kio request dataclass in, kio response out.

What it owns: the socket, framing (``eoslog.protocol.codec``), correlation ids, and the
version negotiation done once per connection with ApiVersions. What it must never do:
retry a request on its own beyond one reconnect, interpret per-partition errors, or
keep metadata — callers (the CLI today, the client of issue 6 later) decide that.

Typical use::

    with bootstrap("127.0.0.1:9092") as conn:
        version = conn.pick_version(ApiKey.METADATA, 12)
        m = request_types(ApiKey.METADATA, version)
        response = conn.send(build(m.MetadataRequest, topics=None))
"""

from __future__ import annotations

import socket
import struct
from types import TracebackType
from typing import Any, Self

from eoslog.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError, error_for
from eoslog.client.versions import ApiVersionTable, api_name, kio_versions, negotiation
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.codec import decode_response, encode_request
from eoslog.protocol.messages import build, request_types

__all__ = [
    "ApiKey", "BrokerConnection", "KafkaConnectionError", "KafkaError", "KafkaProtocolError",
    "bootstrap", "build", "kio_versions", "parse_bootstrap", "raise_for_error", "request_types",
]

DEFAULT_TIMEOUT_S = 30.0
_SIZE = struct.Struct(">i")
# A response larger than this is a framing error, not data (Kafka's clients cap it too).
MAX_RESPONSE_BYTES = 512 * 1024 * 1024


# Requests that change nothing on the broker, so resending one after a reconnect is
# harmless. A Produce or CreateTopics might have been applied before the connection
# dropped; resending it could duplicate records or report a confusing error.
_SAFE_TO_RESEND = frozenset(
    {ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.API_VERSIONS,
     ApiKey.DESCRIBE_CONFIGS}
)


def raise_for_error(error_code: int, message: str | None = None) -> None:
    """Raise the error code's exception (a KafkaProtocolError) unless it is NONE."""
    if int(error_code) != 0:
        raise error_for(error_code, message)


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``"host:port[,host:port]"`` (IPv6 as ``[::1]:9092``) → [(host, port), ...]."""
    out: list[tuple[str, int]] = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not HOST:PORT")
        out.append((host, int(port)))
    if not out:
        raise ValueError(f"no bootstrap server in {servers!r}")
    return out


class BrokerConnection:
    """One TCP connection to one broker; requests are sent and answered one at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "eoslog",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._correlation_id = 0
        # api key → (min, max) the broker advertised in ApiVersions.
        self._versions = ApiVersionTable({})
        self.api_versions: dict[int, tuple[int, int]] = {}

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    # -- lifecycle ------------------------------------------------------------

    def connect(self) -> Self:
        """Open the socket and negotiate API versions (ApiVersions)."""
        self.close()
        try:
            self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        except OSError as e:
            raise KafkaConnectionError(
                f"cannot connect to broker {self.host}:{self.port}: {e.strerror or e}"
            ) from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._negotiate()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- versions -------------------------------------------------------------

    def _negotiate(self) -> None:
        """Ask for the broker's version ranges (``eoslog.client.versions.negotiation``)."""
        gen = negotiation(f"broker {self.host}:{self.port}")
        request = next(gen)
        while True:
            frame = self._exchange(request)
            try:
                request = gen.send(frame)
            except StopIteration as done:
                self._versions = done.value
                self.api_versions = self._versions.ranges
                return

    def pick_version(self, api_key: int, wanted_max: int, wanted_min: int = 0) -> int:
        """The highest version of ``api_key`` that the broker, kio and the caller all support."""
        if not self.connected:
            self.connect()
        return self._versions.pick(api_key, wanted_max, wanted_min)

    def supports(self, api_key: int) -> bool:
        if not self.connected:
            self.connect()
        return api_key in self.api_versions

    # -- requests -------------------------------------------------------------

    def send(self, request: Any, *, timeout_s: float | None = None) -> Any:
        """Send one kio request and return its decoded response.

        A Produce with acks=0 gets no response from Kafka brokers; ``None`` is returned.
        If the connection is lost, read-only requests are sent once more on a fresh
        connection; everything else raises KafkaConnectionError.
        """
        api_key = int(request.__api_key__)
        version = int(request.__version__)
        expects_response = not (api_key == ApiKey.PRODUCE and int(request.acks) == 0)
        if not self.connected:
            self.connect()
        try:
            frame = self._exchange(request, timeout_s, expects_response)
        except KafkaConnectionError:
            if api_key not in _SAFE_TO_RESEND:
                raise
            self.connect()
            frame = self._exchange(request, timeout_s, expects_response)
        if frame is None:
            return None
        try:
            _, response = decode_response(frame, api_key, version)
        except Exception as e:  # kio raises several types on malformed input
            self.close()
            raise KafkaError(
                f"cannot decode {api_name(api_key)} v{version} response: {type(e).__name__}: {e}"
            ) from e
        return response

    def _exchange(
        self, request: Any, timeout_s: float | None = None, expects_response: bool = True
    ) -> bytes | None:
        """Write one request frame; read its response frame (without the size prefix)."""
        sock = self._sock
        if sock is None:
            raise KafkaConnectionError(f"not connected to {self.host}:{self.port}")
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        frame = encode_request(correlation_id, request, self.client_id)
        try:
            sock.settimeout(timeout_s if timeout_s is not None else self.timeout_s)
            sock.sendall(frame)
            if not expects_response:
                return None
            (size,) = _SIZE.unpack(self._recv_exact(sock, 4))
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                raise KafkaConnectionError(f"invalid response size {size} from {self}")
            payload = self._recv_exact(sock, size)
        except TimeoutError:
            self.close()
            raise KafkaConnectionError(
                f"{api_name(int(request.__api_key__))} request to {self.host}:{self.port} "
                "timed out"
            ) from None
        except KafkaConnectionError:
            self.close()
            raise
        except OSError as e:
            self.close()
            raise KafkaConnectionError(
                f"connection to {self.host}:{self.port} failed: {e.strerror or e}"
            ) from None
        (got,) = _SIZE.unpack_from(payload, 0)
        if got != correlation_id:
            self.close()
            raise KafkaConnectionError(
                f"response correlation id {got} does not match request {correlation_id}"
            )
        return payload

    def _recv_exact(self, sock: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise KafkaConnectionError(
                    f"broker {self.host}:{self.port} closed the connection"
                )
            buf += chunk
        return bytes(buf)


def bootstrap(
    servers: str, *, client_id: str = "eoslog", timeout_s: float = DEFAULT_TIMEOUT_S
) -> BrokerConnection:
    """Connect to the first reachable broker of ``"host:port[,host:port]"``."""
    errors: list[str] = []
    for host, port in parse_bootstrap(servers):
        try:
            return BrokerConnection(host, port, client_id=client_id, timeout_s=timeout_s).connect()
        except KafkaConnectionError as e:
            errors.append(str(e))
    raise KafkaConnectionError("; ".join(errors))
