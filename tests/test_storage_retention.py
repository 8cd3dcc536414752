"""Retention of the storage engine: retention.ms, retention.bytes, cleanup.policy, DeleteRecords
(log start offset) and the LogManager's background retention and delayed file deletion.

Everything runs on real files in tmp_path; `now` is passed explicitly and record timestamps are
chosen by the test, so no check depends on the wall clock except the background-thread ones,
which poll with a generous deadline."""
import os
import shutil
import sys
import threading
import time
import traceback

import pytest

from kafkacore.errors import OffsetOutOfRangeError
from kafkacore.record import RecordBatchBuilder, iter_batches
from kafkacore.storage import Log, LogConfig, LogManager
from kafkacore.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile

from _kcutil import by_mode, wait_for

NEVER = str((1 << 62))  # segment.ms that never rolls a segment by time
SEG_SUFFIXES = (".log", ".index", ".timeindex")


def cfg(**overrides):
    """LogConfig from keyword names with '_' for '.', never rolling by time or size."""
    base = {"segment.ms": NEVER, "segment.bytes": 1 << 30, "file.delete.delay.ms": 0}
    base.update({k.replace("_", "."): v for k, v in overrides.items()})
    return LogConfig(base)


def make_batch(timestamps, *, key=b"k", value=b"v" * 20, codec="none", headers=None):
    """One batch with a record per timestamp; equal inputs give equal sizes."""
    b = RecordBatchBuilder(compression=codec)
    for i, ts in enumerate(timestamps):
        b.append(value, key=key + b"%03d" % (i % 1000) if key is not None else None, timestamp_ms=ts,
                 headers=headers)
    return b.build()


def build_segments(lg, segment_timestamps, records_per_batch=3):
    """Appends one batch per entry of segment_timestamps (a list per segment of batch
    timestamps) and rolls between segments; the last list goes into the active segment.
    Returns the segments' base offsets."""
    bases = []
    for i, batch_ts in enumerate(segment_timestamps):
        if i:
            lg.roll()
        bases.append(lg.log_end_offset)
        for ts in batch_ts:
            lg.append(make_batch([ts] * records_per_batch))
    assert [s.base_offset for s in lg.segments] == bases
    return bases


def segment_bytes(lg):
    """{base offset: file bytes} of every segment."""
    return {s.base_offset: s.read_bytes(0, s.size) for s in lg.segments}


def files(directory):
    """Segment and index files (producer-state .snapshot files and the leader-epoch-checkpoint
    have their own tests)."""
    return sorted(n for n in os.listdir(directory) if not n.endswith(".snapshot") and n != "leader-epoch-checkpoint")


def seg_files(directory, base, suffix=""):
    stem = f"{base:020d}"
    return {stem + s + suffix for s in SEG_SUFFIXES}


def offsets_of(data):
    return [r.offset for b in iter_batches(data) for r in b]


def check_readable(lg):
    """Every batch from the log start validates; offsets rise; every offset in the log's
    range reads; one below it is out of range."""
    data = lg.read_batches_bytes()
    prev = -1
    for batch in iter_batches(data):
        batch.validate()
        for rec in batch:
            assert rec.offset > prev
            prev = rec.offset
    if lg.log_start_offset > 0:
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(lg.log_start_offset - 1, 1 << 20)
    start, end = lg.log_start_offset, lg.log_end_offset
    for off in range(start, end, max(1, (end - start) // 200)):
        first = next(iter(iter_batches(lg.read(off, 1).read())))
        assert first.base_offset <= off <= first.last_offset
    assert lg.read(lg.log_end_offset, 1 << 20).length == 0
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(lg.log_end_offset + 1, 1 << 20)
    return data


# ---------------------------------------------------------------------------------------
# retention.ms


def test_retention_ms_deletes_expired_segments_oldest_first_and_stops_at_first_young(tmp_path):
    lg = Log(str(tmp_path / "t-0"), cfg(retention_ms=5000))
    # segment newest timestamps: 1000, 2000, 9000 (young), 1500 (expired but after a young one),
    # then the active segment at 9500
    bases = build_segments(lg, [[500, 1000], [1200, 2000], [3000, 9000], [1500], [9500]])
    before = segment_bytes(lg)
    assert [s.largest_timestamp for s in lg.segments] == [1000, 2000, 9000, 1500, 9500]

    # exactly retention.ms old is not past it
    assert lg.delete_old_segments(now=1000 + 5000) == 0
    assert lg.log_start_offset == 0 and len(lg.segments) == 5
    # one millisecond later the oldest goes, alone
    assert lg.delete_old_segments(now=1000 + 5001) == 1
    assert [s.base_offset for s in lg.segments] == bases[1:]
    assert lg.log_start_offset == bases[1]

    assert lg.delete_old_segments(now=10000) == 1  # 2000 expired; 9000 is young: stop there
    assert [s.base_offset for s in lg.segments] == bases[2:]
    assert lg.log_start_offset == bases[2]
    # no Log-level scheduler: the files are gone at once, nothing left renamed
    assert files(lg.dir) == sorted(set().union(*(seg_files(lg.dir, b) for b in bases[2:])))

    data = check_readable(lg)
    assert data == b"".join(before[b] for b in bases[2:])
    for off in range(0, bases[2]):
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(off, 1 << 20)
    assert lg.offset_for_timestamp(-2) == (bases[2], -1)
    # a timestamp only the deleted records had now finds the first remaining record at or after it
    assert lg.offset_for_timestamp(500)[0] >= bases[2]

    # the same pass again changes nothing
    assert lg.delete_old_segments(now=10000) == 0
    lg.close()


def test_retention_ms_all_segments_expired_rolls_and_keeps_empty_active_segment(tmp_path):
    lg = Log(str(tmp_path / "t-0"), cfg(retention_ms=1000))
    build_segments(lg, [[100], [200, 300], [400]])
    end = lg.log_end_offset
    assert end == 12
    assert lg.delete_old_segments(now=100_000) == 3

    assert lg.log_start_offset == end == lg.log_end_offset
    assert [(s.base_offset, s.size) for s in lg.segments] == [(end, 0)]
    assert files(lg.dir) == sorted(seg_files(lg.dir, end))
    assert lg.read(end, 1 << 20).length == 0
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(end - 1, 1 << 20)
    assert lg.offset_for_timestamp(-2) == (end, -1)
    assert lg.offset_for_timestamp(-1) == (end, -1)
    # the empty active segment is never deleted
    assert lg.delete_old_segments(now=1 << 50) == 0
    assert [s.base_offset for s in lg.segments] == [end]

    # appends continue with the next offsets
    infos = [lg.append(make_batch([100_000 + i] * 2)) for i in range(3)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(12, 13), (14, 15), (16, 17)]
    assert offsets_of(check_readable(lg)) == list(range(12, 18))
    # the old timestamps of those appends are expired too: the active segment goes again
    assert lg.delete_old_segments(now=1 << 50) == 1
    assert lg.log_start_offset == lg.log_end_offset == 18
    assert lg.append(make_batch([5, 5, 5])).first_offset == 18
    lg.close()

    reopened = Log(str(tmp_path / "t-0"), cfg(retention_ms=1000))
    assert reopened.log_start_offset == 18 and reopened.log_end_offset == 21
    assert offsets_of(check_readable(reopened)) == [18, 19, 20]
    reopened.close()


def test_retention_with_background_manager_renames_then_deletes_after_delay(tmp_path):
    delay = 600
    mgr = LogManager(str(tmp_path / "data"), background=True, cleaner_enable=False,
                     retention_check_interval_ms=1 << 40, flush_check_interval_ms=1 << 40,
                     checkpoint_interval_ms=1 << 40)
    try:
        lg = mgr.create_log("ret", 0, {"retention.ms": 1000, "file.delete.delay.ms": delay,
                                       "segment.ms": NEVER})
        bases = build_segments(lg, [[100], [200], [50_000]])
        held = lg.read(0, 1 << 20)  # a fetch in flight on the oldest segment
        held_bytes = held.read()

        t0 = time.monotonic()
        assert mgr.run_retention(now=10_000) == 2
        listed = set(files(lg.dir))
        renamed_in_time = time.monotonic() - t0 < delay / 1000 * 0.8
        assert lg.log_start_offset == bases[2]
        for b in bases[:2]:
            assert not (seg_files(lg.dir, b) & listed)  # no live name any more
            if renamed_in_time:
                assert seg_files(lg.dir, b, ".deleted") <= listed
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(0, 1 << 20)

        def gone():
            return not any(n.endswith(".deleted") for n in os.listdir(lg.dir))
        wait_for(gone, lambda: f"the old segments to go (files: {files(lg.dir)})")
        assert time.monotonic() - t0 >= delay / 1000 * 0.95
        assert {n for n in files(lg.dir) if n[:20].isdigit()} == seg_files(lg.dir, bases[2])
        # the slice taken before still reads the whole deleted segment
        assert held.read() == held_bytes
        assert offsets_of(check_readable(lg)) == [6, 7, 8]
    finally:
        mgr.shutdown()


def test_retention_with_inline_manager_deletes_files_immediately(tmp_path):
    mgr = LogManager(str(tmp_path / "data"), background=False, cleaner_enable=False)
    lg = mgr.create_log("ret", 0, {"retention.ms": 1000, "file.delete.delay.ms": 60000,
                                   "segment.ms": NEVER})
    bases = build_segments(lg, [[100], [200], [50_000]])
    assert mgr.run_retention(now=10_000) == 2
    names = files(lg.dir)
    assert not any(n.endswith(".deleted") for n in names), names
    for b in bases[:2]:
        assert not any(n.startswith(f"{b:020d}") for n in names)
    assert lg.log_start_offset == bases[2]
    mgr.shutdown()


# ---------------------------------------------------------------------------------------
# retention.bytes and cleanup.policy


def _equal_segments(lg, n):
    """n segments of one equal-sized batch each (the last one active); returns the size."""
    build_segments(lg, [[1000 + i] for i in range(n)])
    sizes = {s.size for s in lg.segments}
    assert len(sizes) == 1
    return sizes.pop()


@pytest.mark.parametrize("limit_in_segments, slack, deleted", [
    (5, 0, 0),     # exactly at the limit
    (3, 0, 2),     # deleting two leaves exactly the limit
    (3, -1, 2),    # a byte under 3 segments: a third deletion would go below it
    (3, 1, 1),     # a byte over 3 segments: the second deletion would go below it
    (1, 0, 4),
    (0, 0, 5),     # retention.bytes=0: everything, the active segment too (then a roll)
])
def test_retention_bytes_deletes_oldest_while_staying_above_limit(tmp_path, limit_in_segments, slack, deleted):
    probe = Log(str(tmp_path / "probe-0"), cfg())
    size = _equal_segments(probe, 1)
    probe.close()
    limit = max(0, limit_in_segments * size + slack)
    lg = Log(str(tmp_path / "t-0"), cfg(retention_bytes=limit, retention_ms=-1))
    _equal_segments(lg, 5)
    end = lg.log_end_offset
    before = segment_bytes(lg)
    total = lg.size_in_bytes
    assert lg.delete_old_segments(now=1 << 50) == deleted
    assert lg.log_start_offset == min(deleted * 3, end)
    assert lg.size_in_bytes == total - deleted * size
    assert lg.size_in_bytes >= limit
    remaining = [s.base_offset for s in lg.segments]
    if deleted < 5:
        # no further segment could go without going below the limit
        assert lg.size_in_bytes - size < limit
        assert remaining == [3 * i for i in range(deleted, 5)]
        assert check_readable(lg) == b"".join(before[b] for b in remaining)
        assert lg.delete_old_segments(now=1 << 50) == 0
    else:
        assert remaining == [end] and lg.log_start_offset == end
        assert lg.append(make_batch([1] * 3)).first_offset == end
        assert offsets_of(check_readable(lg)) == [end, end + 1, end + 2]
    lg.close()


@pytest.mark.parametrize("retention_ms, bytes_segments, expected", [
    (1500, 4, 2),  # time expires 1000 and 1001 (now=2502); size alone would take 1
    (1501, 4, 1),  # time expires 1000 only;                size alone would take 1
    (1502, 2, 3),  # time expires nothing;                  size takes 3
    (1500, 2, 3),  # time 2, size 3: the larger applies
])
def test_retention_ms_and_bytes_whichever_is_violated_first(tmp_path, retention_ms, bytes_segments, expected):
    probe = Log(str(tmp_path / "probe-0"), cfg())
    size = _equal_segments(probe, 1)
    probe.close()
    lg = Log(str(tmp_path / "t-0"), cfg(retention_ms=retention_ms, retention_bytes=bytes_segments * size))
    _equal_segments(lg, 5)  # newest timestamps 1000..1004
    assert lg.delete_old_segments(now=2502) == expected
    assert lg.log_start_offset == 3 * expected
    assert [s.base_offset for s in lg.segments] == [3 * i for i in range(expected, 5)]
    check_readable(lg)
    lg.close()


def test_compact_policy_alone_never_deletes_by_time_or_size(tmp_path):
    lg = Log(str(tmp_path / "t-0"), cfg(cleanup_policy="compact", retention_ms=1, retention_bytes=0))
    build_segments(lg, [[100], [200], [300]])
    before = segment_bytes(lg)
    assert lg.delete_old_segments(now=1 << 50) == 0
    assert segment_bytes(lg) == before and lg.log_start_offset == 0
    # the log start offset still deletes what is wholly below it (DeleteRecords)
    assert lg.delete_records(4) == 4
    assert [s.base_offset for s in lg.segments] == [3, 6]
    assert lg.delete_old_segments(now=1 << 50) == 0
    lg.close()


@pytest.mark.parametrize("policy", ["compact,delete", "delete,compact", "delete"])
def test_delete_policy_with_or_without_compact_deletes_by_time_and_size(tmp_path, policy):
    lg = Log(str(tmp_path / "t-0"), cfg(cleanup_policy=policy, retention_ms=1000))
    build_segments(lg, [[100], [200], [5000]])
    assert lg.delete_old_segments(now=2000) == 2
    assert lg.log_start_offset == 6
    lg.config = cfg(cleanup_policy=policy, retention_ms=-1, retention_bytes=0)
    assert lg.delete_old_segments(now=2000) == 1  # the active segment, by size
    assert lg.log_start_offset == lg.log_end_offset == 9
    lg.close()


def test_manager_set_topic_config_changes_retention(tmp_path):
    mgr = LogManager(str(tmp_path / "data"), background=False, cleaner_enable=False)
    lg = mgr.create_log("t", 0, {"segment.ms": NEVER})
    other = mgr.create_log("u", 0, {"segment.ms": NEVER})
    build_segments(lg, [[100], [200], [300]])
    build_segments(other, [[100], [200], [300]])
    assert mgr.run_retention(now=10_000) == 0  # 7 days by default
    mgr.set_topic_config("t", {"retention.ms": 1000, "segment.ms": NEVER})
    assert mgr.run_retention(now=10_000) == 3
    assert lg.log_start_offset == lg.log_end_offset == 9
    assert other.log_start_offset == 0 and len(other.segments) == 3
    mgr.shutdown()


# ---------------------------------------------------------------------------------------
# DeleteRecords and the log start offset


def _three_record_batches(lg, segments=4, batches_per_segment=2):
    """Segments of batches of 3 records: batch i holds offsets 3i..3i+2."""
    return build_segments(lg, [[1000 + s] * batches_per_segment for s in range(segments)])


def test_delete_records_advances_log_start_and_deletes_only_wholly_below_segments(tmp_path):
    lg = Log(str(tmp_path / "t-0"), cfg())
    bases = _three_record_batches(lg)  # segments [0,6) [6,12) [12,18) [18,24)
    assert bases == [0, 6, 12, 18]
    before = segment_bytes(lg)

    assert lg.delete_records(7) == 7  # inside batch [6, 8] of the second segment
    assert lg.log_start_offset == 7
    assert [s.base_offset for s in lg.segments] == [6, 12, 18]
    assert not any(n.startswith(f"{0:020d}") for n in files(lg.dir))
    for off in range(0, 7):
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(off, 1 << 20)
    # a read inside the straddling batch returns the whole batch
    sl = lg.read(7, 1)
    (batch,) = list(iter_batches(sl.read()))
    assert (batch.base_offset, batch.last_offset) == (6, 8)
    batch.validate()
    assert lg.read(8, 1 << 20).read().startswith(sl.read())
    assert lg.read_batches_bytes() == b"".join(before[b] for b in (6, 12, 18))
    assert lg.offset_for_timestamp(-2) == (7, -1)
    # the first record at or after the straddling batch's timestamp, not below the log start
    assert lg.offset_for_timestamp(1001) == (7, 1001)

    # never backwards
    assert lg.delete_records(3) == 7
    assert lg.delete_records(7) == 7
    assert lg.log_start_offset == 7 and [s.base_offset for s in lg.segments] == [6, 12, 18]

    # exactly at a segment base: the segment below goes, the one at it stays
    assert lg.delete_records(12) == 12
    assert [s.base_offset for s in lg.segments] == [12, 18]
    assert lg.read(12, 1 << 20).first_offset == 12

    # past the high watermark: refused, nothing changes
    hw = lg.high_watermark
    assert hw == lg.log_end_offset == 24
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records(hw + 1)
    assert lg.log_start_offset == 12 and [s.base_offset for s in lg.segments] == [12, 18]

    # up to the high watermark: every inactive segment goes, the active one stays (empty of
    # readable records); appends go on
    assert lg.delete_records(hw) == 24
    assert [s.base_offset for s in lg.segments] == [18]
    assert lg.read(24, 1 << 20).length == 0
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(23, 1 << 20)
    assert lg.append(make_batch([5, 6])).first_offset == 24
    assert offsets_of(check_readable(lg)) == [24, 25]
    # a later retention pass does not move the log start backwards either
    assert lg.delete_old_segments(now=2000) == 0
    assert lg.log_start_offset == 24
    lg.close()


def test_delete_records_then_retention_pass_keeps_log_start(tmp_path):
    lg = Log(str(tmp_path / "t-0"), cfg(retention_ms=10_000))
    _three_record_batches(lg)
    assert lg.delete_records(14) == 14
    assert [s.base_offset for s in lg.segments] == [12, 18]
    # the straddling segment is expired now: retention deletes it, the start moves to 18
    assert lg.delete_old_segments(now=1002 + 10_001) == 1
    assert lg.log_start_offset == 18
    lg.close()


def _reopen(data_dir, **kw):
    return LogManager(data_dir, background=False, cleaner_enable=False, **kw)


def test_log_start_offset_survives_clean_restart(tmp_path):
    data = str(tmp_path / "data")
    mgr = _reopen(data)
    lg = mgr.create_log("t", 3, {"segment.ms": NEVER})
    _three_record_batches(lg)
    assert lg.delete_records(10) == 10
    expected = lg.read_batches_bytes()
    mgr.shutdown()
    assert OffsetCheckpointFile(os.path.join(data, LOG_START_OFFSET_CHECKPOINT)).read() == {("t", 3): 10}

    mgr = _reopen(data)
    assert mgr.had_clean_shutdown
    lg = mgr.get_log("t", 3)
    assert lg.log_start_offset == 10
    assert [s.base_offset for s in lg.segments] == [6, 12, 18]
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(9, 1 << 20)
    (batch,) = list(iter_batches(lg.read(10, 1).read()))
    assert (batch.base_offset, batch.last_offset) == (9, 11)
    assert lg.read_batches_bytes() == expected
    assert lg.offset_for_timestamp(-2) == (10, -1)
    assert lg.append(make_batch([1] * 2)).first_offset == 24
    mgr.shutdown()


def test_log_start_offset_survives_unclean_restart_from_checkpoint(tmp_path):
    data = str(tmp_path / "data")
    mgr = _reopen(data)
    lg = mgr.create_log("t", 0, {"segment.ms": NEVER})
    _three_record_batches(lg)
    assert lg.delete_records(13) == 13
    mgr.checkpoint()
    expected = lg.read_batches_bytes()
    # the crash: the directory as it is while the manager still runs (no clean-shutdown marker)
    crashed = str(tmp_path / "crashed")
    shutil.copytree(data, crashed)
    assert OffsetCheckpointFile(os.path.join(crashed, LOG_START_OFFSET_CHECKPOINT)).read() == {("t", 0): 13}
    mgr.shutdown()

    mgr2 = _reopen(crashed)
    assert not mgr2.had_clean_shutdown
    lg2 = mgr2.get_log("t", 0)
    assert lg2.log_start_offset == 13
    assert [s.base_offset for s in lg2.segments] == [12, 18]
    with pytest.raises(OffsetOutOfRangeError):
        lg2.read(12, 1 << 20)
    (batch,) = list(iter_batches(lg2.read(13, 1).read()))
    assert (batch.base_offset, batch.last_offset) == (12, 14)
    assert lg2.read_batches_bytes() == expected
    assert lg2.log_end_offset == 24
    assert lg2.append(make_batch([1] * 2)).first_offset == 24
    mgr2.shutdown()
    mgr3 = _reopen(crashed)
    assert mgr3.had_clean_shutdown and mgr3.get_log("t", 0).log_start_offset == 13
    mgr3.shutdown()


def test_retention_moved_log_start_survives_restart(tmp_path):
    data = str(tmp_path / "data")
    mgr = _reopen(data)
    lg = mgr.create_log("t", 0, {"segment.ms": NEVER, "retention.ms": 1000})
    build_segments(lg, [[100], [200], [300]])
    assert mgr.run_retention(now=1000 + 250) == 2  # 100 and 200 expired, 300 not
    assert lg.log_start_offset == 6
    mgr.shutdown()
    mgr = _reopen(data)
    lg = mgr.get_log("t", 0)
    assert lg.log_start_offset == 6 and lg.log_end_offset == 9
    assert offsets_of(check_readable(lg)) == [6, 7, 8]
    mgr.shutdown()


# ---------------------------------------------------------------------------------------
# The background retention thread


def test_background_retention_thread_deletes_expired_segments(tmp_path):
    now = int(time.time() * 1000)
    old, young = now - 3_600_000, now + 3_600_000  # an hour ago / an hour ahead of the clock
    mgr = LogManager(str(tmp_path / "data"), background=True, cleaner_enable=False,
                     retention_check_interval_ms=50, checkpoint_interval_ms=1 << 40)
    try:
        # built without retention (the thread would race the building), then switched on
        lg = mgr.create_log("bg", 0, {"retention.ms": -1, "segment.ms": NEVER})
        keep = mgr.create_log("keep", 0, {"segment.ms": NEVER})  # default retention: 7 days
        n_old = by_mode(6, 4)
        bases = build_segments(lg, [[old + i] for i in range(n_old)] + [[young], [young]])
        build_segments(keep, [[old], [old]])
        young_base = bases[n_old]
        time.sleep(0.15)  # a negative check: a few passes of the thread (every 50 ms) delete nothing
        assert lg.log_start_offset == 0
        mgr.set_topic_config("bg", {"retention.ms": 60_000, "segment.ms": NEVER, "file.delete.delay.ms": 30})

        wait_for(lambda: lg.log_start_offset == young_base, lambda: f"the log start offset {young_base} ({lg})")
        assert [s.base_offset for s in lg.segments] == bases[n_old:]

        def files_gone():
            names = os.listdir(lg.dir)
            return (not any(n.endswith(".deleted") for n in names)
                    and not any(n.startswith(f"{b:020d}") for b in bases[:n_old] for n in names))
        wait_for(files_gone, lambda: f"the deleted segments' files to go (files: {files(lg.dir)})")
        assert offsets_of(check_readable(lg)) == list(range(young_base, young_base + 6))
        # the young segments stay, the other topic is untouched
        time.sleep(0.2)  # a negative check: further passes of the thread delete nothing more
        assert lg.log_start_offset == young_base and len(lg.segments) == 2
        assert keep.log_start_offset == 0 and len(keep.segments) == 2
        # appends keep going while the thread runs
        assert lg.append(make_batch([young])).first_offset == young_base + 6
    finally:
        mgr.shutdown()
    assert not any(n.endswith(".deleted") for n in os.listdir(lg.dir))


# ---------------------------------------------------------------------------------------
# Leftovers of a stop, timestamps missing, and retention racing appends and reads


def test_pending_deletions_run_at_clean_shutdown_and_leftovers_go_after_a_crash(tmp_path):
    data = str(tmp_path / "data")
    mgr = LogManager(data, background=True, cleaner_enable=False, retention_check_interval_ms=1 << 40,
                     flush_check_interval_ms=1 << 40, checkpoint_interval_ms=1 << 40)
    lg = mgr.create_log("t", 0, {"retention.ms": 1000, "segment.ms": NEVER, "file.delete.delay.ms": 3_600_000})
    build_segments(lg, [[100], [200], [5000], [5000]])
    assert mgr.run_retention(now=3000) == 2
    assert sum(n.endswith(".deleted") for n in os.listdir(lg.dir)) == 6
    mgr.checkpoint()
    expected = lg.read_batches_bytes()
    crashed = str(tmp_path / "crashed")
    shutil.copytree(data, crashed)
    mgr.shutdown()  # the hour-long delay does not survive a clean stop: the files go now
    assert not any(n.endswith(".deleted") for n in os.listdir(lg.dir)), files(lg.dir)

    for d, clean in ((data, True), (crashed, False)):
        m = _reopen(d)
        assert m.had_clean_shutdown is clean
        lg2 = m.get_log("t", 0)
        assert not any(n.endswith(".deleted") for n in os.listdir(lg2.dir)), files(lg2.dir)
        assert lg2.log_start_offset == 6 and [s.base_offset for s in lg2.segments] == [6, 9]
        assert lg2.read_batches_bytes() == expected
        m.shutdown()


def test_segment_without_record_timestamps_expires_by_file_modification_time(tmp_path):
    lg = Log(str(tmp_path / "t-0"), cfg(retention_ms=60_000))
    build_segments(lg, [[-1], [-1], [-1]])
    now = int(time.time() * 1000)
    segs = lg.segments
    assert all(s.max_timestamp_so_far == -1 for s in segs)
    old = (now - 3_600_000) / 1000
    os.utime(segs[0].log_path, (old, old))  # last written an hour ago
    # the second stays "just written": the pass stops there
    assert lg.delete_old_segments(now=now) == 1
    assert lg.log_start_offset == 3
    assert lg.delete_old_segments(now=now + 3_600_000) == 2  # an hour later both are old
    assert lg.log_start_offset == lg.log_end_offset == 9
    lg.close()


def test_retention_racing_appends_and_reads(tmp_path):
    # every record is expired; retention.bytes keeps the log near two segments while one
    # thread appends (rolling every few batches) and another reads from the log start
    probe = Log(str(tmp_path / "probe-0"), cfg())
    size = len(make_batch([1] * 5))
    probe.close()
    lg = Log(str(tmp_path / "t-0"), cfg(segment_bytes=size * 4, retention_bytes=size * 8, retention_ms=-1,
                                         segment_index_bytes=4096, index_interval_bytes=64))
    n_batches = by_mode(1500, 40)  # the twins' pure-Python reads starve the appender of the GIL
    errors, appended, seen = [], [], []
    done = threading.Event()

    def appender():
        try:
            expect = 0
            for i in range(n_batches):
                info = lg.append(make_batch([i] * 5))
                if info.first_offset != expect or info.last_offset != expect + 4:
                    errors.append(("append", expect, info))
                expect = info.last_offset + 1
                appended.append(info.first_offset)
        except Exception as e:  # pragma: no cover - the failure being tested for
            errors.append(("append", repr(e), traceback.format_exc(limit=-4)))
        finally:
            done.set()

    def reader():
        try:
            while not done.is_set():
                offset = lg.log_start_offset
                prev = -1
                while offset < lg.log_end_offset:
                    try:
                        data = lg.read(offset, size * 3).read()
                    except OffsetOutOfRangeError:
                        start = lg.log_start_offset
                        if start <= offset:
                            errors.append(("read out of range", offset, start))
                        offset = start
                        prev = -1
                        continue
                    if not data:
                        break
                    for batch in iter_batches(data):
                        batch.validate()
                        assert batch.count == 5 and batch.last_offset == batch.base_offset + 4
                        assert batch.base_offset > prev and batch.base_offset % 5 == 0
                        assert batch.max_timestamp == batch.base_offset // 5
                        prev = batch.last_offset
                    offset = prev + 1
                    seen.append(prev)
        except Exception as e:  # pragma: no cover
            errors.append(("read", repr(e), traceback.format_exc(limit=-4)))

    threads = [threading.Thread(target=appender), threading.Thread(target=reader), threading.Thread(target=reader)]
    # The appender makes many short syscalls (a roll every few batches); each one gives up the
    # GIL, and getting it back from two busy readers costs a whole switch interval (5 ms by
    # default): hundreds of seconds in twin mode. A short interval keeps the race and the time.
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    try:
        for t in threads:
            t.start()
        passes = 0
        while not done.is_set():
            lg.delete_old_segments(now=1 << 50)
            passes += 1
            time.sleep(0.0005)  # pacing: the appender and readers run between the passes
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(old_interval)
    lg.delete_old_segments(now=1 << 50)
    assert errors == []
    assert passes > 0 and seen
    assert lg.log_end_offset == 5 * n_batches
    assert lg.size_in_bytes >= size * 8
    assert lg.log_start_offset == lg.segments[0].base_offset > 0
    assert offsets_of(check_readable(lg)) == list(range(lg.log_start_offset, lg.log_end_offset))
    live = {n for n in os.listdir(lg.dir) if n[:20].isdigit()}
    snapshots = {n for n in live if n.endswith(".snapshot")}
    assert live - snapshots == set().union(*(seg_files(lg.dir, s.base_offset) for s in lg.segments))
    # a roll's producer snapshot (Kafka writes one at every roll) stays with its segment only
    assert snapshots <= {f"{s.base_offset:020d}.snapshot" for s in lg.segments}
    lg.close()
