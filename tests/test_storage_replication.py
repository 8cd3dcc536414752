"""What replication needs from the storage engine, with real files: the leader epoch cache and
its ``leader-epoch-checkpoint``, the follower's append, truncation, the high watermark and its
``replication-offset-checkpoint``, and OffsetForLeaderEpoch answered from the cache.

The reference for truncation is a log that was only ever written up to the cut: the truncated
log must equal it byte for byte (.log, .index, .timeindex), in its producers' state and leader
epochs, while open, after a close, and after an unclean stop. Crash safety is checked two ways:
every file operation of a truncation is failed in turn (the log reopened as after a crash at
that point must be a consistent prefix of the original), and a child process that appends and
truncates is killed with SIGKILL again and again."""
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacore.errors import (CorruptMessageError, InvalidRecordError, KafkaStorageError, OffsetOutOfRangeError,
                              OutOfOrderSequenceNumberError)
from kafkacore.record import RecordBatchBuilder, iter_batches
from kafkacore.storage import Log, LogCleaner, LogConfig, LogManager
from kafkacore.storage.checkpoints import (LEADER_EPOCH_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                                           OffsetCheckpointFile)
from kafkacore.storage.leader_epoch_cache import EpochEntry, LeaderEpochFileCache
from kafkacore.storage.log import OffsetsOutOfOrderError, UnexpectedAppendOffsetError

from _kcutil import fix_crc

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
T0 = 1_700_000_000_000
_POOL = random.Random(7).randbytes(8192)  # incompressible values: segments fill and roll

# small segments and a small index interval: rolls and index entries everywhere
SMALL = {"segment.bytes": 1500, "index.interval.bytes": 200, "segment.index.bytes": 4096, "retention.ms": -1}


def config(**extra):
    c = dict(SMALL)
    c.update({k.replace("_", "."): v for k, v in extra.items()})
    return LogConfig(c)


def batch(first, count, codec="none", *, epoch=-1, pid=-1, pepoch=-1, seq=-1, ts=None, size=20):
    """A batch at first of count records; record o's value names its offset (and ts)."""
    b = RecordBatchBuilder(compression=codec, base_offset=first, producer_id=pid, producer_epoch=pepoch,
                           base_sequence=seq, partition_leader_epoch=epoch)
    for o in range(first, first + count):
        stamp = T0 + 7 * o if ts is None else ts
        b.append(b"%d:" % o + _POOL[(o * 7919) % 4096:][:size], key=b"k%d" % (o % 13), timestamp_ms=stamp)
    return b.build()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def segment_files(lg):
    """{file name: bytes} of every segment file (.log, .index, .timeindex) of a log."""
    out = {}
    for seg in lg.segments:
        for path in seg.paths():
            out[os.path.basename(path)] = read(path)
    return out


def files_on_disk(d):
    """{name: bytes} of the segment files in a directory (for closed logs)."""
    return {n: read(os.path.join(d, n)) for n in sorted(os.listdir(d))
            if n.endswith((".log", ".index", ".timeindex"))}


def producers(lg):
    """{producer id: (epoch, last sequence, last offset)}"""
    return {pid: (e.epoch, e.last_seq, e.batches[-1].last_offset if e.batches else None)
            for pid, e in lg.producer_state.producers.items()}


def state(lg):
    return {"end": lg.log_end_offset, "start": lg.log_start_offset, "hw": lg.high_watermark,
            "segments": [(s.base_offset, s.size, s.next_offset) for s in lg.segments],
            "epochs": lg.leader_epoch_cache.entries(), "producers": producers(lg),
            "data": lg.read_batches_bytes()}


def abandon(lg):
    """Drops a Log as a crash would: no flush, no trim of the active indexes, no snapshot."""
    lg.closed = True
    for seg in lg.segments:
        seg.offset_index.close()
        seg.time_index.close()
        seg.file.close()


def follow(leader, follower, start=None, stop=None):
    """Feeds the leader's batches to the follower one by one (as the leader appended them)."""
    offset = follower.log_end_offset if start is None else start
    end = leader.log_end_offset if stop is None else stop
    while offset < end:
        data = leader.read(offset, 1).read()
        first = next(iter(iter_batches(data)))
        if first.next_offset > end:
            break
        follower.append_as_follower(data)
        offset = first.next_offset


def derived_epochs(data, log_start):
    """The leader epoch entries the batches imply: each higher epoch at the batch starting it,
    then Kafka's truncateFromStart at the log start."""
    out, latest = [], -1
    for b in iter_batches(data):
        if b.partition_leader_epoch > latest:
            latest = b.partition_leader_epoch
            out.append(EpochEntry(latest, b.base_offset))
    below = [e for e in out if e.start_offset <= log_start]
    if below:
        out = [EpochEntry(below[-1].epoch, log_start)] + [e for e in out if e.start_offset > log_start]
    return out


def derived_producers(data):
    """{pid: (epoch, last sequence, last offset)} from the batches (the state a replay gives)."""
    out = {}
    for b in iter_batches(data):
        if b.producer_id >= 0:
            out[b.producer_id] = (b.producer_epoch, (b.base_sequence + b.last_offset_delta) % (1 << 31), b.last_offset)
    return out


# ---------------------------------------------------------------------------------------------
# leader-epoch-checkpoint: Kafka's format

def test_checkpoint_file_is_kafkas_format_byte_for_byte(tmp_path):
    path = str(tmp_path / LEADER_EPOCH_CHECKPOINT)
    cache = LeaderEpochFileCache(path)
    assert not os.path.exists(path) and cache.entries() == [] and cache.latest_epoch == -1
    assert cache.latest_entry is None
    cache.assign(0, 0)
    assert read(path) == b"0\n1\n0 0\n"
    cache.assign(3, 120)
    cache.assign(3, 150)  # the same epoch later on: nothing changes, nothing written
    cache.assign(7, 1000000000000)
    assert read(path) == b"0\n3\n0 0\n3 120\n7 1000000000000\n"
    assert sorted(os.listdir(tmp_path)) == [LEADER_EPOCH_CHECKPOINT]  # no temp file left
    assert LeaderEpochFileCache(path).entries() == [(0, 0), (3, 120), (7, 1000000000000)]
    cache.truncate_from_end(120)
    assert read(path) == b"0\n1\n0 0\n"
    cache.clear()
    assert read(path) == b"0\n0\n"


def test_checkpoint_file_written_by_kafka_loads(tmp_path):
    path = str(tmp_path / LEADER_EPOCH_CHECKPOINT)
    with open(path, "w") as f:
        f.write("0\n3\n0 0\n2 4512\n5  99010\n")  # Kafka splits on any whitespace
    assert LeaderEpochFileCache(path).entries() == [(0, 0), (2, 4512), (5, 99010)]
    open(path, "w").close()  # Kafka creates the file empty
    assert LeaderEpochFileCache(path).entries() == []


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\n0 0\n", "0\n1\n0 0 7\n", "0\n1\nzero 0\n", "x\n", "0\n1\n-1 0\n",
                                  "0\n1\n0 0\n\n"])
def test_malformed_checkpoint_file_is_refused(tmp_path, text):
    path = str(tmp_path / LEADER_EPOCH_CHECKPOINT)
    with open(path, "w") as f:
        f.write(text)
    with pytest.raises(KafkaStorageError, match="checkpoint file"):
        LeaderEpochFileCache(path)


def test_a_failed_checkpoint_write_changes_nothing(tmp_path, monkeypatch):
    path = str(tmp_path / LEADER_EPOCH_CHECKPOINT)
    cache = LeaderEpochFileCache(path)
    cache.assign(1, 10)

    def full_disk(*_a, **_k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(KafkaStorageError, match="No space left"):
        cache.assign(2, 20)
    with pytest.raises(KafkaStorageError):
        cache.truncate_from_end(10)
    monkeypatch.undo()
    assert cache.entries() == [(1, 10)] and cache.latest_epoch == 1
    assert LeaderEpochFileCache(path).entries() == [(1, 10)]


# ---------------------------------------------------------------------------------------------
# the cache's rules (Kafka's LeaderEpochFileCache)

def cache_with(tmp_path, *entries):
    cache = LeaderEpochFileCache(str(tmp_path / LEADER_EPOCH_CHECKPOINT))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


# (entries, requested epoch, log end offset) -> (epoch, end offset)
END_OFFSET_CASES = [
    ((), 0, 0, (-1, -1)),                                    # nothing cached
    ((), -1, 10, (-1, -1)),
    (((2, 6),), -1, 10, (-1, -1)),                          # UNDEFINED_EPOCH asked
    (((2, 6),), 2, 30, (2, 30)),                            # the latest epoch ends at the log end
    (((2, 6),), 3, 30, (-1, -1)),                           # above the latest
    (((2, 6),), 1, 30, (1, 6)),                             # below every entry: itself, first start
    (((4, 11), (5, 15)), 2, 30, (2, 11)),
    (((0, 0), (2, 10), (5, 20)), 0, 40, (0, 10)),
    (((0, 0), (2, 10), (5, 20)), 1, 40, (0, 10)),           # between: the epoch below, next start
    (((0, 0), (2, 10), (5, 20)), 2, 40, (2, 20)),
    (((0, 0), (2, 10), (5, 20)), 3, 40, (2, 20)),
    (((0, 0), (2, 10), (5, 20)), 4, 40, (2, 20)),
    (((0, 0), (2, 10), (5, 20)), 5, 40, (5, 40)),
    (((0, 0), (2, 10), (5, 20)), 6, 40, (-1, -1)),
    (((1, 0), (2, 0)), 1, 5, (1, 0)),                       # (1, 0) was replaced by (2, 0)
]


@pytest.mark.parametrize("entries,requested,leo,expected", END_OFFSET_CASES)
def test_end_offset_for(tmp_path, entries, requested, leo, expected):
    assert cache_with(tmp_path, *entries).end_offset_for(requested, leo) == expected


# (entries before, assign) -> entries after
ASSIGN_CASES = [
    ((), (2, 6), [(2, 6)]),
    (((2, 6),), (2, 9), [(2, 6)]),                          # the same epoch later: kept as it was
    (((2, 6),), (2, 4), [(2, 4)]),                          # the same epoch earlier: moves down
    (((2, 6),), (3, 9), [(2, 6), (3, 9)]),
    (((2, 6),), (3, 6), [(3, 6)]),                          # no records in epoch 2: it goes
    (((2, 6), (3, 9)), (4, 8), [(2, 6), (4, 8)]),           # start offsets must increase
    (((2, 6), (3, 9)), (1, 7), [(1, 7)]),                   # a lower epoch drops every higher one
    (((2, 6), (3, 9)), (3, 20), [(2, 6), (3, 9)]),
    (((0, 0), (4, 10)), (1, 10), [(0, 0), (1, 10)]),       # a leader's entry at the end, no records
]


@pytest.mark.parametrize("before,new,after", ASSIGN_CASES)
def test_assign(tmp_path, before, new, after):
    cache = cache_with(tmp_path, *before)
    cache.assign(*new)
    assert cache.entries() == after
    assert LeaderEpochFileCache(cache.path).entries() == after


def test_assign_refuses_negative_values(tmp_path):
    cache = cache_with(tmp_path, (1, 5))
    for bad in [(-1, 7), (2, -1)]:
        with pytest.raises(ValueError):
            cache.assign(*bad)
    assert cache.entries() == [(1, 5)]


TRUNCATE_CASES = [
    # (entries, op, offset, after)
    (((2, 6), (3, 8), (4, 11)), "end", 11, [(2, 6), (3, 8)]),
    (((2, 6), (3, 8), (4, 11)), "end", 9, [(2, 6), (3, 8)]),
    (((2, 6), (3, 8), (4, 11)), "end", 8, [(2, 6)]),
    (((2, 6), (3, 8), (4, 11)), "end", 6, []),
    (((2, 6), (3, 8), (4, 11)), "end", 12, [(2, 6), (3, 8), (4, 11)]),
    (((2, 6), (3, 8), (4, 11)), "end", -1, [(2, 6), (3, 8), (4, 11)]),
    (((2, 6), (3, 8), (4, 11)), "start", 8, [(3, 8), (4, 11)]),
    (((2, 6), (3, 8), (4, 11)), "start", 9, [(3, 9), (4, 11)]),
    (((2, 6), (3, 8), (4, 11)), "start", 5, [(2, 6), (3, 8), (4, 11)]),
    (((2, 6), (3, 8), (4, 11)), "start", 6, [(2, 6), (3, 8), (4, 11)]),
    (((2, 6), (3, 8), (4, 11)), "start", 11, [(4, 11)]),
    (((2, 6), (3, 8), (4, 11)), "start", 15, [(4, 15)]),
    ((), "start", 15, []),
    ((), "end", 15, []),
]


@pytest.mark.parametrize("entries,op,offset,after", TRUNCATE_CASES)
def test_truncate_from_end_and_start(tmp_path, entries, op, offset, after):
    cache = cache_with(tmp_path, *entries)
    getattr(cache, "truncate_from_" + op)(offset)
    assert cache.entries() == after
    if entries:
        assert LeaderEpochFileCache(cache.path).entries() == after


def test_epoch_for_offset_and_previous_epoch(tmp_path):
    cache = cache_with(tmp_path, (1, 5), (3, 10), (4, 20))
    assert [cache.epoch_for_offset(o) for o in (0, 4, 5, 9, 10, 19, 20, 1000)] == [-1, -1, 1, 1, 3, 3, 4, 4]
    assert [cache.previous_epoch(e) for e in (1, 3, 4, 9)] == [-1, 1, 3, 4]
    assert cache.latest_entry == (4, 20) and cache.earliest_entry == (1, 5) and len(cache) == 3


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["assign", "assign", "assign", "end", "start"]),
                              st.integers(0, 12), st.integers(0, 200)), max_size=40))
def test_cache_property_monotonic_persisted_and_consistent(tmp_path_factory, ops):
    """Whatever happens, entries increase in both epoch and start offset, the file says what
    memory says, and end_offset_for agrees with the entries."""
    path = str(tmp_path_factory.mktemp("cache") / LEADER_EPOCH_CHECKPOINT)
    cache = LeaderEpochFileCache(path)
    for op, epoch, offset in ops:
        if op == "assign":
            cache.assign(epoch, offset)
        elif op == "end":
            cache.truncate_from_end(offset)
        else:
            cache.truncate_from_start(offset)
        entries = cache.entries()
        assert all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in zip(entries, entries[1:]))
        if os.path.exists(path):
            assert LeaderEpochFileCache(path).entries() == entries
        leo = (entries[-1].start_offset if entries else 0) + 5
        for i, e in enumerate(entries):
            end = entries[i + 1].start_offset if i + 1 < len(entries) else leo
            assert cache.end_offset_for(e.epoch, leo) == (e.epoch, end)
            assert cache.epoch_for_offset(e.start_offset) == e.epoch
        if entries:
            assert cache.end_offset_for(entries[-1].epoch + 1, leo) == (-1, -1)


# ---------------------------------------------------------------------------------------------
# the log's epoch cache

def test_leader_appends_assign_new_epochs_only(tmp_path):
    lg = Log(str(tmp_path / "t-0"), config())
    lg.append(batch(0, 3), leader_epoch=0)
    lg.append(batch(0, 2), leader_epoch=0)
    lg.append(batch(0, 4), leader_epoch=2)
    lg.append(batch(0, 1), leader_epoch=1)  # an older epoch on the leader path is not assigned
    lg.append(batch(0, 1), leader_epoch=5)
    assert lg.leader_epoch_cache.entries() == [(0, 0), (2, 5), (5, 10)]
    assert lg.latest_epoch == 5
    assert lg.end_offset_for_epoch(2) == (2, 10) and lg.end_offset_for_epoch(5) == (5, 11)
    assert lg.end_offset_for_epoch(9) is None
    assert read(os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT)) == b"0\n3\n0 0\n2 5\n5 10\n"
    lg.close()


def test_cache_is_rebuilt_from_the_batches_when_the_file_is_missing(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, config())
    for i in range(30):
        lg.append(batch(0, 1 + i % 3, CODECS[i % 5]), leader_epoch=i // 7 * 2)
    expected = lg.leader_epoch_cache.entries()
    assert len(lg.segments) > 2 and len(expected) == 5
    lg.close()
    os.unlink(os.path.join(d, LEADER_EPOCH_CHECKPOINT))
    lg = Log(d, config())
    assert lg.leader_epoch_cache.entries() == expected
    assert read(os.path.join(d, LEADER_EPOCH_CHECKPOINT)).startswith(b"0\n5\n")
    # with the log start moved up (DeleteRecords), the rebuilt cache starts there
    lg.delete_records(20)
    moved = lg.leader_epoch_cache.entries()
    assert moved[0].start_offset == 20 and moved == derived_epochs(lg.read_batches_bytes(), 20)
    lg.close()
    os.unlink(os.path.join(d, LEADER_EPOCH_CHECKPOINT))
    lg = Log(d, config(), log_start_offset=20)
    assert lg.leader_epoch_cache.entries() == moved
    lg.close()


def test_load_cuts_entries_past_the_end_and_below_the_start(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, config())
    for i in range(10):
        lg.append(batch(0, 2), leader_epoch=i // 3)
    lg.close()
    path = os.path.join(d, LEADER_EPOCH_CHECKPOINT)
    with open(path, "w") as f:  # entries of records a crash lost, and of a deleted prefix
        f.write("0\n5\n0 0\n1 6\n2 12\n3 18\n9 20\n")
    lg = Log(d, config(), log_start_offset=7)
    assert lg.log_end_offset == 20
    assert lg.leader_epoch_cache.entries() == [(1, 7), (2, 12), (3, 18)]
    assert LeaderEpochFileCache(path).entries() == [(1, 7), (2, 12), (3, 18)]
    lg.close()


def test_retention_and_delete_records_truncate_the_cache_from_the_start(tmp_path):
    lg = Log(str(tmp_path / "t-0"), config(retention_bytes=2000, cleanup_policy="delete"))
    for i in range(60):
        lg.append(batch(0, 2), leader_epoch=i // 10)
    lg.delete_records(15)
    assert lg.leader_epoch_cache.entries() == derived_epochs(lg.read_batches_bytes(), 15)
    assert lg.delete_old_segments() > 0
    start = lg.log_start_offset
    assert start > 15
    assert lg.leader_epoch_cache.entries() == derived_epochs(lg.read_batches_bytes(), start)
    assert lg.leader_epoch_cache.entries()[0].start_offset == start
    lg.close()


# ---------------------------------------------------------------------------------------------
# the follower's append

def leader_log(d, n=40, cfg=None, seed=1, producer=True):
    """A leader log of n appends: mixed codecs and sizes, epochs rising, an idempotent producer."""
    rng = random.Random(seed)
    lg = Log(d, cfg or config())
    seq = 0
    for i in range(n):
        count = rng.randint(1, 6)
        if producer and i % 3 == 0:
            lg.append(batch(0, count, rng.choice(CODECS), pid=42, pepoch=0, seq=seq), leader_epoch=i // 9)
            seq += count
        else:
            lg.append(batch(0, count, rng.choice(CODECS), size=rng.randint(1, 150)), leader_epoch=i // 9)
    return lg


def test_follower_copies_the_leader_byte_for_byte(tmp_path):
    leader = leader_log(str(tmp_path / "l-0"))
    follower = Log(str(tmp_path / "f-0"), config())
    seen = []
    follower.append_listeners.append(lambda lg: seen.append(lg.log_end_offset))
    follow(leader, follower)
    assert len(leader.segments) > 3
    assert segment_files(follower) == segment_files(leader)
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries()
    assert producers(follower) == producers(leader) == derived_producers(leader.read_batches_bytes())
    assert seen and seen[-1] == leader.log_end_offset
    assert follower.high_watermark == 0  # a follower's appends do not move it
    leader.close()
    follower.close()
    assert files_on_disk(follower.dir) == files_on_disk(leader.dir)
    assert read(os.path.join(follower.dir, LEADER_EPOCH_CHECKPOINT)) == \
        read(os.path.join(leader.dir, LEADER_EPOCH_CHECKPOINT))


def test_follower_takes_many_batches_at_once_and_keeps_them(tmp_path):
    leader = leader_log(str(tmp_path / "l-0"), n=60)
    follower = Log(str(tmp_path / "f-0"), config())
    offset = 0
    while offset < leader.log_end_offset:  # fetches of ~2 KiB, several batches each
        data = leader.read(offset, 2000).read()
        info = follower.append_as_follower(data)
        assert info.first_offset == offset
        offset = info.last_offset + 1
    assert follower.read_batches_bytes() == leader.read_batches_bytes()
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries()
    assert producers(follower) == producers(leader)
    # every segment within segment.bytes, and the indexes follow the rule
    assert all(s.size <= 1500 for s in follower.segments)
    leader.close()
    follower.close()


def test_follower_append_info(tmp_path):
    leader = Log(str(tmp_path / "l-0"), config())
    leader.append(batch(0, 3, ts=T0 + 5), leader_epoch=3)
    leader.append(batch(0, 2, ts=T0 + 9), leader_epoch=3)
    leader.append(batch(0, 4, ts=T0 + 1), leader_epoch=4)
    follower = Log(str(tmp_path / "f-0"), config())
    data = leader.read_batches_bytes()
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset, info.records, info.bytes) == (0, 8, 9, len(data))
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.log_append_time) == (T0 + 9, 4, -1)
    assert follower.leader_epoch_cache.entries() == [(3, 0), (4, 5)]
    for lg in (leader, follower):
        lg.close()


def test_follower_append_below_the_end_is_refused_and_changes_nothing(tmp_path):
    leader = leader_log(str(tmp_path / "l-0"), n=20)
    follower = Log(str(tmp_path / "f-0"), config())
    follow(leader, follower, stop=30)
    end = follower.log_end_offset
    before = state(follower), segment_files(follower)
    last_batch = follower.read(end - 1, 1).read()  # the follower's last batch, sent again
    for data in (leader.read(0, 1).read(), last_batch, last_batch + leader.read(end, 1).read()):
        with pytest.raises(UnexpectedAppendOffsetError) as e:
            follower.append_as_follower(data)
        assert e.value.code == OffsetOutOfRangeError.code and isinstance(e.value, OffsetOutOfRangeError)
        assert e.value.first_offset < end and "below the log end offset" in str(e.value)
        assert (state(follower), segment_files(follower)) == before
    leader.close()
    follower.close()


def test_follower_append_checks(tmp_path):
    follower = Log(str(tmp_path / "f-0"), config())
    follower.append_as_follower(batch(0, 3, epoch=1))
    before = state(follower), segment_files(follower)
    good = batch(3, 2, epoch=1)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    bad_magic = fix_crc(bad_magic)
    codec7 = bytearray(good)
    codec7[22] |= 7
    codec7 = fix_crc(codec7)
    cases = [
        (bytes(bad_crc), CorruptMessageError, "CRC"),
        (bytes(bad_magic), CorruptMessageError, "magic"),
        (bytes(codec7), CorruptMessageError, "codec"),
        (good[:-3], CorruptMessageError, "truncated"),
        (good + batch(4, 1, epoch=1), OffsetsOutOfOrderError, "out of order"),
        (b"", InvalidRecordError, "no record batches"),
    ]
    for data, error, words in cases:
        with pytest.raises(error, match=words):
            follower.append_as_follower(data)
        assert (state(follower), segment_files(follower)) == before, words
    # control batches and a gap above the end (a compacted leader) are fine
    control = RecordBatchBuilder(base_offset=10, control=True, producer_id=5, producer_epoch=0,
                                 partition_leader_epoch=2)
    control.append(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x00", timestamp_ms=T0)
    follower.append_as_follower(good + control.build())
    assert follower.log_end_offset == 11
    assert follower.leader_epoch_cache.entries() == [(1, 0), (2, 10)]
    follower.close()


def test_follower_replicates_a_compacted_leader(tmp_path):
    leader = Log(str(tmp_path / "l-0"), config(cleanup_policy="compact"))
    for i in range(50):  # keys repeat every 13 offsets: the cleaner leaves partial batches
        leader.append(batch(leader.log_end_offset, 4, CODECS[i % 5]), leader_epoch=i // 20)
    leader.roll()
    cleaner = LogCleaner(str(tmp_path), lambda: {(leader.topic, leader.partition): leader}, background=False)
    assert cleaner.clean_log(leader) is not None
    data = leader.read_batches_bytes()
    counts = [(b.count, b.last_offset - b.base_offset + 1) for b in iter_batches(data)]
    assert any(c < span for c, span in counts), "the cleaner left every batch whole"
    follower = Log(str(tmp_path / "f-0"), config())
    offset = leader.log_start_offset
    while offset < leader.log_end_offset:
        chunk = leader.read(offset, 1500).read()
        if not chunk:
            break
        info = follower.append_as_follower(chunk)
        offset = info.last_offset + 1
    assert follower.read_batches_bytes() == data
    assert follower.leader_epoch_cache.entries() == derived_epochs(data, 0)
    leader.close()
    follower.close()


# ---------------------------------------------------------------------------------------------
# truncate_to

def reference(leader, cut, d, cfg=None):
    """A log only ever written up to cut (the leader's batches wholly below it, fed as the
    leader appended them), and the offset where it ends."""
    ref = Log(d, cfg or config())
    follow(leader, ref, start=0, stop=cut)
    return ref


def check_equal(lg, ref):
    assert lg.log_end_offset == ref.log_end_offset
    assert [(s.base_offset, s.size, s.next_offset) for s in lg.segments] == \
        [(s.base_offset, s.size, s.next_offset) for s in ref.segments]
    assert segment_files(lg) == segment_files(ref)
    assert lg.leader_epoch_cache.entries() == ref.leader_epoch_cache.entries()
    assert producers(lg) == producers(ref)
    assert lg.read_batches_bytes() == ref.read_batches_bytes()


def cut_points(leader):
    """Offsets to cut at: batch starts and middles, segment boundaries, the ends."""
    data = leader.read_batches_bytes()
    points = {0, 1, leader.log_end_offset - 1}
    for b in iter_batches(data):
        points.add(b.base_offset)
        points.add((b.base_offset + b.last_offset + 1) // 2)
    for s in leader.segments:
        points.update({s.base_offset, s.base_offset + 1, s.base_offset - 1})
    return sorted(p for p in points if 0 <= p < leader.log_end_offset)


def test_truncate_to_equals_a_log_written_up_to_the_cut(tmp_path):
    leader = leader_log(str(tmp_path / "leader-0"), n=45)
    assert len(leader.segments) >= 4
    points = cut_points(leader)
    rng = random.Random(5)
    for i, cut in enumerate(points):
        f = Log(str(tmp_path / f"f{i}-0"), config())
        follow(leader, f)
        f.make_replicated()
        f.update_high_watermark(f.log_end_offset)
        ref = reference(leader, cut, str(tmp_path / f"r{i}-0"))
        assert f.truncate_to(cut) is True
        check_equal(f, ref)
        assert f.high_watermark == f.log_end_offset <= cut
        assert f.recovery_point <= f.log_end_offset
        # appends after the cut go where the reference's go
        more = [batch(0, rng.randint(1, 5), rng.choice(CODECS)) for _ in range(4)]
        for b in more:
            f.append(b, leader_epoch=9)
            ref.append(b, leader_epoch=9)
        check_equal(f, ref)
        f.close()
        ref.close()
        assert files_on_disk(f.dir) == files_on_disk(ref.dir)
        reopened, ref2 = Log(f.dir, config()), Log(ref.dir, config())
        check_equal(reopened, ref2)
        reopened.close()
        ref2.close()
        shutil.rmtree(f.dir)
        shutil.rmtree(ref.dir)
    leader.close()


def unclean_reopen(lg, recovery_point):
    abandon(lg)
    return Log(lg.dir, config(), recovery_point=recovery_point, clean_shutdown=False)


def test_truncate_to_then_unclean_stop(tmp_path):
    """Reopened without a clean shutdown (whatever the recovery point says), a truncated log
    is the reference log reopened the same way."""
    leader = leader_log(str(tmp_path / "leader-0"), n=40)
    for i, cut in enumerate(cut_points(leader)[::3]):
        for j, rp in enumerate(("stale", 0, "end")):
            f = Log(str(tmp_path / f"f{i}-{j}"), config())
            follow(leader, f)
            f.flush()
            stale = f.recovery_point
            f.truncate_to(cut)
            end = f.log_end_offset
            f.append(batch(0, 3), leader_epoch=8)
            ref = reference(leader, cut, str(tmp_path / f"r{i}-{j}"))
            ref.append(batch(0, 3), leader_epoch=8)
            point = {"stale": stale, "end": end}.get(rp, rp)
            g, ref2 = unclean_reopen(f, point), unclean_reopen(ref, point)
            assert g.load_result.truncated_bytes == 0
            check_equal(g, ref2)
            for lg in (g, ref2):
                lg.close()
            assert files_on_disk(g.dir) == files_on_disk(ref2.dir)
            shutil.rmtree(g.dir)
            shutil.rmtree(ref2.dir)
    leader.close()


def test_truncate_to_at_or_past_the_end_changes_nothing(tmp_path):
    lg = leader_log(str(tmp_path / "t-0"), n=10)
    before = state(lg), segment_files(lg)
    assert lg.truncate_to(lg.log_end_offset) is False
    assert lg.truncate_to(lg.log_end_offset + 100) is False
    assert (state(lg), segment_files(lg)) == before
    # but an epoch assigned at the end (a leader that wrote nothing in it) goes, as in Kafka
    lg.leader_epoch_cache.assign(7, lg.log_end_offset)
    assert lg.truncate_to(lg.log_end_offset) is False
    assert lg.leader_epoch_cache.latest_epoch == before[0]["epochs"][-1].epoch
    with pytest.raises(ValueError):
        lg.truncate_to(-1)
    lg.close()


def test_truncate_to_inside_a_batch_removes_the_whole_batch(tmp_path):
    lg = Log(str(tmp_path / "t-0"), config())
    lg.append(batch(0, 5), leader_epoch=0)
    lg.append(batch(0, 5, "gzip"), leader_epoch=1)
    lg.append(batch(0, 5), leader_epoch=2)
    assert lg.truncate_to(7)
    assert lg.log_end_offset == 5  # offsets 5..9 were one batch
    assert lg.leader_epoch_cache.entries() == [(0, 0)]
    assert [b.base_offset for b in iter_batches(lg.read_batches_bytes())] == [0]
    lg.close()


def test_truncate_below_the_first_segment_starts_over(tmp_path):
    lg = leader_log(str(tmp_path / "t-0"), n=40)
    lg.delete_records(lg.segments[2].base_offset)
    lg.delete_old_segments()
    first = lg.segments[0].base_offset
    assert first > 3
    assert lg.truncate_to(first - 3) is True
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark) == (first - 3,) * 3
    assert lg.leader_epoch_cache.entries() == [] and producers(lg) == {}
    lg.close()


def test_truncate_below_the_log_start_offset_moves_it_down(tmp_path):
    lg = leader_log(str(tmp_path / "t-0"), n=12, producer=False)
    base = lg.segments[0].base_offset
    lg.delete_records(10)
    assert lg.log_start_offset == 10 and lg.segments[0].base_offset == base
    lg.truncate_to(6)
    assert lg.log_start_offset == lg.log_end_offset <= 6
    lg.close()


def test_producer_state_after_truncation(tmp_path):
    cfg = config()
    lg = Log(str(tmp_path / "t-0"), cfg)
    seq = 0
    ends = []
    for i in range(30):  # one producer, 3 records a batch; rolls (and snapshots) on the way
        lg.append(batch(0, 3, CODECS[i % 5], pid=7, pepoch=0, seq=seq, size=60), leader_epoch=0)
        seq += 3
        ends.append(lg.log_end_offset)
    snapshots = [n for n in os.listdir(lg.dir) if n.endswith(".snapshot")]
    assert len(lg.segments) > 3 and snapshots
    cut = ends[12]  # 13 batches stay: the next sequence is 39
    lg.truncate_to(cut)
    assert producers(lg) == {7: (0, 38, cut - 1)}
    assert all(int(n[:20]) <= cut for n in os.listdir(lg.dir) if n.endswith(".snapshot"))
    # what the longer log expected next is now out of order; 39 follows
    with pytest.raises(OutOfOrderSequenceNumberError):
        lg.append(batch(0, 3, pid=7, pepoch=0, seq=90), leader_epoch=0)
    info = lg.append(batch(0, 3, pid=7, pepoch=0, seq=36), leader_epoch=0)  # a retry of the last batch
    assert info.duplicate and info.first_offset == cut - 3
    info = lg.append(batch(0, 3, pid=7, pepoch=0, seq=39), leader_epoch=0)
    assert not info.duplicate and info.first_offset == cut
    lg.close()
    lg = Log(lg.dir, cfg)
    assert producers(lg) == {7: (0, 41, cut + 2)}
    with pytest.raises(OutOfOrderSequenceNumberError):
        lg.append(batch(0, 3, pid=7, pepoch=0, seq=90), leader_epoch=0)
    lg.close()


def test_a_cleaned_copy_of_a_truncated_segment_is_not_swapped_in(tmp_path):
    """The cleaner copies an inactive segment outside the log's lock. If a truncation cuts that
    segment meanwhile (it becomes active, takes new records, rolls again), the copy is of
    records that are gone: the swap must refuse it."""
    from kafkacore.storage.log_segment import LogSegment
    from kafkacore.storage.segment_files import CLEANED_SUFFIX
    from kafkacore.storage.log_cleaner import iter_segment_batches
    lg = leader_log(str(tmp_path / "t-0"), n=30, producer=False)
    old = lg.segments[1]
    copy = LogSegment(lg.dir, old.base_offset, lg.config, suffix=CLEANED_SUFFIX)
    copy.load(active=True)
    for _pos, b in iter_segment_batches(old):
        copy.append(bytearray(b), 0)
    copy.become_inactive(flush=True)
    lg.truncate_to((old.base_offset + old.next_offset) // 2)
    while len(lg.segments) < 4:
        lg.append(batch(0, 5), leader_epoch=7)
    assert lg.segments[1] is not old and lg.segments[1].base_offset == old.base_offset
    before = lg.read_batches_bytes()
    assert lg.replace_segment(old, copy) is False
    assert lg.read_batches_bytes() == before
    assert not any(n.endswith(CLEANED_SUFFIX) for n in os.listdir(lg.dir))
    lg.close()


@settings(max_examples=int(os.environ.get("KC_REPLICATION_EXAMPLES", "25")),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(appends=st.lists(st.tuples(st.integers(1, 8), st.sampled_from(CODECS), st.integers(0, 120),
                                  st.booleans(), st.booleans()), min_size=1, max_size=40),
       cut_at=st.floats(0, 1), seed=st.integers(0, 1 << 30))
def test_truncate_property(tmp_path_factory, appends, cut_at, seed):
    """Any log, any cut: equal to the log written up to the cut, and so after a reopen."""
    root = tmp_path_factory.mktemp("prop")
    leader = Log(str(root / "l-0"), config())
    epoch = seq = 0
    for count, codec, size, new_epoch, idempotent in appends:
        epoch += new_epoch
        if idempotent:
            leader.append(batch(0, count, codec, pid=3, pepoch=0, seq=seq, size=size), leader_epoch=epoch)
            seq += count
        else:
            leader.append(batch(0, count, codec, size=size), leader_epoch=epoch)
    f = Log(str(root / "f-0"), config())
    follow(leader, f)
    cut = int(cut_at * leader.log_end_offset)
    ref = reference(leader, cut, str(root / "r-0"))
    f.truncate_to(cut)
    check_equal(f, ref)
    assert f.leader_epoch_cache.entries() == derived_epochs(ref.read_batches_bytes(), 0)
    assert producers(f) == derived_producers(ref.read_batches_bytes())
    for lg in (leader, f, ref):
        lg.close()
    assert files_on_disk(f.dir) == files_on_disk(ref.dir)
    g, ref2 = Log(f.dir, config()), Log(ref.dir, config())
    try:
        check_equal(g, ref2)
    finally:
        g.close()
        ref2.close()


# ---------------------------------------------------------------------------------------------
# truncate_fully_and_start_at

def test_truncate_fully_and_start_at(tmp_path):
    lg = leader_log(str(tmp_path / "t-0"), n=30)
    lg.make_replicated()
    seen = []
    lg.truncation_listeners.append(lambda log: seen.append(log.log_end_offset))
    lg.truncate_fully_and_start_at(5000)
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark, lg.recovery_point) == (5000,) * 4
    assert [(s.base_offset, s.size) for s in lg.segments] == [(5000, 0)]
    assert lg.leader_epoch_cache.entries() == [] and producers(lg) == {}
    assert seen == [5000]
    names = sorted(os.listdir(lg.dir))
    assert names == ["00000000000000005000.index", "00000000000000005000.log", "00000000000000005000.timeindex",
                     LEADER_EPOCH_CHECKPOINT]
    assert read(os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT)) == b"0\n0\n"
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(100, 1000)
    # the leader's batches from there on
    lg.append_as_follower(batch(5000, 3, epoch=6, pid=42, pepoch=1, seq=0))
    assert lg.leader_epoch_cache.entries() == [(6, 5000)] and producers(lg) == {42: (1, 2, 5002)}
    lg.close()
    lg = Log(lg.dir, config(), log_start_offset=0)
    assert (lg.log_start_offset, lg.log_end_offset) == (5000, 5003)
    assert lg.leader_epoch_cache.entries() == [(6, 5000)] and producers(lg) == {42: (1, 2, 5002)}
    # at an offset equal to an existing segment's base, and below everything
    lg.truncate_fully_and_start_at(5000)
    assert (lg.log_start_offset, lg.log_end_offset) == (5000, 5000)
    lg.truncate_fully_and_start_at(0)
    assert (lg.log_start_offset, lg.log_end_offset) == (0, 0)
    lg.append(batch(0, 2), leader_epoch=1)
    assert lg.read_batches_bytes() and lg.leader_epoch_cache.entries() == [(1, 0)]
    lg.close()


# ---------------------------------------------------------------------------------------------
# high watermark

def test_high_watermark_single_node_is_the_log_end(tmp_path):
    lg = Log(str(tmp_path / "t-0"), config())
    assert not lg.replicated
    lg.append(batch(0, 3))
    assert lg.high_watermark == lg.log_end_offset == 3
    lg.close()


def test_high_watermark_replicated(tmp_path):
    lg = Log(str(tmp_path / "t-0"), config())
    lg.append(batch(0, 10))
    assert lg.make_replicated() == 0  # nothing checkpointed: 0 (here the log start)
    woken = []
    lg.append_listeners.append(lambda log: woken.append(log.high_watermark))
    lg.append(batch(0, 5))
    assert (lg.high_watermark, lg.log_end_offset) == (0, 15)
    assert lg.update_high_watermark(12) == 12 and woken[-1] == 12
    n = len(woken)
    assert lg.update_high_watermark(12) == 12 and len(woken) == n  # no change, no wake-up
    assert lg.update_high_watermark(99) == 15  # bounded by the log end
    lg.append_as_follower(batch(15, 2, epoch=1))
    assert lg.high_watermark == 15
    lg.delete_records(4)
    assert lg.update_high_watermark(1) == 4  # and by the log start
    assert lg.make_replicated() == 4  # already replicated: unchanged
    lg.update_high_watermark(17)
    lg.truncate_to(13)
    assert lg.high_watermark == 10 == lg.log_end_offset  # 10..14 was one batch
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records(11)
    lg.close()


def test_make_replicated_applies_the_checkpointed_high_watermark(tmp_path):
    lg = Log(str(tmp_path / "t-0"), config(), checkpointed_high_watermark=7)
    assert lg.high_watermark == 0  # an empty log
    lg.append(batch(0, 20))
    assert lg.high_watermark == 20
    assert lg.make_replicated() == 7
    lg.close()
    lg = Log(lg.dir, config(), checkpointed_high_watermark=70, replicated=True)
    assert lg.replicated and lg.high_watermark == 20
    lg.close()


def test_high_watermark_checkpoint_survives_a_restart(tmp_path):
    data = str(tmp_path / "data")
    with LogManager(data, config(), background=False) as m:
        a = m.get_or_create_log("a", 0)
        b = m.get_or_create_log("b", 1)
        for lg in (a, b):
            lg.append(batch(0, 10))
            lg.make_replicated()
        a.update_high_watermark(6)
        m.checkpoint_high_watermarks()
        path = os.path.join(data, REPLICATION_OFFSET_CHECKPOINT)
        assert read(path) == b"0\n2\na 0 6\nb 1 0\n"
        b.update_high_watermark(9)
        m.checkpoint()
        assert OffsetCheckpointFile(path).read() == {("a", 0): 6, ("b", 1): 9}
        a.update_high_watermark(8)
    assert read(path) == b"0\n2\na 0 8\nb 1 9\n"  # written by shutdown
    with LogManager(data, config(), background=False) as m:
        a, b = m.get_log("a", 0), m.get_log("b", 1)
        assert (a.checkpointed_high_watermark, b.checkpointed_high_watermark) == (8, 9)
        # not replicated yet: a single node's HW; the checkpoint keeps the replicated one
        assert a.high_watermark == 10
        m.checkpoint()
        assert OffsetCheckpointFile(path).read() == {("a", 0): 8, ("b", 1): 9}
        assert a.make_replicated() == 8
        c = m.get_or_create_log("c", 0)
        assert c.checkpointed_high_watermark is None
    # unclean: the checkpoint as last written; a log shorter than it is bounded
    with LogManager(data, config(), background=False, replicated=True) as m:
        a = m.get_log("a", 0)
        assert a.replicated and a.high_watermark == 8
        assert m.get_log("b", 1).high_watermark == 9
        assert m.get_or_create_log("d", 0).replicated


def test_single_node_manager_keeps_high_watermark_at_the_end(tmp_path):
    data = str(tmp_path / "data")
    with LogManager(data, config(), background=False) as m:
        lg = m.get_or_create_log("t", 0)
        lg.append(batch(0, 4))
    with LogManager(data, config(), background=False) as m:
        lg = m.get_log("t", 0)
        assert lg.high_watermark == lg.log_end_offset == 4
        lg.append(batch(0, 4))
        assert lg.high_watermark == 8


def test_truncation_writes_the_checkpoints(tmp_path):
    """A truncation lowers the recovery point; the manager writes it at once, so a crash after
    later appends recovers them (a stale, higher recovery point would skip them)."""
    data = str(tmp_path / "data")
    m = LogManager(data, config(), background=False)
    lg = m.get_or_create_log("t", 0)
    for i in range(40):
        lg.append(batch(0, 3, size=80), leader_epoch=0)
    lg.flush()
    m.checkpoint()
    recovery = OffsetCheckpointFile(os.path.join(data, "recovery-point-offset-checkpoint"))
    assert recovery.read()[("t", 0)] == 120
    lg.truncate_to(31)
    assert recovery.read()[("t", 0)] == lg.recovery_point <= 30
    m.shutdown()


def test_truncation_lowers_the_cleaners_first_dirty_offset(tmp_path):
    data = str(tmp_path / "data")
    m = LogManager(data, config(cleanup_policy="compact"), background=False)
    lg = m.get_or_create_log("c", 0)
    for i in range(40):
        lg.append(batch(lg.log_end_offset, 3), leader_epoch=0)
    lg.roll()
    assert m.cleaner.clean_log(lg) is not None
    cleaner_file = OffsetCheckpointFile(os.path.join(data, "cleaner-offset-checkpoint"))
    assert cleaner_file.read()[("c", 0)] == 120
    lg.truncate_to(50)
    assert cleaner_file.read()[("c", 0)] == lg.log_end_offset <= 50
    m.shutdown()


# ---------------------------------------------------------------------------------------------
# OffsetForLeaderEpoch

class _ClusterBroker:
    """A leader of a cluster at leader epoch ``epoch`` for ``logs`` (replicated logs built here)."""

    def __init__(self, logs, epoch):
        self.logs = logs
        self.epoch = epoch

    def get_log(self, topic, partition):
        return self.logs.get((topic, partition))

    def leader_log(self, topic, partition):
        from kafkacore.errors import NotLeaderOrFollowerError
        lg = self.get_log(topic, partition)
        if lg is None:
            raise NotLeaderOrFollowerError("not the leader")
        return lg

    def leader_epoch_of(self, topic, partition):
        return self.epoch


def test_offset_for_leader_epoch_answers_from_the_cache(tmp_path):
    from kafkacore import Broker
    from kafkacore.broker.handlers import offset_for_leader_epoch as h
    from kafkacore.protocol.messages.offset_for_leader_epoch_request import OffsetForLeaderPartition

    def ask(broker, partition, epoch, current=-1, v=4):
        out = h._end_offset(broker, "t", OffsetForLeaderPartition(partition=partition, leader_epoch=epoch,
                                                                   current_leader_epoch=current), v)
        return out.error_code, out.leader_epoch, out.end_offset

    # a real single node (the embedded one): its controller gives it its partitions at epoch 0
    with Broker(tmp_path / "node") as embedded:
        embedded.create_topic("t", 2)
        single = embedded.core

        def on_broker(fn, *args, **kw):
            return embedded.call(fn, *args, **kw)

        for e, n in ((0, 10), (2, 10), (5, 7)):  # epochs of a log written under several leaders
            on_broker(single.get_log("t", 0).append, batch(0, n), leader_epoch=e)
        assert [on_broker(ask, single, 0, e) for e in (-1, 0, 1, 2, 4, 5, 6)] == [
            (0, -1, -1), (0, 0, 10), (0, 0, 10), (0, 2, 20), (0, 2, 20), (0, 5, 27), (0, -1, -1)]
        assert on_broker(ask, single, 1, 0) == (0, 0, 0)  # nothing written yet: epoch 0 from the end
        assert on_broker(ask, single, 1, 1) == (0, -1, -1)
        assert on_broker(ask, single, 2, 0)[0] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert on_broker(ask, single, 0, 0, current=1)[0] == 75  # UNKNOWN_LEADER_EPOCH
        assert on_broker(ask, single, 0, 0, current=-2)[0] == 74  # FENCED_LEADER_EPOCH
        assert on_broker(ask, single, 0, 0, current=1, v=1) == (0, 0, 10)  # no current epoch before v2
    lg = Log(str(tmp_path / "t-0"), config())
    for e, n in ((0, 10), (2, 10), (5, 7)):
        lg.append(batch(0, n), leader_epoch=e)
    empty = Log(str(tmp_path / "t-1"), config())
    lg.make_replicated()
    empty.make_replicated()
    cluster = _ClusterBroker({("t", 0): lg, ("t", 1): empty}, epoch=5)
    assert ask(cluster, 0, 2, current=5) == (0, 2, 20)
    assert ask(cluster, 0, 2, current=4)[0] == 74
    assert ask(cluster, 0, 2, current=6)[0] == 75
    assert ask(cluster, 1, 0) == (0, -1, -1)  # a replicated log answers from its cache alone
    assert ask(cluster, 3, 0)[0] == 6  # NOT_LEADER_OR_FOLLOWER
    lg.close()
    empty.close()


# ---------------------------------------------------------------------------------------------
# crash safety: every file operation of a truncation failed in turn

class _Crash(Exception):
    pass


MUTATING = ("rename", "replace", "unlink", "ftruncate", "pwrite", "fsync")


def _crash_at(monkeypatch, n):
    """Makes the n-th mutating os call (0-based) raise _Crash before it runs."""
    calls = [0]
    for name in MUTATING:
        real = getattr(os, name)

        def wrapper(*args, _real=real, **kwargs):
            if calls[0] == n:
                calls[0] += 1
                raise _Crash()
            calls[0] += 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(os, name, wrapper)
    return calls


def check_consistent(lg, original):
    """lg (reopened after a crash) is a prefix of original on batch boundaries, and its epochs
    and producers are those its batches imply."""
    data = lg.read_batches_bytes()
    assert original.startswith(data)
    if data:
        assert len(data) in {b.position + b.size_in_bytes for b in iter_batches(original)}
    assert lg.leader_epoch_cache.entries() == derived_epochs(data, lg.log_start_offset)
    assert producers(lg) == derived_producers(data)


@pytest.mark.parametrize("what", ["inside", "boundary", "fully"])
def test_truncation_crash_at_every_step(tmp_path, monkeypatch, what):
    pristine = str(tmp_path / "pristine-0")
    leader = leader_log(pristine, n=36)
    leader.flush()
    original = leader.read_batches_bytes()
    old_end = leader.log_end_offset
    segments = leader.segments
    if what == "inside":
        cut = (segments[1].base_offset + segments[1].next_offset) // 2
    elif what == "boundary":
        cut = segments[2].base_offset
    else:
        cut = None
    leader.close()
    ref_state = ref_files = None
    if cut is not None:
        source = Log(pristine, config())
        ref = reference(source, cut, str(tmp_path / "ref-0"))
        source.close()
        ref_state = (ref.log_end_offset, ref.read_batches_bytes(), ref.leader_epoch_cache.entries(), producers(ref))
        ref.close()
        ref_files = files_on_disk(ref.dir)
    steps = 0
    while True:
        d = str(tmp_path / f"run{steps}-0")
        shutil.copytree(pristine, d)
        lg = Log(d, config())
        _crash_at(monkeypatch, steps)
        try:
            if cut is None:
                lg.truncate_fully_and_start_at(old_end + 50)
            else:
                lg.truncate_to(cut)
            done = True
        except (_Crash, KafkaStorageError):
            done = False
            assert lg.closed  # a failure part way leaves the log closed
        monkeypatch.undo()
        g = unclean_reopen(lg, old_end)
        if not done:
            check_consistent(g, original)
            # finishing the truncation gives what an uninterrupted one gives
            if cut is None:
                g.truncate_fully_and_start_at(old_end + 50)
            else:
                g.truncate_to(cut)
        if cut is None:
            assert (g.log_start_offset, g.log_end_offset) == (old_end + 50,) * 2
            assert g.leader_epoch_cache.entries() == [] and producers(g) == {}
        else:
            assert (g.log_end_offset, g.read_batches_bytes(), g.leader_epoch_cache.entries(), producers(g)) == ref_state
        g.close()
        if cut is not None:  # closed, the files are the reference's (recovery's final time entry included)
            assert files_on_disk(d) == ref_files
        if done:
            break
        shutil.rmtree(d)
        steps += 1
        assert steps < 200
    assert steps >= 5  # the truncation went through many failure points


# ---------------------------------------------------------------------------------------------
# crash safety: SIGKILL loop

CHILD = r'''
import os, random, sys
sys.path.insert(0, TESTS_DIR)
from kafkacore.storage import LogManager, LogConfig
from test_storage_replication import SMALL, batch, CODECS

data_dir, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
m = LogManager(data_dir, LogConfig(SMALL), background=True, flush_check_interval_ms=20, checkpoint_interval_ms=30)
lg = m.get_or_create_log("k", 0)
lg.make_replicated()
gen = lg.leader_epoch_cache.latest_epoch + 1
seq = {}
out = sys.stdout
out.write("R\n")  # ready: the parent's random delay starts now, whatever the start-up cost
out.flush()
while True:
    r = rng.random()
    end = lg.log_end_offset
    if r < 0.08 and end > 0:
        cut = rng.randint(max(0, end - 60), end)
        lg.truncate_to(cut)
        gen += 1
        out.write("T %d %d\n" % (cut, lg.log_end_offset))
    elif r < 0.1:
        lg.update_high_watermark(rng.randint(0, end))
        out.write("H\n")
    else:
        count = rng.randint(1, 6)
        pid = rng.choice([-1, 11])
        if pid >= 0:
            s = lg.producer_state.producers.get(pid)
            nxt = 0 if s is None else (s.last_seq + 1)
            info = lg.append(batch(0, count, rng.choice(CODECS), pid=pid, pepoch=0, seq=nxt, size=rng.randint(0, 200)),
                             leader_epoch=gen)
        else:
            info = lg.append(batch(0, count, rng.choice(CODECS), size=rng.randint(0, 200)), leader_epoch=gen)
        out.write("A %d %d %d\n" % (info.first_offset, info.last_offset, gen))
    out.flush()
'''.replace("TESTS_DIR", repr(TESTS_DIR))


def _check_after_kill(lg):
    data = lg.read_batches_bytes()
    expect = lg.log_start_offset
    for b in iter_batches(data):
        b.validate()
        assert b.base_offset == expect or (expect == lg.log_start_offset and b.base_offset <= expect)
        expect = b.next_offset
    assert expect == lg.log_end_offset or not data
    epochs = [b.partition_leader_epoch for b in iter_batches(data)]
    assert epochs == sorted(epochs)
    assert lg.leader_epoch_cache.entries() == derived_epochs(data, lg.log_start_offset)
    assert producers(lg) == derived_producers(data)
    assert lg.high_watermark <= lg.log_end_offset
    return data


def test_sigkill_loop_appends_and_truncations(tmp_path):
    data_dir = str(tmp_path / "data")
    seconds = float(os.environ.get("KAFKACORE_CRASH_SECONDS", "6"))
    deadline = time.monotonic() + seconds
    rng = random.Random(99)
    kills = 0
    truncations = appends = 0
    acked = {}  # offset -> generation (epoch) of the record there, by the acknowledged operations
    while kills < 12 or time.monotonic() < deadline:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, data_dir, str(kills)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=os.environ.copy())
        ready = proc.stdout.readline()
        assert ready == b"R\n", (ready, proc.stderr.read().decode(errors="replace") if not ready else "")
        time.sleep(0.15 + rng.random() * 0.35)  # pacing: the kill lands at a random point of the work
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")
        kills += 1
        lines = out.decode().splitlines()
        complete = lines if out.endswith(b"\n") else lines[:-1]
        for line in complete:
            kind, *rest = line.split()
            if kind == "A":
                appends += 1
                first, last, gen = map(int, rest)
                for o in range(first, last + 1):
                    acked[o] = gen
            elif kind == "T":
                truncations += 1
                _cut, new_end = map(int, rest)
                for o in [o for o in acked if o >= new_end]:
                    del acked[o]
        with LogManager(data_dir, LogConfig(SMALL), background=False) as m:
            lg = m.get_log("k", 0)
            lg.make_replicated()
            data = _check_after_kill(lg)
            found = {}
            for b in iter_batches(data):
                for o in range(b.base_offset, b.next_offset):
                    found[o] = b.partition_leader_epoch
            # every acknowledged record is there with its generation, except the ones an
            # unacknowledged truncation (the one in flight at the kill) may have cut
            lost = [o for o, g in acked.items() if found.get(o) != g]
            if lost:
                assert min(lost) >= lg.log_end_offset and all(o >= lg.log_end_offset for o in lost), lost[:5]
                for o in lost:
                    del acked[o]
            for o in range(lg.log_end_offset):
                acked.setdefault(o, found[o])  # unacknowledged appends that made it
            for o in [o for o in acked if o >= lg.log_end_offset]:
                del acked[o]
    # the loop did something: many appends, truncations acknowledged, kills in the middle of work
    assert truncations >= 3 and appends >= 200, (kills, truncations, appends)
    print(f"sigkill loop: {kills} kills, {appends} appends and {truncations} truncations acknowledged")
