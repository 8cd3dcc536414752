"""Kafka wire protocol: primitives (``wire``), codecs generated from Kafka's JSON schemas
(``messages``, ``coordinator``, ``api_table``) and request/response framing (``frames``)."""
from .frames import (
    RequestHeader,
    api_name,
    decode_request,
    encode_response,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from .wire import ProtocolDecodeError, Reader, Writer

__all__ = [
    "ProtocolDecodeError", "Reader", "Writer", "RequestHeader", "api_name", "decode_request",
    "encode_response", "request_class", "response_class", "request_header_version",
    "response_header_version",
]
