"""Request/response framing over kio's typed messages.

A frame is ``int32 size`` + header + body. The request header is v1 (api key,
version, correlation id, nullable client id) for non-flexible request versions and v2
(v1 + tagged fields) for flexible ones; the response header is v0 (correlation id) or
v1 (+ tagged fields), except that ApiVersions responses always use v0 so that a client
can read the answer before it knows which versions the broker speaks.
"""

from __future__ import annotations

import io
import logging
import struct
from functools import cache
from typing import Any, NamedTuple, Protocol

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.encoded import EncodedItems, spliced
from eoslog.protocol.messages import request_types, response_types

log = logging.getLogger(__name__)

API_VERSIONS_KEY = ApiKey.API_VERSIONS
_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


# A request frame without its size prefix: bytes, or a read-only memoryview of the
# buffer the connection read it into (kio's native readers refuse writable buffers).
Frame = bytes | memoryview


class RequestPrefix(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int


class DecodeError(Exception):
    """A frame that cannot be parsed; the connection that sent it is closed."""


def read_prefix(frame: Frame) -> RequestPrefix:
    if len(frame) < _PREFIX.size:
        raise DecodeError(f"request of {len(frame)} bytes is shorter than a request header")
    return RequestPrefix._make(_PREFIX.unpack_from(frame, 0))


@cache
def request_schema(api_key: int, version: int) -> type[Any]:
    # By name from the module ``messages`` serves, which may extend kio's (eoslog's tagged fields).
    cls: type[Any] = getattr(request_types(api_key, version), load_request_schema(api_key, version).__name__)
    return cls


@cache
def response_schema(api_key: int, version: int) -> type[Any]:
    # By name from the module ``messages`` serves, which may be eoslog's copy of kio's.
    cls: type[Any] = getattr(response_types(api_key, version), load_response_schema(api_key, version).__name__)
    return cls


# kio builds a reader/writer per class; building one is costly, so each is kept.
_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _reader(cls: type[Any]) -> Any:
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = entity_reader(cls)
    return reader


def _writer(cls: type[Any]) -> Any:
    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = entity_writer(cls)
    return writer


def decode_request(frame: Frame, prefix: RequestPrefix) -> tuple[Any, str | None]:
    """Parse header and body of a request whose version the broker supports."""
    schema = request_schema(prefix.api_key, prefix.api_version)
    header_cls = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    try:
        header, pos = _reader(header_cls)(frame, 0)
        body, size = _reader(schema)(frame, pos)
    except Exception as e:  # kio raises several types for malformed input
        raise DecodeError(
            f"malformed {schema.__name__} v{prefix.api_version}: {type(e).__name__}: {e}"
        ) from e
    if pos + size != len(frame):
        # Kafka's parser ignores bytes after the body, and clients rely on it:
        # librdkafka 2.x sends Metadata v12 with three bytes past the schema.
        log.debug("%s v%d from %s: %d trailing bytes ignored", schema.__name__,
                  prefix.api_version, header.client_id, len(frame) - pos - size)
    return body, header.client_id


def read_client_id(frame: bytes) -> str | None:
    """Client id of any request (its position is the same in header v1 and v2)."""
    if len(frame) < 10:
        return None
    (n,) = struct.unpack_from(">h", frame, 8)
    if n < 0 or 10 + n > len(frame):
        return None
    return frame[10 : 10 + n].decode("utf-8", "replace")


class FileRegion(Protocol):
    """Bytes of a file not read yet (``eoslog.records.file_records.FileRecords``): what a Fetch
    response carries as its records, for the connection to send with ``sendfile``."""

    fd: int
    position: int
    size: int

    def __len__(self) -> int: ...

    def read(self, skip: int = 0, size: int | None = None) -> bytes: ...


# A piece of an encoded response: bytes, or a file region to send or read before the event
# loop moves on.
Buffer = bytes | bytearray | memoryview
Chunk = Buffer | FileRegion


class _ChunkWriter:
    """A kio ``Writable`` that keeps large values (record sets) by reference.

    Fixed-size fields are gathered into small byte strings; anything of at least
    ``LARGE`` bytes becomes its own chunk, so a Fetch response's records go from the page
    cache read (or, as a file region, from the file itself) to the socket without being
    copied into the response. A smaller file region is read into the small bytes.
    """

    LARGE = 16 * 1024
    __slots__ = ("_small", "chunks", "size")

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.size = 0
        self._small = bytearray()

    def write(self, data: bytes | FileRegion) -> int:
        n = len(data)
        if n >= self.LARGE:
            if self._small:
                self.chunks.append(bytes(self._small))
                self._small.clear()
            self.chunks.append(data)
        else:
            self._small += data if isinstance(data, bytes | bytearray | memoryview) else data.read()
        self.size += n
        return n

    def finish(self) -> list[Chunk]:
        if self._small:
            self.chunks.append(bytes(self._small))
        return [_SIZE.pack(self.size), *self.chunks]


# The one array field of an API's response that may be given as EncodedItems.
_ENCODED_FIELD = {int(ApiKey.METADATA): "topics"}


def encode_response_chunks(correlation_id: int, response: Any, api_key: int) -> list[Chunk]:
    """Frame a response as buffers for ``transport.writelines``: size, header (v0/v1),
    body, with record sets referenced rather than copied (file regions left unread: see
    ``read_chunks``), and an array given as ``EncodedItems`` written as it is."""
    out = _ChunkWriter()
    if response.__flexible__ and api_key != API_VERSIONS_KEY:
        _writer(ResponseHeaderV1)(out, ResponseHeaderV1(correlation_id=i32(correlation_id)))
    else:
        _writer(ResponseHeaderV0)(out, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    name = _ENCODED_FIELD.get(api_key)
    items = getattr(response, name, None) if name is not None else None
    if name is not None and isinstance(items, EncodedItems):
        for part in spliced(response, name, items.items):
            out.write(part)
    else:
        _writer(type(response))(out, response)
    return out.finish()




def read_chunks(chunks: list[Chunk]) -> list[Buffer]:
    """The response's bytes, its file regions read."""
    return [c if isinstance(c, bytes | bytearray | memoryview) else c.read() for c in chunks]


def encode_response(correlation_id: int, response: Any, api_key: int) -> bytes:
    """Frame a response as one byte string: size, header (v0/v1), body."""
    return b"".join(read_chunks(encode_response_chunks(correlation_id, response, api_key)))


def encode_request(correlation_id: int, request: Any, client_id: str | None = "eoslog") -> bytes:
    """Frame a request (used by eoslog's own tools and tests)."""
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    header_cls = RequestHeaderV2 if request.__flexible__ else RequestHeaderV1
    _writer(header_cls)(
        buf,
        header_cls(
            request_api_key=i16(request.__api_key__),
            request_api_version=i16(request.__version__),
            correlation_id=i32(correlation_id),
            client_id=client_id,
        ),
    )
    _writer(type(request))(buf, request)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """Parse a response frame (without its size prefix) → (correlation id, body)."""
    schema = response_schema(api_key, version)
    header_cls = (
        ResponseHeaderV1 if schema.__flexible__ and api_key != API_VERSIONS_KEY else ResponseHeaderV0
    )
    header, pos = _reader(header_cls)(frame, 0)
    body, _ = _reader(schema)(frame, pos)
    return int(header.correlation_id), body
