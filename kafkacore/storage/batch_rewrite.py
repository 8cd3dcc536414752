"""Rewriting a batch off the hot path: the log cleaner keeps some of a batch's records, and a
topic whose compression.type is not ``producer`` recompresses what producers send. Both keep the
batch's header (base offset, base timestamp, producer id/epoch/sequence, lastOffsetDelta) and
its record bytes as they are; only the records section, count, codec, size and CRC change."""
import struct

from ..checksum import crc32c
from ..record import codecs

HEADER = 61
_ATTR_CODEC = 0x07
_ATTR_LOG_APPEND_TIME = 0x08


def records_section(batch) -> bytes:
    """The uncompressed records section of one batch (bytes-like, whole batch)."""
    mv = memoryview(batch).cast("B")
    codec = struct.unpack_from(">h", mv, 21)[0] & _ATTR_CODEC
    body = mv[HEADER:]
    return bytes(body) if codec == 0 else codecs.decompress(codec, body)


def build_batch(header, records_raw, count, codec, max_timestamp=None) -> bytearray:
    """A batch with header's fields, these records (uncompressed record bytes, length prefixes
    included) compressed with codec (id), count records, and max_timestamp if given."""
    body = codecs.compress(codec, records_raw) if codec else bytes(records_raw)
    out = bytearray(HEADER + len(body))
    out[:HEADER] = bytes(header[:HEADER])
    out[HEADER:] = body
    struct.pack_into(">i", out, 8, len(out) - 12)
    attrs = struct.unpack_from(">h", out, 21)[0]
    struct.pack_into(">h", out, 21, (attrs & ~_ATTR_CODEC) | codec)
    if max_timestamp is not None and not attrs & _ATTR_LOG_APPEND_TIME:
        struct.pack_into(">q", out, 35, max_timestamp)
    struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return out


def empty_batch(batch) -> bytearray:
    """The header-only batch that stands for batch once all its records are gone (Kafka's
    DefaultRecordBatch.writeEmptyHeader, the cleaner's RETAIN_EMPTY): same base offset, last
    offset delta, producer id, epoch, base sequence, leader epoch, attributes (transactional,
    control, timestamp type) and max timestamp; uncompressed, no records, base timestamp -1."""
    out = bytearray(batch[:HEADER])
    struct.pack_into(">q", out, 27, -1)
    return build_batch(out, b"", 0, 0)


def recompress(buf, codec) -> bytearray:
    """Every batch of buf in codec (id); batches already in it are copied unchanged."""
    mv = memoryview(buf).cast("B")
    out = bytearray()
    pos = 0
    while pos + 12 <= len(mv):
        total = struct.unpack_from(">i", mv, pos + 8)[0] + 12
        batch = mv[pos:pos + total]
        attrs = struct.unpack_from(">h", batch, 21)[0]
        if attrs & _ATTR_CODEC == codec:
            out += batch
        else:
            count = struct.unpack_from(">i", batch, 57)[0]
            out += build_batch(batch[:HEADER], records_section(batch), count, codec)
        pos += total
    return out
