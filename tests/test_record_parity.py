"""Record batches: round trips through the selected implementation, and the native module
against its pure-Python twin (same bytes built, same records and Arrow columns decoded)."""
import gc
import struct
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacore.client import records_py
from kafkacore.client.consumer import decode_records  # the selected implementation
from kafkacore.record import CorruptRecordError, RecordBatchBuilder, decode_to_arrow, iter_batches
from kafkacore.record import arrow_py, batch_py
from kafkacore.record import codecs as kc_codecs

from _kcutil import (
    BATCH_FIELDS, CODECS, INT64_MAX, INT64_MIN, assemble_batch, batch_fields, batch_specs, build_batch, by_mode,
    corrupt_payload_txn_batch, examples, expected_records, fix_crc, interleaved_txns, native_module, random_bytes,
    rec_tuple, requires_native, txn_batch, txn_logs, txn_marker, wrap64,
)

native = native_module("records")
needs_native = requires_native("records")

TWIN_BUILDER = batch_py.RecordBatchBuilder


def decode_all(iter_fn, buf):
    """[(header fields, [record tuples])] for every batch of buf, validating each."""
    out = []
    for batch in iter_fn(buf):
        batch.validate()
        out.append((batch_fields(batch), [rec_tuple(r) for r in batch]))
    return out


# ---------------------------------------------------------------------------------------
# Round trips through the selected implementation (runs in both passes)


@settings(max_examples=examples(300, 80))
@given(spec=batch_specs())
def test_round_trip(spec):
    params, records = spec
    data = build_batch(RecordBatchBuilder, spec)
    assert isinstance(data, bytes)
    batches = list(iter_batches(data))
    assert len(batches) == 1
    b = batches[0]
    b.validate()
    n = len(records)
    assert b.position == 0 and b.size_in_bytes == len(data)
    assert b.batch_length == len(data) - 12
    assert b.magic == 2
    assert b.count == n
    assert b.base_offset == params["base_offset"]
    assert b.last_offset_delta == n - 1
    assert b.last_offset == wrap64(params["base_offset"] + n - 1)
    assert b.next_offset == wrap64(params["base_offset"] + n)
    assert b.compression == params["compression"]
    assert b.compression_type == CODECS.index(params["compression"])
    assert b.producer_id == params["producer_id"]
    assert b.producer_epoch == params["producer_epoch"]
    assert b.base_sequence == params["base_sequence"]
    assert b.partition_leader_epoch == params["partition_leader_epoch"]
    assert b.is_transactional == params["transactional"]
    assert b.is_control == params["control"]
    assert b.timestamp_type == (1 if params["log_append_time"] else 0)
    assert b.base_timestamp == records[0][2]
    assert b.max_timestamp == max(r[2] for r in records)
    assert b.crc == struct.unpack_from(">I", data, 17)[0]
    assert [rec_tuple(r) for r in b] == expected_records(spec)
    # Iterating twice gives the same records (nothing is consumed).
    assert [rec_tuple(r) for r in b] == expected_records(spec)


@settings(max_examples=examples(150, 40))
@given(specs=st.lists(batch_specs(max_records=6), min_size=1, max_size=5))
def test_round_trip_concatenated(specs):
    parts = [build_batch(RecordBatchBuilder, s) for s in specs]
    buf = b"".join(parts)
    batches = list(iter_batches(buf))
    assert len(batches) == len(specs)
    pos = 0
    for b, part, spec in zip(batches, parts, specs):
        assert b.position == pos and b.size_in_bytes == len(part)
        b.validate()
        assert b.to_bytes() == part
        assert [rec_tuple(r) for r in b] == expected_records(spec)
        pos += len(part)
    table = decode_to_arrow(buf, topic="t", partition=3)
    expected = [r for s in specs if not s[0]["control"] for r in expected_records(s)]
    assert table.num_rows == len(expected)
    assert table.column("key").to_pylist() == [r[2] for r in expected]
    assert table.column("value").to_pylist() == [r[3] for r in expected]
    assert table.column("offset").to_pylist() == [r[0] for r in expected]
    assert table.column("timestamp").cast("int64").to_pylist() == [r[1] for r in expected]
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r[4]] or None for r in expected]


@pytest.mark.parametrize("codec", CODECS)
def test_large_values_round_trip(codec):
    # ~1 MiB values: one incompressible, one compressible, next to small ones.
    big = by_mode(1 << 20, 1 << 19)
    values = [random_bytes(big, 1), b"x", random_bytes(big - 17, 2, compressible=True), None, b""]
    b = RecordBatchBuilder(compression=codec, base_offset=5)
    for i, v in enumerate(values):
        b.append(v, key=b"k%d" % i, timestamp_ms=1_700_000_000_000 + i, headers=[("h", v[:10] if v else v)])
    data = b.build()
    if codec != "none":
        assert len(data) < 2 * big + 200  # the compressible value really was compressed
    (batch,) = iter_batches(data)
    batch.validate()
    got = list(batch)
    assert [r.value for r in got] == values
    assert [r.offset for r in got] == [5, 6, 7, 8, 9]
    table = decode_to_arrow(data)
    assert table.column("value").to_pylist() == values


@settings(max_examples=examples(200, 60))
@given(
    values=st.lists(st.one_of(st.none(), st.binary(max_size=50)), min_size=1, max_size=30),
    with_keys=st.booleans(),
    data=st.data(),
    codec=st.sampled_from(CODECS),
)
def test_extend_equals_repeated_append(values, with_keys, data, codec):
    n = len(values)
    keys = data.draw(st.lists(st.one_of(st.none(), st.binary(max_size=10)), min_size=n, max_size=n)) \
        if with_keys else None
    timestamps = data.draw(st.lists(st.integers(INT64_MIN, INT64_MAX), min_size=n, max_size=n))
    a = RecordBatchBuilder(compression=codec, base_offset=100)
    a.extend(values, keys, timestamps)
    b = RecordBatchBuilder(compression=codec, base_offset=100)
    for i, v in enumerate(values):
        b.append(v, key=None if keys is None else keys[i], timestamp_ms=timestamps[i])
    assert a.build() == b.build()
    # tuples and numpy timestamps give the same batch as lists
    c = RecordBatchBuilder(compression=codec, base_offset=100)
    c.extend(tuple(values), None if keys is None else tuple(keys), np.array(timestamps, dtype=np.int64))
    assert c.build() == b.build()


def test_extend_appends_after_existing_records():
    a = RecordBatchBuilder()
    a.append(b"first", timestamp_ms=10)
    a.extend([b"second", b"third"], [b"k2", None], [11, 9])
    b = RecordBatchBuilder()
    b.append(b"first", timestamp_ms=10)
    b.append(b"second", key=b"k2", timestamp_ms=11)
    b.append(b"third", timestamp_ms=9)
    assert a.build() == b.build()
    (batch,) = iter_batches(a.build())
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in batch] == [
        (0, None, b"first", 10), (1, b"k2", b"second", 11), (2, None, b"third", 9)]
    assert batch.max_timestamp == 11 and batch.base_timestamp == 10


def test_extend_without_timestamps_uses_one_current_time():
    before = time.time_ns() // 1_000_000
    b = RecordBatchBuilder()
    b.extend([b"a", b"b", b"c"])
    after = time.time_ns() // 1_000_000
    (batch,) = iter_batches(b.build())
    stamps = {r.timestamp_ms for r in batch}
    assert len(stamps) == 1
    assert before <= stamps.pop() <= after


def test_append_without_timestamp_uses_current_time():
    before = time.time_ns() // 1_000_000
    b = RecordBatchBuilder()
    b.append(b"v")
    after = time.time_ns() // 1_000_000
    (batch,) = iter_batches(b.build())
    (rec,) = list(batch)
    assert before <= rec.timestamp_ms <= after


@pytest.mark.parametrize("bad", [
    dict(keys=[b"a"]), dict(timestamps_ms=[1, 2, 3]), dict(keys=[b"a", b"b", b"c"], timestamps_ms=[1])])
def test_extend_length_mismatch(bad):
    b = RecordBatchBuilder()
    with pytest.raises(ValueError):
        b.extend([b"x", b"y"], **bad)


def test_extend_rejects_float_timestamps():
    # append() refuses a float timestamp; extend() must not silently truncate one either.
    for ts in ([1.5, 2.5], np.array([1.5, 2.5])):
        b = RecordBatchBuilder()
        with pytest.raises(TypeError):
            b.extend([b"x", b"y"], timestamps_ms=ts)
    with pytest.raises(TypeError):
        RecordBatchBuilder().append(b"x", timestamp_ms=1.5)


def test_extend_rejects_out_of_range_numpy_timestamps():
    # uint64 beyond int64 must not wrap around to a negative timestamp.
    b = RecordBatchBuilder()
    with pytest.raises((OverflowError, ValueError)):
        b.extend([b"x"], timestamps_ms=np.array([2**64 - 1], dtype=np.uint64))


def _unaligned_int64(values):
    raw = bytearray(1 + 8 * len(values))
    arr = np.frombuffer(raw, dtype=np.int64, count=len(values), offset=1)
    arr[:] = values
    assert not arr.flags.aligned
    return arr


@pytest.mark.parametrize("form", [
    lambda ts: np.array(ts, dtype=np.int64),
    lambda ts: np.array(ts, dtype=np.uint32),
    lambda ts: np.array(ts, dtype=">i8"),                      # byte-swapped
    lambda ts: np.array([t for t in ts for _ in (0, 1)], dtype=np.int64)[::2],  # strided
    _unaligned_int64,                                          # contiguous but misaligned
], ids=["int64", "uint32", "big-endian", "strided", "unaligned"])
def test_extend_numpy_timestamps_in_any_layout(form):
    # The native loop reads int64 memory: every other layout (and a misaligned array, which
    # would be undefined behaviour to read as int64_t) must come out as the list form does.
    ts = [4_000_000_000, 5, 1_700_000_123]  # fits every dtype below
    values = [b"a", b"b", b"c"]

    def build(timestamps):
        b = RecordBatchBuilder()
        b.extend(values, timestamps_ms=timestamps)
        return b.build()

    assert build(form(ts)) == build(ts)


@pytest.mark.parametrize("form", [bytearray, memoryview, lambda v: np.frombuffer(v, dtype=np.uint8)])
def test_bytes_like_values_keys_and_header_values(form):
    def build(conv):
        b = RecordBatchBuilder(compression="gzip")
        b.append(conv(b"value-1"), key=conv(b"key-1"), timestamp_ms=1, headers=[("h", conv(b"hv"))])
        b.append(conv(b""), key=conv(b""), timestamp_ms=2)
        b.extend([conv(b"v3"), conv(b"v4")], [conv(b"k3"), None], [3, 4])
        return b.build()

    assert build(form) == build(bytes)


def test_headers_accept_tuples_and_lists():
    a = RecordBatchBuilder()
    a.append(b"v", timestamp_ms=1, headers=[("a", b"1"), ("b", None), ("", b"")])
    b = RecordBatchBuilder()
    b.append(b"v", timestamp_ms=1, headers=(["a", b"1"], ["b", None], ["", b""]))
    assert a.build() == b.build()
    (batch,) = iter_batches(a.build())
    assert list(batch)[0].headers == [("a", b"1"), ("b", None), ("", b"")]


def test_builder_can_build_again_after_more_appends():
    b = RecordBatchBuilder(compression="lz4")
    b.append(b"one", timestamp_ms=5)
    first = b.build()
    assert b.build() == first
    b.append(b"two", timestamp_ms=6)
    (batch,) = iter_batches(b.build())
    assert [r.value for r in batch] == [b"one", b"two"]
    assert len(b) == 2


@pytest.mark.parametrize("builder_cls", [RecordBatchBuilder, TWIN_BUILDER], ids=["selected", "twin"])
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_set_producer_state_sets_the_transactional_bit(builder_cls, codec):
    b = builder_cls(compression=codec, base_offset=5)
    b.append(b"v", timestamp_ms=1)
    b.set_producer_state(7, 2, 10, transactional=True)
    data = b.build()
    assert struct.unpack_from(">h", data, 21)[0] & 0x10  # attributes, bit 4
    (batch,) = iter_batches(data)
    batch.validate()
    assert batch.is_transactional and not batch.is_control and batch.compression == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 2, 10)
    assert b.transactional
    # Set either way, as Kafka's setProducerState: the default stamps a non-transactional batch
    # (what the idempotent producer's sender does today), even over the constructor's flag.
    t = builder_cls(compression=codec, transactional=True)
    t.append(b"v", timestamp_ms=1)
    t.set_producer_state(7, 2, 10)
    (batch,) = iter_batches(t.build())
    assert not batch.is_transactional and not t.transactional
    assert batch.attributes == (0 if codec == "none" else 4)


@pytest.mark.parametrize("builder_cls", [RecordBatchBuilder, TWIN_BUILDER], ids=["selected", "twin"])
@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_build_view_is_the_built_batch_and_ends_the_builder(builder_cls, codec):
    """build_view: the same bytes as build(), writable (a broker stamps offsets in place), and
    the builder takes no more records or producer state; the view outlives the builder."""
    b = builder_cls(compression=codec)
    for i in range(50):
        b.append(b"value-%d" % i, key=b"k", timestamp_ms=1000 + i, headers=[("h", b"x")])
    b.set_producer_state(9, 1, 100)
    expected = b.build()
    view = b.build_view()
    assert not view.readonly and bytes(view) == expected
    assert bytes(b.build_view()) == expected  # again: the same batch
    with pytest.raises(BufferError):
        b.append(b"late", timestamp_ms=1)
    with pytest.raises(BufferError):
        b.extend([b"late"])
    with pytest.raises(BufferError):
        b.set_producer_state(9, 1, 200)
    del b
    gc.collect()
    struct.pack_into(">q", view, 0, 4242)  # as the broker stamps the base offset
    (batch,) = iter_batches(view)
    batch.validate()  # the base offset is outside the CRC
    assert batch.base_offset == 4242 and [r.value for r in batch] == [b"value-%d" % i for i in range(50)]
    with pytest.raises(ValueError):
        builder_cls(compression=codec).build_view()


# ---------------------------------------------------------------------------------------
# Native against twin (native pass only)


@needs_native
@settings(max_examples=examples(100))
@given(spec=batch_specs(), state=st.tuples(st.integers(-1, INT64_MAX), st.integers(-1, 32767),
                                           st.integers(-1, 2**31 - 1), st.booleans()))
def test_native_set_producer_state_equals_twin(spec, state):
    def build(cls):
        params, records = spec
        b = cls(**params)
        for value, key, ts, headers in records:
            b.append(value, key=key, timestamp_ms=ts, headers=headers)
        pid, epoch, seq, txn = state
        b.set_producer_state(pid, epoch, seq, transactional=txn)
        return b.build()

    data = build(native.RecordBatchBuilder)
    assert data == build(TWIN_BUILDER)
    (batch,) = native.iter_batches(data)
    assert batch.is_transactional == state[3]


@needs_native
@settings(max_examples=examples(300))
@given(spec=batch_specs())
def test_native_builder_bytes_equal_twin(spec):
    assert build_batch(native.RecordBatchBuilder, spec) == build_batch(TWIN_BUILDER, spec)


@needs_native
def test_a_large_batch_is_built_in_recycled_memory():
    """Past 64 KiB a builder grows in blocks of the block cache, toward its size_hint; a
    finished batch's block goes back to the cache and the next batch of that size reuses it.
    The bytes are the twin's either way."""
    values = [b"%06d" % i * 16 for i in range(9000)]  # 96-byte values: about 1 MB of records

    def fill(cls, hint):
        b = cls()
        b.size_hint = hint
        for i, v in enumerate(values):
            b.append(v, timestamp_ms=1_000 + i)
        return b

    twin = fill(TWIN_BUILDER, 1_000_000).build()
    native.set_block_cache_limit(0)  # empty the cache, then let it hold blocks again
    native.set_block_cache_limit(256 << 20)
    try:
        for hint in (0, 1_000_000):
            b = fill(native.RecordBatchBuilder, hint)
            view = b.build_view()
            assert bytes(view) == twin
            del b, view
            held = native.block_cache_bytes()
            assert held >= len(twin)  # the block went back to the cache, not to the kernel
            again = fill(native.RecordBatchBuilder, hint)
            assert native.block_cache_bytes() < held  # and the next batch took it
            assert bytes(again.build_view()) == twin
            del again
    finally:
        native.set_block_cache_limit(256 << 20)


@needs_native
@settings(max_examples=examples(150))
@given(spec=batch_specs())
def test_native_build_view_equals_twin(spec):
    def view(cls):
        params, records = spec
        b = cls(**params)
        for value, key, ts, headers in records:
            b.append(value, key=key, timestamp_ms=ts, headers=headers)
        return bytes(b.build_view())

    assert view(native.RecordBatchBuilder) == view(TWIN_BUILDER) == build_batch(TWIN_BUILDER, spec)


@needs_native
@settings(max_examples=examples(5), suppress_health_check=list(HealthCheck))
@given(
    sizes=st.lists(st.integers(100_000, 1 << 20), min_size=1, max_size=3),
    seed=st.integers(0, 2**32),
    compressible=st.booleans(),
    codec=st.sampled_from(CODECS),
)
def test_native_builder_large_values_equal_twin(sizes, seed, compressible, codec):
    values = [random_bytes(n, seed + i, compressible) for i, n in enumerate(sizes)]
    spec = (dict(compression=codec, base_offset=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                 transactional=False, log_append_time=False, partition_leader_epoch=-1, control=False),
            [(v, v[:16], 1_000 + i, [("k", v[:8])]) for i, v in enumerate(values)])
    data = build_batch(native.RecordBatchBuilder, spec)
    assert data == build_batch(TWIN_BUILDER, spec)
    assert decode_all(native.iter_batches, data) == decode_all(batch_py.iter_batches, data)
    assert native.decode_to_arrow(data).equals(arrow_py.decode_to_arrow(data))


@needs_native
@settings(max_examples=examples(150))
@given(specs=st.lists(batch_specs(max_records=8), min_size=1, max_size=4),
       topic=st.one_of(st.none(), st.text(max_size=10)),
       partition=st.one_of(st.none(), st.integers(0, 2**31 - 1)))
def test_native_decode_equals_twin(specs, topic, partition):
    buf = b"".join(build_batch(TWIN_BUILDER, s) for s in specs)
    got = decode_all(native.iter_batches, buf)
    want = decode_all(batch_py.iter_batches, buf)
    assert got == want
    assert [recs for _, recs in got] == [expected_records(s) for s in specs]
    for check in (True, False):
        n_tab = native.decode_to_arrow(buf, topic=topic, partition=partition, check_crcs=check)
        t_tab = arrow_py.decode_to_arrow(buf, topic=topic, partition=partition, check_crcs=check)
        assert n_tab.schema == t_tab.schema
        assert n_tab.equals(t_tab)


@needs_native
@settings(max_examples=examples(200))
@given(spec=batch_specs(), data=st.data())
def test_native_extend_equals_twin(spec, data):
    params, records = spec
    values = [r[0] for r in records]
    keys = data.draw(st.one_of(st.none(), st.just([r[1] for r in records])))
    stamps = [r[2] for r in records]
    a = native.RecordBatchBuilder(**params)
    a.extend(values, keys, stamps)
    b = TWIN_BUILDER(**params)
    b.extend(values, keys, stamps)
    assert a.build() == b.build()


@needs_native
def test_native_record_and_batch_types_compare_with_twin():
    data = build_batch(TWIN_BUILDER, (dict(compression="none", base_offset=7), [
        (b"v", b"k", 1, [("h", b"x")]), (None, None, 2, [])]))
    n_recs = list(next(iter(native.iter_batches(data))))
    t_recs = list(next(iter(batch_py.iter_batches(data))))
    assert n_recs == t_recs and t_recs == n_recs
    assert [r.headers for r in n_recs] == [[("h", b"x")], []]
    assert set(BATCH_FIELDS) <= set(dir(next(iter(native.iter_batches(data)))))


header_key_bytes = st.one_of(
    st.binary(max_size=8),
    st.text(max_size=4).map(lambda s: s.encode("utf-8")),
    st.sampled_from([b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xf0\x9f\x98\x80",
                     b"\xef\xbf\xbf", b"\xf8\x88\x80\x80\x80", b"\x80", b"\xc2"]),
)


@needs_native
@settings(max_examples=examples(300))
@given(hkeys=st.lists(header_key_bytes, min_size=1, max_size=4), codec=st.sampled_from(["none", "zstd"]))
def test_native_header_key_decoding_equals_twin(hkeys, codec):
    # Header keys are Kafka strings, read leniently as Kafka's Java reader does: ill-formed
    # bytes become U+FFFD. Native and twin must agree byte for byte, also in Arrow.
    out = bytearray()
    batch_py.encode_record(out, 0, 0, b"k", b"v", [(k, b"x") for k in hkeys])
    from kafkacore.record import codecs as kc_codecs
    section = kc_codecs.compress(kc_codecs.CODEC_IDS[codec], bytes(out))
    data = assemble_batch(section, 1, attributes=kc_codecs.CODEC_IDS[codec])
    outcomes = []
    for iter_fn, to_arrow in ((native.iter_batches, native.decode_to_arrow),
                              (batch_py.iter_batches, arrow_py.decode_to_arrow)):
        res = []
        for step in (lambda: [rec_tuple(r) for b in iter_fn(data) for r in b],
                     lambda: [b.validate() for b in iter_fn(data)],
                     lambda: to_arrow(data).to_pylist()):
            try:
                res.append(step())
            except Exception as e:  # noqa: BLE001 - the exception type is what is compared
                res.append(type(e).__name__)
        outcomes.append(res)
    assert outcomes[0] == outcomes[1]
    expected = [(k.decode("utf-8", "replace"), b"x") for k in hkeys]
    assert outcomes[1][0][0][4] == expected
    assert outcomes[1][1] == [None]
    assert outcomes[1][2][0]["headers"] == [{"key": k, "value": v} for k, v in expected]


@needs_native
@pytest.mark.parametrize("records", [
    [(b"v", None, INT64_MIN, []), (b"w", None, INT64_MAX, [])],
    [(b"v", None, INT64_MAX, []), (b"w", None, INT64_MIN, []), (b"x", None, 0, [])],
    [(None, b"", -1, [("", None)])],
])
def test_native_extreme_timestamps_equal_twin(records):
    spec = (dict(compression="none", base_offset=INT64_MAX - 1, log_append_time=False), records)
    data = build_batch(native.RecordBatchBuilder, spec)
    assert data == build_batch(TWIN_BUILDER, spec)
    assert decode_all(native.iter_batches, data) == decode_all(batch_py.iter_batches, data)
    assert [r for _, r in decode_all(native.iter_batches, data)][0] == expected_records(spec)
    assert native.decode_to_arrow(data).equals(arrow_py.decode_to_arrow(data))


@needs_native
@pytest.mark.parametrize("codec", CODECS)
def test_native_reads_hand_built_batches_like_twin(codec):
    # A records section written by something other than our builder (offset deltas with a
    # gap, base timestamp below the first record's), compressed with the shared codecs.
    from kafkacore.record import codecs as kc_codecs
    recs = [(b"a", b"k", 1000, [("x", None)]), (None, None, 990, []), (b"c" * 500, None, 1010, [("y", b"z")])]
    section = bytearray()
    for delta, (v, k, ts, h) in zip((0, 2, 5), recs):
        batch_py.encode_record(section, ts - 900, delta, k, v, [(hk.encode(), hv) for hk, hv in h])
    comp = kc_codecs.compress(kc_codecs.CODEC_IDS[codec], bytes(section))
    data = assemble_batch(comp, 3, attributes=kc_codecs.CODEC_IDS[codec], base_offset=50, last_offset_delta=5,
                          base_ts=900, max_ts=1010)
    got = decode_all(native.iter_batches, data)
    assert got == decode_all(batch_py.iter_batches, data)
    assert [r[0] for r in got[0][1]] == [50, 52, 55]
    assert [r[1] for r in got[0][1]] == [1000, 990, 1010]
    assert native.decode_to_arrow(data).equals(arrow_py.decode_to_arrow(data))


@pytest.mark.parametrize("name", ["crc", "murmur2", "records"])
def test_native_module_imports_on_its_own(name):
    # Importing an extension module first (before kafkacore.record) must work too.
    import os
    import subprocess
    import sys

    if native_module(name) is None:
        pytest.skip(f"kafkacore._ext.{name} not built or extensions disabled")
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKACORE_NO_EXTENSIONS",)}
    proc = subprocess.run([sys.executable, "-c", f"import kafkacore._ext.{name} as m; print(m.__name__)"],
                          capture_output=True, text=True, env=env, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_builder_copies_its_inputs():
    value, key, hval = bytearray(b"value"), bytearray(b"key"), bytearray(b"hv")
    b = RecordBatchBuilder()
    b.append(value, key=key, timestamp_ms=1, headers=[("h", hval)])
    b.extend([value], [key], [2])
    value[:] = b"XXXXX"
    key[:] = b"YYY"
    hval[:] = b"ZZ"
    (batch,) = iter_batches(b.build())
    assert [(r.key, r.value, r.headers) for r in batch] == [
        (b"key", b"value", [("h", b"hv")]), (b"key", b"value", [])]


# ---------------------------------------------------------------------------------------
# read_committed: decoders with the Fetch response's aborted transactions (both passes, and
# native against twin)


def _crec(r):
    return (r.topic, r.partition, r.offset, r.timestamp_ms, r.timestamp_type, r.key, r.value, list(r.headers))


def _offsets(result):
    records, next_offset, error = result
    return [r.offset for r in records], next_offset, error


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("impl", ["selected", "twin"])
def test_read_committed_drops_aborted_transactions(codec, impl):
    buf, aborted, kept = interleaved_txns(codec)
    dec = decode_records if impl == "selected" else records_py.decode_records
    it = iter_batches if impl == "selected" else batch_py.iter_batches
    got, next_offset, error = _offsets(dec(buf, "t", 0, 0, True, aborted))
    assert (got, next_offset, error) == (kept, 19, None)
    # read_uncommitted (None, the default): every data record, markers still dropped
    everything = [o for o in range(19) if o not in (6, 11, 12, 17)]
    assert _offsets(dec(buf, "t", 0, 0, True, None)) == _offsets(dec(buf, "t", 0)) == (everything, 19, None)
    # an empty list (read_committed, nothing aborted) keeps every data record too
    assert _offsets(dec(buf, "t", 0, 0, True, [])) == (everything, 19, None)
    # iter_batches yields every batch and says which ones a read_committed reader drops
    flags = [(b.base_offset, b.aborted) for b in it(buf, aborted)]
    assert [o for o, a in flags if a] == [0, 5, 13]
    assert not any(b.aborted for b in it(buf))
    assert not any(b.aborted for b in it(buf, []))


@pytest.mark.parametrize("impl", ["selected", "twin"])
def test_aborted_transactions_as_fetch_response_objects(impl):
    from kafkacore.protocol.messages.fetch_response import AbortedTransaction
    buf, aborted, kept = interleaved_txns()
    dec = decode_records if impl == "selected" else records_py.decode_records
    objs = [AbortedTransaction(producer_id=p, first_offset=f) for p, f in aborted]
    assert _offsets(dec(buf, "t", 0, 0, True, objs))[0] == kept
    assert _offsets(dec(buf, "t", 0, 0, True, iter([list(a) for a in aborted])))[0] == kept


@pytest.mark.parametrize("impl", ["selected", "twin"])
def test_markers_before_the_position_still_end_aborted_ranges(impl):
    # P1 aborts [0, 1], then commits [3, 4]: a reader positioned at 3 must keep 3 and 4, so
    # the ABORT marker at 2 is read although it lies before min_offset.
    buf = txn_batch(1, 0, 2) + txn_marker(1, 2, False) + txn_batch(1, 3, 2) + txn_marker(1, 5, True)
    dec = decode_records if impl == "selected" else records_py.decode_records
    for pos in (0, 1, 2, 3):
        assert _offsets(dec(buf, "t", 0, pos, True, [(1, 0)])) == ([3, 4], 6, None)
    assert _offsets(dec(buf, "t", 0, 4, True, [(1, 0)])) == ([4], 6, None)


@pytest.mark.parametrize("impl", ["selected", "twin"])
def test_only_aborted_data_still_moves_the_position(impl):
    buf = txn_batch(4, 10, 3, "lz4") + txn_marker(4, 13, False)
    dec = decode_records if impl == "selected" else records_py.decode_records
    assert _offsets(dec(buf, "t", 0, 10, True, [(4, 10)])) == ([], 14, None)


@pytest.mark.parametrize("impl", ["selected", "twin"])
def test_aborted_compressed_batches_are_never_decompressed(impl, monkeypatch):
    dec = decode_records if impl == "selected" else records_py.decode_records
    buf = (txn_batch(1, 0, 2, "gzip") + corrupt_payload_txn_batch(2, 2) + txn_batch(1, 4, 1, "zstd")
           + txn_marker(2, 5, False) + txn_marker(1, 6, True))
    # the garbage is real: read uncommitted, the batch fails
    with pytest.raises(CorruptRecordError):
        list(batch_py.iter_batches(buf))[1].validate()
    records, _next, error = dec(buf, "t", 0, 0, True, None)
    assert [r.offset for r in records] == [0, 1] and isinstance(error, CorruptRecordError)
    # read committed: it is dropped from its header, and only the kept batches are decompressed
    calls = []
    real = kc_codecs.decompress
    monkeypatch.setattr(kc_codecs, "decompress", lambda codec, data, position=-1: (
        calls.append(position), real(codec, data, position))[1])
    assert _offsets(dec(buf, "t", 0, 0, True, [(2, 2)])) == ([0, 1, 4], 7, None)
    positions = [b.position for b in batch_py.iter_batches(buf)]
    assert calls == [positions[0], positions[2]]
    # its CRC is still checked: a flipped byte in it is reported
    bad = bytearray(buf)
    bad[positions[1] + 70] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        records, _n, error = dec(bytes(bad), "t", 0, 0, True, [(2, 2)])
        raise error


@pytest.mark.parametrize("impl", ["selected", "twin"])
@pytest.mark.parametrize("bad, exc", [
    (5, TypeError), ([(1,)], TypeError), ([(1, 2, 3)], TypeError), ([("1", 2)], TypeError),
    ([(1, 2.0)], TypeError), ([object()], TypeError), ([(1 << 63, 0)], OverflowError),
    ([(0, -(1 << 63) - 1)], OverflowError), ([(True, 0)], TypeError),
])
def test_bad_aborted_lists_are_refused(impl, bad, exc):
    buf, _aborted, _kept = interleaved_txns()
    dec = decode_records if impl == "selected" else records_py.decode_records
    it = iter_batches if impl == "selected" else batch_py.iter_batches
    with pytest.raises(exc, match="aborted"):
        dec(buf, "t", 0, 0, True, bad)
    with pytest.raises(exc, match="aborted"):
        it(buf, bad)


@pytest.mark.parametrize("impl", ["selected", "twin"])
@pytest.mark.parametrize("key, reason", [
    (None, "key is null or shorter than 4 bytes"), (b"\x00\x00\x00", "key is null or shorter than 4 bytes"),
    (b"\xff\xff\x00\x00", "key has a negative version"),
])
def test_a_malformed_marker_is_a_clear_error_when_reading_committed(impl, key, reason):
    b = batch_py.RecordBatchBuilder(control=True, transactional=True, base_offset=2, producer_id=1)
    b.append(b"\x00\x00\x00\x00\x00\x00", key=key, timestamp_ms=1)
    marker = b.build()
    head = txn_batch(2, 0, 2)  # kept records before the bad marker: they come first, the error after
    buf = head + marker + txn_batch(1, 3, 1)
    dec = decode_records if impl == "selected" else records_py.decode_records
    it = iter_batches if impl == "selected" else batch_py.iter_batches
    records, next_offset, error = dec(buf, "t", 0, 0, True, [(1, 0)])
    assert [r.offset for r in records] == [0, 1] and next_offset == 2
    assert isinstance(error, CorruptRecordError)
    assert error.reason == f"t-0 offset 2: control batch: control record {reason}"
    assert error.position == len(head)
    # nothing good before it: raised
    with pytest.raises(CorruptRecordError, match=reason):
        dec(marker + txn_batch(1, 3, 1), "t", 0, 0, True, [])
    with pytest.raises(CorruptRecordError, match=reason):
        list(it(buf, [(1, 0)]))
    # read uncommitted, a control batch is not looked into
    assert _offsets(dec(buf, "t", 0)) == ([0, 1, 3], 4, None)
    assert len(list(it(buf))) == 3


@settings(max_examples=examples(150, 40), suppress_health_check=[HealthCheck.too_slow])
@given(log=txn_logs())
def test_read_committed_keeps_exactly_the_committed_records(log):
    buf, aborted, kept = log
    for dec in (decode_records, records_py.decode_records):
        records, _next, error = dec(buf, "t", 0, 0, True, aborted)
        assert error is None
        assert [r.offset for r in records] == kept
        assert [r.value for r in records] == [b"%d" % o for o in kept]
    flags = [not b.aborted for b in iter_batches(buf, aborted) if not b.is_control for _ in range(b.count)]
    assert sum(flags) == len(kept)


@needs_native
@settings(max_examples=examples(200))
@given(log=txn_logs(), min_offset=st.integers(0, 1 << 41), extra=st.lists(
    st.tuples(st.integers(-1, 4), st.integers(0, 1 << 41)), max_size=3), check=st.booleans())
def test_native_read_committed_equals_twin(log, min_offset, extra, check):
    buf, aborted, _kept = log
    for ab in (None, [], aborted, aborted + extra, extra):
        n = native.decode_records(buf, "t", 3, min_offset, check, ab)
        t = records_py.decode_records(buf, "t", 3, min_offset, check, ab)
        assert [_crec(r) for r in n[0]] == [_crec(r) for r in t[0]]
        assert n[1] == t[1] and (n[2] is None) == (t[2] is None)
        assert ([(b.base_offset, b.aborted) for b in native.iter_batches(buf, ab)]
                == [(b.base_offset, b.aborted) for b in batch_py.iter_batches(buf, ab)])


@needs_native
@settings(max_examples=examples(300), suppress_health_check=list(HealthCheck))
@given(log=txn_logs(), edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4),
       cut=st.integers(0, 1 << 20), fix=st.booleans(), aborted=st.lists(
           st.tuples(st.integers(-2, 4), st.one_of(st.integers(0, 1 << 41),
                                                   st.integers(-(1 << 63), (1 << 63) - 1))), max_size=5))
def test_fuzz_read_committed_decoders(log, edits, cut, fix, aborted):
    """Hostile bytes (a log with bytes changed, CRCs refixed or not, cut anywhere) and any
    aborted list: every decoder raises nothing but CorruptRecordError, and native and twin
    agree whenever both succeed."""
    buf = bytearray(log[0])
    for at, v in edits:
        if buf:
            buf[at % len(buf)] = v
    buf = bytes(buf[: cut % (len(buf) + 1)])
    if fix:
        try:
            buf = b"".join(fix_crc(b.to_bytes()) for b in batch_py.iter_batches(buf))
        except CorruptRecordError:
            pass
    for ab in (aborted, log[1]):
        results = []
        for dec in (native.decode_records, records_py.decode_records):
            try:
                records, nxt, err = dec(buf, "t", 0, 0, True, ab)
                results.append(([r.offset for r in records], nxt, err is None))
            except CorruptRecordError:
                results.append("error")
        if "error" not in results:
            assert results[0][0][:len(results[1][0])] == results[1][0][:len(results[0][0])]
        tabs = []
        for arrow in (native.decode_to_arrow, arrow_py.decode_to_arrow):
            try:
                tabs.append(arrow(buf, aborted=ab))
            except CorruptRecordError:
                tabs.append(None)
        if tabs[0] is not None and tabs[1] is not None:
            assert tabs[0].equals(tabs[1])
        for it in (native.iter_batches, batch_py.iter_batches):
            try:
                assert all(b.aborted in (True, False) for b in it(buf, ab))
            except CorruptRecordError:
                pass


@needs_native
@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize("kind", [-2, -3, 7, 0x7FFF])
def test_a_marker_with_an_unknown_control_type_ends_nothing_and_crashes_nothing(check, kind):
    """A transaction marker's type is any int16 its key holds. Type -2 was taken by the native
    read_committed paths for their error value and crashed the process (found by the CI fuzzer,
    2026-11-26, with CRC checks off). Unknown types end no transaction, as in Kafka, where only
    ABORT and COMMIT are markers: native and twin agree on every path."""
    data = RecordBatchBuilder(base_offset=0, producer_id=9)
    data.append(b"in-txn", timestamp_ms=1)
    data.set_producer_state(9, 0, 0, transactional=True)
    marker = TWIN_BUILDER(base_offset=1, producer_id=9, transactional=True, control=True)
    marker.append(struct.pack(">hi", 0, 0), key=struct.pack(">hh", 0, kind), timestamp_ms=2)
    after = TWIN_BUILDER(base_offset=2)
    after.append(b"after", timestamp_ms=3)
    buf = data.build() + marker.build() + after.build()
    aborted = [(9, 0)]
    got = {}
    for name, decode in (("native", native.decode_records), ("twin", records_py.decode_records)):
        records, _next, err = decode(buf, "t", 0, 0, check, aborted)
        got[name] = ([r.value for r in records], err is None)
    assert got["native"] == got["twin"]
    tables = [arrow(buf, check_crcs=check, aborted=aborted) for arrow in (native.decode_to_arrow,
                                                                         arrow_py.decode_to_arrow)]
    assert tables[0].equals(tables[1])
    assert ([b.aborted for b in native.iter_batches(buf, aborted)]
            == [b.aborted for b in batch_py.iter_batches(buf, aborted)])
