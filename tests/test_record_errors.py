"""Bad input: truncation, corruption, hostile headers, builder misuse. Whatever the bytes,
the readers raise CorruptRecordError and nothing else (and never crash)."""
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacore.record import (
    CorruptRecordError, RecordBatchBuilder, UnsupportedCodecError, decode_to_arrow, iter_batches,
)
from kafkacore.record import arrow_py, batch_py
from kafkacore.record import codecs as kc_codecs

from _kcutil import (
    CODEC_IDS, CODECS, assemble_batch, batch_specs, build_batch, examples, fix_crc, native_module, rec_tuple,
    requires_native,
)

native = native_module("records")


def _batch(values=(b"a", b"bb", b"ccc"), codec="none", **kw):
    b = RecordBatchBuilder(compression=codec, **kw)
    for i, v in enumerate(values):
        b.append(v, key=b"k%d" % i, timestamp_ms=1000 + i, headers=[("h", b"%d" % i)])
    return b.build()


# ---------------------------------------------------------------------------------------
# Truncation


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_truncated_final_batch_is_not_an_error(codec):
    first = _batch(codec=codec, base_offset=0)
    second = _batch((b"x" * 100, b"y"), codec=codec, base_offset=3)
    for cut in range(0, len(second)):
        buf = first + second[:cut]
        batches = list(iter_batches(buf))
        assert [b.base_offset for b in batches] == [0], cut
        batches[0].validate()
        table = decode_to_arrow(buf)
        assert table.column("offset").to_pylist() == [0, 1, 2], cut
    # and a buffer holding only a partial batch holds nothing
    for cut in (0, 5, 11, 12, 16, 17, 60, len(first) - 1):
        assert list(iter_batches(first[:cut])) == []
        assert decode_to_arrow(first[:cut]).num_rows == 0


def test_truncated_buffer_object_types():
    data = _batch() + _batch(base_offset=3)[:30]
    for buf in (data, bytearray(data), memoryview(data), memoryview(b"\0" * 5 + data)[5:]):
        assert [b.base_offset for b in iter_batches(buf)] == [0]
        assert decode_to_arrow(buf).num_rows == 3


# ---------------------------------------------------------------------------------------
# CRC


@pytest.mark.parametrize("codec", CODECS)
def test_crc_mismatch(codec):
    first = _batch(codec=codec)
    second = bytearray(_batch((b"payload-" * 20,), codec=codec, base_offset=3))
    second[-3] ^= 0x40  # inside the (possibly compressed) records
    buf = first + bytes(second)
    batches = list(iter_batches(buf))  # framing does not look at the CRC
    assert len(batches) == 2
    batches[0].validate()
    with pytest.raises(CorruptRecordError) as ei:
        batches[1].validate()
    assert ei.value.position == len(first)
    assert "CRC" in str(ei.value)
    with pytest.raises(CorruptRecordError) as ei:
        decode_to_arrow(buf)
    assert ei.value.position == len(first)
    assert "CRC" in str(ei.value)
    with pytest.raises(CorruptRecordError):
        decode_to_arrow(buf, check_crcs=True)


@pytest.mark.parametrize("field_offset", [17, 21, 24, 30, 40, 50, 52, 56, 60])
def test_any_crc_covered_field_or_the_crc_itself_breaks_the_check(field_offset):
    data = bytearray(_batch())
    data[field_offset] ^= 0x01
    (batch,) = iter_batches(bytes(data))
    with pytest.raises(CorruptRecordError, match="CRC"):
        batch.validate()
    with pytest.raises(CorruptRecordError, match="CRC"):
        batch.validate(records=False)


def test_fields_outside_the_crc_do_not_break_it():
    data = bytearray(_batch())
    struct.pack_into(">q", data, 0, 123456)  # base offset
    struct.pack_into(">i", data, 12, 77)  # partition leader epoch
    (batch,) = iter_batches(bytes(data))
    batch.validate()
    assert [r.offset for r in batch] == [123456, 123457, 123458]
    assert batch.partition_leader_epoch == 77


def test_check_crcs_false_decodes_a_corrupted_value():
    data = bytearray(_batch((b"hello",)))
    pos = bytes(data).index(b"hello")
    data[pos] = ord("j")
    buf = bytes(data)
    with pytest.raises(CorruptRecordError):
        decode_to_arrow(buf)
    assert decode_to_arrow(buf, check_crcs=False).column("value").to_pylist() == [b"jello"]
    (batch,) = iter_batches(buf)
    assert [r.value for r in batch] == [b"jello"]  # iteration alone does not check the CRC


# ---------------------------------------------------------------------------------------
# Framing errors


def test_batch_length_below_minimum():
    good = _batch()
    for blen in (0, -1, 1, 48, -(2**31)):
        bad = bytearray(good)
        struct.pack_into(">i", bad, 8, blen)
        for buf, at in ((bytes(bad), 0), (good + bytes(bad), len(good)), (good + bytes(bad[:12]), len(good))):
            with pytest.raises(CorruptRecordError) as ei:
                list(iter_batches(buf))
            assert ei.value.position == at
            with pytest.raises(CorruptRecordError) as ei:
                decode_to_arrow(buf)
            assert ei.value.position == at


def test_minimum_length_is_accepted_when_count_is_zero():
    # 49 = the header after the length field: an empty batch (Kafka writes these after
    # compaction removed every record). It frames, validates and decodes to no rows.
    data = assemble_batch(b"", 0, last_offset_delta=0)
    (batch,) = iter_batches(data)
    batch.validate()
    assert batch.count == 0 and list(batch) == []
    assert decode_to_arrow(data).num_rows == 0


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_wrong_magic(magic):
    good = _batch()
    bad = bytearray(good)
    bad[16] = magic
    for buf, at in ((bytes(bad), 0), (good + bytes(bad), len(good)), (good + bytes(bad[:17]), len(good))):
        with pytest.raises(CorruptRecordError) as ei:
            list(iter_batches(buf))
        assert ei.value.position == at
        assert "magic" in str(ei.value)
        with pytest.raises(CorruptRecordError):
            decode_to_arrow(buf)


def test_errors_are_value_errors_with_position_and_reason():
    bad = bytearray(_batch())
    bad[16] = 1
    with pytest.raises(ValueError) as ei:
        list(iter_batches(bytes(bad)))
    err = ei.value
    assert isinstance(err, CorruptRecordError)
    assert err.position == 0 and err.reason and "magic" in err.reason


# ---------------------------------------------------------------------------------------
# Structurally bad records with a correct CRC (what a buggy writer produces)


def _bad_batch(section, count, codec="none", **kw):
    comp = kc_codecs.compress(CODEC_IDS[codec], section) if codec != "none" else section
    return assemble_batch(comp, count, attributes=CODEC_IDS[codec], **kw)


def _one_record(key=b"k", value=b"v", headers=(), offset_delta=0):
    out = bytearray()
    batch_py.encode_record(out, 0, offset_delta, key, value, list(headers))
    return bytes(out)


def _raw_record(*body):
    """A record from raw body bytes (attributes onwards), with its length prefix."""
    out = bytearray()
    batch_py.write_varlong(out, len(body))
    return bytes(out) + bytes(body)


BAD_SECTIONS = {
    "count-too-high": (_one_record(), 2),
    "count-too-low": (_one_record() * 2, 1),
    "trailing-garbage": (_one_record() + b"\x00", 1),
    "record-length-past-end": (b"\x7e" + _one_record()[1:], 1),
    "record-length-zero": (b"\x00" + _one_record()[1:], 1),
    "varint-too-long": (b"\xff" * 11, 1),
    # body fields: attributes, timestampDelta, offsetDelta, keyLength, [key], valueLength, ...
    # (zigzag varints: 1 is -1, 2 is 1, 3 is -2, 4 is 2)
    "key-length-below-minus-one": (_raw_record(0, 0, 0, 3, 1, 0), 1),
    "header-key-null": (_raw_record(0, 0, 0, 1, 1, 2, 1, 1), 1),
    "header-key-negative-length": (_raw_record(0, 0, 0, 1, 1, 2, 5, 1), 1),
    "header-value-below-minus-one": (_raw_record(0, 0, 0, 1, 1, 2, 0, 3), 1),
    "negative-header-count": (_raw_record(0, 0, 0, 1, 1, 1), 1),
    "header-count-too-high": (_raw_record(0, 0, 0, 1, 1, 4), 1),
    "value-past-record-end": (_raw_record(0, 0, 0, 1, 40, 0), 1),
    "record-without-header-count": (_raw_record(0, 0, 0, 1, 1), 1),
    "truncated-varlong-timestamp": (_raw_record(0, 0x80), 1),
    "offset-delta-beyond-last": (_one_record(offset_delta=5), 1),
    "negative-offset-delta": (_one_record(offset_delta=-1), 1),
}


@pytest.mark.parametrize("codec", ["none", "gzip"])
@pytest.mark.parametrize("case", list(BAD_SECTIONS))
def test_bad_records_with_good_crc(case, codec):
    section, count = BAD_SECTIONS[case]
    data = _bad_batch(section, count, codec)
    prefix = _batch()
    buf = prefix + data
    batches = list(iter_batches(buf))
    assert len(batches) == 2
    batches[0].validate()
    with pytest.raises(CorruptRecordError) as ei:
        batches[1].validate()
    if codec == "none":
        assert ei.value.position >= len(prefix)
    else:
        assert ei.value.position == len(prefix)
    if case not in ("offset-delta-beyond-last", "negative-offset-delta"):
        # iteration does not check offset deltas against the header (as Kafka's reader)
        with pytest.raises(CorruptRecordError):
            list(batches[1])
        with pytest.raises(CorruptRecordError):
            decode_to_arrow(buf)


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_header_key_not_utf8_is_read_leniently_like_kafka(codec):
    # Java reads header keys with new String(bytes, UTF_8) and ensureValid() checks only size
    # and CRC: such a batch is valid and the key reads with U+FFFD for the ill-formed bytes.
    data = _bad_batch(_one_record(headers=[(b"ok\xff\xfe", b"x")]), 1, codec)
    (batch,) = iter_batches(data)
    batch.validate()
    (rec,) = list(batch)
    assert rec.headers == [("ok\ufffd\ufffd", b"x")]
    assert decode_to_arrow(data).column("headers").to_pylist() == [[{"key": "ok\ufffd\ufffd", "value": b"x"}]]


def test_negative_record_count():
    data = assemble_batch(_one_record(), -1, last_offset_delta=0)
    (batch,) = iter_batches(data)
    assert batch.count == -1
    for step in (batch.validate, lambda: list(batch), lambda: decode_to_arrow(data)):
        with pytest.raises(CorruptRecordError) as ei:
            step()
        assert ei.value.position == 0


def test_last_offset_delta_below_count():
    data = assemble_batch(_one_record() + _one_record(offset_delta=1), 2, last_offset_delta=0)
    (batch,) = iter_batches(data)
    with pytest.raises(CorruptRecordError):
        batch.validate()
    with pytest.raises(CorruptRecordError):
        decode_to_arrow(data)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id(codec_id):
    data = assemble_batch(_one_record(), 1, attributes=codec_id)
    (batch,) = iter_batches(data)
    assert batch.compression_type == codec_id
    assert str(codec_id) in batch.compression
    with pytest.raises(CorruptRecordError):
        batch.validate()
    with pytest.raises(CorruptRecordError):
        list(batch)
    with pytest.raises(CorruptRecordError):
        decode_to_arrow(data)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_undecompressable_records(codec):
    data = assemble_batch(b"\x00\x01 definitely not " + codec.encode() + b" \xff" * 8, 1,
                          attributes=CODEC_IDS[codec])
    (batch,) = iter_batches(data)
    for step in (batch.validate, lambda: list(batch), lambda: decode_to_arrow(data)):
        with pytest.raises(CorruptRecordError) as ei:
            step()
        assert ei.value.position == 0


def test_truncated_compressed_stream():
    good = _batch((b"abc" * 1000,), codec="gzip")
    data = fix_crc(_shorten(good, 10))
    (batch,) = iter_batches(data)
    with pytest.raises(CorruptRecordError):
        batch.validate()
    with pytest.raises(CorruptRecordError):
        decode_to_arrow(data)


def _shorten(batch_bytes, n):
    """The batch with its last n bytes cut and its length field updated."""
    out = bytearray(batch_bytes[:-n])
    struct.pack_into(">i", out, 8, len(out) - 12)
    return bytes(out)


# ---------------------------------------------------------------------------------------
# Control batches and LogAppendTime


def _control_batch(base_offset, commit=True):
    b = RecordBatchBuilder(base_offset=base_offset, producer_id=99, producer_epoch=1, transactional=True,
                           control=True)
    # ControlRecordType key: version 0, type 1 (COMMIT) / 0 (ABORT); EndTransactionMarker value
    b.append(struct.pack(">hi", 0, 5), key=struct.pack(">hh", 0, 1 if commit else 0), timestamp_ms=2000)
    return b.build()


def test_control_batches_are_skipped_by_decode_to_arrow_but_iterated():
    data = _batch(transactional=True, producer_id=99, producer_epoch=1) + _control_batch(3) + \
        _batch((b"after",), base_offset=4) + _control_batch(5, commit=False)
    batches = list(iter_batches(data))
    assert [b.is_control for b in batches] == [False, True, False, True]
    assert [b.is_transactional for b in batches] == [True, True, False, True]
    for b in batches:
        b.validate()
    (marker,) = list(batches[1])
    assert marker.offset == 3 and marker.key == struct.pack(">hh", 0, 1)
    assert marker.value == struct.pack(">hi", 0, 5)
    table = decode_to_arrow(data)
    assert table.column("offset").to_pylist() == [0, 1, 2, 4]
    assert table.column("value").to_pylist() == [b"a", b"bb", b"ccc", b"after"]


def test_control_batch_crc_still_checked():
    ctrl = bytearray(_control_batch(3))
    ctrl[-1] ^= 0xFF
    data = _batch() + bytes(ctrl)
    with pytest.raises(CorruptRecordError) as ei:
        decode_to_arrow(data)
    assert ei.value.position == len(_batch())
    assert decode_to_arrow(data, check_crcs=False).num_rows == 3


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time(codec):
    stamps = [5000, 1000, 9000, 3000]
    b = RecordBatchBuilder(compression=codec, log_append_time=True)
    for i, ts in enumerate(stamps):
        b.append(b"v%d" % i, timestamp_ms=ts)
    data = b.build()
    (batch,) = iter_batches(data)
    assert batch.timestamp_type == 1
    assert batch.max_timestamp == 9000
    assert [r.timestamp_ms for r in batch] == [9000] * 4
    table = decode_to_arrow(data + _batch(base_offset=4))
    assert table.column("timestamp").cast("int64").to_pylist() == [9000] * 4 + [1000, 1001, 1002]
    assert table.column("timestampType").to_pylist() == [1] * 4 + [0] * 3


def test_log_append_time_uses_the_broker_set_max_timestamp():
    # The broker stamps LogAppendTime by rewriting maxTimestamp (and the CRC), not the records.
    b = RecordBatchBuilder()
    b.append(b"a", timestamp_ms=100)
    b.append(b"b", timestamp_ms=200)
    data = bytearray(b.build())
    struct.pack_into(">h", data, 21, 0x08)
    struct.pack_into(">q", data, 35, 1_700_000_000_123)
    data = fix_crc(bytes(data))
    (batch,) = iter_batches(data)
    batch.validate()
    assert [r.timestamp_ms for r in batch] == [1_700_000_000_123] * 2
    table = decode_to_arrow(data)
    assert table.column("timestamp").cast("int64").to_pylist() == [1_700_000_000_123] * 2
    assert table.column("timestampType").to_pylist() == [1, 1]


# ---------------------------------------------------------------------------------------
# Builder misuse


@pytest.mark.parametrize("kw", [dict(value="text"), dict(value=b"v", key="text"), dict(value=12),
                                dict(value=b"v", key=3.5), dict(value=b"v", headers=[("h", "text")]),
                                dict(value=b"v", headers=[(b"\xff", b"x")]), dict(value=b"v", headers=[(1, b"x")]),
                                dict(value=b"v", headers=[("only-key",)]), dict(value=b"v", headers=["ab"])])
def test_builder_rejects_bad_record_types(kw):
    b = RecordBatchBuilder()
    with pytest.raises((TypeError, ValueError)):
        b.append(**kw)
    assert len(b) == 0  # nothing half-added
    with pytest.raises(ValueError):
        b.build()


def test_builder_rejects_str_values_with_type_error():
    b = RecordBatchBuilder()
    with pytest.raises(TypeError):
        b.append("value")
    with pytest.raises(TypeError):
        b.append(b"v", key="key")
    with pytest.raises(TypeError):
        b.extend(["a", "b"])


@pytest.mark.parametrize("ts,exc", [(1.5, TypeError), ("1", TypeError), (True, TypeError),
                                    (2**63, OverflowError), (-(2**63) - 1, OverflowError)])
def test_builder_rejects_bad_timestamps(ts, exc):
    with pytest.raises(exc):
        RecordBatchBuilder().append(b"v", timestamp_ms=ts)


@pytest.mark.parametrize("name", ["brotli", "lz5", "", "snappy-raw", 5, -1, 8])
def test_builder_rejects_unknown_codecs(name):
    with pytest.raises(UnsupportedCodecError):
        RecordBatchBuilder(compression=name)
    assert issubclass(UnsupportedCodecError, ValueError)


@pytest.mark.parametrize("name,expected", [("GZIP", "gzip"), ("Zstd", "zstd"), (0, "none"), (3, "lz4")])
def test_builder_codec_names_and_ids(name, expected):
    b = RecordBatchBuilder(compression=name)
    b.append(b"v" * 100, timestamp_ms=0)
    (batch,) = iter_batches(b.build())
    assert batch.compression == expected


def test_build_of_empty_builder():
    for codec in CODECS:
        with pytest.raises(ValueError):
            RecordBatchBuilder(compression=codec).build()


@pytest.mark.parametrize("kw", [dict(base_offset=2**63), dict(producer_id=-(2**63) - 1),
                                dict(producer_epoch=2**15), dict(base_sequence=2**31),
                                dict(partition_leader_epoch=-(2**31) - 1)])
def test_builder_rejects_out_of_range_header_fields(kw):
    with pytest.raises((OverflowError, ValueError)):
        RecordBatchBuilder(**kw)


# ---------------------------------------------------------------------------------------
# Fuzzing: only CorruptRecordError, for random bytes and for damaged valid batches


def arrow_summary(table):
    """Plain Python values of a decoded table; timestamps as int64 (a damaged batch can hold
    any int64, beyond the range of Python datetimes)."""
    return {name: (table.column(name).cast("int64") if name == "timestamp" else table.column(name)).to_pylist()
            for name in table.schema.names}


def exercise(buf, iter_fn=iter_batches, to_arrow=decode_to_arrow):
    """Runs every reader entry point over buf and returns a comparable summary of what
    happened. Any exception other than CorruptRecordError propagates (failing the test)."""
    outcome = []
    batches = []
    try:
        for b in iter_fn(buf):
            batches.append(b)
    except CorruptRecordError as e:
        assert 0 <= e.position <= len(buf)
        outcome.append(("frame-error", e.position))
    for b in batches:
        header = (b.base_offset, b.count, b.compression, b.last_offset, b.is_control, b.position,
                  b.size_in_bytes, b.max_timestamp, b.timestamp_type)
        try:
            b.validate()
            valid = True
        except CorruptRecordError as e:
            assert b.position <= e.position <= b.position + b.size_in_bytes
            valid = False
        try:
            recs = [rec_tuple(r) for r in b]
        except CorruptRecordError:
            recs = "corrupt"
        outcome.append((header, valid, recs))
    for check in (True, False):
        try:
            outcome.append(arrow_summary(to_arrow(buf, topic="t", partition=0, check_crcs=check)))
        except CorruptRecordError as e:
            assert 0 <= e.position <= len(buf)
            outcome.append("corrupt")
    return outcome


@settings(max_examples=examples(400, 150), suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=600))
def test_random_bytes(data):
    exercise(data)


@settings(max_examples=examples(300, 100), suppress_health_check=list(HealthCheck))
@given(data=st.binary(min_size=61, max_size=400), fix_length=st.booleans(), fix_magic=st.booleans(),
       codec=st.integers(0, 7))
def test_random_bytes_with_plausible_header(data, fix_length, fix_magic, codec):
    buf = bytearray(data)
    if fix_length:
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    if fix_magic:
        buf[16] = 2
    buf[22] = (buf[22] & ~7) | codec
    exercise(bytes(buf))
    if fix_length and fix_magic:
        exercise(fix_crc(bytes(buf)))


HEADER_FIELDS = {8: ">i", 21: ">h", 23: ">i", 57: ">i"}  # length, attributes, lastOffsetDelta, count
interesting_ints = st.sampled_from([0, 1, 2, 7, 8, 0x20, 0x28, -1, -2, 48, 49, 60, 61, 1000, 2**15 - 1, -(2**15),
                                    2**31 - 1, -(2**31)])

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("set"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 16)),
    st.tuples(st.just("field"), st.sampled_from(sorted(HEADER_FIELDS)), interesting_ints),
)


def mutate(buf, mutations):
    out = bytearray(buf)
    for kind, where, arg in mutations:
        if not out:
            break
        pos = where % len(out)
        if kind == "flip":
            out[pos] ^= arg
        elif kind == "set":
            out[pos] = arg
        elif kind == "truncate":
            del out[pos:]
        elif kind == "insert":
            out[pos:pos] = bytes([arg])
        elif kind == "delete":
            del out[pos:pos + arg]
        elif kind == "field" and len(out) >= 61:
            fmt = HEADER_FIELDS[where]
            lo, hi = (-(2**15), 2**15 - 1) if fmt == ">h" else (-(2**31), 2**31 - 1)
            if lo <= arg <= hi:
                struct.pack_into(fmt, out, where, arg)
    return bytes(out)


def recrc_all(buf):
    """Rewrites the CRC of every batch that still frames, so that validation gets past the
    CRC into record parsing."""
    pos = 0
    out = bytes(buf)
    while len(out) - pos >= 61:
        (blen,) = struct.unpack_from(">i", out, pos + 8)
        if blen < 49 or pos + 12 + blen > len(out):
            break
        out = fix_crc(out, pos)
        pos += 12 + blen
    return out


def damaged_batches(builder_cls, specs, mutations, recrc):
    buf = mutate(b"".join(build_batch(builder_cls, s) for s in specs), mutations)
    return recrc_all(buf) if recrc else buf


def damaged_compressed(builder_cls, spec, mutations, codec):
    """Damage the uncompressed records, then compress and frame them with a good CRC, so the
    record parser runs on decompressed data."""
    plain = build_batch(builder_cls, ({**spec[0], "compression": "none"}, spec[1]))
    section = mutate(plain[61:], [m for m in mutations if m[0] != "field"])
    count = struct.unpack_from(">i", plain, 57)[0]
    flags = struct.unpack_from(">h", plain, 21)[0] & ~7
    comp = kc_codecs.compress(CODEC_IDS[codec], section) if codec != "none" else section
    return assemble_batch(comp, count, attributes=CODEC_IDS[codec] | flags, base_offset=spec[0]["base_offset"],
                          base_ts=struct.unpack_from(">q", plain, 27)[0],
                          max_ts=struct.unpack_from(">q", plain, 35)[0])


@settings(max_examples=examples(400, 120), suppress_health_check=list(HealthCheck))
@given(specs=st.lists(batch_specs(max_records=5), min_size=1, max_size=3),
       mutations=st.lists(mutation, min_size=1, max_size=4), recrc=st.booleans())
def test_mutated_valid_batches(specs, mutations, recrc):
    exercise(damaged_batches(RecordBatchBuilder, specs, mutations, recrc))


@settings(max_examples=examples(400, 120), suppress_health_check=list(HealthCheck))
@given(spec=batch_specs(max_records=6), mutations=st.lists(mutation, min_size=1, max_size=3),
       codec=st.sampled_from(CODECS))
def test_mutated_records_inside_compressed_batches(spec, mutations, codec):
    exercise(damaged_compressed(RecordBatchBuilder, spec, mutations, codec))


# ---------------------------------------------------------------------------------------
# Native and twin agree on damaged input (native pass only): both accept exactly the same
# inputs and decode them to the same values; on damaged input both raise
# CorruptRecordError (messages and positions may differ).


def _without_positions(outcome):
    return [("frame-error",) if isinstance(o, tuple) and o[0] == "frame-error" else o for o in outcome]


def _agree(buf):
    got = exercise(buf, native.iter_batches, native.decode_to_arrow)
    want = exercise(buf, batch_py.iter_batches, arrow_py.decode_to_arrow)
    assert _without_positions(got) == _without_positions(want)


@requires_native("records")
@settings(max_examples=examples(400), suppress_health_check=list(HealthCheck))
@given(specs=st.lists(batch_specs(max_records=5), min_size=1, max_size=3),
       mutations=st.lists(mutation, min_size=1, max_size=4), recrc=st.booleans())
def test_native_and_twin_agree_on_damaged_batches(specs, mutations, recrc):
    _agree(damaged_batches(batch_py.RecordBatchBuilder, specs, mutations, recrc))


@requires_native("records")
@settings(max_examples=examples(300), suppress_health_check=list(HealthCheck))
@given(spec=batch_specs(max_records=6), mutations=st.lists(mutation, min_size=1, max_size=3),
       codec=st.sampled_from(CODECS))
def test_native_and_twin_agree_on_damaged_compressed_records(spec, mutations, codec):
    _agree(damaged_compressed(batch_py.RecordBatchBuilder, spec, mutations, codec))


@requires_native("records")
@settings(max_examples=examples(300), suppress_health_check=list(HealthCheck))
@given(data=st.binary(min_size=61, max_size=300), codec=st.integers(0, 7))
def test_native_and_twin_agree_on_random_batches(data, codec):
    buf = bytearray(data)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    buf[16] = 2
    buf[22] = (buf[22] & ~7) | codec
    _agree(fix_crc(bytes(buf)))
