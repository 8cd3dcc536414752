"""Interoperability with independent implementations of record batch v2: kafka-python and
aiokafka (its pure-Python and Cython readers/writers) read what we build, we read what they
build, and we read framings other clients write (raw snappy as librdkafka, zstd without a
content size as the Java client's streaming writer, multi-member gzip, linked-block lz4)."""
import gzip
import zlib

import cramjam
import lz4.frame
import os

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacore.record import RecordBatchBuilder, decode_to_arrow, iter_batches

from _kcutil import CODEC_IDS, CODECS, assemble_batch, encode_records, examples, random_bytes

import kafka.codec
from kafka.record.default_records import DefaultRecordBatch as KPBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KPBuilder
from kafka.record.memory_records import MemoryRecords as KPMemoryRecords
from kafka.record.memory_records import MemoryRecordsBuilder as KPMemoryRecordsBuilder

import aiokafka.codec
from aiokafka.record import _crecords
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy, _DefaultRecordBatchPy
from aiokafka.record.memory_records import _MemoryRecordsPy


def _kp_has(codec):
    return {"none": True, "gzip": kafka.codec.has_gzip(), "snappy": kafka.codec.has_snappy(),
            "lz4": kafka.codec.has_lz4(), "zstd": kafka.codec.has_zstd()}[codec]


def _aio_has(codec):
    return {"none": True, "gzip": aiokafka.codec.has_gzip(), "snappy": aiokafka.codec.has_snappy(),
            "lz4": aiokafka.codec.has_lz4(), "zstd": aiokafka.codec.has_zstd()}[codec]


# (name, batch reader class, memory-records class, codec support)
READERS = [
    ("kafka-python", KPBatch, KPMemoryRecords, _kp_has),
    ("aiokafka-py", _DefaultRecordBatchPy, _MemoryRecordsPy, _aio_has),
    ("aiokafka-cython", _crecords.DefaultRecordBatch, _crecords.MemoryRecords, _aio_has),
]
# (name, builder class, codec support)
WRITERS = [
    ("kafka-python", KPBuilder, _kp_has),
    ("aiokafka-py", _DefaultRecordBatchBuilderPy, _aio_has),
    ("aiokafka-cython", _crecords.DefaultRecordBatchBuilder, _aio_has),
]

READER_CASES = [pytest.param(r, c, id=f"{r[0]}-{c}") for r in READERS for c in CODECS]
WRITER_CASES = [pytest.param(w, c, id=f"{w[0]}-{c}") for w in WRITERS for c in CODECS]

BASE_TS = 1_700_000_000_000


def sample_records(n=40, seed=0):
    """Compressible records with null keys and values, empty values, headers (incl. null
    header values and non-ASCII header keys)."""
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else b"key-%d" % (i % 7)
        if i % 9 == 4:
            value = None
        elif i % 11 == 3:
            value = b""
        else:
            value = (b"value %d " % i) * (1 + i % 13) + random_bytes(i % 4, seed + i)
        headers = []
        if i % 3 == 1:
            headers = [("trace-id", b"%08x" % i), ("empty", b""), ("null", None)]
        elif i % 3 == 2:
            headers = [("clé-ü-日本", b"\x00\xff" * (i % 4))]
        out.append((value, key, BASE_TS + (i * 37) % 500 - 100, headers))
    return out


def _records_of(reader_batch):
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in reader_batch]


def _expected(records, base_offset=0, first_delta=0):
    return [(base_offset + first_delta + i, ts, k, v, [(hk, hv) for hk, hv in h])
            for i, (v, k, ts, h) in enumerate(records)]


def _build_ours(records, codec, **params):
    b = RecordBatchBuilder(compression=codec, **params)
    for v, k, ts, h in records:
        b.append(v, key=k, timestamp_ms=ts, headers=h)
    return b.build()


def _skip_unless(supported, codec, who):
    if not supported(codec):
        # The test extra installs every codec; in CI a missing one is a broken setup.
        if os.environ.get("CI"):
            pytest.fail(f"{who} has no {codec} codec installed (the test extra should provide it)")
        pytest.skip(f"{who} has no {codec} codec installed")


# ---------------------------------------------------------------------------------------
# They read ours


@pytest.mark.parametrize("reader,codec", READER_CASES)
def test_they_read_our_batch(reader, codec):
    name, batch_cls, _, supported = reader
    _skip_unless(supported, codec, name)
    records = sample_records()
    data = _build_ours(records, codec, base_offset=1000, producer_id=42, producer_epoch=3, base_sequence=17,
                       transactional=True, partition_leader_epoch=9)
    fresh = batch_cls(data)
    assert fresh.validate_crc()
    batch = batch_cls(data)
    assert batch.base_offset == 1000
    assert batch.magic == 2
    assert batch.compression_type == CODEC_IDS[codec]
    assert batch.is_transactional
    assert not batch.is_control_batch
    assert batch.producer_id == 42 and batch.producer_epoch == 3 and batch.base_sequence == 17
    assert batch.last_offset_delta == len(records) - 1
    assert batch.max_timestamp == max(r[2] for r in records)
    assert _records_of(batch) == _expected(records, base_offset=1000)


@pytest.mark.parametrize("reader,codec", READER_CASES)
def test_they_read_our_log_append_time_batch(reader, codec):
    name, batch_cls, _, supported = reader
    _skip_unless(supported, codec, name)
    records = sample_records(10, seed=3)
    data = _build_ours(records, codec, log_append_time=True)
    assert batch_cls(data).validate_crc()
    batch = batch_cls(data)
    assert batch.timestamp_type == 1
    max_ts = max(r[2] for r in records)
    got = list(batch)
    assert [r.timestamp for r in got] == [max_ts] * len(records)
    assert [r.value for r in got] == [r[0] for r in records]


@pytest.mark.parametrize("reader", READERS, ids=[r[0] for r in READERS])
def test_they_read_our_concatenated_batches(reader):
    name, _, memory_records_cls, supported = reader
    codecs = [c for c in CODECS if supported(c)]
    parts, expected = [], []
    offset = 0
    for i, codec in enumerate(codecs * 2):
        records = sample_records(5 + i, seed=i)
        parts.append(_build_ours(records, codec, base_offset=offset))
        expected.append((codec, _expected(records, base_offset=offset)))
        offset += len(records) + 3  # gaps between batches, as after compaction
    buf = b"".join(parts)
    mr = memory_records_cls(buf + parts[0][:40])  # plus a truncated tail they must ignore
    got = []
    while mr.has_next():
        batch = mr.next_batch()
        if batch is None:
            break
        got.append((batch.compression_type, _records_of(batch)))
    assert got == [(CODEC_IDS[c], recs) for c, recs in expected]


@settings(max_examples=examples(60, 25))
@given(
    records=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=200)),
            st.one_of(st.none(), st.binary(max_size=30)),
            st.integers(BASE_TS - 10**6, BASE_TS + 10**6),
            st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))), max_size=3),
        ),
        min_size=1, max_size=20,
    ),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**40),
)
def test_they_read_our_random_batches(records, codec, base_offset):
    data = _build_ours(records, codec, base_offset=base_offset)
    expected = _expected(records, base_offset=base_offset)
    for name, batch_cls, _, supported in READERS:
        if not supported(codec):
            continue
        assert batch_cls(data).validate_crc(), name
        assert _records_of(batch_cls(data)) == expected, name


# ---------------------------------------------------------------------------------------
# We read theirs


def _their_batch(builder_cls, codec, records, first_offset=0, transactional=False, producer=(-1, -1, -1)):
    b = builder_cls(magic=2, compression_type=CODEC_IDS[codec], is_transactional=int(transactional),
                    producer_id=producer[0], producer_epoch=producer[1], base_sequence=producer[2],
                    batch_size=1 << 24)
    for i, (v, k, ts, h) in enumerate(records):
        assert b.append(first_offset + i, timestamp=ts, key=k, value=v, headers=h) is not None
    return bytes(b.build())


def _check_ours_reads(data, records, codec, first_delta=0):
    (batch,) = list(iter_batches(data))
    batch.validate()
    # Their builders fall back to no compression when it does not pay: our sample
    # records compress well, so the codec must really be the one asked for.
    assert batch.compression == codec
    assert batch.count == len(records)
    assert [(r.offset, r.timestamp_ms, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch] == \
        _expected(records, first_delta=first_delta)
    table = decode_to_arrow(data, topic="topic", partition=1)
    assert table.num_rows == len(records)
    assert table.column("key").to_pylist() == [r[1] for r in records]
    assert table.column("value").to_pylist() == [r[0] for r in records]
    assert table.column("offset").to_pylist() == [first_delta + i for i in range(len(records))]
    assert table.column("timestamp").cast("int64").to_pylist() == [r[2] for r in records]
    assert table.column("timestampType").to_pylist() == [0] * len(records)
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r[3]] or None for r in records]
    return batch


@pytest.mark.parametrize("writer,codec", WRITER_CASES)
def test_we_read_their_batch(writer, codec):
    name, builder_cls, supported = writer
    _skip_unless(supported, codec, name)
    records = sample_records(60, seed=11)
    data = _their_batch(builder_cls, codec, records)
    batch = _check_ours_reads(data, records, codec)
    assert batch.producer_id == -1 and not batch.is_transactional and not batch.is_control


@pytest.mark.parametrize("writer,codec", WRITER_CASES)
def test_we_read_their_transactional_batch(writer, codec):
    name, builder_cls, supported = writer
    _skip_unless(supported, codec, name)
    records = sample_records(30, seed=5)
    data = _their_batch(builder_cls, codec, records, transactional=True, producer=(123456789012, 7, 2**31 - 5))
    batch = _check_ours_reads(data, records, codec)
    assert batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123456789012, 7, 2**31 - 5)


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python_memory_records(codec):
    _skip_unless(_kp_has, codec, "kafka-python")
    # MemoryRecordsBuilder writes absolute offsets as offset deltas over base offset 0.
    parts, expected = [], []
    for start in (0, 100, 250):
        records = sample_records(20, seed=start)
        mrb = KPMemoryRecordsBuilder(magic=2, compression_type=CODEC_IDS[codec], batch_size=1 << 24, offset=start)
        for v, k, ts, h in records:
            assert mrb.append(ts, k, v, h) is not None
        mrb.close()
        parts.append(bytes(mrb.buffer()))
        expected += _expected(records, first_delta=start)
    buf = b"".join(parts)
    batches = list(iter_batches(buf))
    assert [b.base_offset for b in batches] == [0, 0, 0]
    assert [b.last_offset for b in batches] == [19, 119, 269]
    got = []
    for b in batches:
        b.validate()
        assert b.compression == codec
        got += [(r.offset, r.timestamp_ms, r.key, r.value, [tuple(h) for h in r.headers]) for r in b]
    assert got == expected
    table = decode_to_arrow(buf)
    assert table.column("offset").to_pylist() == [e[0] for e in expected]
    assert table.column("value").to_pylist() == [e[3] for e in expected]


@settings(max_examples=examples(60, 20))
@given(
    records=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=100).map(lambda b: b * 4)),
            st.one_of(st.none(), st.binary(max_size=30)),
            st.integers(BASE_TS - 10**6, BASE_TS + 10**6),
            st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))), max_size=3),
        ),
        min_size=1, max_size=20,
    ),
    writer=st.sampled_from(WRITERS),
    codec=st.sampled_from(CODECS),
)
def test_we_read_their_random_batches(records, writer, codec):
    name, builder_cls, supported = writer
    if not supported(codec):
        codec = "none"
    data = _their_batch(builder_cls, codec, records)
    (batch,) = list(iter_batches(data))
    batch.validate()
    assert batch.compression in (codec, "none")  # they may decide not to compress
    assert [(r.offset, r.timestamp_ms, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch] == \
        _expected(records)
    table = decode_to_arrow(data)
    assert table.column("value").to_pylist() == [r[0] for r in records]
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r[3]] or None for r in records]


# ---------------------------------------------------------------------------------------
# Framings other clients write


def _framed_batch(records, codec, compressed_section):
    return assemble_batch(compressed_section, len(records), attributes=CODEC_IDS[codec], base_offset=77,
                          base_ts=records[0][2], max_ts=max(r[2] for r in records))


def _check_framed(data, records):
    (batch,) = list(iter_batches(data))
    batch.validate()
    assert [(r.offset, r.timestamp_ms, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch] == \
        _expected(records, base_offset=77)
    table = decode_to_arrow(data)
    assert table.column("value").to_pylist() == [r[0] for r in records]
    assert table.column("offset").to_pylist() == [77 + i for i in range(len(records))]


@pytest.mark.parametrize("n", [1, 40, 400])
def test_raw_snappy_as_librdkafka_writes(n):
    records = sample_records(n, seed=n)
    section = encode_records(records)
    raw = bytes(cramjam.snappy.compress_raw(section))
    assert not raw.startswith(b"\x82SNAPPY\x00")
    data = _framed_batch(records, "snappy", raw)
    _check_framed(data, records)


def test_raw_snappy_batch_read_by_aiokafka_too():
    # Cross-check of the hand-built batch itself: an independent reader agrees with it.
    records = sample_records(30, seed=4)
    data = _framed_batch(records, "snappy", bytes(cramjam.snappy.compress_raw(encode_records(records))))
    assert _DefaultRecordBatchPy(data).validate_crc()
    assert _records_of(_DefaultRecordBatchPy(data)) == _expected(records, base_offset=77)


def test_xerial_snappy_many_blocks():
    # Over 32 KiB of records: several xerial blocks, written by aiokafka's encoder.
    records = [(random_bytes(3000, i, compressible=True), b"k", BASE_TS + i, []) for i in range(40)]
    section = encode_records(records)
    assert len(section) > 3 * 32 * 1024
    xerial = aiokafka.codec.snappy_encode(section, xerial_compatible=True)
    assert xerial.startswith(b"\x82SNAPPY\x00")
    _check_framed(_framed_batch(records, "snappy", xerial), records)


def test_our_xerial_snappy_many_blocks_read_by_aiokafka():
    records = [(random_bytes(3000, i, compressible=True), None, BASE_TS, []) for i in range(40)]
    data = _build_ours(records, "snappy")
    assert data[61:69] == b"\x82SNAPPY\x00"  # xerial framing, as the Java client writes
    assert _records_of(_DefaultRecordBatchPy(data)) == _expected(records)
    assert _records_of(_crecords.DefaultRecordBatch(data)) == _expected(records)


def test_zstd_without_content_size():
    # The Java client's streaming zstd writer leaves the content size out of the frame.
    records = sample_records(50, seed=8)
    section = encode_records(records)
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(section)
    assert zstandard.frame_content_size(frame) == -1
    _check_framed(_framed_batch(records, "zstd", frame), records)


def test_zstd_streamed_in_several_frames():
    records = sample_records(50, seed=9)
    section = encode_records(records)
    half = len(section) // 2
    c = zstandard.ZstdCompressor(write_content_size=False)
    _check_framed(_framed_batch(records, "zstd", c.compress(section[:half]) + c.compress(section[half:])), records)


def test_gzip_with_header_fields_and_several_members():
    records = sample_records(50, seed=10)
    section = encode_records(records)
    half = len(section) // 3
    member1 = gzip.compress(section[:half], mtime=123456)  # mtime set, as GZIPOutputStream-like writers do
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    member2 = z.compress(section[half:]) + z.flush()
    _check_framed(_framed_batch(records, "gzip", member1 + member2), records)


@pytest.mark.parametrize("kw", [
    dict(block_linked=True, content_checksum=True, store_size=True),
    dict(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_checksum=True),
    dict(compression_level=lz4.frame.COMPRESSIONLEVEL_MINHC),
], ids=["linked-checksum-size", "4mb-blockchecksum", "hc"])
def test_lz4_frame_variants(kw):
    records = sample_records(50, seed=12) + [(random_bytes(150_000, 1, compressible=True), None, BASE_TS, [])]
    frame = lz4.frame.compress(encode_records(records), **kw)
    _check_framed(_framed_batch(records, "lz4", frame), records)
