"""Request and response framing.

A request on the wire is ``int32 size`` then the request header, then the body. The header is
v1 (api key, api version, correlation id, nullable client id) or, for flexible request
versions, v2 (v1 plus tagged fields; the client id stays a non-compact string) -- except
ControlledShutdown v0, whose header is v0 (no client id; a special case in Kafka's generator).
Responses carry header v0 (correlation id) or, for flexible versions, v1 (plus tagged fields) — except
ApiVersions, whose response header is always v0 so that a client can read it before it knows
what the broker speaks.
"""
from __future__ import annotations

import importlib
import struct
from functools import lru_cache

from .api_table import API_TABLE
from .wire import ProtocolDecodeError, Reader, Writer

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7
_header = struct.Struct(">hhi")


class RequestHeader:
    __slots__ = ("api_key", "api_version", "correlation_id", "client_id")

    def __init__(self, api_key, api_version, correlation_id, client_id):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id

    def __repr__(self):
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


def api_name(api_key: int) -> str:
    entry = API_TABLE.get(api_key)
    return entry[0] if entry else f"Unknown({api_key})"


@lru_cache(maxsize=None)
def _module(api_key: int):
    entry = API_TABLE[api_key]
    return importlib.import_module(f"kafkacore.protocol.messages.{entry[1]}_request"), \
        importlib.import_module(f"kafkacore.protocol.messages.{entry[1]}_response")


def request_class(api_key: int):
    return getattr(_module(api_key)[0], API_TABLE[api_key][2])


def response_class(api_key: int):
    return getattr(_module(api_key)[1], API_TABLE[api_key][3])


def is_flexible(api_key: int, api_version: int) -> bool:
    flex = API_TABLE[api_key][6]
    return flex is not None and api_version >= flex


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def peek_header(frame) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame (without the size prefix);
    enough to answer even a request whose body cannot be decoded."""
    if len(frame) < 8:
        raise ProtocolDecodeError(f"a request header needs 8 bytes, the frame has {len(frame)}")
    return _header.unpack_from(frame, 0)


def decode_header(frame) -> tuple[RequestHeader, Reader]:
    """The header, and a Reader positioned at the body. The api key and version must be
    known (in API_TABLE and within its versions) for the header version to be known;
    ProtocolDecodeError if they are not."""
    api_key, api_version, correlation_id = peek_header(frame)
    entry = API_TABLE.get(api_key)
    if entry is None:
        raise ProtocolDecodeError(f"unknown api key {api_key}")
    if not entry[4] <= api_version <= entry[5]:
        raise ProtocolDecodeError(f"{entry[0]} has no version {api_version}")
    hv = request_header_version(api_key, api_version)
    r = Reader(frame, 8)
    client_id = r.nullable_string() if hv >= 1 else None
    if hv >= 2:
        r.skip_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id), r


def decode_request(frame):
    """(RequestHeader, request object) of a frame; ProtocolDecodeError on anything malformed.
    Bytes left over after the body are ignored, as Kafka's broker does (librdkafka 2.16 sends
    three trailing bytes after a Metadata v12 request); ``decode_request_strict`` refuses them."""
    header, r = decode_header(frame)
    cls = request_class(header.api_key)
    try:
        body = cls.read(r, header.api_version)
    except ProtocolDecodeError:
        raise
    except (struct.error, ValueError, IndexError, OverflowError) as e:
        raise ProtocolDecodeError(f"malformed {api_name(header.api_key)} v{header.api_version} request: {e}") from e
    return header, body


def decode_request_strict(frame):
    """decode_request, and ProtocolDecodeError when bytes are left over after the body."""
    header, r = decode_header(frame)
    body = request_class(header.api_key).read(r, header.api_version)
    if r.remaining():
        raise ProtocolDecodeError(
            f"{r.remaining()} bytes left over after a {api_name(header.api_key)} v{header.api_version} request")
    return header, body


def encode_response(api_key: int, api_version: int, correlation_id: int, body,
                    header_version: int | None = None) -> Writer:
    """A whole response frame, size prefix included, in a Writer (``parts()`` to send)."""
    w = Writer()
    w.buf += b"\x00\x00\x00\x00"
    w.int32(correlation_id)
    hv = response_header_version(api_key, api_version) if header_version is None else header_version
    if hv >= 1:
        w.uvarint(0)
    body.write(w, api_version)
    size = len(w) - 4
    first = w.chunks[0] if w.chunks else w.buf
    struct.pack_into(">i", first, 0, size)
    return w


def encode_request(header: RequestHeader, body) -> bytes:
    """A request frame with its size prefix (for tests and kafkacore's own clients)."""
    return b"".join(encode_request_parts(header, body, None))


# Records fields this large stay in their own buffers when a client encodes a request.
RECORDS_CHUNK_BYTES = 16384


def encode_request_parts(header: RequestHeader, body, chunk_from=RECORDS_CHUNK_BYTES) -> list:
    """A request frame with its size prefix as a list of buffers: a producer's large record
    batches are not copied into the frame but sent from where they are (socket.sendmsg)."""
    w = Writer(chunk_from)
    w.buf += b"\x00\x00\x00\x00"
    w.buf += _header.pack(header.api_key, header.api_version, header.correlation_id)
    hv = request_header_version(header.api_key, header.api_version)
    if hv >= 1:
        w.nullable_string(header.client_id)
    if hv >= 2:
        w.uvarint(0)
    body.write(w, header.api_version)
    parts = w.parts()
    struct.pack_into(">i", parts[0], 0, len(w) - 4)  # the size prefix is the first 4 bytes written
    return parts


def decode_response(api_key: int, api_version: int, frame, strict: bool = True):
    """(correlation id, response object) of a response frame without its size prefix.
    ``strict=False`` ignores bytes after the response, as Kafka's Java client and librdkafka
    do (librdkafka's mock cluster, for one, ends some responses with a stray byte)."""
    r = Reader(frame)
    correlation_id = r.int32()
    if response_header_version(api_key, api_version) >= 1:
        r.skip_tagged_fields()
    body = response_class(api_key).read(r, api_version)
    if strict and r.remaining():
        raise ProtocolDecodeError(f"{r.remaining()} bytes left over after a response")
    return correlation_id, body
