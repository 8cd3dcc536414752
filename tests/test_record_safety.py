"""Regression tests for misuse and concurrency: objects made outside their factories,
builders shared between threads, user code that mutates arguments mid-call, views that
outlive a call, and format corners found in review (multi-frame zstd, lz4 frame flags)."""
import gc
import struct
import threading

import pytest
import zstandard

from kafkacore.checksum import crc32c
from kafkacore.record import (CorruptRecordError, RecordBatch, RecordBatchBuilder, batch_py,
                              decode_to_arrow, iter_batches)
from kafkacore.record import arrow_py

from _kcutil import NATIVE


@pytest.mark.skipif(not NATIVE, reason="the pure-Python twin makes no thread-safety promise")
def test_builder_shared_between_threads_never_crashes():
    # The producer pattern: application threads append while a sender thread builds. An
    # append that would move memory a compressor is reading gets BufferError instead.
    for codec in ("none", "lz4"):
        b = RecordBatchBuilder(compression=codec)
        b.append(b"seed", timestamp_ms=1)
        unexpected = []

        def appender():
            for _ in range(150):
                try:
                    b.append(b"x" * (256 * 1024), timestamp_ms=1)
                except BufferError:
                    pass
                except Exception as e:  # pragma: no cover - the failure being tested for
                    unexpected.append(e)

        t = threading.Thread(target=appender)
        t.start()
        built = [b.build() for _ in range(20)]
        t.join()
        assert unexpected == []
        for data in built:
            (batch,) = list(iter_batches(data))
            batch.validate()
            assert all(r.value in (b"seed", b"x" * (256 * 1024)) for r in batch)


def test_batch_objects_made_directly_refuse_to_read():
    with pytest.raises(TypeError):
        RecordBatch().validate(records=False)
    with pytest.raises(TypeError):
        list(RecordBatch())
    if NATIVE:
        with pytest.raises(TypeError):
            next(type(iter_batches(b""))())


def test_builder_made_without_init_is_a_default_builder():
    b = RecordBatchBuilder.__new__(RecordBatchBuilder)
    if not NATIVE:
        pytest.skip("the twin is a plain class: __new__ without __init__ has no state by design")
    b.append(b"x", timestamp_ms=5)
    (batch,) = list(iter_batches(b.build()))
    assert (batch.compression, batch.producer_id, batch.base_sequence) == ("none", -1, -1)
    assert [r.value for r in batch] == [b"x"]


def test_extend_survives_argument_mutation_by_user_code():
    values = [b"a", b"b", b"c"]

    class Clearing:
        def __index__(self):
            values.clear()
            return 5

    b = RecordBatchBuilder()
    b.extend(values, timestamps_ms=[Clearing(), 6, 7])
    (batch,) = list(iter_batches(b.build()))
    assert [(r.value, r.timestamp_ms) for r in batch] == [(b"a", 5), (b"b", 6), (b"c", 7)]


def _hand_batch(codec_id, compressed, count):
    head = struct.pack(">qiiBIhiqqqhii", 0, 49 + len(compressed), -1, 2, 0, codec_id, count - 1,
                       0, 0, -1, -1, -1, count)
    data = bytearray(head) + compressed
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def test_zstd_batch_of_several_frames_with_content_sizes():
    # Each frame records its content size; a one-shot decompress would stop after the first.
    r1, r2 = bytearray(), bytearray()
    batch_py.encode_record(r1, 0, 0, None, b"one", [])
    batch_py.encode_record(r2, 0, 1, b"k", b"two", [])
    z = zstandard.ZstdCompressor()
    data = _hand_batch(4, z.compress(bytes(r1)) + z.compress(bytes(r2)), 2)
    (batch,) = list(iter_batches(data))
    batch.validate()
    assert [r.value for r in batch] == [b"one", b"two"]
    assert decode_to_arrow(data).column("value").to_pylist() == [b"one", b"two"]
    assert arrow_py.decode_to_arrow(data).column("value").to_pylist() == [b"one", b"two"]


def test_lz4_frame_uses_independent_blocks_without_checksums():
    # Java's KafkaLZ4BlockInputStream rejects linked blocks ("Dependent block stream is
    # unsupported") although the Python peers accept them, so pin the frame header:
    # magic 04224d18, FLG 0x60 (version 01, independent blocks, no checksums, no content
    # size), BD 0x40 (64 KiB blocks). Facts from the LZ4 frame format specification.
    b = RecordBatchBuilder(compression="lz4")
    b.append(b"v" * 1000, timestamp_ms=1)
    data = b.build()
    assert data[61:67] == bytes.fromhex("04224d186040")


def test_snappy_is_written_in_xerial_framing():
    b = RecordBatchBuilder(compression="snappy")
    b.append(b"v" * 100_000, timestamp_ms=1)
    data = b.build()
    assert data[61:77] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def test_views_kept_by_an_error_never_dangle():
    # A decompressor error keeps its frame (and so views of the input) alive through the
    # traceback; those views must hold the caller's buffer, not point into freed memory.
    b = RecordBatchBuilder(compression="snappy")
    b.append(b"v" * 100, timestamp_ms=1)
    data = bytearray(b.build())
    data[61 + 16 + 6] ^= 0xFF
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordError) as info:
        decode_to_arrow(data)
    try:
        data.extend(b"x" * 1_000_000)  # allowed only if no view of the old memory survives
    except BufferError:
        pass  # a surviving view pins the buffer: safe
    del info
    gc.collect()
    data.extend(b"x")  # with the error gone nothing may hold the buffer


# Found by the fuzzer (ci/fuzz_decoders.py): a zstd frame whose header claims an enormous
# content size; the one-shot decompress tried to allocate it (MemoryError).
ZSTD_HUGE_CLAIM = bytes.fromhex(
    "00000000000000070000007cffffffff02434d03d2002c000000030000018bcfe568000000018bcf6800e50000100000000003ff41ffffffff0000000428b52ffdd7206415020084032a76616c75650402680276026e011600ff9fb787e905020101006600f59fabfef9620401000000066bffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff65790a76616c756504025078001a00f306046b32000002005709c44a5006")


def test_frame_claiming_a_huge_size_is_corrupt_not_an_allocation():
    with pytest.raises(CorruptRecordError, match="MAX_DECOMPRESSED_BYTES"):
        for batch in iter_batches(ZSTD_HUGE_CLAIM):
            list(batch)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_decompressed_size_is_capped(codec, monkeypatch):
    from kafkacore.record import codecs

    b = RecordBatchBuilder(compression=codec)
    b.append(b"z" * 50_000, timestamp_ms=1)
    b.append(bytes(range(256)) * 40, timestamp_ms=1)  # less compressible: lz4's ratio bound won't vouch
    data = b.build()
    assert [r.value for r in next(iter(iter_batches(data)))] == [b"z" * 50_000, bytes(range(256)) * 40]
    monkeypatch.setattr(codecs, "MAX_DECOMPRESSED_BYTES", 10_000)
    with pytest.raises(CorruptRecordError, match="MAX_DECOMPRESSED_BYTES"):
        list(next(iter(iter_batches(data))))
    with pytest.raises(CorruptRecordError, match="MAX_DECOMPRESSED_BYTES"):
        decode_to_arrow(data)
    with pytest.raises(CorruptRecordError, match="MAX_DECOMPRESSED_BYTES"):
        arrow_py.decode_to_arrow(data)


def test_zstd_without_content_size_is_capped_while_streaming(monkeypatch):
    from kafkacore.record import codecs

    r = bytearray()
    batch_py.encode_record(r, 0, 0, None, b"q" * 50_000, [])
    data = _hand_batch(4, zstandard.ZstdCompressor(write_content_size=False).compress(bytes(r)), 1)
    assert [x.value for x in next(iter(iter_batches(data)))] == [b"q" * 50_000]
    monkeypatch.setattr(codecs, "MAX_DECOMPRESSED_BYTES", 10_000)
    with pytest.raises(CorruptRecordError, match="MAX_DECOMPRESSED_BYTES"):
        list(next(iter(iter_batches(data))))
