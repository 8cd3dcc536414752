"""Log append and read behaviour of the storage engine on real files (kafkacore.storage.Log).

Every expectation here comes from how the input was built (record counts, timestamps, sizes)
or from independent reference walks over the batches, never from the engine's own indexes:
offsets, LogAppendInfo, stored bytes, read slices (batch holding the offset, batch boundaries,
max_bytes / max_offset / min_one_batch, one segment per read), sendfile, rolls (segment.bytes,
segment.ms, full indexes), index trimming and preallocation, LogAppendTime, ListOffsets by
timestamp, rejected input leaving the log untouched, flush.messages / flush.ms, topic-level
recompression, LogConfig validation, and appends racing reads."""
import os
import random
import socket
import struct
import sys
import threading
import time
import traceback

import pytest

from kafkacore.checksum import crc32c
from kafkacore.errors import (CorruptMessageError, InvalidConfigurationError, InvalidRecordError,
                              KafkaError, KafkaStorageError, MessageTooLargeError, OffsetOutOfRangeError,
                              RecordListTooLargeError)
from kafkacore.record import RecordBatchBuilder, codecs, iter_batches
from kafkacore.storage import Log, LogConfig
from kafkacore.storage.scheduler import Scheduler

from _kcutil import CODEC_IDS, CODECS, INT64_MAX, by_mode

BASE_TS = 1_700_000_000_000
ATTR_LOG_APPEND_TIME = 0x08
ATTR_CONTROL = 0x20


# ---------------------------------------------------------------------------------------
# helpers


def build(records, codec="none", **kw):
    """One batch of [(value, key, timestamp, headers)]."""
    b = RecordBatchBuilder(compression=codec, **kw)
    for value, key, ts, headers in records:
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    return b.build()


def simple_records(n, *, ts=BASE_TS, size=20, tag=0, keyed=True):
    return [(bytes([65 + (tag + i) % 26]) * size + b"%d/%d" % (tag, i), b"k%d" % i if keyed else None,
             ts + i, [("h", b"%d" % i)]) for i in range(n)]


def simple_batch(n=1, codec="none", **kw):
    return build(simple_records(n, **kw), codec)


def rec_tuples(data):
    return [(r.offset, r.timestamp_ms, r.key, r.value, [tuple(h) for h in r.headers])
            for b in iter_batches(data) for r in b]


def layout(data):
    """[(position, size, base, last, max_timestamp)] of the batches in data, parsed with struct."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, blen = struct.unpack_from(">qi", data, pos)
        (lod,) = struct.unpack_from(">i", data, pos + 23)
        (max_ts,) = struct.unpack_from(">q", data, pos + 35)
        out.append((pos, blen + 12, base, base + lod, max_ts))
        pos += blen + 12
    assert pos == len(data), "the data does not end on a batch boundary"
    return out


def snapshot(path):
    """{file name: bytes} of a directory: what "the log is unchanged" compares."""
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


def check_whole_batches(data, first_holds=None):
    """data is whole, valid batches with contiguous offsets; returns the batches."""
    batches = list(iter_batches(data))
    assert sum(b.size_in_bytes for b in batches) == len(data)
    for prev, b in zip(batches, batches[1:]):
        assert b.base_offset == prev.last_offset + 1
    for b in batches:
        b.validate()
    if first_holds is not None and batches:
        assert batches[0].base_offset <= first_holds <= batches[0].last_offset
    return batches


def set_crc(buf):
    """Rewrite the CRC of the single batch in buf (CRC-32C of bytes[21:], big-endian at 17)."""
    buf = bytearray(buf)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def log_files(lg, suffix):
    return sorted(n for n in os.listdir(lg.dir) if n.endswith(suffix))


@pytest.fixture
def new_log(tmp_path):
    logs = []

    def make(overrides=None, name="topic-0", **kw):
        lg = Log(str(tmp_path / name), LogConfig(overrides or {}), **kw)
        logs.append(lg)
        return lg

    yield make
    for lg in logs:
        lg.close()


# ---------------------------------------------------------------------------------------
# append: offsets, LogAppendInfo, stored bytes


@pytest.mark.parametrize("codec", CODECS)
def test_append_offsets_info_and_stored_bytes(new_log, codec):
    lg = new_log()
    rnd = random.Random(f"append-{codec}")
    appended = []  # (original bytes, first offset)
    expected_records = []
    nxt = 0
    for i in range(by_mode(40, 15)):
        n = rnd.randint(1, 6)
        tss = [BASE_TS + rnd.randint(-5000, 5000) for _ in range(n)]
        recs = [(rnd.randbytes(rnd.randint(0, 80)), None if j == 1 else b"k%d" % j, tss[j],
                 [("i", b"%d" % i)] if j % 2 else []) for j in range(n)]
        data = build(recs, codec, producer_id=1000 + i, producer_epoch=3, base_sequence=10 * i,
                     partition_leader_epoch=-1, base_offset=rnd.choice([0, 12345]))
        info = lg.append(data, leader_epoch=7)
        assert info.first_offset == nxt
        assert info.last_offset == nxt + n - 1
        assert info.records == n
        assert info.bytes == len(data)
        assert info.log_append_time == -1  # CreateTime topic
        assert info.max_timestamp == max(tss)
        # Kafka's shallowOffsetOfMaxTimestamp: the last offset of the batch holding the max
        assert info.offset_of_max_timestamp == info.last_offset
        assert info.log_start_offset == 0
        appended.append((data, nxt))
        expected_records += [(nxt + j, tss[j], r[1], r[0], [tuple(h) for h in r[3]]) for j, r in enumerate(recs)]
        nxt += n
        assert lg.log_end_offset == nxt == lg.high_watermark

    stored = lg.read_batches_bytes()
    batches = list(iter_batches(stored))
    assert len(batches) == len(appended)
    for batch, (orig, first) in zip(batches, appended):
        sb = batch.to_bytes()
        assert len(sb) == len(orig)
        assert struct.unpack_from(">q", sb, 0)[0] == first
        assert struct.unpack_from(">i", sb, 12)[0] == 7  # partitionLeaderEpoch stamped
        # everything else is what the producer sent, the CRC included (it does not cover them)
        assert sb[8:12] == orig[8:12]
        assert sb[16:] == orig[16:]
        batch.validate()
        assert batch.compression == codec
    assert rec_tuples(stored) == expected_records
    assert lg.size_in_bytes == sum(len(d) for d, _ in appended)


def test_append_of_several_batches_at_once(new_log):
    lg = new_log()
    lg.append(simple_batch(2))
    a = build(simple_records(3, ts=BASE_TS + 50), "gzip")
    b = build(simple_records(2, ts=BASE_TS + 900, tag=5), "none")
    c = build(simple_records(4, ts=BASE_TS + 100, tag=9), "zstd")
    info = lg.append(a + b + c, leader_epoch=2)
    assert (info.first_offset, info.last_offset, info.records, info.bytes) == (2, 10, 9, len(a + b + c))
    assert info.max_timestamp == BASE_TS + 901
    assert info.offset_of_max_timestamp == 2 + 3 + 2 - 1  # last offset of the second batch
    stored = lg.read_batches_bytes(2)
    bases = [(bt.base_offset, bt.last_offset, bt.compression, bt.partition_leader_epoch) for bt in iter_batches(stored)]
    assert bases == [(2, 4, "gzip", 2), (5, 6, "none", 2), (7, 10, "zstd", 2)]
    check_whole_batches(stored)


def test_bytearray_and_memoryview_input(new_log):
    lg = new_log()
    data = simple_batch(3)
    keep = bytes(data)
    lg.append(data)
    assert data == keep  # bytes input is not touched
    lg.append(memoryview(bytearray(simple_batch(2))))
    lg.append(bytearray(simple_batch(1)))
    ro = simple_batch(2)
    lg.append(memoryview(ro))  # read-only: copied before stamping
    assert ro == simple_batch(2)
    assert lg.log_end_offset == 8
    batches = check_whole_batches(lg.read_batches_bytes())
    assert [b.base_offset for b in batches] == [0, 3, 5, 6]


def test_reopen_keeps_offsets_and_bytes(new_log, tmp_path):
    lg = new_log({"segment.bytes": 1200, "index.interval.bytes": 100})
    for i in range(30):
        lg.append(simple_batch(1 + i % 4, tag=i, ts=BASE_TS + 10 * i))
    data, end = lg.read_batches_bytes(), lg.log_end_offset
    lg.close()
    lg2 = new_log({"segment.bytes": 1200, "index.interval.bytes": 100})
    assert lg2.log_end_offset == end
    assert lg2.read_batches_bytes() == data
    assert lg2.append(simple_batch(2)).first_offset == end
    check_whole_batches(lg2.read_batches_bytes())


# ---------------------------------------------------------------------------------------
# read


def _reference_slice(lay, offset, max_bytes, max_offset=None, min_one_batch=True):
    """(start position, length) Kafka-style within one segment's batches (lay = layout)."""
    i = next(k for k, b in enumerate(lay) if b[3] >= offset)
    start = lay[i][0]
    length = 0
    for k in range(i, len(lay)):
        pos, size, base, last, _ = lay[k]
        if max_offset is not None and last >= max_offset:
            break
        if length + size > max_bytes and not (k == i and min_one_batch):
            break
        length += size
    return start, length, lay[i][2]


@pytest.fixture
def one_segment_log(new_log):
    lg = new_log({"index.interval.bytes": 150})
    rnd = random.Random(5)
    for i in range(by_mode(30, 14)):
        recs = [(rnd.randbytes(rnd.randint(1, 90)), b"k", BASE_TS + i, []) for _ in range(rnd.randint(1, 5))]
        lg.append(build(recs, rnd.choice(["none", "none", "lz4"])))
    assert len(lg.segments) == 1
    return lg, layout(lg.read_batches_bytes())


def test_read_starts_at_batch_holding_offset_and_ends_on_boundary(one_segment_log):
    lg, lay = one_segment_log
    rnd = random.Random(11)
    sizes = sorted({b[1] for b in lay})
    for offset in range(lg.log_end_offset):
        holder = next(b for b in lay if b[2] <= offset <= b[3])
        choices = {0, 1, holder[1] - 1, holder[1], holder[1] + 1, 250, 600, 10**9, holder[1] + sizes[0]}
        choices |= {rnd.randint(1, 2000) for _ in range(3)}
        for max_bytes in sorted(c for c in choices if c >= 0):
            sl = lg.read(offset, max_bytes)
            start, length, base = _reference_slice(lay, offset, max_bytes)
            assert (sl.position, sl.length, sl.first_offset) == (start, length, base), (offset, max_bytes)
            data = sl.read()
            assert len(data) == length
            check_whole_batches(data, first_holds=offset)
            # at least one whole batch, never more than max_bytes otherwise
            assert length <= max(max_bytes, holder[1])


def test_read_max_bytes_smaller_than_a_batch(one_segment_log):
    lg, lay = one_segment_log
    for pos, size, base, last, _ in lay:
        for offset in (base, last, (base + last) // 2):
            sl = lg.read(offset, 1)
            assert (sl.position, sl.length) == (pos, size)  # exactly one whole batch
            assert len(list(iter_batches(sl.read()))) == 1
            empty = lg.read(offset, size - 1, min_one_batch=False)
            assert empty.length == 0 and empty.read() == b""
            exact = lg.read(offset, size, min_one_batch=False)
            assert (exact.position, exact.length) == (pos, size)
            for mb in (size + 1, 3 * size, 10**9):
                a = lg.read(offset, mb, min_one_batch=False)
                assert (a.position, a.length) == _reference_slice(lay, offset, mb, min_one_batch=False)[:2]


def test_read_bounded_by_max_offset(one_segment_log):
    lg, lay = one_segment_log
    end = lg.log_end_offset
    rnd = random.Random(3)
    for _ in range(by_mode(300, 100)):
        offset = rnd.randrange(end)
        max_offset = rnd.randrange(end + 3)
        max_bytes = rnd.choice([1, 200, 700, 10**9])
        sl = lg.read(offset, max_bytes, max_offset=max_offset)
        data = sl.read()
        if offset >= max_offset:
            assert sl.length == 0
            continue
        start, length, _ = _reference_slice(lay, offset, max_bytes,
                                            max_offset=max_offset if max_offset < end else None)
        assert sl.length == length, (offset, max_offset, max_bytes)
        if length:
            assert sl.position == start
            for b in check_whole_batches(data, first_holds=offset):
                assert b.last_offset < max_offset


def test_read_against_reference_over_segments(new_log):
    """Random reads (offset, max_bytes, max_offset, min_one_batch) over a log of many segments:
    the slice is the reference slice within the one segment holding the offset."""
    lg = new_log({"segment.bytes": 1200, "index.interval.bytes": 90})
    rnd = random.Random(21)
    for i in range(70):
        recs = [(rnd.randbytes(rnd.randint(1, 150)), b"k", BASE_TS + i, []) for _ in range(rnd.randint(1, 4))]
        lg.append(build(recs, rnd.choice(["none", "none", "gzip", "zstd"])))
    segs = lg.segments
    assert len(segs) >= 5
    lays = {}
    for seg in segs:
        with open(seg.log_path, "rb") as f:
            lays[seg.base_offset] = layout(f.read())
    end = lg.log_end_offset
    for _ in range(by_mode(1500, 500)):
        offset = rnd.randrange(end)
        seg = [s for s in segs if s.base_offset <= offset][-1]
        max_offset = rnd.choice([None, None, rnd.randrange(end + 2)])
        max_bytes = rnd.choice([0, 1, rnd.randint(50, 400), rnd.randint(400, 2000), 1 << 30])
        min_one = rnd.random() < 0.7
        sl = lg.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
        case = (offset, max_bytes, max_offset, min_one)
        if max_offset is not None and offset >= max_offset:
            assert sl.length == 0, case
            continue
        bound = max_offset if max_offset is not None and max_offset < end else None
        start, length, base = _reference_slice(lays[seg.base_offset], offset, max_bytes, bound, min_one)
        assert sl.length == length, case
        if length:
            assert (sl.file.path, sl.position, sl.first_offset) == (seg.log_path, start, base), case
            check_whole_batches(sl.read(), first_holds=offset)


def test_read_at_end_and_out_of_range(new_log):
    lg = new_log({"segment.bytes": 600})
    assert lg.read(0, 100).length == 0  # empty log: offset 0 is the end
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(1, 100)
    for i in range(12):
        lg.append(simple_batch(3, tag=i))
    end = lg.log_end_offset
    sl = lg.read(end, 10**6)
    assert sl.length == 0 and sl.read() == b""
    for bad in (end + 1, end + 1000, -1):
        with pytest.raises(OffsetOutOfRangeError) as e:
            lg.read(bad, 100)
        assert e.value.code == 1
    assert len(lg.segments) > 2
    new_start = lg.segments[1].base_offset + 1  # inside the second segment
    assert lg.delete_records(new_start) == new_start
    assert lg.log_start_offset == new_start
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(new_start - 1, 100)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    sl = lg.read(new_start, 10**6)
    check_whole_batches(sl.read(), first_holds=new_start)
    assert lg.append(simple_batch(1)).log_start_offset == new_start


def test_reads_stop_at_segment_boundaries(new_log):
    lg = new_log({"segment.bytes": 1500, "index.interval.bytes": 100})
    rnd = random.Random(8)
    for i in range(60):
        lg.append(build(simple_records(rnd.randint(1, 4), size=rnd.randint(5, 120), tag=i), rnd.choice(CODECS)))
    segs = lg.segments
    assert len(segs) >= 4
    files = {}
    for seg in segs:
        with open(seg.log_path, "rb") as f:
            files[seg.base_offset] = f.read()
    for seg in segs:
        if seg.size == 0:
            continue
        lay = layout(files[seg.base_offset])
        for k in (0, len(lay) // 2, len(lay) - 1):
            pos, _size, base, last, _ = lay[k]
            for offset in (base, last):
                sl = lg.read(offset, 10**9)
                assert sl.file.path == seg.log_path
                assert sl.position == pos
                assert sl.read() == files[seg.base_offset][pos:]  # the rest of this segment only
                assert list(iter_batches(sl.read()))[-1].next_offset == seg.next_offset
    # walking reads from the start gives every segment's bytes in order
    offset, parts = 0, []
    while offset < lg.log_end_offset:
        sl = lg.read(offset, rnd.randint(1, 900))
        data = sl.read()
        parts.append(data)
        offset = list(iter_batches(data))[-1].next_offset
    assert b"".join(parts) == b"".join(files[s.base_offset] for s in segs)


def _socket_pair(kind):
    if kind == "unix":
        return socket.socketpair()
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
    return client, conn


@pytest.mark.parametrize("kind", ["unix", "tcp-loopback"])
def test_sendfile_gives_the_bytes_of_read(new_log, kind):
    lg = new_log({"index.interval.bytes": 1000})
    rnd = random.Random(2)
    for i in range(by_mode(120, 60)):
        lg.append(build([(rnd.randbytes(rnd.randint(100, 3000)), b"k", BASE_TS, [])], rnd.choice(CODECS)))
    sl = lg.read(7, 1 << 30)
    expected = sl.read()
    assert sl.length == len(expected) > by_mode(100_000, 50_000)
    check_whole_batches(expected, first_holds=7)
    a, b = _socket_pair(kind)
    received = bytearray()

    def receive(total):
        while len(received) < total:
            chunk = b.recv(1 << 16)
            if not chunk:
                break
            received.extend(chunk)

    try:
        t = threading.Thread(target=receive, args=(sl.length,))
        t.start()
        sent = 0
        while sent < sl.length:
            n = sl.sendfile(a.fileno(), sent)
            assert n > 0
            sent += n
        t.join(30)
        assert not t.is_alive()
        assert bytes(received) == expected
        # a part of the slice: offset and count within it
        received.clear()
        n = sl.sendfile(a.fileno(), 1000, 5000)
        assert 0 < n <= 5000
        t = threading.Thread(target=receive, args=(n,))
        t.start()
        t.join(30)
        assert bytes(received) == expected[1000:1000 + n]
    finally:
        a.close()
        b.close()


def test_slice_outlives_deleted_segment(new_log):
    lg = new_log({"segment.bytes": 800, "file.delete.delay.ms": 0})
    for i in range(20):
        lg.append(simple_batch(2, tag=i, size=40))
    first = lg.segments[0]
    sl = lg.read(0, 1 << 20)
    with open(first.log_path, "rb") as f:
        expected = f.read()
    lg.delete_records(lg.segments[2].base_offset)
    assert lg.segments[0].base_offset > first.base_offset
    assert not os.path.exists(first.log_path)  # gone from the directory
    assert sl.read() == expected  # the slice still holds the file
    a, b = socket.socketpair()
    try:
        assert sl.sendfile(a.fileno(), 0, 200) == 200
        assert b.recv(200) == expected[:200]
    finally:
        a.close()
        b.close()


# ---------------------------------------------------------------------------------------
# rolls, index files


def test_roll_on_segment_bytes(new_log):
    limit = 2000
    lg = new_log({"segment.bytes": limit})
    rnd = random.Random(4)
    for i in range(by_mode(80, 40)):
        lg.append(build([(rnd.randbytes(rnd.randint(40, 500)), b"k", BASE_TS + i, [])]))
    segs = lg.segments
    assert len(segs) > 5
    assert log_files(lg, ".log") == [f"{s.base_offset:020d}.log" for s in segs]
    assert log_files(lg, ".index") == [f"{s.base_offset:020d}.index" for s in segs]
    assert log_files(lg, ".timeindex") == [f"{s.base_offset:020d}.timeindex" for s in segs]
    assert all(len(n) == 24 for n in log_files(lg, ".log"))
    lays = []
    for seg in segs:
        with open(seg.log_path, "rb") as f:
            data = f.read()
        assert len(data) == seg.size <= limit
        lays.append(layout(data))
        assert lays[-1][0][2] == seg.base_offset  # named after its first batch's base offset
    for k in range(len(segs) - 1):
        assert segs[k].next_offset == segs[k + 1].base_offset
        # it rolled because the next batch would not fit
        assert segs[k].size + lays[k + 1][0][1] > limit
    assert lays[0][0][2] == 0 and segs[-1].next_offset == lg.log_end_offset
    # each rolled segment is flushed (inline here): the recovery point is the last roll's base
    assert lg.recovery_point == segs[-1].base_offset


def test_rolled_segment_is_flushed_after_the_delay_and_at_a_clean_shutdown(new_log, monkeypatch):
    """Under a background scheduler a rolled segment's fsync waits ROLLED_SEGMENT_FLUSH_DELAY_MS
    (the kernel writes the pages back meanwhile); the recovery point moves only once it ran,
    and a clean shutdown (run_pending) runs the flushes still waiting."""
    import kafkacore.storage.local_log as log_module
    monkeypatch.setattr(log_module, "ROLLED_SEGMENT_FLUSH_DELAY_MS", 400)
    scheduler = Scheduler()
    try:
        lg = new_log({"segment.bytes": 600}, scheduler=scheduler)
        rnd = random.Random(5)
        t_roll = None
        while len(lg.segments) < 2:
            lg.append(build([(rnd.randbytes(200), b"k", BASE_TS, [])]))
            if len(lg.segments) == 2:
                t_roll = time.monotonic()
        rolled_base = lg.segments[-1].base_offset
        assert lg.recovery_point == 0  # not flushed at the roll
        while lg.recovery_point != rolled_base:
            assert time.monotonic() - t_roll < 10, "the rolled segment was never flushed"
            time.sleep(0.01)
        assert time.monotonic() - t_roll >= 0.35  # not before the delay
    finally:
        scheduler.shutdown(run_pending=True)

    monkeypatch.setattr(log_module, "ROLLED_SEGMENT_FLUSH_DELAY_MS", 3_600_000)
    scheduler = Scheduler()
    lg = new_log({"segment.bytes": 600}, name="topic-1", scheduler=scheduler)
    rnd = random.Random(6)
    while len(lg.segments) < 3:
        lg.append(build([(rnd.randbytes(200), b"k", BASE_TS, [])]))
    time.sleep(0.2)  # a negative check: no flush runs before its (hour-long) delay
    assert lg.recovery_point == 0
    scheduler.shutdown(run_pending=True)
    assert lg.recovery_point == lg.segments[-1].base_offset


def test_roll_on_segment_ms_uses_batch_timestamps(new_log):
    lg = new_log({"segment.ms": 1000})
    t0 = BASE_TS

    def append(ts):
        lg.append(build([(b"v", b"k", ts, [])]))
        return [s.base_offset for s in lg.segments]

    assert append(t0) == [0]
    assert append(t0 + 400) == [0]
    assert append(t0 + 1000) == [0]  # waited == segment.ms: not yet
    assert append(t0 - 50_000) == [0]  # older timestamps do not roll
    assert append(t0 + 1001) == [0, 4]
    assert append(t0 + 1500) == [0, 4]
    assert append(t0 + 2001) == [0, 4]
    assert append(t0 + 2002) == [0, 4, 7]
    # a far-future batch rolls once; the next segment measures from that batch
    assert append(t0 + 10**9) == [0, 4, 7, 8]
    assert append(t0 + 10**9 + 999) == [0, 4, 7, 8]
    # reopened, the active segment measures from its first batch's timestamp read from the file
    lg.close()
    lg = new_log({"segment.ms": 1000})
    assert [s.base_offset for s in lg.segments] == [0, 4, 7, 8]
    assert append(t0 + 10**9 + 1000) == [0, 4, 7, 8]
    assert append(t0 + 10**9 + 1001) == [0, 4, 7, 8, 11]


def test_roll_on_full_index_and_trimmed_index_files(new_log):
    index_bytes = 36  # 4 offset entries, 3 time entries (one kept for the final entry)
    lg = new_log({"segment.index.bytes": index_bytes, "index.interval.bytes": 0})
    for i in range(by_mode(40, 20)):
        lg.append(simple_batch(2, ts=BASE_TS + 10 * i, tag=i))
    segs = lg.segments
    assert len(segs) > 5
    assert all(s.size < 5000 for s in segs)  # not a size roll
    max_off, max_time = index_bytes // 8, index_bytes // 12
    for seg in segs[:-1]:
        idx, tidx = seg.offset_index.path, seg.time_index.path
        n_off, n_time = os.path.getsize(idx) // 8, os.path.getsize(tidx) // 12
        assert os.path.getsize(idx) == n_off * 8 and os.path.getsize(tidx) == n_time * 12
        assert 0 < n_off <= max_off and 0 < n_time <= max_time
        assert n_off == seg.offset_index.entries and n_time == seg.time_index.entries
        with open(idx, "rb") as f:
            raw = f.read()
        entries = [struct.unpack_from(">ii", raw, 8 * k) for k in range(n_off)]
        assert all(e[1] > 0 for e in entries)  # real entries, no preallocated zeros
    act = segs[-1]
    assert os.path.getsize(act.offset_index.path) == max_off * 8
    assert os.path.getsize(act.time_index.path) == max_time * 12
    check_whole_batches(lg.read_batches_bytes())


def test_roll_on_full_offset_index(new_log):
    """Constant timestamps: the time index keeps one entry and the offset index fills. With
    index.interval.bytes=0 every batch but a segment's first gets an entry, so a segment with
    room for 6 entries holds 7 batches."""
    lg = new_log({"segment.index.bytes": 48, "index.interval.bytes": 0})
    for i in range(30):
        lg.append(simple_batch(1, ts=BASE_TS, tag=i))
    segs = lg.segments
    assert [s.base_offset for s in segs] == [0, 7, 14, 21, 28]
    for seg in segs[:-1]:
        with open(seg.offset_index.path, "rb") as f:
            raw = f.read()
        assert len(raw) == 48
        with open(seg.log_path, "rb") as f:
            layout_ = layout(f.read())
        assert [struct.unpack_from(">ii", raw, k) for k in range(0, 48, 8)] == \
            [(b[3] - seg.base_offset, b[0]) for b in layout_[1:]]
        with open(seg.time_index.path, "rb") as f:
            # one entry, at the first index point: the max and the batch that first reached it
            assert f.read() == struct.pack(">qi", BASE_TS, 0)


def test_index_files_trimmed_on_roll_and_preallocated_while_active(new_log):
    index_bytes = 1000
    lg = new_log({"segment.bytes": 3000, "segment.index.bytes": index_bytes, "index.interval.bytes": 0})
    for i in range(60):
        lg.append(simple_batch(1 + i % 3, ts=BASE_TS + i, tag=i, size=60))
    segs = lg.segments
    assert len(segs) > 3
    for seg in segs[:-1]:
        assert os.path.getsize(seg.offset_index.path) == seg.offset_index.entries * 8
        assert os.path.getsize(seg.time_index.path) == seg.time_index.entries * 12
        assert seg.offset_index.entries > 0 and seg.time_index.entries > 0
    act = segs[-1]
    assert os.path.getsize(act.offset_index.path) == (index_bytes // 8) * 8 == 1000
    assert os.path.getsize(act.time_index.path) == (index_bytes // 12) * 12 == 996
    lg.roll()
    assert os.path.getsize(act.offset_index.path) == act.offset_index.entries * 8
    assert os.path.getsize(act.time_index.path) == act.time_index.entries * 12
    new_act = lg.segments[-1]
    assert new_act.base_offset == lg.log_end_offset
    assert os.path.getsize(new_act.offset_index.path) == 1000
    assert os.path.getsize(new_act.time_index.path) == 996
    lg.close()
    for seg in lg.segments:  # close trims the active segment too
        assert os.path.getsize(seg.offset_index.path) % 8 == 0
        assert os.path.getsize(seg.offset_index.path) == seg.offset_index.entries * 8


# ---------------------------------------------------------------------------------------
# timestamps


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_log_append_time(new_log, codec):
    lg = new_log({"message.timestamp.type": "LogAppendTime"})
    old = BASE_TS - 10**9
    recs = [(b"v%d" % i, b"k%d" % i, old + i, [("a", b"b")]) for i in range(5)]
    data = build(recs, codec)
    before = time.time_ns() // 1_000_000
    info = lg.append(data)
    after = time.time_ns() // 1_000_000
    assert before <= info.log_append_time <= after
    assert info.max_timestamp == info.log_append_time
    assert info.offset_of_max_timestamp == info.last_offset == 4
    (batch,) = list(iter_batches(lg.read_batches_bytes()))
    assert batch.attributes & ATTR_LOG_APPEND_TIME
    assert batch.timestamp_type == 1
    assert batch.max_timestamp == info.log_append_time
    assert batch.compression == codec
    batch.validate()  # CRC recomputed
    sb = batch.to_bytes()
    assert struct.unpack_from(">I", sb, 17)[0] == crc32c(sb[21:])
    assert [(r.offset, r.timestamp_ms, r.value) for r in batch] == \
        [(i, info.log_append_time, b"v%d" % i) for i in range(5)]
    # the base timestamp and record bytes are the producer's
    assert struct.unpack_from(">q", sb, 27)[0] == old
    assert sb[61:] == data[61:]
    assert lg.offset_for_timestamp(info.log_append_time) == (0, info.log_append_time)


def test_log_append_time_topic_rolls_on_append_time(new_log):
    """On a LogAppendTime topic the batches' timestamps are the append times, so segment.ms
    measures those (Kafka's maybeRoll sees the validated maxTimestamp): producer clocks far
    ahead or behind do not roll segments."""
    lg = new_log({"message.timestamp.type": "LogAppendTime", "segment.ms": 600_000})
    now = time.time_ns() // 1_000_000
    for ts in (now + 10**8, now + 10**8, now - 10**9, now + 10**8, now + 3 * 10**8):
        info = lg.append(build([(b"v", b"k", ts, [])]))
        assert abs(info.log_append_time - now) < 600_000
    assert [s.base_offset for s in lg.segments] == [0]
    assert lg.segments[0].max_timestamp_so_far == info.log_append_time


def test_create_time_keeps_producer_timestamps(new_log):
    lg = new_log({"message.timestamp.type": "CreateTime"})
    tss = [BASE_TS - 10**9, BASE_TS + 5, BASE_TS - 3]
    data = build([(b"v", b"k", ts, []) for ts in tss], "gzip")
    info = lg.append(data)
    assert info.log_append_time == -1 and info.max_timestamp == BASE_TS + 5
    (batch,) = list(iter_batches(lg.read_batches_bytes()))
    assert not batch.attributes & ATTR_LOG_APPEND_TIME
    assert batch.max_timestamp == BASE_TS + 5
    assert [r.timestamp_ms for r in batch] == tss
    assert batch.to_bytes()[16:] == data[16:]


def _reference_offset_for_timestamp(batches, target, start):
    """Kafka's search: the first batch (offset order) whose maxTimestamp >= target, then the
    first record in it at or after the log start with timestamp >= target; on to the next
    batch if it has none."""
    for b in batches:
        if b.last_offset < start or b.max_timestamp < target:
            continue
        for r in b:
            if r.offset >= start and r.timestamp_ms >= target:
                return r.offset, r.timestamp_ms
    return None


def _reference_max_timestamp(batches, start):
    best = None
    for b in batches:
        for r in b:
            if r.offset >= start and (best is None or r.timestamp_ms > best[1]):
                best = (r.offset, r.timestamp_ms)
    return best


def _check_offsets_for_times(lg, targets):
    batches = list(iter_batches(lg.read_batches_bytes()))
    start = lg.log_start_offset
    for target in targets:
        assert lg.offset_for_timestamp(target) == _reference_offset_for_timestamp(batches, target, start), target
    assert lg.offset_for_timestamp(-2) == (start, -1)
    assert lg.offset_for_timestamp(-1) == (lg.log_end_offset, -1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_offset_for_timestamp_against_reference(new_log, seed):
    overrides = {"segment.bytes": 1400, "index.interval.bytes": 120}
    lg = new_log(overrides)
    rnd = random.Random(seed)
    all_ts = []
    for i in range(70):
        n = rnd.randint(1, 5)
        # timestamps jump around between batches and inside them
        tss = [BASE_TS + rnd.randint(0, 3000) for _ in range(n)]
        all_ts += tss
        lg.append(build([(b"v", b"k", ts, []) for ts in tss], rnd.choice(["none", "gzip", "lz4"])))
    assert len(lg.segments) > 3
    targets = sorted({t + d for t in all_ts for d in (-1, 0, 1)} | {0, BASE_TS - 1, max(all_ts) + 1, 10**15})
    targets = rnd.sample(targets, min(len(targets), by_mode(400, 120))) + [max(all_ts), max(all_ts) + 1]
    _check_offsets_for_times(lg, targets)
    assert lg.offset_for_timestamp(max(all_ts) + 1) is None
    assert lg.offset_for_timestamp(10**15) is None
    batches = list(iter_batches(lg.read_batches_bytes()))
    assert lg.offset_for_timestamp(-3) == _reference_max_timestamp(batches, 0)
    # the same answers from the index files after a reopen
    lg.close()
    lg2 = new_log(overrides)
    _check_offsets_for_times(lg2, targets)
    assert lg2.offset_for_timestamp(-3) == _reference_max_timestamp(batches, 0)
    # and after more appends to the reopened log
    for i in range(20):
        tss = [BASE_TS + rnd.randint(0, 3500) for _ in range(rnd.randint(1, 4))]
        lg2.append(build([(b"w", b"k", ts, []) for ts in tss], rnd.choice(["none", "zstd"])))
    _check_offsets_for_times(lg2, targets + [BASE_TS + 3500])
    batches = list(iter_batches(lg2.read_batches_bytes()))
    assert lg2.offset_for_timestamp(-3) == _reference_max_timestamp(batches, 0)


def test_offset_for_timestamp_monotonic_with_log_start(new_log):
    lg = new_log({"segment.bytes": 1000, "index.interval.bytes": 60})
    ts = BASE_TS
    for i in range(by_mode(60, 30)):
        n = 1 + i % 4
        lg.append(build([(b"v%d" % j, b"k", ts + 10 * j, []) for j in range(n)]))
        ts += 10 * n
    assert lg.offset_for_timestamp(BASE_TS) == (0, BASE_TS)
    assert lg.offset_for_timestamp(BASE_TS + 25) == (3, BASE_TS + 30)
    assert lg.offset_for_timestamp(ts - 10) == (lg.log_end_offset - 1, ts - 10)
    assert lg.offset_for_timestamp(ts - 9) is None
    assert lg.offset_for_timestamp(-3) == (lg.log_end_offset - 1, ts - 10)
    start = lg.segments[2].base_offset + 2
    lg.delete_records(start)
    targets = list(range(BASE_TS - 5, ts + 5, 7))
    _check_offsets_for_times(lg, targets)
    assert lg.offset_for_timestamp(BASE_TS) == (start, BASE_TS + 10 * start)
    assert lg.offset_for_timestamp(-2) == (start, -1)


def test_offset_for_timestamp_max_timestamp_ties(new_log):
    lg = new_log({"segment.bytes": 300})
    lg.append(build([(b"a", b"k", BASE_TS + 5, []), (b"b", b"k", BASE_TS + 9, [])]))
    lg.append(build([(b"c", b"k", BASE_TS + 9, []), (b"d", b"k", BASE_TS + 1, [])]))
    lg.append(build([(b"e", b"k", BASE_TS + 2, [])] * 3))
    lg.append(build([(b"f", b"k", BASE_TS + 9, [])]))
    assert len(lg.segments) > 1
    assert lg.offset_for_timestamp(-3) == (1, BASE_TS + 9)
    assert lg.offset_for_timestamp(BASE_TS + 6) == (1, BASE_TS + 9)
    assert lg.offset_for_timestamp(BASE_TS + 3) == (0, BASE_TS + 5)
    empty = new_log(name="empty-0")
    assert empty.offset_for_timestamp(-3) is None
    assert empty.offset_for_timestamp(BASE_TS) is None
    assert empty.offset_for_timestamp(-2) == (0, -1)
    assert empty.offset_for_timestamp(-1) == (0, -1)


# ---------------------------------------------------------------------------------------
# bad input leaves the log unchanged


def _flip(data, at):
    b = bytearray(data)
    b[at] ^= 0x40
    return bytes(b)


def _with_header(data, fmt, at, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, at, value)
    return set_crc(b)


GOOD = simple_batch(3, tag=1)

BAD_INPUTS = [
    ("flipped record byte", lambda: _flip(GOOD, 70), {}, CorruptMessageError),
    ("flipped header byte", lambda: _flip(GOOD, 45), {}, CorruptMessageError),
    ("flipped crc", lambda: _flip(GOOD, 18), {}, CorruptMessageError),
    ("truncated batch", lambda: GOOD[:-3], {}, CorruptMessageError),
    ("truncated header", lambda: GOOD[:30], {}, CorruptMessageError),
    ("good batch then a partial one", lambda: GOOD + GOOD[:11], {}, CorruptMessageError),
    ("good batch then a corrupt one", lambda: GOOD + _flip(GOOD, 80), {}, CorruptMessageError),
    ("magic 1", lambda: _with_header(GOOD, ">b", 16, 1), {}, CorruptMessageError),
    ("count too large", lambda: _with_header(GOOD, ">i", 57, 4), {}, InvalidRecordError),
    ("count too small", lambda: _with_header(GOOD, ">i", 57, 2), {}, InvalidRecordError),
    ("last offset delta off", lambda: _with_header(GOOD, ">i", 23, 5), {}, InvalidRecordError),
    ("good batch then an inconsistent one", lambda: GOOD + _with_header(GOOD, ">i", 57, 9), {}, InvalidRecordError),
    ("batch larger than max.message.bytes", lambda: GOOD, {"max.message.bytes": len(GOOD) - 1},
     MessageTooLargeError),
    ("records larger than segment.bytes", lambda: simple_batch(12, size=100),
     {"segment.bytes": 1000}, RecordListTooLargeError),
    ("compacted topic, null key", lambda: build([(b"v", b"k", BASE_TS, []), (b"v", None, BASE_TS, [])]),
     {"cleanup.policy": "compact"}, InvalidRecordError),
    ("compacted topic, null key, compressed",
     lambda: build([(b"v", b"k", BASE_TS, []), (b"v", None, BASE_TS, [])], "lz4"),
     {"cleanup.policy": "compact,delete"}, InvalidRecordError),
    ("control batch from a client", lambda: _with_header(GOOD, ">h", 21, 0x20 | 0x10), {}, InvalidRecordError),
]


@pytest.mark.parametrize("make_input,overrides,error", [pytest.param(*c[1:], id=c[0]) for c in BAD_INPUTS])
def test_bad_input_leaves_log_unchanged(new_log, make_input, overrides, error):
    lg = new_log(overrides)
    for i in range(3):
        lg.append(build(simple_records(2, tag=i)))
    lg.flush()
    files, end, size = snapshot(lg.dir), lg.log_end_offset, lg.size_in_bytes
    bad = make_input()
    with pytest.raises(error) as e:
        lg.append(bad)
    assert isinstance(e.value, KafkaError)
    assert e.value.code == {CorruptMessageError: 2, InvalidRecordError: 87, MessageTooLargeError: 10,
                            RecordListTooLargeError: 18}[error]
    assert type(e.value) is error
    assert (lg.log_end_offset, lg.size_in_bytes, lg.high_watermark) == (end, size, end)
    assert snapshot(lg.dir) == files
    # the log takes the next good append at the same offset
    assert lg.append(build(simple_records(1, tag=9))).first_offset == end
    batches = check_whole_batches(lg.read_batches_bytes())
    assert [b.base_offset for b in batches] == [0, 2, 4, 6]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compacted_topic_rejects_compressed_batch_with_malformed_records(new_log, codec):
    """The key check of a compacted topic reads the records of compressed batches; a record
    whose header runs past its length must fail the append with a Kafka error (the broker
    answers with its code) and leave the log as it was."""
    # key "k", null value, one header "000" whose value length lies past the record's 11 bytes
    section = b"\x16\x00\x00\x00\x02k\x01\x02\x06000\x01"
    body = codecs.compress(CODEC_IDS[codec], section)
    head = struct.pack(">qiiBIhiqqqhii", 0, 61 + len(body) - 12, -1, 2, 0, CODEC_IDS[codec], 0,
                       BASE_TS, BASE_TS, -1, -1, -1, 1)
    bad = set_crc(head + body)
    lg = new_log({"cleanup.policy": "compact"})
    lg.append(build(simple_records(2)))
    files, end = snapshot(lg.dir), lg.log_end_offset
    with pytest.raises(KafkaError) as e:
        lg.append(bad)
    assert e.value.code in (CorruptMessageError.code, InvalidRecordError.code)
    assert lg.log_end_offset == end and snapshot(lg.dir) == files


def test_control_batch_allowed_from_the_broker(new_log):
    lg = new_log()
    ctrl = _with_header(GOOD, ">h", 21, 0x20 | 0x10)
    with pytest.raises(InvalidRecordError):
        lg.append(ctrl)
    info = lg.append(ctrl, allow_control=True)
    assert (info.first_offset, info.last_offset) == (0, 2)
    (batch,) = list(iter_batches(lg.read_batches_bytes()))
    assert batch.is_control and batch.is_transactional
    batch.validate()


def test_size_limits_are_inclusive(new_log):
    data = simple_batch(3, tag=4)
    lg = new_log({"max.message.bytes": len(data), "segment.bytes": len(data)})
    assert lg.append(data).first_offset == 0  # exactly max.message.bytes and segment.bytes
    assert lg.append(data).first_offset == 3  # rolls: a segment holds one such batch
    assert [s.base_offset for s in lg.segments] == [0, 3]
    two = new_log({"segment.bytes": 2 * len(data) - 1}, name="two-0")
    with pytest.raises(RecordListTooLargeError):
        two.append(data + data)  # the whole append counts, not each batch
    assert two.log_end_offset == 0 and two.size_in_bytes == 0


def test_compacted_topic_accepts_keyed_records(new_log):
    lg = new_log({"cleanup.policy": "compact"})
    for codec in CODECS:
        lg.append(build([(b"v", b"", BASE_TS, []), (None, b"k", BASE_TS, [])], codec))  # empty key, tombstone
    assert lg.log_end_offset == 2 * len(CODECS)
    assert [(r.key, r.value) for r in iter_batches(lg.read_batches_bytes()) for r in r] == \
        [(b"", b"v"), (b"k", None)] * len(CODECS)


def test_append_listeners_and_closed_log(new_log):
    lg = new_log()
    seen = []
    lg.append_listeners.append(lambda log: seen.append(log.log_end_offset))
    lg.append(simple_batch(2))
    lg.append(simple_batch(3))
    assert seen == [2, 5]
    lg.close()
    with pytest.raises(KafkaStorageError):
        lg.append(simple_batch(1))
    assert seen == [2, 5]


# ---------------------------------------------------------------------------------------
# flushing


def test_flush_messages(new_log):
    lg = new_log({"flush.messages": 3})
    assert lg.recovery_point == 0
    points = []
    for n in (1, 1, 1, 2, 1, 5, 1):
        lg.append(simple_batch(n))
        points.append((lg.log_end_offset, lg.recovery_point))
    assert points == [(1, 0), (2, 0), (3, 3), (5, 3), (6, 6), (11, 11), (12, 11)]


def test_flush_ms_via_maybe_flush(new_log):
    lg = new_log({"flush.ms": 1000})
    lg.append(simple_batch(4))
    assert lg.recovery_point == 0
    last = lg.last_flush_ms
    lg.maybe_flush(last + 999)
    assert lg.recovery_point == 0
    lg.maybe_flush(last + 1000)
    assert lg.recovery_point == 4
    lg.append(simple_batch(2))
    lg.maybe_flush(lg.last_flush_ms + 10)
    assert lg.recovery_point == 4
    lg.maybe_flush(lg.last_flush_ms + 5000)
    assert lg.recovery_point == 6
    never = new_log(name="never-0")  # flush.ms default: no time-based flush
    never.append(simple_batch(2))
    never.maybe_flush(never.last_flush_ms + 10**12)
    assert never.recovery_point == 0


# ---------------------------------------------------------------------------------------
# topic compression.type


@pytest.mark.parametrize("target", ["gzip", "snappy", "lz4", "zstd"])
def test_topic_compression_recompresses(new_log, target):
    lg = new_log({"compression.type": target})
    recs = [(b"value-%d" % i * 20, None if i == 3 else b"k%d" % i, BASE_TS + i * 7, [("h", b"%d" % i), ("n", None)])
            for i in range(10)]
    data = build(recs, "none", producer_id=42, producer_epoch=2, base_sequence=100)
    info = lg.append(data)
    assert info.records == 10
    (batch,) = list(iter_batches(lg.read_batches_bytes()))
    assert batch.compression == target
    assert batch.compression_type == CODEC_IDS[target]
    assert info.bytes == batch.size_in_bytes
    batch.validate()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 2, 100)
    assert batch.max_timestamp == BASE_TS + 63
    assert rec_tuples(batch.to_bytes()) == rec_tuples(_with_base(data, 0))


def _with_base(data, base):
    b = bytearray(data)
    struct.pack_into(">q", b, 0, base)
    return bytes(b)


def test_topic_compression_with_log_append_time_and_several_batches(new_log):
    lg = new_log({"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"})
    a, b = build(simple_records(3, tag=1), "none"), build(simple_records(2, tag=2), "snappy")
    info = lg.append(a + b)
    assert (info.first_offset, info.last_offset, info.records) == (0, 4, 5)
    batches = check_whole_batches(lg.read_batches_bytes())
    assert [(bt.base_offset, bt.count, bt.compression) for bt in batches] == [(0, 3, "gzip"), (3, 2, "gzip")]
    for bt in batches:
        assert bt.timestamp_type == 1 and bt.max_timestamp == info.log_append_time
    assert [(r.offset, r.key, r.value) for bt in batches for r in bt] == \
        [(r[0], r[2], r[3]) for r in rec_tuples(a)] + [(r[0] + 3, r[2], r[3]) for r in rec_tuples(b)]
    assert info.bytes == sum(bt.size_in_bytes for bt in batches)


def test_topic_compression_uncompressed(new_log):
    lg = new_log({"compression.type": "uncompressed"})
    data = build(simple_records(6), "gzip")
    lg.append(data)
    (batch,) = list(iter_batches(lg.read_batches_bytes()))
    assert batch.compression == "none"
    batch.validate()
    assert rec_tuples(batch.to_bytes()) == rec_tuples(data)


@pytest.mark.parametrize("codec", CODECS)
def test_topic_compression_producer_keeps_codec(new_log, codec):
    lg = new_log({"compression.type": "producer"})
    data = build(simple_records(6), codec)
    lg.append(data)
    stored = lg.read_batches_bytes()
    assert stored[16:] == data[16:]
    assert next(iter_batches(stored)).compression == codec


# ---------------------------------------------------------------------------------------
# LogConfig


@pytest.mark.parametrize("key,value", [
    ("no.such.config", "1"),
    ("segment.bytes", "abc"),
    ("segment.bytes", "12.5"),
    ("segment.bytes", -1),
    ("segment.ms", "0"),
    ("retention.ms", "-2"),
    ("retention.bytes", "-7"),
    ("flush.messages", "0"),
    ("max.message.bytes", "-1"),
    ("index.interval.bytes", "-1"),
    ("cleanup.policy", "destroy"),
    ("cleanup.policy", "compact,erase"),
    ("message.timestamp.type", "WallClockTime"),
    ("compression.type", "brotli"),
    ("min.cleanable.dirty.ratio", "1.5"),
    ("preallocate", "maybe"),
    ("segment.bytes", "13"),
    ("segment.bytes", True),
    ("segment.index.bytes", "8"),
    ("max.compaction.lag.ms", "0"),
])
def test_log_config_rejects_bad_values(key, value):
    with pytest.raises(InvalidConfigurationError) as e:
        LogConfig({key: value})
    assert e.value.code == 40
    assert key in str(e.value) and str(value) in str(e.value)


def test_log_config_values_defaults_and_describe():
    cfg = LogConfig()
    d = cfg.describe()
    assert d["segment.bytes"] == "1073741824"
    assert d["segment.ms"] == "604800000"
    assert d["segment.index.bytes"] == "10485760"
    assert d["index.interval.bytes"] == "4096"
    assert d["retention.ms"] == "604800000"
    assert d["retention.bytes"] == "-1"
    assert d["cleanup.policy"] == "delete"
    assert d["max.message.bytes"] == "1048588"
    assert d["message.timestamp.type"] == "CreateTime"
    assert d["compression.type"] == "producer"
    assert d["flush.messages"] == d["flush.ms"] == str(INT64_MAX)
    assert d["min.cleanable.dirty.ratio"] == "0.5"
    assert d["delete.retention.ms"] == "86400000"
    assert d["file.delete.delay.ms"] == "60000"
    assert all(isinstance(v, str) for v in d.values())
    cfg = LogConfig({"segment.bytes": "1024", "cleanup.policy": "compact, delete", "retention.ms": -1,
                     "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.25"})
    assert cfg.segment_bytes == 1024 and cfg.retention_ms == -1
    assert cfg.cleanup_policy == frozenset({"compact", "delete"})
    assert cfg.message_timestamp_type == "LogAppendTime" and cfg.log_append_time
    assert cfg.min_cleanable_dirty_ratio == 0.25
    d = cfg.describe()
    assert (d["segment.bytes"], d["cleanup.policy"], d["retention.ms"]) == ("1024", "compact,delete", "-1")
    more = cfg.with_overrides({"segment.ms": 5000})
    assert (more.segment_ms, more.segment_bytes, more.retention_ms) == (5000, 1024, -1)
    assert cfg.segment_ms == 604800000


def test_log_config_from_broker():
    cfg = LogConfig.from_broker({
        "log.segment.bytes": "4096", "log.roll.ms": "1000", "log.index.interval.bytes": 100,
        "log.index.size.max.bytes": "8192", "log.retention.hours": "2", "log.retention.bytes": "123456",
        "log.cleanup.policy": "compact", "message.max.bytes": "2000",
        "log.message.timestamp.type": "LogAppendTime", "compression.type": "lz4",
        "log.flush.interval.messages": "10", "log.flush.interval.ms": "500",
        "log.segment.delete.delay.ms": "0", "node.id": "3", "listeners": "PLAINTEXT://:9092",
    })
    assert (cfg.segment_bytes, cfg.segment_ms, cfg.index_interval_bytes, cfg.segment_index_bytes) == \
        (4096, 1000, 100, 8192)
    assert (cfg.retention_ms, cfg.retention_bytes) == (2 * 3600 * 1000, 123456)
    assert cfg.cleanup_policy == frozenset({"compact"})
    assert (cfg.max_message_bytes, cfg.message_timestamp_type, cfg.compression_type) == (2000, "LogAppendTime", "lz4")
    assert (cfg.flush_messages, cfg.flush_ms, cfg.file_delete_delay_ms) == (10, 500, 0)
    # Kafka's precedence: log.retention.ms, then minutes, then hours
    assert LogConfig.from_broker({"log.retention.minutes": "3", "log.retention.hours": "1"}).retention_ms == 180000
    assert LogConfig.from_broker({"log.retention.ms": "77", "log.retention.minutes": "3"}).retention_ms == 77
    assert LogConfig.from_broker({}).describe() == LogConfig().describe()
    with pytest.raises(InvalidConfigurationError):
        LogConfig.from_broker({"log.segment.bytes": "big"})


# ---------------------------------------------------------------------------------------
# concurrency


def test_appends_racing_reads(new_log):
    """One thread appends (rolling often; rolled segments are flushed by a background scheduler
    thread, as under a LogManager) while another reads: every read is whole valid batches with
    contiguous offsets, starting at the batch holding the offset, with the records appended."""
    rounds = by_mode(3, 5)
    n = by_mode(1500, 1000)
    errors = []
    reads = [0]
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # interleave the threads finely
    try:
        for rnd_no in range(rounds):
            scheduler = Scheduler()
            lg = new_log({"segment.bytes": 1000, "index.interval.bytes": 64, "segment.index.bytes": 4096},
                         name=f"race-{rnd_no}", scheduler=scheduler)
            value_at = {}
            batches = []
            off = 0
            for i in range(n):
                cnt = 1 + i % 3
                recs = [(b"%d" % (off + j) * 3, b"k", BASE_TS + i, []) for j in range(cnt)]
                for j in range(cnt):
                    value_at[off + j] = recs[j][0]
                batches.append(build(recs, "lz4" if i % 5 == 0 else "none"))
                off += cnt
            done = threading.Event()

            def writer():
                try:
                    for data in batches:
                        lg.append(data)
                except BaseException:  # noqa: BLE001 - reported below
                    errors.append(("writer", traceback.format_exc()))
                finally:
                    done.set()

            def reader(seed):
                rnd = random.Random(seed)
                try:
                    while not done.is_set() and not errors:
                        end = lg.log_end_offset
                        if end == 0:
                            continue
                        offset = rnd.randrange(max(0, end - 40), end) if rnd.random() < 0.8 else rnd.randrange(end)
                        max_bytes = rnd.randint(1, 3000)
                        sl = lg.read(offset, max_bytes)
                        data = sl.read()
                        got = check_whole_batches(data, first_holds=offset)
                        assert got, (offset, end)
                        assert len(data) <= max(max_bytes, got[0].size_in_bytes)
                        for b in got:
                            for r in b:
                                assert r.value == value_at[r.offset]
                        reads[0] += 1
                except BaseException:  # noqa: BLE001 - reported below
                    errors.append(("reader", traceback.format_exc()))

            threads = [threading.Thread(target=writer), threading.Thread(target=reader, args=(rnd_no,))]
            try:
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(120)
            finally:
                scheduler.shutdown(run_pending=True)
            assert not any(t.is_alive() for t in threads)
            assert not errors, errors[0][0] + " failed:\n" + errors[0][1]
            assert lg.log_end_offset == off
            assert lg.recovery_point == lg.segments[-1].base_offset  # the rolled segments were flushed
            final = check_whole_batches(lg.read_batches_bytes())
            assert [r.value for b in final for r in b] == [value_at[o] for o in range(off)]
    finally:
        sys.setswitchinterval(old_interval)
    assert reads[0] > 0
