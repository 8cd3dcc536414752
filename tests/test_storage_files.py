"""On-disk format fidelity of the storage engine, checked with independent readers.

- kafka-python's record reader reads the ``.log`` files the engine writes (every codec it has).
- ``.index`` / ``.timeindex`` parsed with struct match the entries a reference walk over the
  ``.log`` file (struct parsing of batch headers) gives by the index rule; positions are batch
  starts, the time index is strictly increasing.
- Index files rebuilt after they were deleted or damaged are byte-identical to those appends
  wrote.
- The data directory's files: checkpoints, meta.properties, the clean-shutdown marker,
  partition.metadata; a directory of another node is refused; topic names are validated."""
import os
import random
import re
import struct
import subprocess
import sys

import kafka.codec
import pytest
from kafka.record.default_records import DefaultRecordBatch as KPBatch
from kafka.record.memory_records import MemoryRecords as KPMemoryRecords

from kafkacore.errors import InvalidTopicError, KafkaStorageError, TopicAlreadyExistsError
from kafkacore.record import RecordBatchBuilder
from kafkacore.storage import Log, LogConfig, LogManager

import storage_writer as W
from _kcutil import CODEC_IDS, CODECS, by_mode

BASE_TS = 1_700_000_000_000


def _kp_has(codec):
    return {"none": True, "gzip": kafka.codec.has_gzip(), "snappy": kafka.codec.has_snappy(),
            "lz4": kafka.codec.has_lz4(), "zstd": kafka.codec.has_zstd()}[codec]


KP_CODECS = [c for c in CODECS if _kp_has(c)]


def build(records, codec="none", **kw):
    b = RecordBatchBuilder(compression=codec, **kw)
    for value, key, ts, headers in records:
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    return b.build()


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def parse_offset_index(raw):
    assert len(raw) % 8 == 0
    return [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]


def parse_time_index(raw):
    assert len(raw) % 12 == 0
    return [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw), 12)]


def reference_indexes(data, segment_base, interval, inactive):
    """The index rule over a segment's bytes (storage_writer.expected_index_entries, written
    independently of the engine); an inactive segment's time index also has its final entry."""
    offsets, times, final, _running = W.expected_index_entries(data, segment_base, interval)
    if inactive and final is not None:
        times.append(final)
    return offsets, times


def segment_bases(directory):
    return sorted(int(n[:20]) for n in os.listdir(directory) if n.endswith(".log"))


def stem(directory, base):
    return os.path.join(directory, f"{base:020d}")


def fill_log(lg, n, seed, codecs=("none", "gzip", "lz4"), monotonic=False):
    rnd = random.Random(seed)
    ts = BASE_TS
    for i in range(n):
        count = rnd.randint(1, 5)
        if monotonic:
            tss = [ts + k for k in range(count)]
            ts += count + rnd.randint(0, 5)
        else:  # out of order between batches and inside them
            tss = [BASE_TS + rnd.randint(0, 4000) for _ in range(count)]
        recs = [(rnd.randbytes(rnd.randint(0, 120)), b"k%d" % rnd.randint(0, 9), t, []) for t in tss]
        data = build(recs, rnd.choice(codecs))
        if rnd.random() < 0.2:  # several batches in one append: the index rule is per batch
            data += build([(b"x" * rnd.randint(0, 150), b"k", tss[0] + rnd.randint(-100, 100), [])], rnd.choice(codecs))
        lg.append(data)


# ---------------------------------------------------------------------------------------
# kafka-python reads the segment files


@pytest.mark.parametrize("codec", KP_CODECS)
def test_kafka_python_reads_segment_files(tmp_path, codec):
    lg = Log(str(tmp_path / "kp-0"), LogConfig({"segment.bytes": 4000, "index.interval.bytes": 200}))
    rnd = random.Random(codec)
    expected = {}
    sequence = 0  # an idempotent producer's batches follow each other in sequence
    for i in range(by_mode(60, 30)):
        recs = [(rnd.choice([None, rnd.randbytes(rnd.randint(0, 200))]), rnd.choice([None, b"key-%d" % i]),
                 BASE_TS + rnd.randint(-10**6, 10**6), [("h%d" % j, rnd.choice([None, b"x" * j])) for j in range(i % 3)])
                for _ in range(rnd.randint(1, 6))]
        info = lg.append(build(recs, codec, producer_id=77, producer_epoch=1, base_sequence=sequence), leader_epoch=4)
        sequence += len(recs)
        for j, (value, key, ts, headers) in enumerate(recs):
            expected[info.first_offset + j] = (ts, key, value, [(k, v) for k, v in headers])
    lg.close()
    bases = segment_bases(lg.dir)
    assert len(bases) > 2
    got = {}
    for base in bases:
        data = read_bytes(stem(lg.dir, base) + ".log")
        mr = KPMemoryRecords(data)
        first = True
        while mr.has_next():
            batch = mr.next_batch()
            if batch is None:
                break
            assert batch.validate_crc()
            assert batch.compression_type == CODEC_IDS[codec]
            assert batch.leader_epoch == 4
            assert batch.producer_id == 77
            if first:
                assert batch.base_offset == base
                first = False
            for r in batch:
                got[r.offset] = (r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
        assert not first, f"no batches read from segment {base}"
    assert got == expected
    assert sorted(got) == list(range(lg.log_end_offset))


def test_kafka_python_reads_log_append_time_and_mixed_codecs(tmp_path):
    lg = Log(str(tmp_path / "lat-0"), LogConfig({"message.timestamp.type": "LogAppendTime"}))
    infos = []
    for i, codec in enumerate(KP_CODECS * 2):
        recs = [(b"v%d-%d" % (i, j), b"k", BASE_TS - 10**6, []) for j in range(3)]
        infos.append((lg.append(build(recs, codec)), codec, recs))
    data = read_bytes(lg.segments[0].log_path)
    lg.close()
    mr = KPMemoryRecords(data)
    for info, codec, recs in infos:
        batch = mr.next_batch()
        assert batch.validate_crc()
        assert batch.timestamp_type == 1
        assert batch.max_timestamp == info.log_append_time
        assert batch.compression_type == CODEC_IDS[codec]
        assert [(r.offset, r.timestamp, r.value) for r in batch] == \
            [(info.first_offset + j, info.log_append_time, recs[j][0]) for j in range(3)]
    assert mr.next_batch() is None


def test_kafka_python_reads_read_slices(tmp_path):
    lg = Log(str(tmp_path / "sl-0"), LogConfig({"segment.bytes": 3000, "index.interval.bytes": 100}))
    fill_log(lg, 50, seed=9, codecs=KP_CODECS)
    offset, seen = 0, []
    while offset < lg.log_end_offset:
        data = lg.read(offset, 700).read()
        batch = KPBatch(data)  # the first batch of the slice, as a fetch response would carry it
        assert batch.base_offset <= offset <= batch.last_offset
        mr = KPMemoryRecords(data)
        while mr.has_next():
            b = mr.next_batch()
            if b is None:
                break
            assert b.validate_crc()
            seen += [r.offset for r in b]
        offset = seen[-1] + 1
    assert seen == list(range(lg.log_end_offset))
    lg.close()


def test_a_slice_read_into_the_block_cache_is_the_slice_read_with_pread(tmp_path):
    """FileSlice.read_buffer (the native pooled read the embedded consumer uses) against
    FileSlice.read (os.pread, its twin): every slice of a log, ranges past the file's end, and
    blocks reused by the cache after their last user let go."""
    from kafkacore._loader import load_native
    from kafkacore.storage.file_slice import FileSlice
    lg = Log(str(tmp_path / "pool-0"), LogConfig({"segment.bytes": 3000, "index.interval.bytes": 100}))
    fill_log(lg, 60, seed=4, codecs=KP_CODECS)
    offset = 0
    while offset < lg.log_end_offset:
        sl = lg.read(offset, 900)
        pooled = sl.read_buffer()
        assert bytes(pooled) == sl.read() and len(sl.read()) > 0
        offset = list(_last_offsets(sl.read()))[-1] + 1
    records = load_native("records")
    if records is not None:
        path = tmp_path / "blob"
        blob = random.Random(3).randbytes(300_000)
        path.write_bytes(blob)
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(3):  # big enough for the cache: later reads reuse earlier blocks
                for pos, n in [(0, 300_000), (1, 70_000), (250_000, 100_000), (300_000, 5), (0, 0)]:
                    got = records.read_pooled(fd, pos, n)
                    assert bytes(got) == os.pread(fd, n, pos)
                    assert memoryview(got).readonly
            with pytest.raises(ValueError):
                records.read_pooled(fd, -1, 10)
            with pytest.raises(OSError):
                records.read_pooled(-5, 0, 10)
        finally:
            os.close(fd)
    lg.close()


def _last_offsets(data):
    mr = KPMemoryRecords(data)
    while mr.has_next():
        b = mr.next_batch()
        if b is None:
            return
        yield b.last_offset


# ---------------------------------------------------------------------------------------
# index files against a reference walk


@pytest.mark.parametrize("interval", [0, 1, 150, 700, 4096])
def test_index_files_follow_the_index_rule(tmp_path, interval):
    cfg = LogConfig({"segment.bytes": 6000, "index.interval.bytes": interval, "segment.index.bytes": 4096})
    lg = Log(str(tmp_path / "idx-0"), cfg)
    fill_log(lg, by_mode(160, 100), seed=interval)
    assert len(lg.segments) > 3

    def check(base, inactive):
        st = stem(lg.dir, base)
        data = read_bytes(st + ".log")
        batches = W.batch_headers(data)  # (position, base, last offset, max timestamp, size)
        ref_off, ref_time = reference_indexes(data, base, interval, inactive)
        raw_off, raw_time = read_bytes(st + ".index"), read_bytes(st + ".timeindex")
        if inactive:
            assert len(raw_off) == 8 * len(ref_off) and len(raw_time) == 12 * len(ref_time)
        else:  # preallocated to segment.index.bytes, zeros after the entries
            assert len(raw_off) == 4096 and len(raw_time) == 4092
            assert raw_off[8 * len(ref_off):] == bytes(len(raw_off) - 8 * len(ref_off))
            assert raw_time[12 * len(ref_time):] == bytes(len(raw_time) - 12 * len(ref_time))
            raw_off, raw_time = raw_off[:8 * len(ref_off)], raw_time[:12 * len(ref_time)]
        off_entries, time_entries = parse_offset_index(raw_off), parse_time_index(raw_time)
        assert off_entries == ref_off
        assert time_entries == ref_time
        starts = {b[0]: b for b in batches}
        for rel, pos in off_entries:
            assert pos in starts and starts[pos][2] == base + rel  # a batch start, its last offset
        lasts = {b[2]: b for b in batches}
        for (ts, rel), nxt in zip(time_entries, time_entries[1:] + [None]):
            assert base + rel in lasts and lasts[base + rel][3] == ts  # the batch holding that max
            if nxt is not None:
                assert nxt[0] > ts and nxt[1] >= rel  # strictly increasing timestamps
        if interval == 0 and len(batches) > 1:
            assert len(off_entries) == len(batches) - 1

    bases = segment_bases(lg.dir)
    for base in bases[:-1]:
        check(base, inactive=True)
    check(bases[-1], inactive=False)
    lg.close()
    for base in bases:
        check(base, inactive=True)


@pytest.mark.parametrize("clean_shutdown", [True, False], ids=["clean", "unclean"])
def test_deleted_indexes_are_rebuilt_identically(tmp_path, clean_shutdown):
    cfg = LogConfig({"segment.bytes": 5000, "index.interval.bytes": 300})
    path = str(tmp_path / "rebuild-0")
    lg = Log(path, cfg)
    fill_log(lg, by_mode(120, 70), seed=5)
    end = lg.log_end_offset
    lg.close()
    bases = segment_bases(path)
    assert len(bases) > 3
    written = {n: read_bytes(os.path.join(path, n)) for n in os.listdir(path)
               if n.endswith(".index") or n.endswith(".timeindex")}
    assert any(len(v) for v in written.values())
    for name in written:
        os.unlink(os.path.join(path, name))
    lg2 = Log(path, cfg, clean_shutdown=clean_shutdown, recovery_point=0 if not clean_shutdown else end)
    try:
        assert lg2.log_end_offset == end
        for base in bases[:-1]:  # the rolled segments
            for suffix in (".index", ".timeindex"):
                name = f"{base:020d}{suffix}"
                assert read_bytes(os.path.join(path, name)) == written[name], name
    finally:
        lg2.close()


@pytest.mark.parametrize("damage", ["reversed offset index", "odd-sized time index", "position past the log"])
def test_damaged_index_is_rebuilt_identically(tmp_path, damage):
    cfg = LogConfig({"segment.bytes": 5000, "index.interval.bytes": 200})
    path = str(tmp_path / "damaged-0")
    lg = Log(path, cfg)
    fill_log(lg, 80, seed=6)
    lg.close()
    bases = segment_bases(path)
    assert len(bases) > 2
    victim = stem(path, bases[0])
    good_off, good_time = read_bytes(victim + ".index"), read_bytes(victim + ".timeindex")
    entries = parse_offset_index(good_off)
    assert len(entries) > 2
    if damage == "reversed offset index":
        with open(victim + ".index", "wb") as f:
            f.write(b"".join(struct.pack(">ii", *e) for e in reversed(entries)))
    elif damage == "odd-sized time index":
        with open(victim + ".timeindex", "wb") as f:
            f.write(good_time[:-5])
    else:
        bad = entries[:-1] + [(entries[-1][0], os.path.getsize(victim + ".log") + 100)]
        with open(victim + ".index", "wb") as f:
            f.write(b"".join(struct.pack(">ii", *e) for e in bad))
    lg2 = Log(path, cfg)
    try:
        assert read_bytes(victim + ".index") == good_off
        assert read_bytes(victim + ".timeindex") == good_time
        assert lg2.load_result.rebuilt_indexes + lg2.load_result.recovered_segments >= 1
    finally:
        lg2.close()


# ---------------------------------------------------------------------------------------
# the data directory


def read_properties(path):
    props = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            props[k] = v
    return props


def read_checkpoint(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[-1] == ""  # ends with a newline
    lines = lines[:-1]
    assert lines[0] == "0"
    count = int(lines[1])
    assert len(lines) == 2 + count
    out = {}
    for line in lines[2:]:
        topic, partition, offset = line.split(" ")
        out[(topic, int(partition))] = int(offset)
    return out


def manager(data_dir, **kw):
    kw.setdefault("node_id", 3)
    return LogManager(str(data_dir), LogConfig({"segment.bytes": 2000}), background=False,
                      cleaner_enable=False, **kw)


def top_files(data_dir):
    return {n: read_bytes(os.path.join(data_dir, n)) for n in os.listdir(data_dir)
            if os.path.isfile(os.path.join(data_dir, n))}


def test_data_directory_files_and_clean_shutdown(tmp_path):
    d = tmp_path / "data"
    marker = d / ".kafka_cleanshutdown"
    mgr = manager(d, cluster_id="Q2x1c3Rlci1pZC0xMjM0NQ")
    assert not marker.exists() and not mgr.had_clean_shutdown
    meta = read_properties(d / "meta.properties")
    assert meta["version"] == "1"
    assert meta["node.id"] == "3"
    assert meta["cluster.id"] == "Q2x1c3Rlci1pZC0xMjM0NQ"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", meta["directory.id"])
    a = mgr.create_log("alpha", 0)
    b = mgr.create_log("beta", 2)
    for i in range(40):
        a.append(build([(b"a%d" % i, b"k", BASE_TS + i, [])] * 2))
        b.append(build([(b"b%d" % i * 30, b"k", BASE_TS + i, [])]))
    assert len(b.segments) > 2
    start = b.segments[1].base_offset + 1
    b.delete_records(start)
    mgr.checkpoint()
    assert read_checkpoint(d / "recovery-point-offset-checkpoint") == \
        {("alpha", 0): a.recovery_point, ("beta", 2): b.recovery_point}
    assert read_checkpoint(d / "log-start-offset-checkpoint") == {("alpha", 0): 0, ("beta", 2): start}
    lines = read_bytes(d / "recovery-point-offset-checkpoint").decode().splitlines()
    assert lines[:2] == ["0", "2"] and lines[2].startswith("alpha 0 ") and lines[3].startswith("beta 2 ")
    assert not marker.exists()  # running
    ends = {("alpha", 0): a.log_end_offset, ("beta", 2): b.log_end_offset}
    mgr.shutdown()
    assert marker.exists()
    assert read_checkpoint(d / "recovery-point-offset-checkpoint") == ends
    assert read_checkpoint(d / "log-start-offset-checkpoint") == {("alpha", 0): 0, ("beta", 2): start}
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]

    # another node's directory, or another cluster's, is refused and left as it was
    before = top_files(d)
    with pytest.raises(KafkaStorageError) as e:
        manager(d, node_id=4)
    assert e.value.code == 56
    with pytest.raises(KafkaStorageError):
        manager(d, cluster_id="c29tZS1vdGhlci1jbHVzdGVy")
    assert top_files(d) == before

    mgr2 = manager(d)
    try:
        assert mgr2.had_clean_shutdown
        assert not marker.exists()  # taken: a crash from now on is seen as one
        assert mgr2.cluster_id == "Q2x1c3Rlci1pZC0xMjM0NQ"
        a2, b2 = mgr2.get_log("alpha", 0), mgr2.get_log("beta", 2)
        assert {("alpha", 0): a2.log_end_offset, ("beta", 2): b2.log_end_offset} == ends
        assert b2.log_start_offset == start
        assert a2.load_result.recovered_segments == 0
        a2.append(build([(b"more", b"k", BASE_TS, [])]))
    finally:
        # a crash: the files are closed, but there is no clean shutdown
        for lg in mgr2.logs.values():
            lg.close()
        mgr2._dir_lock.release()  # as the kernel drops a dead process's flock
    assert not marker.exists()
    mgr3 = manager(d)
    try:
        assert not mgr3.had_clean_shutdown
        a3 = mgr3.get_log("alpha", 0)
        assert a3.log_end_offset == ends[("alpha", 0)] + 1
        assert a3.load_result.recovered_segments >= 1
        assert a3.recovery_point == a3.log_end_offset
    finally:
        mgr3.shutdown()
    assert marker.exists()


def test_a_data_directory_in_use_is_refused(tmp_path):
    """Kafka's .lock: a second LogManager on an open directory, in this process or another, is
    refused with the directory and the holder named, and touches nothing; the lock goes with
    a clean shutdown and with the death of the holding process."""
    d = tmp_path / "data"
    mgr = manager(d)
    mgr.create_log("alpha", 0).append(build([(b"v", b"k", BASE_TS, [])]))
    before = top_files(d)
    with pytest.raises(KafkaStorageError) as e:
        manager(d)
    msg = str(e.value)
    assert str(d) in msg and f"process {os.getpid()}" in msg and ".lock" in msg, msg
    code = ("import sys; from kafkacore.storage import LogManager\n"
            "try:\n    LogManager(sys.argv[1], background=False)\n"
            "except Exception as e:\n    print(e); sys.exit(3)\n")
    out = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 3 and "is in use by process" in out.stdout, out.stdout + out.stderr
    assert top_files(d) == before
    mgr.shutdown()
    manager(d).shutdown()  # released by the clean shutdown
    # a holder that dies holds nothing
    hold = ("import sys, time; from kafkacore.storage import LogManager\n"
            "m = LogManager(sys.argv[1], background=False, node_id=3); print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", hold, str(d)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(KafkaStorageError, match=f"in use by process {proc.pid}"):
            manager(d)
    finally:
        proc.kill()
        proc.wait()
    again = manager(d)
    assert again.get_log("alpha", 0).log_end_offset == 1
    again.shutdown()


def test_generated_cluster_id(tmp_path):
    mgr = manager(tmp_path / "gen", node_id=7)
    meta = read_properties(tmp_path / "gen" / "meta.properties")
    mgr.shutdown()
    assert meta["node.id"] == "7" and meta["version"] == "1"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", meta["cluster.id"])
    again = manager(tmp_path / "gen", node_id=7, cluster_id=meta["cluster.id"])
    assert again.cluster_id == meta["cluster.id"]
    again.shutdown()


@pytest.mark.parametrize("topic", ["a/b", "..", ".", "", "a" * 250, "a b", "t\u00f3pico", "a\\b", "a:b", "a\x00b"])
def test_invalid_topic_names(tmp_path, topic):
    mgr = manager(tmp_path / "names")
    try:
        before = sorted(os.listdir(tmp_path / "names"))
        with pytest.raises(InvalidTopicError) as e:
            mgr.create_log(topic, 0)
        assert e.value.code == 17
        assert sorted(os.listdir(tmp_path / "names")) == before
        assert mgr.get_log(topic, 0) is None
    finally:
        mgr.shutdown()


def test_valid_topic_names_and_duplicates(tmp_path):
    mgr = manager(tmp_path / "ok")
    try:
        for topic in ("a" * 249, "Az.09_x-y", "...", "_internal"):
            lg = mgr.create_log(topic, 1)
            assert os.path.isdir(os.path.join(tmp_path / "ok", f"{topic}-1"))
            assert (lg.topic, lg.partition) == (topic, 1)
        with pytest.raises(TopicAlreadyExistsError) as e:
            mgr.create_log("Az.09_x-y", 1)
        assert e.value.code == 36
    finally:
        mgr.shutdown()


def test_partition_metadata_topic_id(tmp_path):
    d = tmp_path / "meta"
    topic_id = "vQ3mY1m2S0ek2xF7dG9aZw"
    mgr = manager(d)
    lg = mgr.create_log("orders", 3, topic_id=topic_id)
    assert lg.topic_id == topic_id
    text = read_bytes(d / "orders-3" / "partition.metadata").decode()
    assert text == f"version: 0\ntopic_id: {topic_id}\n"
    mgr.create_log("plain", 0)
    assert not (d / "plain-0" / "partition.metadata").exists()
    mgr.shutdown()
    mgr2 = manager(d)
    try:
        assert mgr2.get_log("orders", 3).topic_id == topic_id
        assert mgr2.get_log("plain", 0).topic_id is None
    finally:
        mgr2.shutdown()
