"""Primitive types of the Kafka wire protocol, read from and written to buffers.

The generated codecs (``kafkacore.protocol.messages``) are built from these. Every read is
bounds-checked: running off the end of a frame, a negative length that is not a null marker, a
collection claiming more elements than bytes remain, or invalid UTF-8 raises
``ProtocolDecodeError`` (Kafka answers such requests by closing the connection).

Types follow Kafka's protocol guide (https://kafka.apache.org/protocol#protocol_types):
fixed-width big-endian integers, zig-zag varints, int16/int32-prefixed strings and bytes
(-1 = null), and in flexible versions "compact" forms whose unsigned-varint length is stored
plus one (0 = null), plus tagged fields.
"""
from __future__ import annotations

import struct
import uuid as _uuid

__all__ = ["ProtocolDecodeError", "Reader", "Writer", "ZERO_UUID"]

ZERO_UUID = b"\x00" * 16

_i8 = struct.Struct(">b")
_i16 = struct.Struct(">h")
_u16 = struct.Struct(">H")
_i32 = struct.Struct(">i")
_u32 = struct.Struct(">I")
_i64 = struct.Struct(">q")
_f64 = struct.Struct(">d")


class ProtocolDecodeError(ValueError):
    """A request or record that does not follow the schema it claims."""


class Reader:
    """Reads protocol primitives from a bytes-like object, front to back."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, pos: int = 0, end: int | None = None):
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise ProtocolDecodeError(f"needed {n} bytes at position {p}, {self.end - p} remain")
        self.pos = p + n
        return p

    def int8(self) -> int:
        return _i8.unpack_from(self.buf, self._need(1))[0]

    def bool(self) -> bool:
        return self.buf[self._need(1)] != 0

    def int16(self) -> int:
        return _i16.unpack_from(self.buf, self._need(2))[0]

    def uint16(self) -> int:
        return _u16.unpack_from(self.buf, self._need(2))[0]

    def int32(self) -> int:
        return _i32.unpack_from(self.buf, self._need(4))[0]

    def uint32(self) -> int:
        return _u32.unpack_from(self.buf, self._need(4))[0]

    def int64(self) -> int:
        return _i64.unpack_from(self.buf, self._need(8))[0]

    def float64(self) -> float:
        return _f64.unpack_from(self.buf, self._need(8))[0]

    def uuid(self) -> bytes:
        p = self._need(16)
        return bytes(self.buf[p:p + 16])

    def uvarint(self) -> int:
        buf, p, end = self.buf, self.pos, self.end
        result = shift = 0
        while True:
            if p >= end:
                raise ProtocolDecodeError("varint runs past the end of the frame")
            b = buf[p]
            p += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise ProtocolDecodeError("varint longer than 10 bytes")
        self.pos = p
        return result

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def _text(self, n: int) -> str:
        p = self._need(n)
        try:
            return str(self.buf[p:p + n], "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolDecodeError(f"invalid UTF-8 in a string at position {p}") from e

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ProtocolDecodeError(f"non-nullable string has length {n}")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolDecodeError(f"string has length {n}")
        return self._text(n)

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise ProtocolDecodeError("non-nullable compact string is null")
        return self._text(n)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._text(n)

    def _bytes(self, n: int):
        p = self._need(n)
        return self.buf[p:p + n]

    def bytes(self):
        n = self.int32()
        if n < 0:
            raise ProtocolDecodeError(f"non-nullable bytes have length {n}")
        return bytes(self._bytes(n))

    def nullable_bytes(self):
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolDecodeError(f"bytes have length {n}")
        return bytes(self._bytes(n))

    def compact_bytes(self):
        n = self.uvarint() - 1
        if n < 0:
            raise ProtocolDecodeError("non-nullable compact bytes are null")
        return bytes(self._bytes(n))

    def compact_nullable_bytes(self):
        n = self.uvarint() - 1
        return None if n < 0 else bytes(self._bytes(n))

    # Records stay a zero-copy view of the frame (writable when the frame is a bytearray, so
    # the storage engine stamps offsets in place without a copy).
    def _view(self, n: int):
        p = self._need(n)
        return memoryview(self.buf)[p:p + n]

    def records(self):
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolDecodeError(f"records have length {n}")
        return self._view(n)

    def compact_records(self):
        n = self.uvarint() - 1
        return None if n < 0 else self._view(n)

    def array_length(self, min_element_size: int = 1) -> int:
        n = self.int32()
        if n < -1:
            raise ProtocolDecodeError(f"array has length {n}")
        self._check_count(n, min_element_size)
        return n

    def compact_array_length(self, min_element_size: int = 1) -> int:
        n = self.uvarint() - 1
        self._check_count(n, min_element_size)
        return n

    def _check_count(self, n: int, min_element_size: int) -> None:
        # As Kafka does: a count that cannot fit in what remains is refused before anything
        # is allocated for it.
        if n > 0 and n * max(min_element_size, 1) > self.end - self.pos:
            raise ProtocolDecodeError(
                f"a collection of {n} elements cannot fit in the {self.end - self.pos} bytes remaining")

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._need(self.uvarint())

    def tagged_field(self):
        """(tag, Reader over the field's bytes) for one tagged field."""
        tag = self.uvarint()
        size = self.uvarint()
        p = self._need(size)
        return tag, Reader(self.buf, p, p + size)


class Writer:
    """Builds an encoded message. Parts that must be sent with ``sendfile`` (record data held
    in segment files) are kept aside as separate chunks; everything else is one bytearray."""

    __slots__ = ("buf", "chunks", "size_before", "chunk_from")

    def __init__(self, chunk_from=None):
        self.buf = bytearray()
        self.chunks = None  # list of bytes-like and file slices once a slice is written
        self.size_before = 0  # bytes held in chunks
        # records fields of at least this many bytes are kept as their own chunks too, not
        # copied into the message (a producer's batches, sent from their buffers with sendmsg)
        self.chunk_from = chunk_from

    def __len__(self) -> int:
        return self.size_before + len(self.buf)

    def getvalue(self) -> bytes:
        if self.chunks is not None:
            raise ValueError("message holds file slices; use parts()")
        return bytes(self.buf)

    def parts(self) -> list:
        """The message as a list of bytes-like objects and file slices, in order."""
        if self.chunks is None:
            return [self.buf]
        return self.chunks + [self.buf]

    def int8(self, v: int) -> None:
        self.buf += _i8.pack(v)

    def bool(self, v) -> None:
        self.buf.append(1 if v else 0)

    def int16(self, v: int) -> None:
        self.buf += _i16.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _u16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _i32.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _u32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _i64.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _f64.pack(v)

    def uuid(self, v) -> None:
        if isinstance(v, _uuid.UUID):
            v = v.bytes
        if len(v) != 16:
            raise ValueError("a uuid is 16 bytes")
        self.buf += v

    def uvarint(self, v: int) -> None:
        buf = self.buf
        while v > 0x7F:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def varint(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 63))

    def string(self, v: str) -> None:
        b = v.encode()
        self.buf += _i16.pack(len(b))
        self.buf += b

    def nullable_string(self, v) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.string(v)

    def compact_string(self, v: str) -> None:
        b = v.encode()
        self.uvarint(len(b) + 1)
        self.buf += b

    def compact_nullable_string(self, v) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    def bytes(self, v) -> None:
        self.buf += _i32.pack(len(v))
        self.buf += v

    def nullable_bytes(self, v) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes(v)

    def compact_bytes(self, v) -> None:
        self.uvarint(len(v) + 1)
        self.buf += v

    def compact_nullable_bytes(self, v) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    def _records_body(self, v) -> None:
        # A file slice (storage.FileSlice: has size and sendfile) is kept as its own chunk
        # so the server can send it with sendfile; anything bytes-like is copied in.
        if hasattr(v, "sendfile") or (self.chunk_from is not None and _records_size(v) >= self.chunk_from):
            if self.chunks is None:
                self.chunks = []
            self.chunks.append(self.buf)
            self.chunks.append(v)
            self.size_before += len(self.buf) + len(v)
            self.buf = bytearray()
        else:
            self.buf += v

    def records(self, v) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
            return
        self.buf += _i32.pack(_records_size(v))
        self._records_body(v)

    def compact_records(self, v) -> None:
        if v is None:
            self.buf.append(0)
            return
        self.uvarint(_records_size(v) + 1)
        self._records_body(v)

    def array_length(self, v) -> None:
        self.buf += _i32.pack(-1 if v is None else len(v))

    def compact_array_length(self, v) -> None:
        self.uvarint(0 if v is None else len(v) + 1)


def _records_size(v) -> int:
    return v.nbytes if isinstance(v, memoryview) else len(v)
