"""Rewriting a batch off the hot path: the log cleaner keeps some of a batch's records, and a
topic whose compression.type is not ``producer`` recompresses what producers send. Both keep the
batch's header (base offset, base timestamp, producer id/epoch/sequence, lastOffsetDelta) and
its record bytes as they are; only the records section, count, codec, size and CRC change."""
import struct

from ..checksum import crc32c
from ..record import codecs
from ..record.layout import (ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET, COMPRESSION_CODEC_MASK, CRC_OFFSET,
                             LENGTH_OFFSET, LOG_OVERHEAD, MAX_TIMESTAMP_OFFSET, RECORD_BATCH_OVERHEAD,
                             RECORDS_COUNT_OFFSET, TIMESTAMP_TYPE_MASK)


def records_section(batch) -> bytes:
    """The uncompressed records section of one batch (bytes-like, whole batch)."""
    mv = memoryview(batch).cast("B")
    codec = struct.unpack_from(">h", mv, ATTRIBUTES_OFFSET)[0] & COMPRESSION_CODEC_MASK
    body = mv[RECORD_BATCH_OVERHEAD:]
    return bytes(body) if codec == 0 else codecs.decompress(codec, body)


def build_batch(header, records_raw, count, codec, max_timestamp=None) -> bytearray:
    """A batch with header's fields, these records (uncompressed record bytes, length prefixes
    included) compressed with codec (id), count records, and max_timestamp if given."""
    body = codecs.compress(codec, records_raw) if codec else bytes(records_raw)
    out = bytearray(RECORD_BATCH_OVERHEAD + len(body))
    out[:RECORD_BATCH_OVERHEAD] = bytes(header[:RECORD_BATCH_OVERHEAD])
    out[RECORD_BATCH_OVERHEAD:] = body
    struct.pack_into(">i", out, LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    attrs = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, (attrs & ~COMPRESSION_CODEC_MASK) | codec)
    if max_timestamp is not None and not attrs & TIMESTAMP_TYPE_MASK:
        struct.pack_into(">q", out, MAX_TIMESTAMP_OFFSET, max_timestamp)
    struct.pack_into(">i", out, RECORDS_COUNT_OFFSET, count)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


def empty_batch(batch) -> bytearray:
    """The header-only batch that stands for batch once all its records are gone (Kafka's
    DefaultRecordBatch.writeEmptyHeader, the cleaner's RETAIN_EMPTY): same base offset, last
    offset delta, producer id, epoch, base sequence, leader epoch, attributes (transactional,
    control, timestamp type) and max timestamp; uncompressed, no records, base timestamp -1."""
    out = bytearray(batch[:RECORD_BATCH_OVERHEAD])
    struct.pack_into(">q", out, BASE_TIMESTAMP_OFFSET, -1)
    return build_batch(out, b"", 0, 0)


def recompress(buf, codec) -> bytearray:
    """Every batch of buf in codec (id); batches already in it are copied unchanged."""
    mv = memoryview(buf).cast("B")
    out = bytearray()
    pos = 0
    while pos + LOG_OVERHEAD <= len(mv):
        total = struct.unpack_from(">i", mv, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
        batch = mv[pos:pos + total]
        attrs = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)[0]
        if attrs & COMPRESSION_CODEC_MASK == codec:
            out += batch
        else:
            count = struct.unpack_from(">i", batch, RECORDS_COUNT_OFFSET)[0]
            out += build_batch(batch[:RECORD_BATCH_OVERHEAD], records_section(batch), count, codec)
        pos += total
    return out
