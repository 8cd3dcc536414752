"""Batch compression with Kafka's framing, shared by the native records module and the twins.

Codec ids are the low three bits of a v2 batch's attributes (Kafka's CompressionType):
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Framing, as Kafka clients write and read it:
- gzip: a gzip member (RFC 1952); written with mtime 0 so output is deterministic.
- snappy: written in xerial framing like the Java client (magic, version 1, compatible 1,
  then big-endian length-prefixed raw snappy blocks of up to 32 KiB input); read in both
  xerial and raw form, since librdkafka writes raw snappy.
- lz4: the LZ4 frame format with independent 64 KiB blocks, as KafkaLZ4BlockOutputStream.
- zstd: one zstd frame. Readers also accept frames without a content size (the Java
  client's streaming writer omits it).

The libraries used (zlib, cramjam, lz4, zstandard) release the GIL while they work.
"""
import struct
import threading
import zlib

import cramjam
import lz4.frame
import zstandard

from .errors import CorruptRecordError, UnsupportedCodecError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_IDS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
CODEC_NAMES = {v: k for k, v in CODEC_IDS.items()}

# Cap on one batch's decompressed records. Frames can claim any size in their headers and
# small inputs can inflate enormously (zstd RLE blocks); past this a batch is reported as
# corrupt rather than allocated. Kafka itself has no such cap, but no producer writes a
# batch of this size (max.request.size defaults to 1 MiB). Raise it here if you must.
MAX_DECOMPRESSED_BYTES = 1 << 30

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024

_local = threading.local()  # zstd contexts are not safe to share between threads


def codec_id(name) -> int:
    """The codec id for a name (or an id); UnsupportedCodecError for anything else."""
    if isinstance(name, int) and name in CODEC_NAMES:
        return name
    try:
        return CODEC_IDS[str(name).lower()]
    except KeyError:
        raise UnsupportedCodecError(
            f"unknown compression type {name!r}; expected one of {', '.join(CODEC_IDS)}"
        ) from None


def _zstd_compressor():
    c = getattr(_local, "zc", None)
    if c is None:
        c = _local.zc = zstandard.ZstdCompressor(level=3)
    return c


def _zstd_decompressor():
    d = getattr(_local, "zd", None)
    if d is None:
        d = _local.zd = zstandard.ZstdDecompressor()
    return d


def compress(codec: int, data) -> bytes:
    if codec == GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: gzip wrapper, mtime 0
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        out = [XERIAL_HEADER]
        mv = memoryview(data)
        for i in range(0, len(mv), XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(mv[i : i + XERIAL_BLOCK]))
            out.append(struct.pack(">i", len(block)))
            out.append(block)
        return b"".join(out)
    if codec == LZ4:
        return lz4.frame.compress(
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        return _zstd_compressor().compress(data)
    if codec == NONE:
        return bytes(data)
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


class _TooLarge(ValueError):
    pass


def _check_size(n: int) -> None:
    if n > MAX_DECOMPRESSED_BYTES:
        raise _TooLarge(f"the records would decompress to more than {MAX_DECOMPRESSED_BYTES} bytes "
                        f"(kafkacore.record.codecs.MAX_DECOMPRESSED_BYTES)")


def _snappy_raw(block) -> bytes:
    # A raw snappy block starts with its uncompressed length (a varint); the library
    # allocates that much up front, so check it first.
    n = shift = 0
    for i in range(min(len(block), 5)):
        n |= (block[i] & 0x7F) << shift
        shift += 7
        if not block[i] & 0x80:
            break
    _check_size(n)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data) -> bytes:
    mv = memoryview(data)
    if bytes(mv[:8]) != XERIAL_MAGIC:
        return _snappy_raw(mv)
    pos, out, total = 16, [], 0
    while pos < len(mv):
        if pos + 4 > len(mv):
            raise ValueError("xerial snappy block length is truncated")
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or pos + n > len(mv):
            raise ValueError("xerial snappy block runs past the end of the data")
        block = _snappy_raw(mv[pos : pos + n])
        total += len(block)
        _check_size(total)
        out.append(block)
        pos += n
    return b"".join(out)


def _gzip_decompress(data) -> bytes:
    # Several concatenated gzip members are one valid stream (RFC 1952). Output is capped
    # as it is produced: a small input can inflate about a thousandfold.
    out, total = [], 0
    rest = bytes(data)
    while rest:
        d = zlib.decompressobj(47)
        chunk = d.decompress(rest, MAX_DECOMPRESSED_BYTES + 1 - total)
        total += len(chunk)
        if d.unconsumed_tail:
            _check_size(MAX_DECOMPRESSED_BYTES + 1)
        _check_size(total)
        out.append(chunk)
        if not d.eof:
            raise ValueError("gzip stream is truncated")
        rest = d.unused_data
    return b"".join(out)


# LZ4 encodes a long match length one byte per 255, so its output is bounded by about 255
# times its input (LZ4 block format specification).
_LZ4_MAX_RATIO = 256


def _lz4_decompress(data) -> bytes:
    size = lz4.frame.get_frame_info(data).get("content_size") or 0
    _check_size(size)  # the library allocates a declared content size up front
    if len(data) * _LZ4_MAX_RATIO <= MAX_DECOMPRESSED_BYTES:
        return lz4.frame.decompress(data)  # can't exceed the cap: the fast one-shot call
    d = lz4.frame.LZ4FrameDecompressor()
    out = d.decompress(data, max_length=MAX_DECOMPRESSED_BYTES + 1)
    _check_size(len(out))
    if not d.eof:
        raise ValueError("lz4 frame is truncated")
    return out


def _zstd_decompress(data) -> bytes:
    d = _zstd_decompressor()
    size = zstandard.frame_content_size(data)
    if size >= 0:
        _check_size(size)  # a frame may claim any size; the one-shot call allocates it
        # One-shot when the first frame is all there is (about 1 us a batch cheaper);
        # further frames are legal and the Java client and librdkafka read them.
        try:
            return d.decompress(data, allow_extra_data=False)
        except zstandard.ZstdError as e:
            if "unused data" not in str(e):
                raise
    # No content size, or several frames: stream across all of them, capping the output
    # (zstd's RLE blocks let a few bytes stand for a lot).
    out, total = [], 0
    with d.stream_reader(data, read_across_frames=True) as reader:
        while True:
            chunk = reader.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
            _check_size(total)
            out.append(chunk)
    return b"".join(out)


def decompress(codec: int, data, position: int = -1) -> bytes:
    """Decompress a batch's records section; CorruptRecordError when the data is bad."""
    try:
        if codec == LZ4:
            return _lz4_decompress(data)
        if codec == ZSTD:
            return _zstd_decompress(data)
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == GZIP:
            return _gzip_decompress(data)
    except (CorruptRecordError, MemoryError):
        raise  # running out of memory is not corruption
    except Exception as e:  # each library has its own error types
        raise CorruptRecordError(f"cannot decompress {CODEC_NAMES[codec]} records: {e}", position) from None
    if codec == NONE:
        return bytes(data)
    raise CorruptRecordError(f"unknown compression codec id {codec}", position)
