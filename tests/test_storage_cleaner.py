"""Log compaction of the storage engine (LogCleaner, Log.replace_segment, the loader's swap
completion, LogManager's cleaner thread), checked against an independent model of what was
appended: {key: latest offset} over the cleaned range.

Real files in tmp_path, explicit `now` and record timestamps wherever the cleaner's decisions
depend on time."""
import os
import random
import shutil
import threading
import time
import traceback

import pytest

from kafkacore.errors import InvalidRecordError
from kafkacore.record import RecordBatchBuilder, iter_batches
from kafkacore.storage import Log, LogCleaner, LogConfig, LogManager
from kafkacore.storage.checkpoints import (CLEANER_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                                           OffsetCheckpointFile)

from _kcutil import CODECS, by_mode, wait_for

NEVER = str(1 << 62)
SEG_SUFFIXES = (".log", ".index", ".timeindex")


def compact_overrides(**kw):
    base = {"cleanup.policy": "compact", "segment.ms": NEVER, "segment.bytes": 1 << 30,
            "file.delete.delay.ms": 0, "index.interval.bytes": 128}
    base.update({k.replace("_", "."): v for k, v in kw.items()})
    return base


def compact_cfg(**kw):
    return LogConfig(compact_overrides(**kw))


class Model:
    """Appends batches to a log and remembers every record as
    (offset, timestamp, key, value, headers)."""

    def __init__(self, lg):
        self.lg = lg
        self.records = []

    def append(self, recs, codec="none", **builder_kw):
        """recs: [(key, value, timestamp, headers)]"""
        b = RecordBatchBuilder(compression=codec, **builder_kw)
        for key, value, ts, headers in recs:
            b.append(value, key=key, timestamp_ms=ts, headers=headers)
        info = self.lg.append(b.build())
        assert info.last_offset - info.first_offset + 1 == len(recs)
        for i, (key, value, ts, headers) in enumerate(recs):
            self.records.append((info.first_offset + i, ts, key, value, list(headers or [])))
        return info

    def expected(self, end, tombstone_kept=lambda offset: True, start=0):
        """The log after compaction of [start, end): a record below end stays iff it has a
        key, is the latest of its key below end, and is not a tombstone due for removal."""
        latest = {}
        for off, _ts, key, _v, _h in self.records:
            if off < end and key is not None:
                latest[key] = off
        out = []
        for rec in self.records:
            off, _ts, key, value, _h = rec
            if off < start:
                continue
            if off >= end:
                out.append(rec)
            elif key is not None and latest[key] == off and (value is not None or tombstone_kept(off)):
                out.append(rec)
        return out


def read_all(lg):
    """(records, batches) of the whole log from its start; every batch validated, offsets
    strictly rising, every record inside its batch's offset range."""
    data = lg.read_batches_bytes()
    recs, batches, prev = [], [], -1
    for batch in iter_batches(data):
        batch.validate()
        raw = data[batch.position:batch.position + batch.size_in_bytes]
        offs = []
        for r in batch:
            assert batch.base_offset <= r.offset <= batch.last_offset
            assert r.offset > prev, (r.offset, prev)
            prev = r.offset
            offs.append(r.offset)
            recs.append((r.offset, r.timestamp_ms, r.key, r.value, [tuple(h) for h in r.headers]))
        batches.append((batch, raw, offs))
    return recs, batches


def batch_map(lg):
    """{base offset: (raw bytes, record offsets, batch)} of the log's batches."""
    _recs, batches = read_all(lg)
    return {b.base_offset: (raw, offs, b) for b, raw, offs in batches}


def check_batches_against(before, lg, end):
    """Every batch of the cleaned log comes from one before it: whole (byte-identical) when
    all its records stayed, rebuilt with the same codec and header fields otherwise. Returns
    (identical, rebuilt, dropped) counts over the cleaned range."""
    after = batch_map(lg)
    identical = rebuilt = 0
    for base, (raw, offs, batch) in after.items():
        assert base in before, f"batch at {base} did not exist before cleaning"
        old_raw, old_offs, old = before[base]
        if offs == old_offs:
            assert raw == old_raw, f"batch at {base} kept every record but changed"
            identical += base < end
            continue
        assert base < end, f"batch at {base} is past the cleaned range but changed"
        rebuilt += 1
        assert offs and set(offs) < set(old_offs)
        assert batch.compression == old.compression
        assert batch.last_offset == old.last_offset  # lastOffsetDelta stays
        assert batch.count == len(offs)
        for f in ("producer_id", "producer_epoch", "base_sequence", "base_timestamp", "timestamp_type",
                  "partition_leader_epoch", "is_transactional"):
            assert getattr(batch, f) == getattr(old, f), f
        assert batch.max_timestamp == max(r.timestamp_ms for r in batch)
    dropped = sum(1 for base in before if base < end and base not in after)
    return identical, rebuilt, dropped


def check_every_offset_reads(lg, expected_offsets, step=1):
    """A fetch at any offset of the log returns the batch holding it (a rebuilt batch keeps
    its last offset, so it may have no record left at or after it), and a consumer that goes
    on from each batch's last offset + 1 meets next exactly the next record that should be
    there."""
    import bisect
    kept = sorted(expected_offsets)
    for off in range(lg.log_start_offset, lg.log_end_offset, step):
        i = bisect.bisect_left(kept, off)
        fetch, found = off, None
        while found is None and fetch < lg.log_end_offset:
            data = lg.read(fetch, 1).read()
            first = next(iter(iter_batches(data)))
            first.validate()
            assert first.last_offset >= fetch
            later = [r.offset for r in first if r.offset >= off]
            found = later[0] if later else None
            fetch = first.last_offset + 1
        assert found == (kept[i] if i < len(kept) else None), off


def check_time_lookups(lg, recs, extra=()):
    """ListOffsets by timestamp over a cleaned log: the first remaining record (from the log
    start) whose timestamp is at or after the target; -3 the first record with the largest
    timestamp."""
    targets = sorted({r[1] for r in recs} | {r[1] + 1 for r in recs} | set(extra))
    for t in targets:
        hits = [(r[0], r[1]) for r in recs if r[1] >= t and r[0] >= lg.log_start_offset]
        assert lg.offset_for_timestamp(t) == (hits[0] if hits else None), t
    if recs:
        top = max(r[1] for r in recs)
        assert lg.offset_for_timestamp(-3) == next((r[0], r[1]) for r in recs if r[1] == top)


def cleaner_for(lg, directory):
    """A LogCleaner without a thread for one stand-alone log; its checkpoint in directory."""
    os.makedirs(directory, exist_ok=True)
    return LogCleaner(str(directory), lambda: {(lg.topic, lg.partition): lg}, background=False)


def random_records(rnd, n, keys, ts, tombstone_p=0.0, header_p=0.3, value_size=(0, 60)):
    out = []
    for _ in range(n):
        key = rnd.choice(keys)
        if rnd.random() < tombstone_p:
            value = None
        else:
            value = rnd.randbytes(rnd.randint(*value_size)) if rnd.random() < 0.5 else \
                (b"val-" + key) * rnd.randint(1, 8)
        headers = [("h%d" % j, rnd.choice([None, b"", rnd.randbytes(5)])) for j in range(rnd.randint(1, 3))] \
            if rnd.random() < header_p else None
        out.append((key, value, ts + rnd.randint(0, 50), headers))
    return out


def fill_segments(model, rnd, n_segments, batches_per_segment, keys, codec, seg_ts, *, tombstone_p=0.1,
                  unique_every=4):
    """n_segments segments (rolled after each) of random batches over keys; every
    unique_every-th batch has keys of its own (never overwritten: kept whole by the cleaner)."""
    lg = model.lg
    for s in range(n_segments):
        for i in range(batches_per_segment):
            ts = seg_ts[s] if isinstance(seg_ts, list) else seg_ts
            if unique_every and i % unique_every == 0:
                n = rnd.randint(1, 5)
                recs = [(b"u-%d-%d-%d" % (s, i, j), b"unique" * j, ts + j, [("u", b"%d" % j)]) for j in range(n)]
            else:
                recs = random_records(rnd, rnd.randint(1, 12), keys, ts, tombstone_p)
            model.append(recs, codec)
        lg.roll()


KEYS = [b"key-%d" % i for i in range(30)] + [b""]


# ---------------------------------------------------------------------------------------
# What compaction keeps


@pytest.mark.parametrize("codec", CODECS)
def test_compaction_keeps_latest_per_key_and_batches_intact(tmp_path, codec):
    rnd = random.Random(f"compact-{codec}")
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("c", 0, compact_overrides())
    model = Model(lg)
    per_seg = by_mode(24, 10)
    fill_segments(model, rnd, 4, per_seg, KEYS, codec, 1000)
    # the active segment holds records too, some of them newer versions of cleaned keys
    for _ in range(5):
        model.append(random_records(rnd, rnd.randint(1, 8), KEYS, 2000, 0.1), codec)
    active = lg.active_segment
    active_bytes = active.read_bytes(0, active.size)
    end_before = lg.log_end_offset
    before = batch_map(lg)
    n_before = len(model.records)

    stats = mgr.cleaner.clean_log(lg, now=5000)  # delete.retention.ms (1 day) keeps tombstones
    assert stats is not None
    assert (stats.first_dirty_offset, stats.end_offset) == (0, active.base_offset)
    expected = model.expected(active.base_offset)
    recs, _batches = read_all(lg)
    assert recs == expected
    assert len(expected) < n_before
    assert stats.records_read == sum(1 for r in model.records if r[0] < active.base_offset)
    assert stats.records_kept == sum(1 for r in expected if r[0] < active.base_offset)

    identical, rebuilt, dropped = check_batches_against(before, lg, active.base_offset)
    assert identical and rebuilt and dropped  # all three cases happened
    assert lg.active_segment is active
    assert active.read_bytes(0, active.size) == active_bytes
    assert lg.log_end_offset == end_before and lg.log_start_offset == 0
    check_every_offset_reads(lg, [r[0] for r in expected], step=by_mode(1, 3))
    check_time_lookups(lg, expected, extra=(0, 999, 1 << 40))
    ckpt = OffsetCheckpointFile(os.path.join(mgr.data_dir, CLEANER_OFFSET_CHECKPOINT)).read()
    assert ckpt == {("c", 0): active.base_offset}

    # nothing dirty: no pass
    assert mgr.cleaner.clean_log(lg, now=5000) is None
    assert read_all(lg)[0] == expected

    # a second pass over more segments: the old cleaned part loses what newer keys supersede
    first_end = active.base_offset
    below_first_end = sum(1 for r in expected if r[0] < first_end)
    lg.roll()
    fill_segments(model, rnd, 2, per_seg, KEYS, codec, 3000)
    before = batch_map(lg)
    stats = mgr.cleaner.clean_log(lg, now=5000)
    end = lg.active_segment.base_offset
    assert (stats.first_dirty_offset, stats.end_offset) == (first_end, end)
    expected = model.expected(end)
    assert read_all(lg)[0] == expected
    check_batches_against(before, lg, end)
    # the already-cleaned part lost the keys the new segments rewrote
    assert sum(1 for r in expected if r[0] < first_end) < below_first_end
    mgr.shutdown()


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_compaction_keeps_producer_fields_and_timestamp_type(tmp_path, timestamp_type):
    rnd = random.Random(7)
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("p", 0, compact_overrides(message_timestamp_type=timestamp_type))
    m = Model(lg)

    def append(recs, codec, **kw):
        info = m.append(recs, codec, **kw)
        if timestamp_type == "LogAppendTime":  # every record reads back with the append time
            assert info.log_append_time > 0
            for i in range(len(recs)):
                off, _ts, key, value, headers = m.records[-len(recs) + i]
                m.records[-len(recs) + i] = (off, info.log_append_time, key, value, headers)
    for i in range(12):
        append(random_records(rnd, 6, KEYS[:6], 1000 + i), "lz4" if i % 2 else "none",
               producer_id=77, producer_epoch=3, base_sequence=6 * i)
    lg.roll()
    append(random_records(rnd, 3, KEYS[:6], 5000), "none")
    before = batch_map(lg)
    mgr.cleaner.clean_log(lg, now=5000)
    end = lg.active_segment.base_offset
    assert read_all(lg)[0] == m.expected(end)
    _i, rebuilt, _d = check_batches_against(before, lg, end)
    assert rebuilt
    for base, (_raw, _offs, batch) in batch_map(lg).items():
        assert batch.timestamp_type == before[base][2].timestamp_type
        if timestamp_type == "LogAppendTime":
            assert batch.max_timestamp == before[base][2].max_timestamp
    mgr.shutdown()


# ---------------------------------------------------------------------------------------
# Tombstones and keyless records


def test_tombstones_kept_within_delete_retention_then_removed(tmp_path):
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("t", 0, compact_overrides(delete_retention_ms=10_000))
    m = Model(lg)
    m.append([(b"a", b"a1", 900, None), (b"b", b"b1", 1000, None), (b"c", b"c1", 1000, [("x", b"y")])])
    lg.roll()  # segment 0: newest 1000
    m.append([(b"a", None, 2000, [("why", b"deleted")]), (b"d", b"d1", 1500, None)])
    lg.roll()  # segment 3: newest 2000
    m.append([(b"b", None, 50_000, None), (b"e", b"e1", 50_000, None)])
    lg.roll()  # segment 5: newest 50000
    m.append([(b"f", b"f1", 50_000, None)])
    keys_of = lambda: {(r[2], r[3]) for r in read_all(lg)[0]}  # noqa: E731

    # now - delete.retention.ms = 1500: segment 0 is past the horizon but holds no tombstone;
    # the tombstones of segments 3 and 5 stay, the values they delete go
    mgr.cleaner.clean_log(lg, now=11_500)
    assert read_all(lg)[0] == m.expected(7)
    assert keys_of() == {(b"a", None), (b"b", None), (b"c", b"c1"), (b"d", b"d1"), (b"e", b"e1"), (b"f", b"f1")}
    tomb_a = [r for r in read_all(lg)[0] if r[2] == b"a"]
    assert tomb_a == [(3, 2000, b"a", None, [("why", b"deleted")])]

    # a pass while segment 3 is still 1 ms inside the horizon keeps its tombstone
    m.append([(b"g", b"g1", 60_000, None)])
    lg.roll()
    mgr.cleaner.clean_log(lg, now=2000 + 10_000 - 1)
    assert (b"a", None) in keys_of()

    # later: segment 3 is past it, segment 5 not: tombstone a goes (and key a with it)
    m.append([(b"h", b"h1", 60_000, None)])
    lg.roll()
    mgr.cleaner.clean_log(lg, now=30_000)
    horizon = 30_000 - 10_000
    seg_newest = {0: 1000, 3: 2000, 5: 50_000}

    def kept(off, horizon=horizon):
        seg = max(b for b in seg_newest if b <= off) if off < 7 else None
        return seg is None or seg_newest[seg] > horizon
    end = lg.active_segment.base_offset
    assert read_all(lg)[0] == m.expected(end, kept)
    assert not any(r[2] == b"a" for r in read_all(lg)[0])
    assert (b"b", None) in keys_of()

    # much later every tombstone is past the horizon
    m.append([(b"i", b"i1", 70_000, None)])
    lg.roll()
    mgr.cleaner.clean_log(lg, now=1 << 40)
    assert keys_of() == {(b"c", b"c1"), (b"d", b"d1"), (b"e", b"e1"), (b"f", b"f1"), (b"g", b"g1"),
                         (b"h", b"h1"), (b"i", b"i1")}
    assert read_all(lg)[0] == m.expected(lg.active_segment.base_offset, lambda off: False)
    mgr.shutdown()


def test_keyless_records_dropped_once_the_topic_is_compacted(tmp_path):
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("k", 0, {"segment.ms": NEVER, "index.interval.bytes": 64})
    m = Model(lg)
    m.append([(None, b"n%d" % i, 1000, None) for i in range(5)], "gzip")  # all keyless: batch goes
    m.append([(b"a", b"a1", 1000, None), (None, b"n", 1000, None), (b"b", b"b1", 1000, None)], "zstd")
    m.append([(None, b"n", 1000, None), (b"a", b"a2", 1000, [("h", b"v")])], "snappy")
    lg.roll()
    m.append([(None, b"tail", 1000, None)])  # active: untouched
    mgr.set_topic_config("k", compact_overrides())
    assert lg.config.compact

    end = lg.log_end_offset
    with pytest.raises(InvalidRecordError):
        m.append([(b"x", b"x", 1, None), (None, b"y", 1, None)])
    assert lg.log_end_offset == end
    before = batch_map(lg)
    mgr.cleaner.clean_log(lg, now=5000)
    recs = read_all(lg)[0]
    assert recs == m.expected(lg.active_segment.base_offset)
    assert [(r[2], r[3]) for r in recs] == [(b"b", b"b1"), (b"a", b"a2"), (None, b"tail")]
    _i, rebuilt, dropped = check_batches_against(before, lg, lg.active_segment.base_offset)
    assert (rebuilt, dropped) == (2, 1)
    mgr.shutdown()


# ---------------------------------------------------------------------------------------
# The cleanable range, the checkpoint, the dirty ratio


def test_min_compaction_lag_keeps_young_segments_out(tmp_path):
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("lag", 0, compact_overrides(min_compaction_lag_ms=5000))
    m = Model(lg)
    m.append([(b"a", b"a0", 1000, None), (b"b", b"b0", 1000, None)])
    lg.roll()  # 0: newest 1000
    m.append([(b"b", b"b1", 2000, None), (b"c", b"c1", 2000, None)])
    lg.roll()  # 2: newest 2000
    m.append([(b"a", b"a2", 9000, None), (b"c", b"c2", 9000, None)])
    lg.roll()  # 4: newest 9000 (young at now=10000)
    m.append([(b"b", b"b3", 3000, None)])
    lg.roll()  # 6: newest 3000, old but after a young segment
    m.append([(b"a", b"a4", 10_000, None)])  # active at 7
    young = {s.base_offset: s.read_bytes(0, s.size) for s in lg.segments[2:]}

    stats = mgr.cleaner.clean_log(lg, now=10_000)
    assert stats.end_offset == 4
    assert read_all(lg)[0] == m.expected(4)
    assert [(r[2], r[3]) for r in read_all(lg)[0]][:3] == [(b"a", b"a0"), (b"b", b"b1"), (b"c", b"c1")]
    assert {s.base_offset: s.read_bytes(0, s.size) for s in lg.segments[2:]} == young
    path = os.path.join(mgr.data_dir, CLEANER_OFFSET_CHECKPOINT)
    with open(path) as f:
        assert f.read() == "0\n1\nlag 0 4\n"
    # the rest of the range is still too young: nothing to do at this time
    assert mgr.cleaner.filthiest_log(now=10_000) is None
    assert mgr.cleaner.clean_log(lg, now=10_000) is None

    # later everything before the active segment is cleanable
    stats = mgr.cleaner.clean_log(lg, now=20_000)
    assert (stats.first_dirty_offset, stats.end_offset) == (4, 7)
    assert read_all(lg)[0] == m.expected(7)
    assert [(r[2], r[3]) for r in read_all(lg)[0]] == [(b"a", b"a2"), (b"c", b"c2"), (b"b", b"b3"), (b"a", b"a4")]
    with open(path) as f:
        assert f.read() == "0\n1\nlag 0 7\n"
    mgr.shutdown()


def test_second_pass_after_restart_maps_only_the_new_dirty_part(tmp_path):
    data = str(tmp_path / "data")
    rnd = random.Random(11)
    mgr = LogManager(data, background=False)
    lg = mgr.create_log("two", 0, compact_overrides())
    m = Model(lg)
    old_keys = [b"old-%d" % i for i in range(60)]
    for s in range(3):  # three segments of 60 distinct keys each
        for k in range(0, 60, 6):
            m.append([(key, b"s%d" % s, 1000 + s, None) for key in old_keys[k:k + 6]], "lz4")
        lg.roll()
    m.append([(b"new-0", b"x", 1500, None)])  # the active segment: one key
    stats = mgr.cleaner.clean_log(lg, now=5000)
    first_end = stats.end_offset
    assert first_end == 180
    assert read_all(lg)[0] == m.expected(first_end)
    mgr.shutdown()

    # a map of 25 entries: enough for the new dirty part (21 keys), far too small for the whole log
    mgr = LogManager(data, background=False, cleaner_dedupe_buffer_size=25 * 24)
    assert mgr.cleaner.first_dirty == {("two", 0): first_end}
    lg = mgr.get_log("two", 0)
    m.lg = lg
    rewritten = rnd.sample(old_keys, 10)
    m.append([(k, b"new", 2000, None) for k in rewritten[:5]] + [(b"new-1", b"y", 2000, None)], "zstd")
    lg.roll()
    m.append([(k, b"newer", 2100, None) for k in rewritten[5:]] + [(b"new-%d" % i, b"z", 2100, None) for i in range(2, 7)])
    lg.roll()
    m.append([(b"active", b"a", 2200, None)])
    stats = mgr.cleaner.clean_log(lg, now=5000)
    end = lg.active_segment.base_offset
    assert (stats.first_dirty_offset, stats.end_offset) == (first_end, end)
    recs = read_all(lg)[0]
    assert recs == m.expected(end)
    live = {r[2]: r[3] for r in recs}
    assert all(live[k] in (b"new", b"newer") for k in rewritten)
    assert sum(1 for r in recs if r[2] in rewritten) == 10  # the old versions went
    mgr.shutdown()


def test_full_offset_map_cleans_in_several_passes(tmp_path):
    mgr = LogManager(str(tmp_path / "data"), background=False, cleaner_dedupe_buffer_size=25 * 24)
    lg = mgr.create_log("full", 0, compact_overrides())
    m = Model(lg)
    rnd = random.Random(3)
    keys = [b"k%d" % i for i in range(40)]
    for s in range(6):
        m.append(random_records(rnd, 20, keys, 1000 + s, 0.0), "snappy")
        lg.roll()
    m.append([(b"k0", b"last", 2000, None)])
    ends, prev_end = [], 0
    while True:
        stats = mgr.cleaner.clean_log(lg, now=5000)
        if stats is None:
            break
        assert stats.first_dirty_offset == prev_end
        assert stats.end_offset > prev_end
        prev_end = stats.end_offset
        ends.append(prev_end)
        assert read_all(lg)[0] == m.expected(prev_end)
        assert len(ends) < 10
    assert len(ends) > 1 and ends[-1] == lg.active_segment.base_offset
    mgr.shutdown()


def _unique_segment(m, seg_index, n_batches=4, ts=1000):
    for b in range(n_batches):
        m.append([(b"s%d-b%d-r%d" % (seg_index, b, r), b"v" * 40, ts, None) for r in range(5)])
    m.lg.roll()


def test_filthiest_log_respects_min_cleanable_dirty_ratio(tmp_path):
    mgr = LogManager(str(tmp_path / "data"), background=False)
    cl = mgr.cleaner
    a = mgr.create_log("a", 0, compact_overrides())
    b = mgr.create_log("b", 0, compact_overrides())
    d = mgr.create_log("d", 0, {"segment.ms": NEVER})  # delete policy: never compacted
    ma, mb, md = Model(a), Model(b), Model(d)
    assert cl.filthiest_log(now=5000) is None
    for i in range(3):
        _unique_segment(ma, i)
        _unique_segment(md, i)
    _unique_segment(mb, 0)
    # keys are never overwritten, so cleaning keeps every segment's size
    assert cl.filthiest_log(now=5000) in (a, b)
    assert cl.clean_log(a, now=5000).end_offset == a.active_segment.base_offset
    assert cl.filthiest_log(now=5000) is b
    cl.clean_log(b, now=5000)
    assert cl.filthiest_log(now=5000) is None
    sizes_a = [s.size for s in a.segments[:-1]]

    _unique_segment(ma, 3)  # a: 1 dirty of 4 equal segments: 0.25 < 0.5
    for i in (1, 2, 3):
        _unique_segment(mb, i)  # b: 3 dirty of 4: 0.75
    assert [s.size for s in a.segments[:-2]] == sizes_a and len({s.size for s in a.segments[:-1]}) == 1
    assert cl.filthiest_log(now=5000) is b
    cl.clean_log(b, now=5000)
    assert cl.filthiest_log(now=5000) is None  # a is below its ratio

    mgr.set_topic_config("a", compact_overrides(min_cleanable_dirty_ratio=0.25))
    assert cl.filthiest_log(now=5000) is a
    mgr.set_topic_config("a", compact_overrides(min_cleanable_dirty_ratio=0.26))
    assert cl.filthiest_log(now=5000) is None
    # max.compaction.lag.ms: a dirty segment older than it is due whatever the ratio
    mgr.set_topic_config("a", compact_overrides(min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=5000))
    assert cl.filthiest_log(now=5000) is None  # its newest record (1000) is 4000 ms old
    assert cl.filthiest_log(now=6001) is a
    # min.compaction.lag.ms makes the dirty segment not cleanable yet
    mgr.set_topic_config("a", compact_overrides(min_cleanable_dirty_ratio=0.0, min_compaction_lag_ms=10_000))
    assert cl.filthiest_log(now=5000) is None
    assert cl.filthiest_log(now=11_001) is a
    cl.clean_log(a, now=11_001)
    assert cl.filthiest_log(now=1 << 40) is None
    mgr.shutdown()


def test_compact_delete_log_start_and_cleaning_together(tmp_path):
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("cd", 0, compact_overrides(cleanup_policy="compact,delete", retention_ms=10_000))
    m = Model(lg)
    rnd = random.Random(5)
    keys = [b"k%d" % i for i in range(8)]
    for s in range(5):  # segment s: offsets 20s..20s+20, newest timestamp 1000(s+1)+50 at most
        m.append(random_records(rnd, 9, keys, 1000 * (s + 1)), "lz4")
        m.append(random_records(rnd, 10, keys, 1000 * (s + 1)), "none")
        m.append([(b"own-%d" % s, b"x", 1000 * (s + 1), None)])  # no segment is emptied
        lg.roll()
    m.append([(b"k0", b"end", 9000, None)])
    assert lg.delete_records(25) == 25
    assert [s.base_offset for s in lg.segments][0] == 20
    mgr.cleaner.clean_log(lg, now=9000)
    end = lg.active_segment.base_offset
    assert lg.log_start_offset == 25
    # below the log start nothing is readable; from it on the log is compacted
    assert read_all(lg)[0] == [r for r in m.expected(end) if r[0] >= 25]
    # retention by time still applies to the cleaned segments: 20.. (newest <= 2050) and
    # 40.. (newest <= 3050) are past 10 s at 13500, 60.. (4000) is not
    assert lg.delete_old_segments(now=13_500) == 2
    assert lg.log_start_offset == 60
    assert read_all(lg)[0] == [r for r in m.expected(end) if r[0] >= 60]
    mgr.shutdown()


def _age_files(lg, when_ms, from_offset=0):
    """Sets the modification time of the inactive segments' files from from_offset on."""
    for seg in lg.segments[:-1]:
        if seg.base_offset < from_offset:
            continue
        for path in seg.paths():
            os.utime(path, ns=(when_ms * 1_000_000, when_ms * 1_000_000))


def test_segment_emptied_by_cleaning_keeps_its_age_for_time_retention(tmp_path):
    # Kafka keeps a cleaned segment's last-modified time (LogCleaner.cleanSegments:
    # cleaned.setLastModified(segments.last.lastModified)), so a segment whose records were
    # all superseded still counts as old as its data when it has no timestamp left.
    now = int(time.time() * 1000)
    old = now - 2 * 3_600_000
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("age", 0, compact_overrides(cleanup_policy="compact,delete", retention_ms=3_600_000))
    m = Model(lg)
    m.append([(b"a", b"1", old, None)])
    lg.roll()
    m.append([(b"a", b"2", old + 1, None)])  # supersedes all of segment 0
    lg.roll()
    m.append([(b"b", b"3", now, None)])  # the active segment, young
    _age_files(lg, old)  # both inactive segments were written two hours ago
    mgr.cleaner.clean_log(lg, now=now)
    assert read_all(lg)[0] == m.expected(2)
    # two hours old, retention one hour: everything but the active segment goes
    assert lg.delete_old_segments(now=now) == 2
    assert lg.log_start_offset == 2
    assert read_all(lg)[0] == [(2, now, b"b", b"3", [])]
    mgr.shutdown()


def test_segment_emptied_by_cleaning_does_not_block_later_compaction(tmp_path):
    now = int(time.time() * 1000)
    old = now - 2 * 3_600_000
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("lag", 0, compact_overrides(min_compaction_lag_ms=3_600_000))
    m = Model(lg)
    m.append([(b"a", b"1", old, None)])
    lg.roll()
    m.append([(b"a", b"2", old + 1, None)])  # supersedes all of segment 0
    lg.roll()
    m.append([(b"b", b"3", old + 2, None)])
    _age_files(lg, old)
    assert mgr.cleaner.clean_log(lg, now=now).end_offset == 2
    assert read_all(lg)[0] == m.expected(2)
    lg.roll()
    m.append([(b"b", b"4", old + 3, None)])  # records two hours old: past the lag
    lg.roll()
    m.append([(b"c", b"5", now, None)])
    _age_files(lg, old, from_offset=2)  # the new segments were written two hours ago too
    # segments 2 and 3 are old enough to clean; the emptied segment 0 holds no record younger
    # than the lag either
    stats = mgr.cleaner.clean_log(lg, now=now)
    assert stats is not None and (stats.first_dirty_offset, stats.end_offset) == (2, 4)
    assert read_all(lg)[0] == m.expected(4)
    mgr.shutdown()


# ---------------------------------------------------------------------------------------
# Reads and appends while the cleaner works


def test_reads_and_appends_during_cleaning(tmp_path):
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("rw", 0, compact_overrides(segment_bytes=4096, index_interval_bytes=256,
                                                   segment_index_bytes=4096))
    keys = [b"key-%02d" % i for i in range(40)]
    n_batches = by_mode(1500, 500)
    errors, appended = [], []
    done = threading.Event()
    reads = [0]

    def appender():
        rnd = random.Random(1)
        nxt = 0
        try:
            for i in range(n_batches):
                n = rnd.randint(1, 8)
                b = RecordBatchBuilder(compression=CODECS[i % len(CODECS)])
                recs = []
                for j in range(n):
                    key = rnd.choice(keys)
                    value = b"%s@%d" % (key, nxt + j)
                    b.append(value, key=key, timestamp_ms=1000 + i, headers=[("i", b"%d" % i)])
                    recs.append((nxt + j, 1000 + i, key, value, [("i", b"%d" % i)]))
                info = lg.append(b.build())
                if (info.first_offset, info.last_offset) != (nxt, nxt + n - 1):
                    errors.append(("offsets", info, nxt))
                nxt = info.last_offset + 1
                appended.extend(recs)
                if i % 50 == 0:
                    time.sleep(0.001)  # pacing: the cleaner and readers get the GIL
        except Exception as e:  # pragma: no cover - the failure being tested for
            errors.append(("append", repr(e), traceback.format_exc(limit=-4)))
        finally:
            done.set()

    def reader():
        try:
            while not done.is_set():
                offset, prev = lg.log_start_offset, -1
                while offset < lg.log_end_offset:
                    data = lg.read(offset, 3000).read()
                    if not data:
                        break
                    for batch in iter_batches(data):
                        batch.validate()
                        assert batch.last_offset >= offset
                        for r in batch:
                            assert batch.base_offset <= r.offset <= batch.last_offset
                            assert r.offset > prev, (r.offset, prev)
                            prev = r.offset
                            assert r.value == b"%s@%d" % (r.key, r.offset)
                        offset = batch.last_offset + 1
                    reads[0] += 1
        except Exception as e:  # pragma: no cover
            errors.append(("read", repr(e), traceback.format_exc(limit=-4)))

    threads = [threading.Thread(target=appender), threading.Thread(target=reader), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    passes = 0
    try:
        while not done.is_set():
            if mgr.cleaner.clean_log(lg, now=2000) is not None:
                passes += 1
            else:
                time.sleep(0.001)  # pacing: nothing to clean yet
    finally:
        for t in threads:
            t.join(120)
    assert errors == []
    mgr.cleaner.clean_log(lg, now=2000)
    assert passes > 1 and reads[0] > 0
    end = mgr.cleaner.first_dirty[("rw", 0)]
    assert 0 < end <= lg.active_segment.base_offset
    model = Model(lg)
    model.records = appended
    assert lg.log_end_offset == appended[-1][0] + 1
    assert read_all(lg)[0] == model.expected(end)
    left = [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert left == []
    mgr.shutdown()


# ---------------------------------------------------------------------------------------
# A crash in the middle of the swap (.cleaned -> .swap, old -> .deleted, .swap -> live)


def _segment_files(directory, base, suffix=""):
    return [os.path.join(directory, f"{base:020d}{s}{suffix}") for s in SEG_SUFFIXES]


def _place(src_dir, dst_dir, base, suffixes):
    """Copies the cleaned segment's three files from src_dir into dst_dir with the given
    suffix per file (log, index, timeindex)."""
    for src, suffix in zip(_segment_files(src_dir, base), suffixes):
        shutil.copyfile(src, os.path.join(dst_dir, os.path.basename(src) + suffix))


def _rename_old(directory, base, suffixes):
    for path, suffix in zip(_segment_files(directory, base), suffixes):
        if suffix:
            os.rename(path, path + suffix)


# state -> (suffixes of the cleaned files, suffixes of the old files, serves the cleaned segment)
SWAP_STATES = {
    # cleaned files written, nothing renamed yet
    "cleaned": ((".cleaned",) * 3, ("",) * 3, False),
    # the .log renamed to .swap, the indexes not yet
    "log-swapped": ((".swap", ".cleaned", ".cleaned"), ("",) * 3, True),
    # all renamed to .swap, the old segment still live
    "swap": ((".swap",) * 3, ("",) * 3, True),
    # the old segment half renamed to .deleted
    "swap-old-half-deleted": ((".swap",) * 3, (".deleted", "", ""), True),
    # the old segment renamed to .deleted
    "swap-old-deleted": ((".swap",) * 3, (".deleted",) * 3, True),
    # the cleaned .log already live, its indexes still .swap
    "swap-half-live": (("", ".swap", ".swap"), (".deleted",) * 3, True),
}


@pytest.fixture(scope="module")
def swap_fixture(tmp_path_factory):
    """An old log (3 inactive segments + active) and the same log cleaned, both closed."""
    root = tmp_path_factory.mktemp("swap")
    old_dir = str(root / "old" / "sw-0")
    lg = Log(old_dir, compact_cfg(index_interval_bytes=64))
    m = Model(lg)
    rnd = random.Random(99)
    keys = [b"k%d" % i for i in range(12)]
    for s in range(3):
        for i in range(by_mode(12, 8)):
            m.append(random_records(rnd, rnd.randint(1, 6), keys, 1000 + s, 0.1), CODECS[(s + i) % len(CODECS)])
        m.append([(b"only-%d" % s, b"x", 1000 + s, None)])  # no segment is emptied
        lg.roll()
    m.append([(b"k0", b"active", 2000, None)])
    bases = [s.base_offset for s in lg.segments]
    lg.close()
    new_dir = str(root / "new" / "sw-0")
    shutil.copytree(old_dir, new_dir)
    lg = Log(new_dir, compact_cfg(index_interval_bytes=64))
    cleaner_for(lg, root / "new-cleaner").clean_log(lg, now=5000)
    assert [s.base_offset for s in lg.segments] == bases
    index_entries = {s.base_offset: (s.offset_index.entries, s.time_index.entries) for s in lg.segments}
    lg.close()

    def seg_bytes(directory, base):
        with open(_segment_files(directory, base)[0], "rb") as f:
            return f.read()
    old = {b: seg_bytes(old_dir, b) for b in bases}
    new = {b: seg_bytes(new_dir, b) for b in bases}
    for b in bases[:-1]:
        assert old[b] != new[b]  # cleaning changed every inactive segment
    return old_dir, new_dir, bases, old, new, index_entries


@pytest.mark.parametrize("opening", ["clean", "unclean-recover-active", "unclean-recover-all"])
@pytest.mark.parametrize("crashed_segment", [0, 1])
@pytest.mark.parametrize("state", list(SWAP_STATES))
def test_crash_during_swap_serves_old_or_cleaned_segment(tmp_path, swap_fixture, state, crashed_segment, opening):
    """The directory a crash at each point of Log.replace_segment leaves, made by hand; opened
    as after a clean stop, after a crash with the recovery point at the active segment (the
    usual case: inactive segments were flushed), and after a crash recovering everything."""
    old_dir, new_dir, bases, old, new, index_entries = swap_fixture
    cleaned_suffixes, old_suffixes, completes = SWAP_STATES[state]
    d = str(tmp_path / "sw-0")
    shutil.copytree(old_dir, d)
    # segments before the crashed one were swapped already
    for b in bases[:crashed_segment]:
        for src in _segment_files(new_dir, b):
            shutil.copyfile(src, os.path.join(d, os.path.basename(src)))
    crashed = bases[crashed_segment]
    _rename_old(d, crashed, old_suffixes)
    _place(new_dir, d, crashed, cleaned_suffixes)

    lg = Log(d, compact_cfg(index_interval_bytes=64), clean_shutdown=opening == "clean",
             recovery_point=0 if opening == "unclean-recover-all" else bases[-1])
    expect_new = bases[:crashed_segment + (1 if completes else 0)]
    expected = b"".join(new[b] if b in expect_new else old[b] for b in bases)
    assert lg.read_batches_bytes() == expected
    recs, _ = read_all(lg)  # every batch valid, offsets rising
    assert [s.base_offset for s in lg.segments] == bases
    for seg in lg.segments:
        assert seg.read_bytes(0, seg.size) == (new if seg.base_offset in expect_new else old)[seg.base_offset]
    names = os.listdir(d)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    assert {n for n in names if n[:20].isdigit() and not n.endswith(".snapshot")} == {
        os.path.basename(p) for b in bases for p in _segment_files(d, b)}
    if completes and state != "swap-half-live":
        assert lg.load_result.completed_swaps == 1
    # the indexes of the serving segment are whole again (rebuilt where they were lost)
    seg = lg.segments[crashed_segment]
    if completes:
        assert (seg.offset_index.entries, seg.time_index.entries) == index_entries[crashed]
    check_every_offset_reads(lg, [r[0] for r in recs], step=by_mode(1, 2))
    end = lg.log_end_offset
    assert lg.append(_one(b"k1", b"after")).first_offset == end
    lg.close()


def _one(key, value, ts=3000):
    b = RecordBatchBuilder()
    b.append(value, key=key, timestamp_ms=ts)
    return b.build()


# ---------------------------------------------------------------------------------------
# The background cleaner thread; compaction and restarts


def _leftovers(directory):
    return [n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap", ".deleted"))]


def test_background_cleaner_thread_compacts_and_shuts_down_cleanly(tmp_path):
    data = str(tmp_path / "data")
    threads_before = set(threading.enumerate())
    mgr = LogManager(data, background=True, cleaner_backoff_ms=10, retention_check_interval_ms=1 << 40,
                     checkpoint_interval_ms=1 << 40)
    own_threads = set(threading.enumerate()) - threads_before
    assert own_threads
    try:
        # built before the topic is compacted (the thread would race the building), then switched
        lg = mgr.create_log("bgc", 0, {"segment.ms": NEVER, "file.delete.delay.ms": 20})
        other = mgr.create_log("plain", 0, {"segment.ms": NEVER})  # delete policy: left alone
        m, mo = Model(lg), Model(other)
        rnd = random.Random(21)
        keys = [b"key-%d" % i for i in range(20)]
        for s in range(4):
            for _ in range(by_mode(20, 8)):
                m.append(random_records(rnd, rnd.randint(1, 8), keys, 1000 + s, 0.0), CODECS[s % 5])
                mo.append(random_records(rnd, 3, keys, 1000 + s, 0.0))
            lg.roll()
            other.roll()
        m.append([(b"key-0", b"active", 2000, None)])
        plain_before = other.read_batches_bytes()
        end = lg.active_segment.base_offset
        mgr.set_topic_config("bgc", compact_overrides(file_delete_delay_ms=20))

        wait_for(lambda: mgr.cleaner.first_dirty.get(("bgc", 0)) == end, "the background cleaner to reach the active segment")
        wait_for(lambda: not _leftovers(lg.dir), lambda: f"no leftovers (have {_leftovers(lg.dir)})")
        assert read_all(lg)[0] == m.expected(end)
        assert other.read_batches_bytes() == plain_before
        assert mgr.cleaner.failures == 0

        # keep it busy: appends and rolls while it cleans, then stop in the middle
        errors = []

        def appender():
            try:
                for i in range(by_mode(240, 120)):
                    m.append(random_records(rnd, rnd.randint(1, 8), keys, 3000 + i, 0.0), CODECS[i % 5])
                    if i % 20 == 19:
                        lg.roll()
                        time.sleep(0.01)  # pacing: the cleaner runs while the log grows
            except Exception as e:  # pragma: no cover - the failure being tested for
                errors.append((repr(e), traceback.format_exc(limit=-4)))
        t = threading.Thread(target=appender)
        t.start()
        t.join(60)
        assert errors == []
        lg.roll()
        # shut down while a pass is running if one can be caught (a pass may also be over by now:
        # both are shutdowns the test wants, so a timeout here is not a failure)
        try:
            wait_for(lambda: mgr.cleaner._lock.locked(), "a cleaning pass", timeout=2.0, interval=0.0005)
        except AssertionError:
            pass
    finally:
        shutter = threading.Thread(target=mgr.shutdown)
        shutter.start()
        shutter.join(60)
        assert not shutter.is_alive(), "shutdown hung"
    assert not [t for t in own_threads if t.is_alive()]
    assert mgr.cleaner.failures == 0
    assert _leftovers(lg.dir) == []
    assert os.path.exists(os.path.join(data, ".kafka_cleanshutdown"))
    cleaned_to = OffsetCheckpointFile(os.path.join(data, CLEANER_OFFSET_CHECKPOINT)).read()[("bgc", 0)]
    assert cleaned_to >= end

    mgr = LogManager(data, background=False)
    assert mgr.had_clean_shutdown
    lg = mgr.get_log("bgc", 0)
    m.lg = lg
    assert lg.log_end_offset == m.records[-1][0] + 1
    # A pass stopped by the shutdown swapped some segments without moving the checkpoint: the
    # content is compacted at least up to it, and never lost a record that was not superseded.
    check_compaction_safety(m, read_all(lg)[0], cleaned_to)
    assert mgr.get_log("plain", 0).read_batches_bytes() == plain_before
    while mgr.cleaner.clean_log(lg) is not None:
        pass
    assert read_all(lg)[0] == m.expected(lg.active_segment.base_offset)
    mgr.shutdown()


def check_compaction_safety(model, recs, compacted_to):
    """What any compaction may leave (no tombstones): records as appended, each missing one
    superseded by a later record of its key, the latest of every key present, and below
    compacted_to at most one record per key."""
    appended = {r[0]: r for r in model.records}
    latest = {}
    for r in model.records:
        latest[r[2]] = r[0]
    present = set()
    for r in recs:
        assert appended[r[0]] == r
        present.add(r[0])
    for off, r in appended.items():
        if off not in present:
            assert latest[r[2]] > off, f"record {off} went without a later record of its key"
    assert set(latest.values()) <= present
    below = [r[2] for r in recs if r[0] < compacted_to]
    assert len(below) == len(set(below))


@pytest.mark.parametrize("restart", ["clean", "unclean"])
def test_cleaned_log_reopens_with_same_content_and_offsets(tmp_path, restart):
    data = str(tmp_path / "data")
    mgr = LogManager(data, background=False)
    lg = mgr.create_log("rs", 1, compact_overrides())
    m = Model(lg)
    rnd = random.Random(restart)
    fill_segments(m, rnd, 4, by_mode(20, 10), KEYS, "zstd", 1000)
    m.append([(b"key-1", b"active", 2000, None)])
    mgr.cleaner.clean_log(lg, now=5000)
    end = lg.active_segment.base_offset
    content = lg.read_batches_bytes()
    assert read_all(lg)[0] == m.expected(end)
    layout = [(s.base_offset, s.size, s.next_offset) for s in lg.segments]
    leo = lg.log_end_offset

    if restart == "clean":
        mgr.shutdown()
        opened_from = data
    else:
        mgr.checkpoint()
        opened_from = str(tmp_path / "crashed")
        shutil.copytree(data, opened_from)
        # no recovery point: every segment, cleaned ones with their offset gaps, is recovered
        os.unlink(os.path.join(opened_from, RECOVERY_POINT_CHECKPOINT))
        mgr.shutdown()

    mgr = LogManager(opened_from, background=False)
    assert mgr.had_clean_shutdown is (restart == "clean")
    lg = mgr.get_log("rs", 1)
    if restart == "unclean":
        assert lg.load_result.recovered_segments == len(layout)
        assert lg.load_result.truncated_bytes == 0 and lg.load_result.deleted_segments == 0
    assert lg.read_batches_bytes() == content
    assert [(s.base_offset, s.size, s.next_offset) for s in lg.segments] == layout
    assert lg.log_end_offset == leo
    recs = read_all(lg)[0]
    check_every_offset_reads(lg, [r[0] for r in recs], step=by_mode(1, 3))
    check_time_lookups(lg, recs)
    assert mgr.cleaner.first_dirty == {("rs", 1): end}
    assert mgr.cleaner.clean_log(lg, now=5000) is None  # nothing dirty after the restart

    # and it goes on: more segments, a second pass over everything
    m.lg = lg
    assert m.append([(b"key-2", b"after", 3000, None)]).first_offset == leo
    lg.roll()
    fill_segments(m, rnd, 1, by_mode(20, 10), KEYS, "gzip", 3000)
    stats = mgr.cleaner.clean_log(lg, now=5000)
    assert stats.first_dirty_offset == end
    assert read_all(lg)[0] == m.expected(lg.active_segment.base_offset)
    mgr.shutdown()


def test_cleaner_reads_batches_larger_than_its_read_chunk(tmp_path):
    # the cleaner reads segments in 8 MiB chunks: a batch can straddle a chunk or exceed one
    mib = 1 << 20
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("big", 0, compact_overrides(max_message_bytes=16 * mib, segment_bytes=64 * mib,
                                                    index_interval_bytes=4096))
    m = Model(lg)
    for i in range(3):  # 3 MiB batches: the third straddles the first 8 MiB chunk
        m.append([(b"k%d" % (3 * i + j), bytes([i + j + 1]) * mib, 1000 + i, [("n", b"%d" % j)]) for j in range(3)])
    lg.roll()
    m.append([(b"huge", b"\x07" * (9 * mib), 2000, None)])  # one batch larger than a chunk
    m.append([(b"k4", b"small", 2001, None), (b"k7", None, 2001, None)])
    lg.roll()
    m.append([(b"k0", b"active", 3000, None)])
    before = batch_map(lg)
    stats = mgr.cleaner.clean_log(lg, now=5000)
    end = lg.active_segment.base_offset
    assert stats.end_offset == end
    recs = read_all(lg)[0]
    assert recs == m.expected(end)
    identical, rebuilt, dropped = check_batches_against(before, lg, end)
    assert (identical, rebuilt, dropped) == (3, 2, 0)  # batch 1 and 2 lost k4 and k7; huge kept
    mgr.shutdown()


def test_retention_deleting_segments_under_the_cleaner(tmp_path):
    # compact,delete: retention deletes segments the cleaner is rewriting. The cleaner does
    # its work outside the log's lock and takes it only to swap; holding the lock here keeps
    # every swap waiting until retention has run.
    mgr = LogManager(str(tmp_path / "data"), background=False)
    lg = mgr.create_log("rc", 0, compact_overrides(cleanup_policy="compact,delete", retention_ms=10_000))
    m = Model(lg)
    rnd = random.Random(8)
    keys = [b"k%d" % i for i in range(10)]
    for s in range(5):  # newest timestamps 1050.., 2050.., ...
        for _ in range(by_mode(10, 5)):
            m.append(random_records(rnd, 5, keys, 1000 * (s + 1)), "gzip")
        m.append([(b"own-%d" % s, b"x", 1000 * (s + 1), None)])
        lg.roll()
    m.append([(b"k0", b"active", 9000, None)])
    end = lg.active_segment.base_offset
    bases = [s.base_offset for s in lg.segments]
    outcome = []
    with lg.lock:
        t = threading.Thread(target=lambda: outcome.append(mgr.cleaner.clean_log(lg, now=9000)))
        t.start()
        first_cleaned = os.path.join(lg.dir, f"{bases[0]:020d}.log.cleaned")
        wait_for(lambda: os.path.exists(first_cleaned) or not t.is_alive(), "the cleaner's first .cleaned file")
        assert t.is_alive()  # it cannot swap while the lock is held here
        assert lg.delete_old_segments(now=12_500) == 2  # the two oldest segments expired
    t.join(60)
    assert not t.is_alive() and outcome and outcome[0] is not None
    assert lg.log_start_offset == bases[2]
    assert [s.base_offset for s in lg.segments] == bases[2:]
    assert _leftovers(lg.dir) == []
    assert not any(n.startswith((f"{bases[0]:020d}", f"{bases[1]:020d}")) for n in os.listdir(lg.dir))
    assert read_all(lg)[0] == [r for r in m.expected(end) if r[0] >= bases[2]]
    mgr.shutdown()


def test_deleted_log_leaves_the_cleaner_checkpoint(tmp_path):
    data = str(tmp_path / "data")
    mgr = LogManager(data, background=False)
    logs = {}
    for name in ("x", "y"):
        lg = logs[name] = mgr.create_log(name, 0, compact_overrides())
        m = Model(lg)
        for i in range(3):
            m.append([(b"a", b"%d" % i, 1000, None), (b"b", b"%d" % i, 1000, None)])
            lg.roll()
        m.append([(b"a", b"last", 1000, None)])
        mgr.cleaner.clean_log(lg, now=5000)
    path = os.path.join(data, CLEANER_OFFSET_CHECKPOINT)
    assert OffsetCheckpointFile(path).read() == {("x", 0): 6, ("y", 0): 6}
    assert mgr.delete_log("x", 0)
    assert OffsetCheckpointFile(path).read() == {("y", 0): 6}
    # a new log of the same name starts dirty from its beginning
    lg = mgr.create_log("x", 0, compact_overrides())
    m = Model(lg)
    m.append([(b"a", b"1", 1000, None), (b"a", b"2", 1000, None)])
    lg.roll()
    m.append([(b"c", b"3", 1000, None)])
    stats = mgr.cleaner.clean_log(lg, now=5000)
    assert (stats.first_dirty_offset, stats.end_offset) == (0, 2)
    assert read_all(lg)[0] == m.expected(2)
    mgr.shutdown()
    mgr = LogManager(data, background=False)
    assert mgr.cleaner.first_dirty == {("x", 0): 2, ("y", 0): 6}
    mgr.shutdown()


# ---------------------------------------------------------------------------------------
# Transactions (docs/transactions.md 4.8, Kafka's LogCleaner rules)

TXN_T0 = 10_000_000


class TxnHistory:
    """Appends plain, transactional and marker batches and remembers each batch as a dict:
    base, last, pid, kind (plain / data / COMMIT / ABORT), txn (pid, n) for a producer's n-th
    transaction, aborted, records [(offset, key)]."""

    def __init__(self, lg):
        self.lg = lg
        self.batches = []
        self.seq = {}
        self.txn_no = {}
        self.open = {}

    def plain(self, keys):
        b = RecordBatchBuilder()
        for k in keys:
            b.append(b"p" + k, key=k, timestamp_ms=TXN_T0)
        info = self.lg.append(b.build())
        self._add(info, -1, "plain", None, keys)

    def data(self, pid, keys):
        seq = self.seq.get(pid, 0)
        b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
        for k in keys:
            b.append(b"t%d" % pid + k, key=k, timestamp_ms=TXN_T0)
        info = self.lg.append(b.build())
        self.seq[pid] = seq + len(keys)
        self.open[pid] = True
        self._add(info, pid, "data", (pid, self.txn_no.get(pid, 0)), keys)

    def end(self, pid, commit):
        info = self.lg.append_marker(pid, 0, 0, commit, timestamp_ms=TXN_T0)
        txn = (pid, self.txn_no.get(pid, 0))
        self.txn_no[pid] = txn[1] + 1
        self.open.pop(pid, None)
        if not commit:
            for b in self.batches:
                if b["txn"] == txn:
                    b["aborted"] = True
        self._add(info, pid, "COMMIT" if commit else "ABORT", txn, [])

    def _add(self, info, pid, kind, txn, keys):
        self.batches.append({"base": info.first_offset, "last": info.last_offset, "pid": pid, "kind": kind,
                             "txn": txn, "aborted": False,
                             "records": [(info.first_offset + i, k) for i, k in enumerate(keys)]})


def reference_pass(batches, end, old, last_data):
    """Kafka's rules for one cleaning pass over [0, end), written from the batch list: batches
    of aborted transactions go; a data batch keeps the records that are the latest of their key
    among the non-aborted records below end; a marker stays when a batch of its transaction is
    still there, else only while its segment is young (not old); a producer's last data batch
    stays header-only when nothing else of it would."""
    latest = {}
    for b in batches:
        if b["kind"] in ("plain", "data") and not b["aborted"]:
            for off, k in b["records"]:
                if off < end:
                    latest[k] = off
    seen = {b["txn"] for b in batches if b["kind"] == "data" and b["base"] < end}
    out = []
    for b in batches:
        if b["base"] >= end:
            out.append(b)
            continue
        if b["kind"] in ("COMMIT", "ABORT"):
            if b["txn"] in seen or not old:
                out.append(b)
            continue
        keep_empty = b["pid"] >= 0 and last_data.get(b["pid"]) == b["last"]
        kept = [] if b["aborted"] else [(o, k) for o, k in b["records"] if latest[k] == o]
        if kept or keep_empty:
            out.append(dict(b, records=kept))
    return out


def log_view(lg):
    """[(base, last, pid, kind, [(offset, key)])] of lg's batches (kind: plain, data, COMMIT,
    ABORT, empty-control)."""
    out = []
    for b in iter_batches(lg.read_batches_bytes()):
        b.validate()
        if b.is_control:
            recs = list(b)
            kind = ("COMMIT" if recs[0].key[3] == 1 else "ABORT") if recs else "empty-control"
            out.append((b.base_offset, b.last_offset, b.producer_id, kind, []))
        else:
            kind = "data" if b.is_transactional else "plain"
            out.append((b.base_offset, b.last_offset, b.producer_id, kind, [(r.offset, r.key) for r in b]))
    return out


def as_view(batches):
    return [(b["base"], b["last"], b["pid"], b["kind"], list(b["records"])) for b in batches]


def _txn_compaction_log(tmp_path, seed):
    lg = Log(str(tmp_path / "tc-0"), compact_cfg(segment_bytes=600, min_cleanable_dirty_ratio=0.01))
    h = TxnHistory(lg)
    rnd = random.Random(seed)
    keys = [b"k%d" % i for i in range(6)]
    for _ in range(90):
        pid = rnd.choice((1, 2, 3))
        r = rnd.random()
        if r < 0.25:
            h.plain(rnd.sample(keys, rnd.randint(1, 3)))
        elif r < 0.7 or (pid not in h.open and r < 0.85):
            h.data(pid, rnd.sample(keys, rnd.randint(1, 3)))
        else:
            h.end(pid, commit=rnd.random() < 0.5)
    for pid in (1, 2, 3):
        if pid in h.open:
            h.end(pid, commit=False)
    h.end(2, commit=True)  # a marker without data
    h.data(4, [keys[0], keys[1]])  # an open transaction: the LSO stops the cleaning at its segment
    while len(lg.segments) < 3 + len(lg.segments):
        h.plain([keys[2]])
        if lg.segments[-1].base_offset > h.batches[-3]["base"] and len(lg.segments) > 2:
            break
    for _ in range(6):
        h.plain([keys[3]])
    return lg, h


@pytest.mark.parametrize("seed", range(3))
def test_compaction_of_committed_aborted_and_open_transactions(tmp_path, seed):
    """A compacted topic with committed, aborted and open transactions keeps exactly the
    batches and records reference_pass computes from the written history; the range stops at
    the segment holding the LSO; markers stay while their transaction's batches do and, once
    none is left, until delete.retention.ms; the .txnindex entries left are those of the ABORT
    markers kept; read_committed never sees aborted data. A second pass with the segments old
    drops the markers whose data is gone; then the open transaction commits and a third pass
    reaches past it."""
    lg, h = _txn_compaction_log(tmp_path, seed)
    cleaner = LogCleaner(str(tmp_path), lambda: {(lg.topic, lg.partition): lg}, background=False)
    try:
        lso = lg.last_stable_offset
        assert lso == next(b["base"] for b in h.batches if b["pid"] == 4)
        end = max(s.base_offset for s in lg.segments if s.base_offset <= lso)
        assert end > 0
        entries = {e.last_offset: e for e in lg.collect_aborted_transactions(0, lg.log_end_offset)}
        assert entries
        last_data = {pid: e.last_data_offset for pid, e in lg.producer_state.producers.items()}
        batches = h.batches
        for now, old in ((TXN_T0 + 1000, False), (TXN_T0 + 10 * 86_400_000, True)):
            if old:  # the range is clean: map it again, as after a lost cleaner checkpoint
                cleaner.first_dirty[(lg.topic, lg.partition)] = 0
            stats = cleaner.clean_log(lg, now=now)
            assert stats is not None and stats.end_offset == end
            seen = {b["txn"] for b in batches if b["kind"] == "data"}  # what the pass walks over
            batches = reference_pass(batches, end, old, last_data)
            assert log_view(lg) == as_view(batches), (seed, old)
            # an ABORT's entry stays where the pass saw a batch of its transaction, and in the
            # segments it did not clean
            kept_aborts = [b["base"] for b in batches if b["kind"] == "ABORT" and b["base"] in entries
                           and (b["txn"] in seen or b["base"] >= end)]
            assert [tuple(e) for e in lg.collect_aborted_transactions(0, lg.log_end_offset)] == \
                [tuple(entries[o]) for o in kept_aborts], (seed, old)
            aborted_offsets = {o for b in h.batches if b["aborted"] for o, _k in b["records"]}
            visible = _read_committed_offsets(lg)
            assert not visible & aborted_offsets
            assert visible == {o for b in batches if not b["aborted"] and b["base"] < lg.last_stable_offset
                               for o, _k in b["records"]}
        kinds = [b["kind"] for b in batches if b["base"] < end]
        assert "ABORT" in [b["kind"] for b in h.batches] and "COMMIT" in [b["kind"] for b in h.batches]
        assert len([b for b in h.batches if b["kind"] in ("ABORT", "COMMIT") and b["base"] < end]) > \
            kinds.count("ABORT") + kinds.count("COMMIT"), "the old pass should drop markers"
        # the open transaction commits: the next pass cleans up to the new LSO's segment
        n = len(h.batches)
        h.end(4, commit=True)
        for _ in range(8):
            h.plain([b"k5"])
        lg.roll()
        h.plain([b"k5"])
        last_data = {pid: e.last_data_offset for pid, e in lg.producer_state.producers.items()}
        end = lg.active_segment.base_offset
        assert cleaner.clean_log(lg, now=TXN_T0 + 10 * 86_400_000) is not None
        batches = reference_pass(batches + h.batches[n:], end, True, last_data)
        assert log_view(lg) == as_view(batches)
        assert any(b["pid"] == 4 and b["kind"] == "COMMIT" for b in batches)  # its batches were seen
    finally:
        cleaner.shutdown()
        lg.close()


def _read_committed_offsets(lg):
    out = set()
    offset = lg.log_start_offset
    while True:
        sl, aborted = lg.read_committed(offset, 1 << 20)
        if len(sl) == 0:
            return out
        pending = sorted(aborted, key=lambda a: a.first_offset)
        active = set()
        for b in iter_batches(sl.read()):
            if b.producer_id >= 0:
                while pending and pending[0].first_offset <= b.last_offset:
                    active.add(pending.pop(0).producer_id)
                if b.is_control:
                    recs = list(b)
                    if recs and recs[0].key[3] == 0:
                        active.discard(b.producer_id)
                    offset = b.next_offset
                    continue
                if b.is_transactional and b.producer_id in active:
                    offset = b.next_offset
                    continue
            out.update(r.offset for r in b)
            offset = b.next_offset


def test_producer_expiry_forgets_idle_producers_without_open_transactions(tmp_path):
    """producer.id.expiration.ms: LogManager's check forgets a producer idle that long unless
    its transaction is open; once forgotten, the cleaner no longer keeps its last batch."""
    mgr = LogManager(str(tmp_path / "data"), background=False, producer_id_expiration_ms=1000)
    lg = mgr.create_log("exp", 0, compact_overrides(segment_bytes=300))
    h = TxnHistory(lg)
    h.data(1, [b"a"])
    h.end(1, commit=True)
    h.plain([b"a"])  # supersedes producer 1's only record
    lg.roll()
    h.data(2, [b"b"])  # stays open (the cleaning stops at its segment)
    lg.roll()
    h.plain([b"c"])
    assert mgr.remove_expired_producers(now=TXN_T0 + 999) == 0
    mgr.cleaner.clean_log(lg, now=TXN_T0 + 999)
    assert (0, 0, 1, "data", []) in log_view(lg), "producer 1's last batch stays, emptied"
    assert mgr.remove_expired_producers(now=TXN_T0 + 1000) == 1
    assert set(lg.producer_state.producers) == {2}
    mgr.cleaner.first_dirty[(lg.topic, lg.partition)] = 0
    mgr.cleaner.clean_log(lg, now=TXN_T0 + 1000)
    assert not any(v[2] == 1 and v[3] == "data" for v in log_view(lg))
    assert lg.producer_state.ongoing == {h.batches[3]["base"]: 2}
    mgr.shutdown()
