"""The storage engine's native hot paths (kafkacore._ext.storage, _native/kc_log.c) against
their pure-Python twin (kafkacore.storage._hot_py): same results, same exception classes, on
Hypothesis-generated batch sequences and on mutated bytes.

- validate_records: the exception class, or every AppendInfo field.
- assign_offsets: the stamped bytes and the returned next offset.
- SegmentScanner.scan fed in random chunks as a segment load does: status, consumed bytes,
  index entries and the scanner state after every call.
- index lookups and sanity checks over random indexes; seek over a temp file in all three
  modes; record_spans.

Parity runs in the native pass only (in the twin pass it would compare the twin with itself)."""
import struct
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacore.checksum import crc32c
from kafkacore.record import RecordBatchBuilder

from _kcutil import (INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, batch_specs, build_batch, examples,
                     native_module, records_st, small_values)

native = native_module("storage")
if native is None:
    pytest.skip("kafkacore._ext.storage is not built or KAFKACORE_NO_EXTENSIONS=1 "
                "(parity runs in the native pass)", allow_module_level=True)

from kafkacore.storage import _hot_py as twin  # noqa: E402

BASE_TS = 1_700_000_000_000
HEADER_FIELDS = [  # (offset, struct format) of the v2 batch header fields
    (0, ">q"), (8, ">i"), (12, ">i"), (16, ">b"), (17, ">I"), (21, ">h"), (23, ">i"), (27, ">q"),
    (35, ">q"), (43, ">q"), (51, ">h"), (53, ">i"), (57, ">i"),
]
INFO_FIELDS = ("batches", "records", "bytes", "max_timestamp", "max_timestamp_delta", "producer_id",
               "producer_epoch", "attributes", "base_sequence", "last_sequence", "is_transactional",
               "has_control")
SCANNER_STATE = ("position", "last_index_position", "next_offset", "max_timestamp", "offset_of_max_timestamp",
                 "last_time_index_timestamp", "batches", "error")


def test_module_constants_match():
    for name in ("SCAN_OK", "SCAN_TRUNCATED", "SCAN_CORRUPT", "SCAN_INDEX_FULL",
                 "SEEK_OFFSET", "SEEK_TIMESTAMP", "SEEK_BOUNDARY"):
        assert getattr(native, name) == getattr(twin, name), name


def outcome(fn, *args):
    """("ok", result) or ("error", exception class)."""
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return "error", type(e)


# ---------------------------------------------------------------------------------------
# inputs


specs_st = batch_specs(max_records=6, values=small_values(60))


def batch_bytes(specs):
    return [build_batch(RecordBatchBuilder, s) for s in specs]


def positions_of(parts):
    out, pos = [], 0
    for p in parts:
        out.append(pos)
        pos += len(p)
    return out


def fix_crc_at(buf, pos):
    """Recompute the CRC of the batch at pos when its length field still frames it."""
    if pos + 21 > len(buf):
        return
    (blen,) = struct.unpack_from(">i", buf, pos + 8)
    end = pos + 12 + blen
    if blen >= 49 and end <= len(buf):
        struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21:end])))


@st.composite
def mutate(draw, parts):
    """parts (batches) joined, then changed one of several ways (or not at all)."""
    buf = bytearray(b"".join(parts))
    starts = positions_of(parts)
    kind = draw(st.sampled_from(["none", "flip", "truncate", "field", "field", "junk", "cut", "dup"]))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(buf) - 1))
            buf[at] ^= draw(st.integers(1, 255))
        if draw(st.booleans()):
            for p in starts:
                fix_crc_at(buf, p)
    elif kind == "truncate":
        buf = buf[:draw(st.integers(0, len(buf) - 1))]
    elif kind == "field":
        p = draw(st.sampled_from(starts))
        at, fmt = draw(st.sampled_from(HEADER_FIELDS))
        size = struct.calcsize(fmt)
        lo, hi = -(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1
        if fmt == ">I":
            lo, hi = 0, (1 << 32) - 1
        old = struct.unpack_from(fmt, buf, p + at)[0]
        value = draw(st.one_of(st.integers(lo, hi), st.sampled_from([v for v in (old - 1, old + 1, 0, -1, 1, 2, 49)
                                                                      if lo <= v <= hi])))
        struct.pack_into(fmt, buf, p + at, value)
        if at != 17 and draw(st.booleans()):
            fix_crc_at(buf, p)
    elif kind == "junk":
        buf += draw(st.binary(min_size=1, max_size=70))
    elif kind == "cut":
        a = draw(st.integers(0, len(buf) - 1))
        b = draw(st.integers(a, min(len(buf), a + 20)))
        del buf[a:b]
    elif kind == "dup":
        buf += parts[draw(st.integers(0, len(parts) - 1))]
    return bytes(buf)


@st.composite
def produce_inputs(draw):
    specs = draw(st.lists(specs_st, min_size=1, max_size=4))
    return draw(mutate(batch_bytes(specs)))


# ---------------------------------------------------------------------------------------
# validate_records / assign_offsets


def info_fields(info):
    return tuple(getattr(info, f) for f in INFO_FIELDS)


@settings(max_examples=examples(250))
@given(buf=produce_inputs(), max_batch=st.one_of(st.just(1 << 40), st.integers(0, 2000)), allow_control=st.booleans())
def test_validate_records_parity(buf, max_batch, allow_control):
    n = outcome(native.validate_records, buf, max_batch, allow_control)
    t = outcome(twin.validate_records, buf, max_batch, allow_control)
    if n[0] == "ok" and t[0] == "ok":
        assert info_fields(n[1]) == info_fields(t[1])
    else:
        assert (n[0], n[1] if n[0] == "error" else info_fields(n[1])) == \
            (t[0], t[1] if t[0] == "error" else info_fields(t[1]))


def test_validate_records_empty_and_odd_buffers():
    for buf in (b"", b"\x00", bytes(11), bytes(12), bytes(61), b"\xff" * 80):
        for allow in (False, True):
            n = outcome(native.validate_records, buf, 1 << 20, allow)
            t = outcome(twin.validate_records, buf, 1 << 20, allow)
            assert (n[0], n[1] if n[0] == "error" else info_fields(n[1])) == \
                (t[0], t[1] if t[0] == "error" else info_fields(t[1])), buf


@settings(max_examples=examples(150))
@given(buf=produce_inputs(), first=st.one_of(st.integers(0, 1 << 40), st.integers(0, 1 << 62)),
       epoch=st.integers(INT32_MIN, INT32_MAX),
       lat=st.one_of(st.just(-1), st.integers(0, 1 << 42), st.integers(INT64_MIN, -2), st.just(INT64_MAX)))
def test_assign_offsets_parity(buf, first, epoch, lat):
    a, b = bytearray(buf), bytearray(buf)
    n = outcome(native.assign_offsets, a, first, epoch, lat)
    t = outcome(twin.assign_offsets, b, first, epoch, lat)
    assert n == t
    assert a == b


def test_assign_offsets_needs_a_writable_buffer():
    data = build_batch(RecordBatchBuilder, ({"compression": "none"}, [(b"v", b"k", BASE_TS, [])]))
    assert outcome(native.assign_offsets, data, 0, 0, -1)[0] == "error"
    assert outcome(twin.assign_offsets, data, 0, 0, -1)[0] == "error"


# ---------------------------------------------------------------------------------------
# SegmentScanner


@st.composite
def segment_streams(draw):
    """A segment's bytes: batches with ascending offsets (gaps sometimes), maybe mutated."""
    specs = draw(st.lists(specs_st, min_size=1, max_size=7))
    seg_base = draw(st.one_of(st.just(0), st.integers(0, 1 << 40)))
    parts = []
    nxt = seg_base + draw(st.sampled_from([0, 0, 0, 3]))
    for data in batch_bytes(specs):
        buf = bytearray(data)
        nxt = twin.assign_offsets(buf, nxt, 0, -1) + draw(st.sampled_from([0, 0, 0, 1, 5]))
        parts.append(bytes(buf))
    return seg_base, draw(mutate(parts))


def scanner_state(sc):
    return tuple(getattr(sc, f) for f in SCANNER_STATE)


@settings(max_examples=examples(200))
@given(stream=segment_streams(), interval=st.one_of(st.integers(0, 300), st.just(4096)), check_crc=st.booleans(),
       chunks=st.lists(st.integers(1, 600), min_size=1, max_size=12), data=st.data())
def test_segment_scanner_parity(stream, interval, check_crc, chunks, data):
    seg_base, buf = stream
    scanners = [native.SegmentScanner(seg_base, interval, check_crc),
                twin.SegmentScanner(seg_base, interval, check_crc)]
    assert scanner_state(scanners[0]) == scanner_state(scanners[1])
    if data.draw(st.booleans()):  # resume from a state, as a segment load does
        # A state a segment load can produce: a max timestamp comes with the offset holding
        # it, inside the segment; no timestamp (-1) with offset -1.
        max_ts = data.draw(st.one_of(st.just(-1), st.integers(0, 1 << 42)))
        state = dict(
            position=data.draw(st.one_of(st.integers(0, 5000), st.integers(INT32_MAX - 200, INT32_MAX + 200))),
            last_index_position=data.draw(st.integers(0, 5000)),
            max_timestamp=max_ts,
            last_time_index_timestamp=data.draw(st.one_of(st.just(-1), st.integers(0, 1 << 42))),
            offset_of_max_timestamp=-1 if max_ts == -1 else data.draw(st.integers(seg_base, seg_base + 5000)),
        )
        for sc in scanners:
            for k, v in state.items():
                setattr(sc, k, v)
    pos, calls = 0, 0
    while pos < len(buf) and calls < 40:
        size = chunks[calls] if calls < len(chunks) else len(buf) - pos
        calls += 1
        chunk = buf[pos:pos + size]
        at_end = pos + len(chunk) >= len(buf)
        rn = scanners[0].scan(chunk)
        rt = scanners[1].scan(chunk)
        assert rn == rt, (pos, size)
        assert scanner_state(scanners[0]) == scanner_state(scanners[1]), (pos, size)
        status, consumed = rn[0], rn[1]
        assert 0 <= consumed <= len(chunk)
        assert status in (twin.SCAN_OK, twin.SCAN_TRUNCATED, twin.SCAN_CORRUPT)
        pos += consumed
        if status == twin.SCAN_CORRUPT or (status == twin.SCAN_TRUNCATED and at_end):
            break


@settings(max_examples=examples(60))
@given(stream=segment_streams(), interval=st.integers(0, 200))
def test_segment_scanner_whole_and_chunked_agree(stream, interval):
    """One scan of everything and a batch-at-a-time scan give the same entries (per impl)."""
    seg_base, buf = stream
    for impl in (native, twin):
        whole = impl.SegmentScanner(seg_base, interval, True)
        w = whole.scan(buf)
        piecewise = impl.SegmentScanner(seg_base, interval, True)
        offs, times, pos = b"", b"", 0
        while pos < len(buf):
            if len(buf) - pos >= 12:
                (blen,) = struct.unpack_from(">i", buf, pos + 8)
                chunk = buf[pos:pos + 12 + max(blen, 0)]
            else:
                chunk = buf[pos:]
            _status, consumed, o, t = piecewise.scan(chunk)
            offs, times = offs + o, times + t
            if consumed == 0:
                break
            pos += consumed
        assert (offs, times) == (w[2], w[3])
        assert piecewise.position == whole.position
        assert piecewise.next_offset == whole.next_offset


# ---------------------------------------------------------------------------------------
# index lookups and sanity checks


def offset_index_bytes(entries):
    return b"".join(struct.pack(">ii", o, p) for o, p in entries)


def time_index_bytes(entries):
    return b"".join(struct.pack(">qi", t, o) for t, o in entries)


int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, INT64_MAX, -1, 0]))


@settings(max_examples=examples(300))
@given(offsets=st.lists(st.integers(0, 1 << 20), unique=True, max_size=60),
       positions=st.lists(st.integers(0, 1 << 30), unique=True, max_size=60),
       targets=st.lists(st.one_of(st.integers(-5, (1 << 20) + 5), int32s), max_size=20),
       sort=st.booleans(), extra=st.integers(0, 3), spare=st.integers(0, 2))
def test_offset_index_lookups_parity(offsets, positions, targets, sort, extra, spare):
    n = min(len(offsets), len(positions))
    entries = list(zip(sorted(offsets[:n]) if sort else offsets[:n], sorted(positions[:n]) if sort else positions[:n]))
    buf = offset_index_bytes(entries) + bytes(8 * spare)  # a preallocated tail
    for count in {len(entries), max(0, len(entries) - extra)}:
        for target in targets + [e[0] for e in entries] + [e[1] for e in entries]:
            if not INT32_MIN <= target <= INT32_MAX:
                continue
            assert native.offset_index_lookup(buf, count, target) == twin.offset_index_lookup(buf, count, target)
            assert native.offset_index_lookup_position(buf, count, target) == \
                twin.offset_index_lookup_position(buf, count, target)
        for log_size in {1, 1 << 31, max([p for _, p in entries], default=0), max([p for _, p in entries], default=0) + 1}:
            if log_size <= INT64_MAX:
                assert native.offset_index_sane(buf, count, log_size) == twin.offset_index_sane(buf, count, log_size)
    # a buffer shorter than its entries is refused by both
    too_many = len(buf) // 8 + 1
    assert outcome(native.offset_index_lookup, buf, too_many, 0) == outcome(twin.offset_index_lookup, buf, too_many, 0)
    assert outcome(native.offset_index_lookup_position, buf, too_many, 0) == \
        outcome(twin.offset_index_lookup_position, buf, too_many, 0)


@settings(max_examples=examples(300))
@given(stamps=st.lists(int64s, unique=True, max_size=60), offsets=st.lists(st.integers(-3, 1 << 20), max_size=60),
       targets=st.lists(int64s, max_size=20), sort=st.booleans(), spare=st.integers(0, 2))
def test_time_index_lookups_parity(stamps, offsets, targets, sort, spare):
    n = min(len(stamps), len(offsets))
    entries = list(zip(sorted(stamps[:n]) if sort else stamps[:n], sorted(offsets[:n]) if sort else offsets[:n]))
    buf = time_index_bytes(entries) + bytes(12 * spare)
    for count in {len(entries), len(entries) // 2}:
        for target in targets + [e[0] for e in entries] + [e[0] - 1 for e in entries if e[0] > INT64_MIN]:
            assert native.time_index_lookup(buf, count, target) == twin.time_index_lookup(buf, count, target)
        assert native.time_index_sane(buf, count) == twin.time_index_sane(buf, count)
    too_many = len(buf) // 12 + 1
    assert outcome(native.time_index_lookup, buf, too_many, 0) == outcome(twin.time_index_lookup, buf, too_many, 0)


def test_index_lookups_on_empty_and_mapped_buffers():
    import mmap
    for impl in (native, twin):
        assert impl.offset_index_lookup(b"", 0, 5) == -1
        assert impl.offset_index_lookup_position(b"", 0, 5) == -1
        assert impl.time_index_lookup(b"", 0, 5) == -1
        assert impl.offset_index_sane(b"", 0, 1) and impl.time_index_sane(b"", 0)
    with tempfile.TemporaryFile() as f:
        f.write(offset_index_bytes([(3, 0), (9, 100), (20, 250)]) + bytes(16))
        f.flush()
        m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
        try:
            for target in range(-1, 25):
                assert native.offset_index_lookup(m, 3, target) == twin.offset_index_lookup(m, 3, target)
        finally:
            m.close()


# ---------------------------------------------------------------------------------------
# seek over a file


@st.composite
def seek_files(draw):
    specs = draw(st.lists(specs_st, min_size=1, max_size=8))
    parts, nxt = [], draw(st.integers(0, 1 << 40))
    for data in batch_bytes(specs):
        buf = bytearray(data)
        nxt = twin.assign_offsets(buf, nxt, 0, -1) + draw(st.sampled_from([0, 0, 2]))
        parts.append(bytes(buf))
    tail = draw(st.sampled_from(["none", "none", "partial batch", "partial header", "junk", "mutated"]))
    buf = b"".join(parts)
    if tail == "partial batch":
        buf += parts[0][:draw(st.integers(12, len(parts[0]) - 1))]
    elif tail == "partial header":
        buf += parts[0][:draw(st.integers(1, 11))]
    elif tail == "junk":
        buf += draw(st.binary(min_size=1, max_size=80))
    elif tail == "mutated":
        buf = draw(mutate(parts))
    return buf, positions_of(parts)


def _seek(impl, fd, start, end, mode, target):
    try:
        return "ok", impl.seek(fd, start, end, mode, target)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return "error", type(e).__name__


@settings(max_examples=examples(100))
@given(f=seek_files(), data=st.data())
def test_seek_parity(f, data):
    buf, starts = f
    with tempfile.TemporaryFile() as fh:
        fh.write(buf)
        fh.flush()
        fd = fh.fileno()
        batches = []
        for p in starts:
            if p + 43 <= len(buf):
                base, = struct.unpack_from(">q", buf, p)
                delta, = struct.unpack_from(">i", buf, p + 23)
                max_ts, = struct.unpack_from(">q", buf, p + 35)
                batches.append((base, base + delta, max_ts))
        offsets = [b[0] for b in batches] + [b[1] for b in batches]
        stamps = [b[2] for b in batches]
        for _ in range(12):
            starts_in = [p for p in starts if p <= len(buf)] or [0]
            start = data.draw(st.one_of(st.sampled_from(starts_in), st.integers(0, len(buf))))
            end = data.draw(st.one_of(st.just(len(buf)), st.integers(start, len(buf) + 100)))
            mode = data.draw(st.sampled_from([twin.SEEK_OFFSET, twin.SEEK_TIMESTAMP, twin.SEEK_BOUNDARY]))
            if mode == twin.SEEK_OFFSET:
                target = data.draw(st.one_of(st.sampled_from(offsets or [0]), st.integers(0, 1 << 41),
                                             st.sampled_from(offsets or [0]).map(lambda o: o + 1)))
            elif mode == twin.SEEK_TIMESTAMP:
                target = data.draw(st.one_of(st.sampled_from(stamps or [0]), int64s,
                                             st.sampled_from(stamps or [0]).map(lambda t: min(t + 1, INT64_MAX))))
            else:
                target = data.draw(st.integers(start, len(buf) + 100))
            n = _seek(native, fd, start, end, mode, target)
            t = _seek(twin, fd, start, end, mode, target)
            assert n == t, (start, end, mode, target, len(buf))


def test_seek_walks_whole_batches():
    """The three modes on a plain file of batches, against values known from building it."""
    parts, nxt = [], 100
    for i in range(6):
        b = RecordBatchBuilder()
        for j in range(i + 1):
            b.append(b"x" * (10 * i), key=b"k", timestamp_ms=BASE_TS + 10 * i + j)
        buf = bytearray(b.build())
        nxt = twin.assign_offsets(buf, nxt, 0, -1)
        parts.append(bytes(buf))
    data = b"".join(parts)
    starts = positions_of(parts)
    with tempfile.TemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        fd = fh.fileno()
        for impl in (native, twin):
            # offsets: batch i holds 100 + i*(i+1)/2 ... + i
            for i, p in enumerate(starts):
                base = 100 + i * (i + 1) // 2
                for target in (base, base + i):
                    got = impl.seek(fd, 0, len(data), impl.SEEK_OFFSET, target)
                    assert got == (p, base, base + i, 0, len(parts[i]))  # no timestamp read here
                got = impl.seek(fd, 0, len(data), impl.SEEK_TIMESTAMP, BASE_TS + 10 * i)
                assert got == (p, base, base + i, BASE_TS + 11 * i, len(parts[i]))
                # boundary: a target inside batch i ends the walk before it, but one batch at least
                assert impl.seek(fd, 0, len(data), impl.SEEK_BOUNDARY, p + 1) == (p if i else len(parts[0]))
                assert impl.seek(fd, p, len(data), impl.SEEK_BOUNDARY, p) == p + len(parts[i])
            assert impl.seek(fd, 0, len(data), impl.SEEK_OFFSET, nxt) is None
            assert impl.seek(fd, 0, len(data), impl.SEEK_TIMESTAMP, BASE_TS + 1000) is None
            assert impl.seek(fd, 0, len(data), impl.SEEK_BOUNDARY, len(data) + 5) == len(data)


# ---------------------------------------------------------------------------------------
# record_spans


@st.composite
def record_sections(draw):
    recs = draw(records_st(max_size=8, values=small_values(80)))
    b = RecordBatchBuilder(compression="none")
    for value, key, ts, headers in recs:
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    section = bytearray(b.build()[61:])
    count = len(recs) + draw(st.sampled_from([0, 0, 0, -1, 1]))
    kind = draw(st.sampled_from(["none", "none", "flip", "truncate", "junk"]))
    if kind == "flip" and section:
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(section) - 1))
            section[at] ^= draw(st.integers(1, 255))
    elif kind == "truncate":
        section = section[:draw(st.integers(0, max(0, len(section) - 1)))]
    elif kind == "junk":
        section += draw(st.binary(min_size=1, max_size=20))
    return bytes(section), count, recs


def _spans(impl, section, count):
    try:
        return "ok", impl.record_spans(section, count)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return "error", type(e).__name__


@settings(max_examples=examples(400))
@given(case=record_sections())
def test_record_spans_parity(case):
    section, count, recs = case
    assert _spans(native, section, count) == _spans(twin, section, count)


@settings(max_examples=examples(150))
@given(recs=records_st(max_size=8, values=small_values(80)))
def test_record_spans_of_built_records(recs):
    b = RecordBatchBuilder(compression="none")
    for value, key, ts, headers in recs:
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    section = b.build()[61:]
    for impl in (native, twin):
        spans = impl.record_spans(section, len(recs))
        assert [s[0] for s in spans] == list(range(len(recs)))
        assert [s[2] for s in spans] == [r[1] for r in recs]
        assert [s[3] for s in spans] == [r[0] is None for r in recs]
        assert spans[0][4] == 0 and spans[-1][5] == len(section)
        assert all(a[5] == b_[4] for a, b_ in zip(spans, spans[1:]))
