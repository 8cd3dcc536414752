"""kafkacore_spark's segment reader without Spark: offset ranges, byte-range splits and damaged
files (Hypothesis). A damaged file gives the records before the damage, each exactly as
written, then a CorruptRecordError naming the partition and file position; never another
exception, and never a record that was not written."""
import os
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from kafkacore.record import CorruptRecordError, RecordBatchBuilder  # noqa: E402
from kafkacore.storage.segment_files import SegmentFiles, walk_batch_headers  # noqa: E402
from kafkacore_spark.segments import PartitionFiles, read_range  # noqa: E402

CODECS = ["none", "gzip", "lz4", "zstd", "snappy"]


def _segment(n_batches=6, per_batch=7):
    raw, records, offset = b"", {}, 0
    for i in range(n_batches):
        b = RecordBatchBuilder(compression=CODECS[i % len(CODECS)], base_offset=offset)
        for j in range(per_batch):
            value = b"value-%d-%d" % (i, j) * (1 + j % 3)
            b.append(value, key=b"k%d" % j, timestamp_ms=1000 * i + j)
            records[offset] = (b"k%d" % j, value, 1000 * i + j)
            offset += 1
        raw += bytes(b.build())
    return raw, records


RAW, RECORDS = _segment()


def _read(path, stop, start=0, end=1 << 62):
    out = {}
    for batch in read_range("t", 0, str(path), 0, stop, start, end):
        d = batch.to_pydict()
        ms = batch.column("timestamp").cast("int64").to_pylist()  # the decoder's timestamp[ms]
        for off, k, v, t in zip(d["offset"], d["key"], d["value"], ms):
            assert off not in out
            out[off] = (k, v, t)
    return out


def test_whole_segment_and_offset_ranges(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(RAW)
    assert _read(path, len(RAW)) == RECORDS
    assert _read(path, len(RAW), 10, 20) == {o: r for o, r in RECORDS.items() if 10 <= o < 20}


@given(start=st.integers(0, 45), length=st.integers(0, 45))
def test_any_offset_range(tmp_path_factory, start, length):
    path = tmp_path_factory.mktemp("seg") / "00000000000000000000.log"
    path.write_bytes(RAW)
    assert _read(path, len(RAW), start, start + length) == {
        o: r for o, r in RECORDS.items() if start <= o < start + length}


def _base_offset_bytes():
    """File positions of each batch's baseOffset field, which the CRC does not cover."""
    out, pos = set(), 0
    while pos < len(RAW):
        out.update(range(pos, pos + 8))
        pos += 12 + struct.unpack_from(">i", RAW, pos + 8)[0]
    return out


BASE_OFFSET_BYTES = _base_offset_bytes()


@given(data=st.data())
def test_damaged_segments(tmp_path_factory, data):
    """Bytes flipped anywhere but in a baseOffset (Kafka's CRC leaves it out; the next test
    covers what the reader checks of it) and truncation at any point."""
    raw = bytearray(RAW)
    if data.draw(st.booleans(), "truncate"):
        raw = raw[:data.draw(st.integers(0, len(raw) - 1), "cut")]
    for _ in range(data.draw(st.integers(0, 3), "flips")):
        if raw:
            at = data.draw(st.integers(0, len(raw) - 1).filter(lambda i: i not in BASE_OFFSET_BYTES), "at")
            raw[at] ^= data.draw(st.integers(1, 255), "mask")
    path = tmp_path_factory.mktemp("seg") / "00000000000000000000.log"
    path.write_bytes(bytes(raw))
    got = {}
    try:
        for batch in read_range("t", 0, str(path), 0, len(raw), 0, 1 << 62):
            d = batch.to_pydict()
            for off, k, v in zip(d["offset"], d["key"], d["value"]):
                got[off] = (k, v)
    except CorruptRecordError as e:
        assert "corrupt data in t-0" in str(e) and "file position" in str(e)
    # whatever was served is exactly what was written, at its offset
    for off, (k, v) in got.items():
        assert off in RECORDS and RECORDS[off][:2] == (k, v)


@pytest.mark.parametrize("batch, value", [(0, -1), (2, 3), (3, 1)])
def test_base_offsets_that_step_back_are_corrupt(tmp_path, batch, value):
    """A baseOffset below the segment's base offset or not past the previous batch's last
    offset is an error before any record of that chunk is served."""
    raw, pos = bytearray(RAW), 0
    for _ in range(batch):
        pos += 12 + struct.unpack_from(">i", raw, pos + 8)[0]
    struct.pack_into(">q", raw, pos, value)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptRecordError, match=f"file position {pos}\\): batch base offset {value}"):
        _read(path, len(raw))


def test_partition_files_offsets_splits_and_timestamps(tmp_path):
    """Two segments with a sparse offset index (as the broker writes them): earliest and latest
    offsets, timestamp lookup, and byte-range splits that cover every batch once."""
    d = tmp_path / "t-0"
    d.mkdir()
    raw2, _ = _segment(3, 5)
    # second segment starts at offset 42 (the first has 42 records): re-stamp its base offsets
    second, pos, base = bytearray(raw2), 0, 42
    while pos < len(second):
        length = struct.unpack_from(">i", second, pos + 8)[0]
        count = struct.unpack_from(">i", second, pos + 57)[0]
        struct.pack_into(">q", second, pos, base)
        base += count
        pos += 12 + length
    (d / "00000000000000000000.log").write_bytes(RAW)
    (d / "00000000000000000042.log").write_bytes(bytes(second))
    # an index entry for every batch but the first (position 0 is never indexed), then zeros
    fd = os.open(d / "00000000000000000000.log", os.O_RDONLY)
    entries = b"".join(struct.pack(">ii", h.last_offset, h.position) for h in walk_batch_headers(fd, 0, len(RAW))
                       if h.position > 0)
    os.close(fd)
    (d / "00000000000000000000.index").write_bytes(entries + bytes(800))
    pf = PartitionFiles(str(tmp_path), "t", 0)
    segs = pf.segments()
    assert [s.base_offset for s in segs] == [0, 42]
    assert pf.log_start_offset(segs) == 0 and pf.log_end_offset(segs) == 42 + 15
    assert pf.offset_for_timestamp(3001, segs) == 3 * 7 + 1
    assert pf.offset_for_timestamp(10**9, segs) is None
    for max_bytes in (1, 100, 500, 10**9):
        splits = pf.splits(0, 57, max_bytes, segs)
        firsts = [(p, a) for p, a, _b in splits]
        assert len(set(firsts)) == len(firsts)
        got = {}
        for path, a, b in splits:
            got.update(_read(path, b, 0, 57) if a == 0 else {
                o: r for batch in read_range("t", 0, path, a, b, 0, 57)
                for o, r in zip(batch.column("offset").to_pylist(), zip(batch.column("key").to_pylist(),
                                                                          batch.column("value").to_pylist()))})
        assert set(got) == set(range(57))
    assert isinstance(segs[0], SegmentFiles)


@pytest.mark.parametrize("counts, want", [
    ((750, 750, 0), 9),       # a partition with no records: Python's round(4.5) gave 4 + 4 = 8 tasks
    ((520, 495, 485), 9),
    ((1, 1000, 2), 7),
    ((3,), 9),                # fewer records than tasks asked: one record a task
    ((0, 0), 4),              # nothing to read: no task
])
def test_broker_plan_honours_min_partitions(counts, want):
    """minPartitions is a minimum, as Spark's KafkaOffsetRangeCalculator makes it where it can:
    every range is covered exactly once, in pieces of at least one record."""
    from kafkacore_spark.backends import BrokerBackend

    # plan() reads only these two options (no broker is contacted)
    backend = BrokerBackend(type("Opts", (), {"min_partitions": want, "max_records_per_partition": None})())
    ranges = {("t", p): (10, 10 + n) for p, n in enumerate(counts)}
    splits = backend.plan(ranges)
    total = sum(counts)
    assert len(splits) >= min(want, total)
    covered = sorted((s.topic, s.partition, s.start_offset, s.end_offset) for s in splits)
    for p, n in enumerate(counts):
        mine = [(a, b) for t, pp, a, b in covered if pp == p]
        offsets = [o for a, b in mine for o in range(a, b)]
        assert offsets == list(range(10, 10 + n))
