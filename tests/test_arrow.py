"""decode_to_arrow: the Spark Kafka source schema and its columns."""
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacore.record import SPARK_KAFKA_SCHEMA, CorruptRecordError, RecordBatchBuilder, arrow_py, decode_to_arrow
from kafkacore.record import codecs as kc_codecs
from kafkacore.record import iter_batches

from _kcutil import (
    CODECS, batch_specs, build_batch, by_mode, corrupt_payload_txn_batch, examples, expected_records,
    interleaved_txns, native_module, random_bytes, requires_native, txn_batch, txn_logs, txn_marker,
)

native = native_module("records")
needs_native = requires_native("records")

EXPECTED_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("ms")),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))),
])


def _batch(values, codec="none", base_offset=0, ts=1_700_000_000_000, headers=None, keys=None):
    b = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    for i, v in enumerate(values):
        b.append(v, key=None if keys is None else keys[i], timestamp_ms=ts + i,
                 headers=None if headers is None else headers[i])
    return b.build()


def test_schema_constant():
    assert SPARK_KAFKA_SCHEMA.equals(EXPECTED_SCHEMA)
    assert SPARK_KAFKA_SCHEMA.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                        "timestampType", "headers"]


@pytest.mark.parametrize("codec", CODECS)
def test_schema_of_result(codec):
    table = decode_to_arrow(_batch([b"a", None], codec), topic="t", partition=0)
    assert isinstance(table, pa.RecordBatch)
    assert table.schema.equals(SPARK_KAFKA_SCHEMA)
    table.validate(full=True)


@pytest.mark.parametrize("buf", [b"", bytearray(), memoryview(b""), b"\x00" * 11], ids=["bytes", "bytearray",
                                                                                          "memoryview", "short"])
def test_empty_input(buf):
    table = decode_to_arrow(buf)
    assert table.num_rows == 0
    assert table.schema.equals(SPARK_KAFKA_SCHEMA)
    table.validate(full=True)
    named = decode_to_arrow(buf, topic="t", partition=4)
    assert named.num_rows == 0 and named.schema.equals(SPARK_KAFKA_SCHEMA)


def test_topic_and_partition_columns():
    data = _batch([b"a", b"b", b"c"])
    t = decode_to_arrow(data, topic="orders", partition=7)
    assert t.column("topic").to_pylist() == ["orders"] * 3
    assert t.column("partition").to_pylist() == [7] * 3
    assert t.column("topic").type == pa.string() and t.column("partition").type == pa.int32()
    t = decode_to_arrow(data)
    assert t.column("topic").to_pylist() == [None] * 3
    assert t.column("partition").to_pylist() == [None] * 3
    assert t.column("topic").null_count == 3 and t.column("partition").null_count == 3
    t = decode_to_arrow(data, topic="日本語-topic", partition=2**31 - 1)
    assert t.column("topic").to_pylist() == ["日本語-topic"] * 3
    assert t.column("partition").to_pylist() == [2**31 - 1] * 3


def test_topic_and_partition_columns_from_the_cache_and_past_it():
    """Columns of up to _CACHED_ROWS rows are slices of one cached column per topic and
    partition (LRU): the same values as freshly repeated ones, for many partitions and topics,
    a long topic name (never cached) and a batch larger than the cache."""
    from kafkacore.record import arrow_schema as S
    long_topic = "x" * 249
    for rows in (0, 1, 5, 27_000, S._CACHED_ROWS, S._CACHED_ROWS + 1):
        for topic in ("t", "日本", long_topic):
            for partition in (0, 3, 2**31 - 1, -1):
                t, p = S.constant_columns(topic, partition, rows)
                assert len(t) == len(p) == rows
                assert t.equals(S._repeat_topic(topic, rows)) and p.equals(S._repeat_partition(partition, rows))
    for partition in range(100):  # past the LRU's size: evicted columns are made again
        t, p = S.constant_columns(f"topic-{partition % 20}", partition, 3)
        assert t.to_pylist() == [f"topic-{partition % 20}"] * 3 and p.to_pylist() == [partition] * 3
    before = S._repeated_topic.cache_info()
    assert S.constant_columns(long_topic, 1, 10)[0].to_pylist() == [long_topic] * 10
    assert S._repeated_topic.cache_info() == before  # a column this large is never kept
    assert before.currsize <= 16 and S._repeated_partition.cache_info().currsize <= 32


@pytest.mark.parametrize("kw", [dict(topic=5), dict(topic=b"bytes"), dict(partition="1"), dict(partition=1.0),
                                dict(partition=True)])
def test_bad_topic_or_partition(kw):
    with pytest.raises(TypeError):
        decode_to_arrow(_batch([b"a"]), **kw)


@pytest.mark.parametrize("partition", [2**31, -(2**31) - 1])
def test_partition_outside_int32_is_refused(partition):
    with pytest.raises(ValueError, match=f"partition {partition} does not fit an int32"):
        decode_to_arrow(_batch([b"a"]), topic="t", partition=partition)
    assert decode_to_arrow(_batch([b"a"]), topic="", partition=-(2**31)).column("partition").to_pylist() == [-(2**31)]


def test_values_keys_nulls_and_empties():
    data = _batch([b"v0", None, b"", b"v3"], keys=[None, b"k1", b"", b"k3"])
    t = decode_to_arrow(data)
    assert t.column("value").to_pylist() == [b"v0", None, b"", b"v3"]
    assert t.column("key").to_pylist() == [None, b"k1", b"", b"k3"]
    assert t.column("value").null_count == 1 and t.column("key").null_count == 1
    t.validate(full=True)


def test_headers_column():
    headers = [None, [], [("a", b"1")], [("a", None), ("ü", b""), ("", b"\x00")]]
    data = _batch([b"0", b"1", b"2", b"3"], headers=headers)
    t = decode_to_arrow(data)
    col = t.column("headers")
    # A record without headers (none given, or an empty list) has a null headers entry.
    assert col.to_pylist() == [
        None, None, [{"key": "a", "value": b"1"}],
        [{"key": "a", "value": None}, {"key": "ü", "value": b""}, {"key": "", "value": b"\x00"}],
    ]
    assert col.null_count == 2
    assert col.type == SPARK_KAFKA_SCHEMA.field("headers").type
    t.validate(full=True)


def test_offsets_timestamps_and_types():
    data = _batch([b"a", b"b"], base_offset=10, ts=-5) + _batch([b"c"], base_offset=20, ts=2**62)
    t = decode_to_arrow(data)
    assert t.column("offset").to_pylist() == [10, 11, 20]
    assert t.column("timestamp").cast(pa.int64()).to_pylist() == [-5, -4, 2**62]
    assert t.column("timestampType").to_pylist() == [0, 0, 0]
    assert t.column("timestamp").type == pa.timestamp("ms")


@pytest.mark.parametrize("form", [bytes, bytearray, memoryview])
def test_buffer_types(form):
    data = _batch([b"a", b"b"]) + _batch([b"c"], codec="zstd", base_offset=2)
    t = decode_to_arrow(form(data))
    assert t.column("value").to_pylist() == [b"a", b"b", b"c"]
    assert [b.base_offset for b in iter_batches(form(data))] == [0, 2]


def test_memoryview_slice_of_larger_buffer():
    data = _batch([b"x", b"y"], base_offset=3)
    padded = b"JUNK" + data + b"\xff" * 3  # trailing partial bytes: a truncated tail
    t = decode_to_arrow(memoryview(padded)[4:])
    assert t.column("offset").to_pylist() == [3, 4]


def test_many_batches_mixed_codecs():
    parts, values, offsets = [], [], []
    offset = 0
    for i in range(by_mode(200, 60)):
        codec = CODECS[i % len(CODECS)]
        vals = [random_bytes(i % 50, i * 10 + j, compressible=j % 2 == 0) for j in range(1 + i % 4)]
        if i % 7 == 3:
            vals[0] = None
        parts.append(_batch(vals, codec, base_offset=offset, headers=[[("i", b"%d" % i)]] * len(vals)))
        values += vals
        offsets += list(range(offset, offset + len(vals)))
        offset += len(vals) + (i % 3)
    buf = b"".join(parts)
    t = decode_to_arrow(buf, topic="many", partition=1)
    assert t.num_rows == len(values)
    assert t.column("value").to_pylist() == values
    assert t.column("offset").to_pylist() == offsets
    assert t.column("topic").to_pylist() == ["many"] * len(values)
    t.validate(full=True)
    # Same as decoding each batch alone and concatenating.
    pieces = [decode_to_arrow(p, topic="many", partition=1) for p in parts]
    assert pa.Table.from_batches(pieces).combine_chunks().equals(pa.Table.from_batches([t]).combine_chunks())


def test_large_values_column():
    big = random_bytes(by_mode(3 << 20, 1 << 20), 5)
    data = _batch([big, b"", big[:1000]], codec="lz4")
    t = decode_to_arrow(data)
    assert t.column("value").to_pylist() == [big, b"", big[:1000]]
    t.validate(full=True)


def test_result_outlives_input_buffer():
    buf = bytearray(_batch([b"value-%d" % i for i in range(100)]))
    t = decode_to_arrow(buf)
    buf[:] = b"\x00" * len(buf)  # the table must own its data (or keep the input alive unchanged)
    del buf
    assert t.column("value").to_pylist() == [b"value-%d" % i for i in range(100)]


@settings(max_examples=examples(150, 40))
@given(specs=st.lists(batch_specs(max_records=6), min_size=0, max_size=4),
       topic=st.one_of(st.none(), st.text(max_size=8)), partition=st.one_of(st.none(), st.integers(0, 2**31 - 1)))
def test_columns_match_records(specs, topic, partition):
    buf = b"".join(build_batch(RecordBatchBuilder, s) for s in specs)
    t = decode_to_arrow(buf, topic=topic, partition=partition)
    t.validate(full=True)
    exp = [(r, s[0]["log_append_time"]) for s in specs if not s[0]["control"] for r in expected_records(s)]
    assert t.num_rows == len(exp)
    assert t.column("offset").to_pylist() == [r[0] for r, _ in exp]
    assert t.column("timestamp").cast(pa.int64()).to_pylist() == [r[1] for r, _ in exp]
    assert t.column("timestampType").to_pylist() == [1 if lat else 0 for _, lat in exp]
    assert t.column("key").to_pylist() == [r[2] for r, _ in exp]
    assert t.column("value").to_pylist() == [r[3] for r, _ in exp]
    assert t.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r[4]] or None for r, _ in exp]
    assert t.column("topic").to_pylist() == [topic] * len(exp)
    assert t.column("partition").to_pylist() == [partition] * len(exp)


def _patterned_batch(n, seed, codec="none"):
    """n records whose key/value/header nulls follow a seed-dependent pattern."""
    import random

    rnd = random.Random(seed)
    keys = [None if rnd.random() < 0.3 else b"k%d" % rnd.randrange(1000) for _ in range(n)]
    values = [None if rnd.random() < 0.2 else b"v" * rnd.randrange(0, 8) for _ in range(n)]
    b = RecordBatchBuilder(compression=codec, base_offset=seed)
    stamps = [seed * 1000 + i for i in range(n)]
    b.extend(values, keys, stamps)
    return b.build(), keys, values, stamps


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_repeated_large_decodes_do_not_share_state(codec):
    # Big enough that column buffers exceed 64 KiB (so an allocator cache, if any, gets
    # reused between calls); every decode must see only its own nulls and values.
    n = by_mode(120_000, 6_000)
    kept = []
    for seed in range(4):
        data, keys, values, stamps = _patterned_batch(n - seed * 1000, seed, codec)
        t = decode_to_arrow(data)
        t.validate(full=True)
        assert t.column("key").to_pylist() == keys
        assert t.column("value").to_pylist() == values
        assert t.column("key").null_count == keys.count(None)
        assert t.column("value").null_count == values.count(None)
        assert t.column("headers").null_count == len(keys)
        assert t.column("timestamp").cast(pa.int64()).to_pylist() == stamps
        assert t.column("offset").to_pylist() == list(range(seed, seed + len(keys)))
        if seed % 2:
            kept.append((t, keys))  # keep some results alive while later decodes run
    for t, keys in kept:
        assert t.column("key").to_pylist() == keys


def test_batches_outlive_the_temporary_buffer():
    import gc

    parts = [_batch([b"value-%d" % i] * 3, codec, base_offset=3 * i) for i, codec in enumerate(CODECS)]
    batches = list(iter_batches(bytearray(b"".join(parts))))  # the only reference is inside the views
    gc.collect()
    _ = [bytes(1000) for _ in range(1000)]  # churn the allocator
    for i, b in enumerate(batches):
        b.validate()
        assert [r.value for r in b] == [b"value-%d" % i] * 3
        assert b.to_bytes() == parts[i]


def test_concurrent_decoding_and_building():
    from concurrent.futures import ThreadPoolExecutor

    parts = [_batch([random_bytes(200, i * 7 + j, compressible=True) for j in range(20)], CODECS[i % 5],
                    base_offset=20 * i) for i in range(by_mode(40, 10))]
    buf = b"".join(parts)
    expected = decode_to_arrow(buf, topic="t", partition=0)

    def decode(_):
        return decode_to_arrow(buf, topic="t", partition=0)

    def build(i):
        return _batch([random_bytes(300, i, compressible=True)] * 5, CODECS[i % 5], base_offset=i)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(decode, range(16)))
        built = list(pool.map(build, range(20)))
    assert all(r.equals(expected) for r in results)
    assert built == [build(i) for i in range(20)]


# ---------------------------------------------------------------------------------------
# read_committed: decode_to_arrow(aborted=...)

TO_ARROW = {"selected": decode_to_arrow, "twin": arrow_py.decode_to_arrow}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("impl", ["selected", "twin"])
def test_read_committed_columns(codec, impl):
    buf, aborted, kept = interleaved_txns(codec)
    to_arrow = TO_ARROW[impl]
    t = to_arrow(buf, topic="t", partition=1, aborted=aborted)
    t.validate(full=True)
    assert t.schema.equals(SPARK_KAFKA_SCHEMA)
    assert t.column("offset").to_pylist() == kept
    assert t.column("value").to_pylist() == [b"%d" % o for o in kept]
    # None (the default) reads uncommitted: every data record; markers are never rows
    everything = [o for o in range(19) if o not in (6, 11, 12, 17)]
    for ab in (None, []):
        assert to_arrow(buf, aborted=ab).column("offset").to_pylist() == everything
    assert to_arrow(buf, aborted=None).equals(to_arrow(buf))


@pytest.mark.parametrize("impl", ["selected", "twin"])
def test_read_committed_skips_compressed_aborted_batches_unread(impl, monkeypatch):
    to_arrow = TO_ARROW[impl]
    buf = (txn_batch(1, 0, 2, "snappy") + corrupt_payload_txn_batch(2, 2) + txn_batch(1, 4, 1, "zstd")
           + txn_marker(2, 5, False) + txn_marker(1, 6, True))
    with pytest.raises(CorruptRecordError):
        to_arrow(buf)  # read uncommitted, the garbage is decompressed and fails
    calls = []
    real = kc_codecs.decompress
    monkeypatch.setattr(kc_codecs, "decompress", lambda codec, data, position=-1: (
        calls.append(codec), real(codec, data, position))[1])
    t = to_arrow(buf, aborted=[(2, 2)])
    assert t.column("offset").to_pylist() == [0, 1, 4]
    assert calls == [2, 4]  # snappy and zstd: the two kept batches only
    # the dropped batch's CRC is still checked
    bad = bytearray(buf)
    bad[len(txn_batch(1, 0, 2, "snappy")) + 70] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        to_arrow(bytes(bad), aborted=[(2, 2)])
    assert to_arrow(bytes(bad), aborted=[(2, 2)], check_crcs=False).num_rows == 3


@pytest.mark.parametrize("impl", ["selected", "twin"])
def test_read_committed_bad_marker_and_bad_list(impl):
    to_arrow = TO_ARROW[impl]
    b = RecordBatchBuilder(control=True, transactional=True, base_offset=2, producer_id=1)
    b.append(b"", key=b"\x00", timestamp_ms=1)
    head = txn_batch(1, 0, 2)
    buf = head + b.build()
    with pytest.raises(CorruptRecordError, match="control batch: control record key is null or shorter") as e:
        to_arrow(buf, aborted=[(1, 0)])
    assert e.value.position == len(head)
    assert to_arrow(buf).num_rows == 2  # read uncommitted: not looked into
    with pytest.raises(TypeError, match="aborted"):
        to_arrow(buf, aborted=[(1, "0")])


@settings(max_examples=examples(100, 30))
@given(log=txn_logs())
def test_read_committed_rows_are_the_committed_records(log):
    buf, aborted, kept = log
    for to_arrow in TO_ARROW.values():
        t = to_arrow(buf, topic="t", partition=0, aborted=aborted)
        assert t.column("offset").to_pylist() == kept
        assert t.column("value").to_pylist() == [b"%d" % o for o in kept]


@needs_native
@settings(max_examples=examples(150))
@given(log=txn_logs(), extra=st.lists(st.tuples(st.integers(-1, 4), st.integers(0, 1 << 41)), max_size=3),
       check=st.booleans())
def test_native_read_committed_arrow_equals_twin(log, extra, check):
    buf, aborted, _kept = log
    for ab in (None, [], aborted, aborted + extra, extra):
        n = native.decode_to_arrow(buf, topic="t", partition=2, check_crcs=check, aborted=ab)
        t = arrow_py.decode_to_arrow(buf, topic="t", partition=2, check_crcs=check, aborted=ab)
        assert n.equals(t)


# ---------------------------------------------------------------------------------------
# decode_segments_to_arrow: several inputs into one batch (poll_arrow's pieces, no concatenation)
SEGMENTS = {"native": getattr(native, "decode_segments_to_arrow", None), "twin": arrow_py.decode_segments_to_arrow}


@needs_native
@settings(max_examples=examples(120))
@given(segs=st.lists(st.tuples(st.lists(batch_specs(max_records=6), max_size=3),
                               st.sampled_from([None, "a", "topic-b"]), st.sampled_from([None, 0, 7])),
                     max_size=4),
       check=st.booleans())
def test_native_segments_equal_twin_and_each_segment_decoded_alone(segs, check):
    inputs = [(b"".join(build_batch(RecordBatchBuilder, s) for s in specs), t, p, None) for specs, t, p in segs]
    n_batch, n_rows = SEGMENTS["native"](inputs, check)
    t_batch, t_rows = SEGMENTS["twin"](inputs, check)
    assert n_batch.schema == EXPECTED_SCHEMA
    assert n_batch.equals(t_batch) and n_rows == t_rows
    alone = [decode_to_arrow(buf, t, p, check) for buf, t, p, _ in inputs]
    assert n_rows == [b.num_rows for b in alone]
    at = 0
    for b in alone:  # each segment's rows, its own topic and partition included, in order
        assert n_batch.slice(at, b.num_rows).equals(b)
        at += b.num_rows
    assert at == n_batch.num_rows


@needs_native
@settings(max_examples=examples(60, 20))
@given(log=txn_logs(), check=st.booleans())
def test_segments_read_committed_per_segment(log, check):
    """Each segment's aborted list applies to that segment only."""
    buf, aborted, kept = log
    for impl in SEGMENTS.values():
        batch, rows = impl([(buf, "t", 0, aborted), (buf, "t", 1, None), (buf, "t", 2, aborted)], check)
        n_all = decode_to_arrow(buf, "t", 1, check).num_rows
        assert rows == [len(kept), n_all, len(kept)]
        assert batch.column("offset").to_pylist()[:len(kept)] == kept
        assert batch.column("partition").to_pylist() == [0] * len(kept) + [1] * n_all + [2] * len(kept)


@needs_native
def test_segments_report_a_bad_segment_as_decode_to_arrow_does():
    good = _batch([b"a", b"b"])
    bad = bytearray(_batch([b"c", b"d"], base_offset=2))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    for impl in SEGMENTS.values():
        with pytest.raises(CorruptRecordError) as seg_err:
            impl([(good, "t", 0, None), (bytes(bad), "t", 0, None)])
        with pytest.raises(CorruptRecordError) as alone_err:
            decode_to_arrow(bytes(bad), "t", 0)
        assert str(seg_err.value) == str(alone_err.value)
        empty, rows = impl([])
        assert rows == [] and empty.num_rows == 0
