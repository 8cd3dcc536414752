"""kafkacore/storage/segment_files.py, the read-only reading of a partition's files that the
storage engine, the Spark source and ``kafkacore log dump`` share, on files a real Log wrote:
names, the listing of segments, the batch header walk (whole files, torn tails, corrupt headers,
files cut while read) and the index views of rolled and preallocated active segments, whose
lookups must be the Log's own."""
import mmap
import os
import random
import struct

import pytest

from kafkacore.record import CorruptRecordError, RecordBatchBuilder, iter_batches
from kafkacore.record.layout import LENGTH_OFFSET, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG_MASK
from kafkacore.storage import Log, LogConfig
from kafkacore.storage.segment_files import (NO_TIMESTAMP, OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY, HeaderWalk,
                                             OffsetIndexView, SegmentFileName, SegmentFiles, TimeIndexView,
                                             find_batch_by_timestamp, index_entries, list_partition_dirs,
                                             list_segments, parse_partition_dir, parse_segment_file_name,
                                             segment_file_name, split_state_suffix, timestamp_search_start,
                                             walk_batch_headers)

BASE_TS = 1_700_000_000_000
CONFIG = {"segment.bytes": 3000, "index.interval.bytes": 250}


def write_log(d, batches=60, seed=0, close=True):
    """A Log of several segments with a sparse index, mixed codecs, timestamps that mostly grow
    (CreateTime: a batch may go back in time) and the batches of an open transaction."""
    rnd = random.Random(seed)
    lg = Log(str(d), LogConfig(CONFIG))
    seq = 0
    for i in range(batches):
        pid = 7 if i % 9 == 4 else -1
        n = rnd.randint(1, 5)
        b = RecordBatchBuilder(compression=rnd.choice(["none", "lz4", "gzip"]), producer_id=pid,
                               producer_epoch=0 if pid >= 0 else -1, base_sequence=seq if pid >= 0 else -1,
                               transactional=pid >= 0)
        for j in range(n):
            b.append(b"value-%d-%d" % (i, j) * rnd.randint(1, 8), key=b"k%d" % j,
                     timestamp_ms=BASE_TS + 10 * i + rnd.randint(-15, 15))
        lg.append(bytes(b.build()))
        seq += n if pid >= 0 else 0
    if close:
        lg.close()
    return lg


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def reference_headers(data):
    """(position, size, base, last, epoch, magic, crc, attributes, base ts, max ts, pid, producer
    epoch, base sequence, count) by the record decoder's batch iterator."""
    return [(b.position, b.size_in_bytes, b.base_offset, b.last_offset, b.partition_leader_epoch, b.magic, b.crc,
             b.attributes, b.base_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch, b.base_sequence,
             b.count) for b in iter_batches(data)]


def walk_file(path, start=0, end=None, **kw):
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size if end is None else end
        walk = HeaderWalk(fd, start, end, **kw)
        return list(walk), walk.position
    finally:
        os.close(fd)


# -- names ------------------------------------------------------------------------------------
def test_segment_file_names_round_trip_and_others_are_refused():
    assert segment_file_name(42) == "00000000000000000042"
    for base in (0, 42, 1 << 40, (1 << 63) - 1):
        for suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
            name = segment_file_name(base) + suffix
            assert parse_segment_file_name(name) == SegmentFileName(base, suffix, None)
            for state in ("deleted", "cleaned", "swap"):
                assert parse_segment_file_name(f"{name}.{state}") == SegmentFileName(base, suffix, state)
    assert split_state_suffix("00000000000000000005.log.swap") == ("00000000000000000005.log", "swap")
    assert split_state_suffix("meta.properties") == ("meta.properties", None)
    for name in ("0000000000000000042.log", "000000000000000000042.log", "00000000000000000042",
                 "00000000000000000042.", "00000000000000000042.log.old", "0000000000000000004x.log",
                 "\u0660" * 20 + ".log", "recovery-point-offset-checkpoint", "00000000000000000042.log.tmp"):
        assert parse_segment_file_name(name) is None, name


def test_partition_directory_names():
    assert parse_partition_dir("events-0") == ("events", 0)
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    for name in ("events", "-3", "events-", "events-x", "events-0.8c1f2d-delete", "events-0.8c1f2d-future",
                 "events-\u00b2", "meta.properties"):
        assert parse_partition_dir(name) is None, name


def test_list_partition_dirs(tmp_path):
    for name in ("a-0", "a-1", "b-b-3", "c-0.abc-delete"):
        (tmp_path / name).mkdir()
    (tmp_path / "d-0").write_text("a file, not a partition")
    assert list_partition_dirs(str(tmp_path)) == [("a", 0), ("a", 1), ("b-b", 3)]
    with pytest.raises(FileNotFoundError):
        list_partition_dirs(str(tmp_path / "missing"))


# -- a partition's segments -----------------------------------------------------------------
@pytest.mark.parametrize("close", [True, False])
def test_list_segments_is_the_logs(tmp_path, close):
    d = tmp_path / "t-0"
    lg = write_log(d, close=close)
    try:
        # a cleaner's leftovers and a deletion in progress are not segments
        for name in ("00000000000000099999.log.cleaned", "00000000000000099998.log.swap",
                     "00000000000000099997.log.deleted", "00000000000000099997.index.deleted", "x.log"):
            (d / name).write_bytes(b"")
        segs = list_segments(str(d))
        assert [s.base_offset for s in segs] == [s.base_offset for s in lg.segments]
        for seg, ls in zip(segs, lg.segments):
            assert isinstance(seg, SegmentFiles)
            assert seg.log_path == ls.log_path and seg.size == ls.size == os.path.getsize(seg.log_path)
            assert (seg.index_path, seg.time_index_path) == (ls.offset_index.path, ls.time_index.path)
            assert seg.txn_index_path == ls.txn_index.path
    finally:
        if not close:
            lg.close()
    assert list_segments(str(tmp_path / "missing")) == []


# -- the batch header walk ------------------------------------------------------------------
@pytest.mark.parametrize("close", [True, False])
def test_walk_gives_every_batch_header_of_a_logs_segments(tmp_path, close):
    lg = write_log(tmp_path / "t-0", close=close)
    try:
        segs = list_segments(str(tmp_path / "t-0"))
        assert len(segs) > 3
        for seg in segs:
            data = read_bytes(seg.log_path)
            want = reference_headers(data)
            for read_size in (RECORD_BATCH_OVERHEAD, 1000, 1 << 20):
                got, end = walk_file(seg.log_path, read_size=read_size)
                assert [tuple(h) for h in got] == want
                assert end == len(data)
            with open(seg.log_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                assert [tuple(h) for h in walk_batch_headers(mm, 0, len(mm))] == want
            # from a batch boundary to another: exactly the batches between them
            if len(want) > 2:
                got, end = walk_file(seg.log_path, want[1][0], want[-1][0])
                assert [tuple(h) for h in got] == want[1:-1] and end == want[-1][0]
            assert all(bool(h.attributes & TRANSACTIONAL_FLAG_MASK) == (h.producer_id >= 0) and not h.is_control
                       for h in got)
    finally:
        if not close:
            lg.close()


def test_batch_bytes_are_the_batches(tmp_path):
    write_log(tmp_path / "t-0")
    seg = list_segments(str(tmp_path / "t-0"))[0]
    data = read_bytes(seg.log_path)
    for read_size in (RECORD_BATCH_OVERHEAD, 700, 1 << 20):
        fd = os.open(seg.log_path, os.O_RDONLY)
        try:
            walk = HeaderWalk(fd, 0, len(data), read_size=read_size)
            for h in walk:
                if h.position % 2 == 0 or read_size > 1000:
                    assert bytes(walk.batch_bytes(h)) == data[h.position:h.position + h.size]
        finally:
            os.close(fd)
    assert walk.position == len(data)


def test_a_torn_tail_ends_the_walk_quietly(tmp_path):
    """A log cut anywhere inside its last batch (a batch still being written, or a crash): the
    walk gives the batches before it and stops at its start; so does a walk to an end that cuts
    a batch."""
    write_log(tmp_path / "t-0")
    seg = list_segments(str(tmp_path / "t-0"))[0]
    data = read_bytes(seg.log_path)
    want = reference_headers(data)
    last_pos = want[-1][0]
    cut_file = tmp_path / "cut.log"
    for cut in range(last_pos, len(data)):
        cut_file.write_bytes(data[:cut])
        got, end = walk_file(str(cut_file))
        assert [tuple(h) for h in got] == want[:-1] and end == last_pos, cut
        got, end = walk_file(seg.log_path, end=cut)
        assert [tuple(h) for h in got] == want[:-1] and end == last_pos, cut


@pytest.mark.parametrize("length", [-7, 0, 12, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD - 1])
def test_a_corrupt_header_is_one_line_corrupt_record_error(tmp_path, length):
    write_log(tmp_path / "t-0")
    seg = list_segments(str(tmp_path / "t-0"))[0]
    data = bytearray(read_bytes(seg.log_path))
    want = reference_headers(bytes(data))
    at = want[2][0]
    struct.pack_into(">i", data, at + LENGTH_OFFSET, length)
    bad = tmp_path / "00000000000000000000.log"
    bad.write_bytes(bytes(data))
    fd = os.open(bad, os.O_RDONLY)
    try:
        walk = HeaderWalk(fd, 0, len(data), name=str(bad))
        seen = []
        with pytest.raises(CorruptRecordError) as e:
            for h in walk:
                seen.append(tuple(h))
        assert seen == want[:2]
        assert e.value.position == at and walk.position == at
        assert "\n" not in str(e.value)
        assert str(e.value) == f"{bad}: batch length {length} is below the v2 header size (at byte {at})"
        # the same header at the very end, claiming bytes past it: a torn tail, not an error
        if length > 0:
            got = list(walk_batch_headers(fd, 0, at + LOG_OVERHEAD + length - 1))
            assert [tuple(h) for h in got] == want[:2]
    finally:
        os.close(fd)


def test_a_file_cut_since_it_was_sized(tmp_path):
    """The caller listed a size, then the broker cut the file (a truncation): the walk ends where
    the file does when no header was cut, and a header cut short is a CorruptRecordError."""
    write_log(tmp_path / "t-0")
    seg = list_segments(str(tmp_path / "t-0"))[0]
    data = read_bytes(seg.log_path)
    want = reference_headers(data)
    path = tmp_path / "cut.log"
    path.write_bytes(data[:want[3][0] + 5])  # 5 bytes of the fourth batch
    got, end = walk_file(str(path), end=len(data))
    assert [tuple(h) for h in got] == want[:3] and end == want[3][0]
    path.write_bytes(data[:want[3][0] + 30])  # its length is there, the rest of its header is not
    with pytest.raises(CorruptRecordError, match=f"ends inside the batch header at position {want[3][0]}"):
        walk_file(str(path), end=len(data))


# -- the indexes ----------------------------------------------------------------------------
def test_index_views_of_a_running_log_are_its_indexes(tmp_path):
    """The active segment's indexes are preallocated (zeros past the entries): the views count
    the entries in use as the Log does, and every lookup answers as the Log's indexes."""
    lg = write_log(tmp_path / "t-0", batches=80, close=False)
    try:
        rnd = random.Random(3)
        active = lg.segments[-1]
        assert os.path.getsize(active.offset_index.path) == lg.config.segment_index_bytes
        for ls, seg in zip(lg.segments, list_segments(lg.dir)):
            with seg.offset_index() as oi, seg.time_index() as ti:
                assert oi.entries == ls.offset_index.entries
                assert ti.entries == ls.time_index.entries
                for slot in range(oi.entries):
                    assert oi.entry(slot) == ls.offset_index.entry(slot)
                for slot in range(ti.entries):
                    assert ti.entry(slot) == ls.time_index.entry(slot)
                assert ti.last_entry() == ls.time_index.last_entry()
                for _ in range(60):
                    offset = rnd.randrange(ls.base_offset - 3, ls.next_offset + 3)
                    position = rnd.randrange(-5, ls.size + 5)
                    ts = BASE_TS + rnd.randrange(-50, 1000)
                    assert oi.lookup(offset) == ls.offset_index.lookup(offset)
                    assert oi.lookup_position(position) == ls.offset_index.lookup_position(position)
                    assert ti.lookup(ts) == ls.time_index.lookup(ts)
                    assert (timestamp_search_start(oi, ti, ts, offset)
                            == ls.timestamp_search_start(ts, offset))
                raw = read_bytes(seg.index_path)
                assert index_entries(raw, OFFSET_INDEX_ENTRY.size, exhaustive=True) == oi.entries
                raw = read_bytes(seg.time_index_path)
                assert index_entries(raw, TIME_INDEX_ENTRY.size, exhaustive=True) == ti.entries
        assert lg.segments[-1].offset_index.entries > 0  # the active segment's index was searched
    finally:
        lg.close()


def test_index_entries_counts_before_the_zeros():
    entries = b"".join(OFFSET_INDEX_ENTRY.pack(rel, 100 * rel) for rel in range(1, 8))
    for zeros in (0, 1, 5, 1000):
        data = entries + bytes(8 * zeros)
        assert index_entries(data, 8) == index_entries(data, 8, exhaustive=True) == 7
    assert index_entries(b"", 8) == index_entries(bytes(800), 8) == 0
    # damage after a zero slot: a verifier sees it, a reader trusts the zeros
    damaged = entries + bytes(16) + OFFSET_INDEX_ENTRY.pack(99, 9900) + bytes(80)
    assert index_entries(damaged, 8, exhaustive=True) == 10
    assert index_entries(damaged, 8) in (7, 10)


def test_index_views_ignore_what_is_not_there(tmp_path):
    missing = OffsetIndexView(str(tmp_path / "none.index"), 10, 500)
    assert missing.entries == 0 and missing.lookup(99) == (10, 0) and missing.lookup_position(99) == 0
    missing.close()
    assert TimeIndexView(str(tmp_path / "none.timeindex"), 10).lookup(BASE_TS) == (NO_TIMESTAMP, 10)
    short = tmp_path / "short.index"
    short.write_bytes(b"\x00\x00\x00")
    with OffsetIndexView(str(short), 0) as view:
        assert view.entries == 0
    # an entry past the log size the caller listed is not used (appended since, or damaged)
    index = tmp_path / "00000000000000000010.index"
    index.write_bytes(OFFSET_INDEX_ENTRY.pack(5, 300) + OFFSET_INDEX_ENTRY.pack(9, 700) + bytes(80))
    with OffsetIndexView(str(index), 10, 500) as view:
        assert view.entries == 2
        assert view.lookup(16) == (15, 300) and view.lookup_position(400) == 300
        assert view.lookup(19) == (10, 0) and view.lookup_position(800) == 0
        assert view.lookup(14) == (10, 0) and view.lookup_position(299) == 0
    with OffsetIndexView(str(index), 10) as view:
        assert view.lookup(19) == (19, 700) and view.lookup(1 << 62) == (19, 700)
        assert view.lookup(-(1 << 62)) == (10, 0)


def test_find_batch_by_timestamp_is_the_first_batch_reaching_it(tmp_path):
    """The index-guided search gives the batch a walk of the whole segment finds (timestamps go
    back in time now and then, as CreateTime allows), for a rolled and an active segment."""
    lg = write_log(tmp_path / "t-0", batches=120, seed=5, close=False)
    try:
        for seg in list_segments(lg.dir):
            fd = os.open(seg.log_path, os.O_RDONLY)
            try:
                headers = list(walk_batch_headers(fd, 0, seg.size))
                for ts in range(BASE_TS - 30, BASE_TS + 10 * 120 + 30, 3):
                    want = next((h for h in headers if h.max_timestamp >= ts), None)
                    assert find_batch_by_timestamp(seg, fd, ts) == want, ts
            finally:
                os.close(fd)
    finally:
        lg.close()
