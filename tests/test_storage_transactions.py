"""Transactions in the storage engine (docs/transactions.md sections 2.3, 4.1-4.5; issue 15
step 3): the last stable offset through open, committed, aborted and interleaved transactions
of several producers, markers (append_marker) and their .txnindex entries, read_committed
reads and their aborted lists (across segments), followers fed the leader's batches, truncation,
and a reopened log.

Expectations come from how the input was built: which records each transaction wrote and how
it ended, .txnindex bytes packed here with struct, and a reference read_committed consumer
written here (Kafka's CompletedFetch rule) that must see exactly the committed and
non-transactional records. No mocks: real Log objects on real files."""
import os
import random
import struct
import time

import pytest

from kafkacore.errors import (InvalidProducerEpochError, InvalidRecordError, InvalidTxnStateError,
                              OutOfOrderSequenceNumberError, TransactionCoordinatorFencedError)
from kafkacore.record import RecordBatchBuilder, iter_batches
from kafkacore.storage import Log, LogConfig
from kafkacore.storage.log_cleaner import LogCleaner

# record timestamps near the markers' (wall clock): segment.ms rolls on the gap between a
# segment's first batch and a later one, as in Kafka
TS = time.time_ns() // 1_000_000 - 60_000
ABORT, COMMIT = 0, 1


# ---------------------------------------------------------------------------------------
# helpers


def batch(pid=-1, epoch=-1, seq=-1, n=1, tag=b"", transactional=False, keyed=True):
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    for i in range(n):
        b.append(b"%s/%d/%d" % (tag, pid, seq + i), key=b"k%d" % (i % 3) if keyed else None, timestamp_ms=TS + i)
    return b.build()


class Scenario:
    """Drives a Log and remembers what a read_committed reader must see: the (offset, value) of
    every non-transactional and committed record, and the aborted transactions."""

    def __init__(self, lg):
        self.lg = lg
        self.visible = {}  # offset -> value
        self.pending = {}  # pid -> [(offset, value)]
        self.first = {}  # pid -> first offset of its open transaction
        self.seq = {}  # pid -> next sequence
        self.epoch = {}
        self.aborted = []  # (pid, first offset, marker offset)
        self.counter = 0

    def plain(self, n=1):
        self.counter += 1
        tag = b"p%d" % self.counter
        info = self.lg.append(batch(n=n, tag=tag))
        for rec in _records(self.lg, info.first_offset, info.last_offset):
            self.visible[rec[0]] = rec[1]
        return info

    def send(self, pid, n=1):
        self.counter += 1
        seq = self.seq.get(pid, 0)
        epoch = self.epoch.setdefault(pid, 0)
        info = self.lg.append(batch(pid, epoch, seq, n, tag=b"t%d" % self.counter, transactional=True))
        self.seq[pid] = seq + n
        self.first.setdefault(pid, info.first_offset)
        self.pending.setdefault(pid, []).extend(_records(self.lg, info.first_offset, info.last_offset))
        return info

    def end(self, pid, commit, coordinator_epoch=0):
        info = self.lg.append_marker(pid, self.epoch.get(pid, 0), coordinator_epoch, commit)
        recs = self.pending.pop(pid, [])
        first = self.first.pop(pid, None)
        if commit:
            self.visible.update(recs)
        elif first is not None:
            self.aborted.append((pid, first, info.first_offset))
        return info

    @property
    def open_first_offsets(self):
        return sorted(self.first.values())


def _records(lg, first, last):
    out = []
    for b in iter_batches(lg.read(first, 1 << 20).read()):
        for r in b:
            if first <= r.offset <= last:
                out.append((r.offset, r.value))
    return out


def read_committed_all(lg, max_bytes, start=None):
    """A read_committed consumer: fetches from the log start (or start) with read_committed and
    applies Kafka's CompletedFetch rule per response: with the aborted list sorted by first
    offset, every batch with a producer id first adds the producers of the listed transactions
    starting at or below its last offset to the aborted set; an ABORT marker removes its
    producer; a transactional batch of a producer in the set is skipped; control batches are
    never records. Returns {offset: value} and the number of fetches."""
    out = {}
    offset = lg.log_start_offset if start is None else start
    fetches = 0
    while True:
        sl, aborted = lg.read_committed(offset, max_bytes)
        fetches += 1
        if len(sl) == 0:
            assert aborted == []
            return out, fetches
        pending = sorted(aborted, key=lambda a: a.first_offset)
        active = set()
        for b in iter_batches(sl.read()):
            if b.producer_id >= 0:
                while pending and pending[0].first_offset <= b.last_offset:
                    active.add(pending.pop(0).producer_id)
                if b.is_control:
                    (rec,) = list(b)
                    if struct.unpack(">hh", rec.key)[1] == ABORT:
                        active.discard(b.producer_id)
                elif b.is_transactional and b.producer_id in active:
                    offset = b.next_offset
                    continue
            if not b.is_control:
                for r in b:
                    assert r.offset not in out
                    out[r.offset] = r.value
            offset = b.next_offset
        assert offset <= lg.last_stable_offset


def txnindex_bytes(entries):
    """Kafka's TransactionIndex file: per entry int16 version 0, int64 producerId, int64
    firstOffset, int64 lastOffset, int64 lastStableOffset, big-endian."""
    return b"".join(struct.pack(">hqqqq", 0, *e) for e in entries)


def txnindex_files(directory):
    return {n: open(os.path.join(directory, n), "rb").read()
            for n in sorted(os.listdir(directory)) if n.endswith(".txnindex")}


def segment_files(directory, suffixes=(".log", ".index", ".timeindex", ".txnindex")):
    return {n: open(os.path.join(directory, n), "rb").read()
            for n in sorted(os.listdir(directory)) if n.endswith(suffixes)}


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
# the last stable offset


def test_lso_through_open_committed_aborted_and_interleaved_transactions(new_log):
    lg = new_log()
    s = Scenario(lg)
    s.plain(2)  # 0-1
    assert lg.last_stable_offset == lg.high_watermark == 2 and lg.first_unstable_offset is None
    s.send(1, 2)  # 2-3: producer 1 opens at 2
    assert (lg.high_watermark, lg.last_stable_offset, lg.first_unstable_offset) == (4, 2, 2)
    s.send(2, 1)  # 4: producer 2 opens at 4
    s.plain(1)  # 5
    s.send(1, 1)  # 6: producer 1's transaction goes on
    assert (lg.high_watermark, lg.last_stable_offset) == (7, 2)
    s.end(1, commit=True)  # 7: COMMIT, producer 2 still open
    assert (lg.high_watermark, lg.last_stable_offset) == (8, 4)
    s.send(3, 2)  # 8-9
    s.end(2, commit=False)  # 10: ABORT of 2; 3 is open since 8
    assert (lg.high_watermark, lg.last_stable_offset) == (11, 8)
    s.end(4, commit=False)  # 11: a marker for a producer without a transaction
    assert lg.last_stable_offset == 8
    s.send(1, 1)  # 12: producer 1's second transaction
    s.end(3, commit=False)  # 13: ABORT of 3; 1 open since 12
    assert (lg.high_watermark, lg.last_stable_offset) == (14, 12)
    s.end(1, commit=True)  # 14
    assert (lg.high_watermark, lg.last_stable_offset, lg.first_unstable_offset) == (15, 15, None)
    # one entry per ABORT of a transaction that wrote data; lastStableOffset: the first offset
    # of the earliest transaction open from another producer (3's at 8, then 1's at 12)
    assert txnindex_files(lg.dir) == {"00000000000000000000.txnindex": txnindex_bytes([(2, 4, 10, 8),
                                                                                        (3, 8, 13, 12)])}
    seen, _n = read_committed_all(lg, 1 << 20)
    assert seen == s.visible


def test_read_committed_stops_at_the_lso_and_lists_the_aborted_transactions(new_log):
    lg = new_log()
    s = Scenario(lg)
    s.send(5, 3)  # 0-2
    s.plain(2)  # 3-4
    sl, aborted = lg.read_committed(0, 1 << 20)
    assert (len(sl), aborted) == (0, [])  # nothing is stable yet
    assert lg.read(0, 1 << 20).length > 0  # read_uncommitted sees it all
    s.end(5, commit=False)  # 5
    sl, aborted = lg.read_committed(0, 1 << 20)
    assert [(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset) for a in aborted] == [(5, 0, 5, 6)]
    assert [b.base_offset for b in iter_batches(sl.read())] == [0, 3, 5]
    sl, aborted = lg.read_committed(3, 1 << 20)  # a fetch from inside the transaction's range
    assert [a.producer_id for a in aborted] == [5]
    s.send(6, 1)  # 6
    sl, aborted = lg.read_committed(6, 1 << 20)  # at the LSO: nothing
    assert (len(sl), aborted) == (0, [])
    seen, _n = read_committed_all(lg, 1 << 20)
    assert seen == s.visible == {3: b"p2/-1/-1", 4: b"p2/-1/0"}


def test_the_append_listeners_fire_on_markers(new_log):
    lg = new_log()
    calls = []
    lg.append_listeners.append(lambda log: calls.append(log.last_stable_offset))
    s = Scenario(lg)
    s.send(1, 2)
    s.end(1, commit=True)
    assert calls == [0, 3]


def test_replicated_leader_and_the_high_watermark(new_log):
    lg = new_log(replicated=True)
    s = Scenario(lg)
    s.send(1, 2)  # 0-1
    s.plain(1)  # 2
    assert (lg.high_watermark, lg.last_stable_offset) == (0, 0)
    lg.update_high_watermark(3)
    assert lg.last_stable_offset == 0  # producer 1 is open
    s.end(1, commit=False)  # 3
    lg.update_high_watermark(3)
    assert lg.last_stable_offset == 0  # decided, but its marker is not replicated
    sl, aborted = lg.read_committed(0, 1 << 20)
    assert len(sl) == 0
    lg.update_high_watermark(4)
    assert lg.last_stable_offset == 4 and lg.first_unstable_offset is None
    sl, aborted = lg.read_committed(0, 1 << 20)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborted] == [(1, 0, 3)]


def test_log_start_moves_past_an_open_transaction(new_log):
    lg = new_log({"segment.bytes": 200})
    s = Scenario(lg)
    s.send(1, 1)  # 0
    for _ in range(6):
        s.plain(1)  # 1-6, rolling as it goes
    assert lg.last_stable_offset == 0
    woken = []
    lg.append_listeners.append(lambda log: woken.append(log.last_stable_offset))
    lg.delete_records(4)
    assert lg.log_start_offset == 4
    assert lg.last_stable_offset == 4 and woken == [4]  # the open transaction holds it at the log start
    assert 1 in lg.producer_state.producers  # never forgotten while open
    s.end(1, commit=True)
    assert lg.last_stable_offset == lg.log_end_offset


# ---------------------------------------------------------------------------------------
# the append rules on the log


def test_coordinator_checks_on_markers(new_log):
    lg = new_log()
    s = Scenario(lg)
    s.epoch[1] = 3
    s.send(1, 1)
    s.end(1, commit=True, coordinator_epoch=5)
    before = (segment_files(lg.dir), lg.log_end_offset)
    with pytest.raises(InvalidProducerEpochError):
        lg.append_marker(1, 2, 5, commit=False)
    with pytest.raises(TransactionCoordinatorFencedError):
        lg.append_marker(1, 3, 4, commit=False)
    assert (segment_files(lg.dir), lg.log_end_offset) == before
    info = lg.append_marker(1, 4, 5, commit=False)  # a fence: new epoch, no open transaction
    assert info.first_offset == 2 and txnindex_files(lg.dir) == {}
    with pytest.raises(OutOfOrderSequenceNumberError):
        lg.append(batch(1, 4, 1, transactional=True))  # sequences restart at 0 in the new epoch
    lg.append(batch(1, 4, 0, transactional=True))


def test_client_rules_on_the_log(new_log):
    lg = new_log()
    lg.append(batch(1, 0, 0, transactional=True))
    end = lg.log_end_offset
    with pytest.raises(InvalidTxnStateError):
        lg.append(batch(1, 0, 1))  # non-transactional inside its open transaction
    with pytest.raises(InvalidRecordError):
        lg.append(batch(transactional=True))  # transactional without a producer id
    with pytest.raises(InvalidRecordError):  # clients write no markers
        from kafkacore.record.control import end_txn_marker_batch
        lg.append(end_txn_marker_batch(1, 0, 0, True, TS))
    assert lg.log_end_offset == end
    dup = lg.append(batch(1, 0, 0, transactional=True))  # a retry
    assert dup.duplicate and dup.first_offset == 0 and lg.log_end_offset == end


def test_markers_are_never_recompressed(new_log):
    lg = new_log({"compression.type": "gzip"})
    s = Scenario(lg)
    s.send(1, 3)
    info = s.end(1, commit=False)
    (marker,) = list(iter_batches(lg.read(info.first_offset, 1 << 20).read()))
    assert marker.is_control and marker.compression == "none"
    seen, _n = read_committed_all(lg, 1 << 20)
    assert seen == {}


# ---------------------------------------------------------------------------------------
# aborted lists across segments, and the consumer's view


def _reference_aborted(lg, fetch_offset, sl):
    """Kafka's collection for a read, recomputed from the files with struct: upper is the
    offset of the first .index entry at or after the slice's end in the segment read, else the
    next segment's base, else the log end; then every .txnindex entry from the segment holding
    fetch_offset on with lastOffset >= fetch_offset and firstOffset < upper, stopping after
    the first whose lastStableOffset >= upper."""
    bases = [s.base_offset for s in lg.segments]
    read_base = int(os.path.basename(sl.file.path)[:20])
    with open(os.path.join(lg.dir, f"{read_base:020d}.index"), "rb") as f:
        raw = f.read()
    upper = None
    for i in range(0, len(raw) - 7, 8):
        rel, pos = struct.unpack_from(">ii", raw, i)
        if (rel, pos) == (0, 0) and i > 0:
            break  # preallocated zeros of the active segment's index
        if pos >= sl.position + sl.length:
            upper = read_base + rel
            break
    if upper is None:
        later = [b for b in bases if b > read_base]
        upper = later[0] if later else lg.log_end_offset
    start = max(b for b in bases if b <= fetch_offset)
    out = []
    for base in [b for b in bases if b >= start]:
        path = os.path.join(lg.dir, f"{base:020d}.txnindex")
        if not os.path.exists(path):
            continue
        data = open(path, "rb").read()
        for i in range(0, len(data), 34):
            _v, pid, first, last, lso = struct.unpack_from(">hqqqq", data, i)
            if last >= fetch_offset and first < upper:
                out.append((pid, first, last, lso))
            if lso >= upper:
                return out
    return out


@pytest.mark.parametrize("seed", range(4))
def test_aborted_lists_across_segments(new_log, seed):
    rnd = random.Random(seed)
    lg = new_log({"segment.bytes": 700, "index.interval.bytes": 150})
    s = Scenario(lg)
    pids = [11, 12, 13, 14]
    for _ in range(120):
        r = rnd.random()
        pid = rnd.choice(pids)
        if r < 0.15:
            s.plain(rnd.randint(1, 3))
        elif r < 0.7 or pid not in s.first:
            s.send(pid, rnd.randint(1, 3))
        else:
            s.end(pid, commit=rnd.random() < 0.5)
        open_firsts = s.open_first_offsets
        assert lg.last_stable_offset == (open_firsts[0] if open_firsts else lg.log_end_offset)
    for pid in list(s.first):
        s.end(pid, commit=False)
    assert len(lg.segments) > 5 and len(s.aborted) >= 5
    # every ABORT of a transaction with data has its entry, in the segment holding its marker
    entries = []
    for name, data in txnindex_files(lg.dir).items():
        base = int(name[:20])
        for i in range(0, len(data), 34):
            _v, pid, first, last, _lso = struct.unpack_from(">hqqqq", data, i)
            assert last >= base
            entries.append((pid, first, last))
    assert sorted(entries) == sorted(s.aborted)
    # each read's list is Kafka's, and a consumer sees exactly what was committed
    for fetch_offset in range(0, lg.log_end_offset, 3):
        max_bytes = rnd.choice([1, 200, 600, 5000])
        sl, aborted = lg.read_committed(fetch_offset, max_bytes)
        if len(sl):
            assert [tuple(a) for a in aborted] == _reference_aborted(lg, fetch_offset, sl)
    for max_bytes in (1, 300, 1 << 20):
        seen, fetches = read_committed_all(lg, max_bytes)
        assert seen == s.visible
        assert fetches > 1 or max_bytes == 1 << 20


# ---------------------------------------------------------------------------------------
# followers


def _leader_history(lg, rnd, steps=80):
    s = Scenario(lg)
    for _ in range(steps):
        pid = rnd.choice([1, 2, 3])
        r = rnd.random()
        if r < 0.2:
            s.plain(rnd.randint(1, 4))
        elif r < 0.7 or pid not in s.first:
            s.send(pid, rnd.randint(1, 4))
        else:
            s.end(pid, commit=rnd.random() < 0.4)
    return s


@pytest.mark.parametrize("seed", range(3))
def test_a_follower_fed_the_leaders_batches_has_identical_files(new_log, seed):
    rnd = random.Random(100 + seed)
    overrides = {"segment.bytes": 900, "index.interval.bytes": 200}
    leader = new_log(overrides, name="leader-0")
    follower = new_log(overrides, name="follower-0", replicated=True)
    s = _leader_history(leader, rnd)
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, rnd.choice([1, 500, 3000])).read()
        follower.append_as_follower(data)
        offset = follower.log_end_offset
    assert txnindex_files(leader.dir), "the history should hold aborted transactions"
    assert segment_files(follower.dir) == segment_files(leader.dir)
    # the follower's state can lead: open transactions and the LSO once the HW is the leader's
    assert follower.producer_state.ongoing == leader.producer_state.ongoing
    follower.update_high_watermark(leader.high_watermark)
    assert follower.last_stable_offset == leader.last_stable_offset
    lso = follower.last_stable_offset
    assert read_committed_all(follower, 2000)[0] == {o: v for o, v in s.visible.items() if o < lso}


def test_a_follower_waits_for_the_high_watermark_to_pass_a_marker(new_log):
    leader = new_log(name="leader-0")
    follower = new_log(name="follower-0", replicated=True)
    s = Scenario(leader)
    s.send(1, 2)  # 0-1
    s.plain(1)  # 2
    s.end(1, commit=True)  # 3
    follower.append_as_follower(leader.read(0, 1 << 20).read())
    assert follower.first_unstable_offset == 0
    follower.update_high_watermark(3)  # below the marker
    assert follower.last_stable_offset == 0
    follower.update_high_watermark(4)
    assert follower.last_stable_offset == 4 and follower.first_unstable_offset is None


# ---------------------------------------------------------------------------------------
# truncation and reopening


def test_truncation_removes_txnindex_entries_and_reopens_transactions(new_log):
    lg = new_log({"segment.bytes": 600})
    s = Scenario(lg)
    s.send(1, 2)  # 0-1
    s.send(2, 1)  # 2
    a1 = s.end(1, commit=False).first_offset  # 3: entry (1, 0, 3, 2)
    s.send(3, 1)  # 4
    a2 = s.end(2, commit=False).first_offset  # 5: entry (2, 2, 5, 4)
    a3 = s.end(3, commit=False).first_offset  # 6: entry (3, 4, 6, 7)
    while len(lg.segments) < 3:
        s.plain(3)
    s.send(4, 1)
    a4 = s.end(4, commit=False).first_offset
    first_files = {n: d for n, d in txnindex_files(lg.dir).items() if n.startswith("00000000000000000000")}
    assert first_files == {"00000000000000000000.txnindex": txnindex_bytes(
        [(1, 0, a1, 2), (2, 2, a2, 4), (3, 4, a3, a3 + 1)])}
    assert len(txnindex_files(lg.dir)) == 2  # the last ABORT is in the active segment

    lg.truncate_to(a2)  # cuts 2's and 3's markers and everything after
    assert lg.log_end_offset == a2
    assert txnindex_files(lg.dir) == {"00000000000000000000.txnindex": txnindex_bytes([(1, 0, a1, 2)])}
    assert lg.producer_state.ongoing == {2: 2, 4: 3}  # open again, from the snapshot or the replay
    assert lg.last_stable_offset == 2
    # the index takes new entries after the cut
    lg.append_marker(3, 0, 0, commit=False)
    assert txnindex_files(lg.dir) == {"00000000000000000000.txnindex": txnindex_bytes(
        [(1, 0, a1, 2), (3, 4, a2, 2)])}
    assert a4 > a2


def test_truncate_fully_forgets_transactions(new_log):
    lg = new_log({"segment.bytes": 300})
    s = Scenario(lg)
    for pid in (1, 2):
        s.send(pid, 2)
        s.end(pid, commit=False)
    s.send(3, 1)
    lg.truncate_fully_and_start_at(100)
    assert txnindex_files(lg.dir) == {} and lg.producer_state.ongoing == {}
    assert lg.last_stable_offset == 100 and lg.first_unstable_offset is None


@pytest.mark.parametrize("drop_close_snapshot", [False, True])
def test_reopening_restores_the_lso_and_open_transactions(tmp_path, drop_close_snapshot):
    d = str(tmp_path / "t-0")
    config = LogConfig({"segment.bytes": 500})
    lg = Log(d, config)
    s = Scenario(lg)
    s.send(1, 2)
    s.send(2, 2)
    s.end(1, commit=False)
    for _ in range(4):
        s.plain(2)
    s.send(3, 1)
    s.end(2, commit=True)
    expected = (lg.last_stable_offset, dict(lg.producer_state.ongoing), lg.log_end_offset,
                {pid: (e.epoch, e.current_txn_first_offset, e.coordinator_epoch)
                 for pid, e in lg.producer_state.producers.items()})
    assert expected[1] == {s.first[3]: 3}
    files = txnindex_files(d)
    lg.close()
    if drop_close_snapshot:
        # the batches after the latest roll snapshot are replayed (markers included)
        os.unlink(os.path.join(d, f"{expected[2]:020d}.snapshot"))
    again = Log(d, config)
    try:
        assert (again.last_stable_offset, again.producer_state.ongoing, again.log_end_offset,
                {pid: (e.epoch, e.current_txn_first_offset, e.coordinator_epoch)
                 for pid, e in again.producer_state.producers.items()}) == expected
        assert txnindex_files(d) == files
        with pytest.raises(InvalidTxnStateError):
            again.append(batch(3, 0, 1))  # its transaction is still open
        s.lg = again
        s.end(3, commit=False)
        assert again.last_stable_offset == again.log_end_offset
        assert read_committed_all(again, 700)[0] == s.visible
    finally:
        again.close()


def test_cleaning_keeps_the_txnindex(new_log, tmp_path):
    lg = new_log({"cleanup.policy": "compact", "segment.bytes": 400, "min.cleanable.dirty.ratio": 0.01,
                  "file.delete.delay.ms": 0})
    s = Scenario(lg)
    s.send(1, 2)
    s.end(1, commit=False)
    while len(lg.segments) < 4:
        s.plain(2)
    before = txnindex_files(lg.dir)
    assert before
    cleaner = LogCleaner(str(tmp_path), lambda: {(lg.topic, lg.partition): lg}, background=False)
    try:
        stats = cleaner.clean_log(lg)
    finally:
        cleaner.shutdown()
    assert stats is not None and stats.segments >= 1
    assert txnindex_files(lg.dir) == before
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap"))]
    assert read_committed_all(lg, 1 << 20)[0] == {o: v for o, v in s.visible.items()
                                                   if o in dict(_all_records(lg))}


def _all_records(lg):
    return [(r.offset, r.value) for b in iter_batches(lg.read_batches_bytes()) if not b.is_control for r in b]
