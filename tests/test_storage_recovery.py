"""Crash recovery of the storage engine, with real processes and real files.

- The SIGKILL loop: tests/storage_writer.py appends to a LogManager in a child process and
  acknowledges each append on stdout; it is killed with SIGKILL at a random moment, the data
  directory is reopened here and every acknowledged append must be there, intact.
- Damaged files: flipped bytes, truncation, garbage and zeros at the end of a segment, broken
  or missing index files, leftovers of deletions and of the cleaner's swap.
- Recovery point semantics: what a clean and an unclean start rescan.

Record contents come from storage_writer.record_for(offset), so any record found in a log can
be checked, acknowledged or not."""
import bisect
import hashlib
import os
import pickle
import random
import select
import shutil
import signal
import struct
import subprocess
import sys
import time

import pytest

from kafkacore.storage import Log, LogManager
from kafkacore.storage.checkpoints import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from kafkacore.storage.segment_files import segment_file_name

import storage_writer as W
from _kcutil import NATIVE

WRITER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "storage_writer.py")

MIN_KILLS = 50
MIN_SECONDS = float(os.environ.get("KAFKACORE_CRASH_SECONDS", "15"))  # at least 50 kills; longer runs with the env var
HARD_CAP_SECONDS = max(150.0, MIN_SECONDS + 60)
RETAINED_BYTES = 16 << 20  # the kill loop moves the log start past older data beyond this


# ---------------------------------------------------------------------------------------
# helpers

def abandon(manager_or_log):
    """Drops a LogManager or Log as a crash would: no flush, no trim of the active indexes, no
    checkpoints, no clean-shutdown marker; only this process's file descriptors are closed (the
    data directory's lock too: the kernel drops a dead process's flock)."""
    logs = manager_or_log.logs.values() if isinstance(manager_or_log, LogManager) else [manager_or_log]
    if isinstance(manager_or_log, LogManager):
        manager_or_log._dir_lock.release()
    for lg in logs:
        lg.closed = True
        for seg in lg.segments:
            seg.offset_index.close()
            seg.time_index.close()
            seg.file.close()


def read_all(log, gaps=False):
    """(bytes, [(base, last)]) of the whole log from its start, read through Log.read in
    segment-sized slices, every batch checked by W.check_batches. Offsets must be contiguous
    unless gaps (a compacted log: a read at a missing offset starts at the next batch)."""
    out = bytearray()
    bounds = []
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        sl = log.read(offset, 1 << 30)
        data = sl.read()
        assert sl.length > 0 and len(data) == sl.length, (offset, sl)
        batches = W.check_batches(data)
        if gaps and bounds:
            assert batches[0][0] >= offset, (offset, batches[0])
        else:
            assert batches[0][0] <= offset <= batches[0][1], (offset, batches[0])
        out += data
        bounds += batches
        offset = batches[-1][1] + 1
    assert offset == end
    return bytes(out), bounds


def check_random_reads(log, bounds, rng, count=25):
    """Log.read from random offsets with random max_bytes: the slice starts at the batch
    holding the offset, is whole valid batches, at most max_bytes unless a single batch, and
    respects max_offset."""
    if not bounds:
        return
    start, end = log.log_start_offset, log.log_end_offset
    by_base = dict(bounds)
    bases = [b for b, _ in bounds]
    for _ in range(count):
        offset = rng.randrange(start, end)
        max_bytes = rng.choice([1, 100, 4096, rng.randrange(1, 200_000)])
        max_offset = None if rng.random() < 0.5 else rng.randrange(offset + 1, end + 1)
        sl = log.read(offset, max_bytes, max_offset=max_offset)
        data = sl.read()
        assert len(data) == sl.length
        got = W.check_batches(data)
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0 or by_base[bases[i]] < offset:  # offset in a gap: the next batch holds it
            i += 1
        holding = bases[i]
        if max_offset is not None and by_base[holding] >= max_offset:
            # the batch holding offset reaches max_offset (e.g. the high watermark): Kafka
            # returns nothing rather than records at or past it
            assert got == [], (offset, max_offset, got)
            continue
        assert got, (offset, max_bytes, max_offset)
        assert got[0] == (holding, by_base[holding]), (offset, got[0])
        for b, last in got:
            assert by_base.get(b) == last
        assert len(got) == 1 or len(data) <= max_bytes, (offset, max_bytes, len(data), len(got))
        if max_offset is not None:
            assert got[-1][1] < max_offset, (offset, max_offset, got[-1])
    empty = log.read(end, 1000)
    assert empty.length == 0


def brute_offset_for_timestamp(bounds, start, ts):
    best = None
    for base, last in bounds:
        for o in range(base, last + 1):
            if o < start:
                continue
            t = W.record_for(o)[2]
            if ts == -3:
                if best is None or t > best[1]:
                    best = (o, t)
            elif t >= ts:
                return o, t
    return best


def run_guarded(fn, timeout=5.0):
    """fn() run in a forked copy of this process, so that an engine call that never returns
    fails the test instead of hanging the suite: ("ok", result), ("error", text) or
    ("timeout", None)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: report and leave without running any of pytest's cleanup
        os.close(r)
        try:
            payload = pickle.dumps(("ok", fn()))
        except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
            payload = pickle.dumps(("error", f"{type(e).__name__}: {e}"))
        view = memoryview(payload)
        while view:
            view = view[os.write(w, view):]
        os._exit(0)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                return "timeout", None
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    return pickle.loads(b"".join(chunks))


def check_timestamps(log, bounds, rng, count=8):
    """Log.offset_for_timestamp (ListOffsets) against a brute-force search of the records:
    the first record at or after the log start offset whose timestamp is >= the target; -3 the
    record with the largest timestamp."""
    start = log.log_start_offset
    stamps = [W.record_for(o)[2] for b, l in bounds for o in (b, l) if o >= start]
    if not stamps:
        return
    targets = [-3, min(stamps) - 1, max(stamps) + 1] + [rng.choice(stamps) + rng.choice([-1, 0, 1])
                                                        for _ in range(count)]
    for ts in targets:
        status, got = run_guarded(lambda: log.offset_for_timestamp(ts))
        assert status != "timeout", (f"offset_for_timestamp({ts}) did not return within 5 s "
                                     f"(log start offset {start}, {log!r})")
        assert status == "ok", got
        assert got == brute_offset_for_timestamp(bounds, start, ts), ts


def files_in(d):
    return sorted(os.listdir(d))


# ---------------------------------------------------------------------------------------
# The SIGKILL loop

class KillLoopChecker:
    """State kept across the rounds of the kill loop. Segments already checked are recognised
    by (path, position, length, sha256) of what Log.read returned, so each round decodes only
    what is new or changed and compares the rest byte for byte."""

    def __init__(self, config):
        self.config = config
        self.interval = config.index_interval_bytes
        self.slices = {}
        self.indexes = set()
        self.acks = []
        self.expected_start = 0
        self.end_seen = 0  # the log end offset the test saw last (the next writer starts there)
        self.stats = {"truncated_bytes": 0, "recovered_segments": 0, "rebuilt_indexes": 0,
                      "deleted_segments": 0, "unacked_records_found": 0}

    def add_acks(self, lines, round_no):
        prev = None
        for line in lines:
            first, last, digest = line.split()
            first, last = int(first), int(last)
            assert first <= last
            if prev is None:
                assert first == self.end_seen, (round_no, "first ack", first, "log end was", self.end_seen)
            else:
                assert first == prev + 1, (round_no, "acks not contiguous", prev, first)
            assert digest == W.payload_digest(W.record_for(o)[1] for o in range(first, last + 1)), \
                (round_no, first, last)
            self.acks.append((first, last))
            prev = last

    def check(self, log, rng):
        start = log.log_start_offset
        end = log.log_end_offset
        assert start == self.expected_start, (start, self.expected_start)
        bounds = []
        offset = start
        while offset < end:
            sl = log.read(offset, 1 << 30)
            data = sl.read()
            assert sl.length > 0 and len(data) == sl.length, (offset, sl)
            key = (sl.file.path, sl.position, sl.length, hashlib.sha256(data).digest())
            batches = self.slices.get(key)
            if batches is None:
                batches = W.check_batches(data)  # validate() + every record
                self.slices[key] = batches
            assert batches[0][0] <= offset <= batches[0][1], (offset, batches[0])
            if bounds:
                assert batches[0][0] == bounds[-1][1] + 1, ("gap", bounds[-1], batches[0])
            bounds += batches
            offset = batches[-1][1] + 1
        assert offset == end, (offset, end)
        if bounds:
            assert bounds[0][0] <= start
        # every acknowledged append is there, on batch boundaries
        bases = {b for b, _ in bounds}
        lasts = {last for _, last in bounds}
        last_acked = -1
        for first, last in self.acks:
            last_acked = max(last_acked, last)
            if last < start:
                continue
            assert last < end, ("acknowledged append lost", first, last, "log end", end)
            if first >= start:
                assert first in bases, ("ack does not start a batch", first)
            assert last in lasts, ("ack does not end a batch", last)
        assert log.high_watermark >= last_acked + 1, (log.high_watermark, last_acked)
        assert log.high_watermark == end
        self.stats["unacked_records_found"] += max(0, end - (last_acked + 1))
        # indexes
        segments = log.segments
        for seg in segments:
            active = seg is segments[-1]
            key = (seg.log_path, seg.size, active,
                   hashlib.sha256(seg.read_bytes(0, seg.size)).digest(),
                   hashlib.sha256(W._read_file(seg.offset_index.path)).digest(),
                   hashlib.sha256(W._read_file(seg.time_index.path)).digest())
            if key not in self.indexes:
                W.check_segment_indexes(seg, self.interval, active=active, exact=False)
                self.indexes.add(key)
        check_random_reads(log, bounds, rng, count=10)
        self.end_seen = end
        return bounds


def _wait_first_ack(proc, path, err_path, deadline):
    while True:
        with open(path, "rb") as f:
            if b"\n" in f.read(4096):
                return
        if proc.poll() is not None:
            with open(err_path, "rb") as f:
                err = f.read().decode(errors="replace")
            pytest.fail(f"writer exited with {proc.returncode} before its first ack:\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail("writer sent no ack within 60 s")
        time.sleep(0.002)


def test_sigkill_loop(tmp_path, capsys):
    """The acceptance loop: kill the writer with SIGKILL again and again on the same data
    directory; after each kill every acknowledged append must be there and intact."""
    data_dir = str(tmp_path / "data")
    config = W.make_config()
    seed = int(os.environ.get("KAFKACORE_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    checker = KillLoopChecker(config)
    env = os.environ.copy()
    t0 = time.monotonic()
    kills = 0
    rounds_clean = 0
    while kills < MIN_KILLS or time.monotonic() - t0 < MIN_SECONDS:
        elapsed = time.monotonic() - t0
        if elapsed > HARD_CAP_SECONDS:
            pytest.fail(f"only {kills} kills in {elapsed:.0f} s (seed {seed}); {MIN_KILLS} needed")
        round_no = kills
        ack_path = tmp_path / f"acks-{round_no}.txt"
        err_path = tmp_path / f"err-{round_no}.txt"
        with open(ack_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen([sys.executable, WRITER, data_dir, str(seed * 1000 + round_no)],
                                    stdout=out, stderr=err, env=env, close_fds=True)
        try:
            _wait_first_ack(proc, ack_path, err_path, time.monotonic() + 60)
            time.sleep(rng.uniform(0.010, 0.300))  # pacing: the kill lands at a random point of the writes
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()
        if proc.returncode != -signal.SIGKILL:
            pytest.fail(f"round {round_no}: writer exited with {proc.returncode}:\n"
                        f"{err_path.read_text(errors='replace')}")
        kills += 1
        mode_line = f"storage_writer: native={NATIVE}\n"
        assert err_path.read_text().startswith(mode_line), err_path.read_text()[:2000]
        raw = ack_path.read_bytes()
        lines = raw.split(b"\n")[:-1]  # a line cut by the kill was not acknowledged
        assert lines, f"round {round_no}: no complete ack"
        checker.add_acks([ln.decode() for ln in lines], round_no)
        os.unlink(ack_path)
        os.unlink(err_path)

        # reopen as the broker would after the crash
        manager = LogManager(data_dir, config, background=False, cleaner_enable=False)
        try:
            assert manager.had_clean_shutdown is False, round_no
            log = manager.get_log(W.TOPIC, W.PARTITION)
            assert log is not None
            lr = log.load_result
            assert lr.recovered_segments >= 1, (round_no, vars(lr))
            assert lr.completed_swaps == 0
            for k in ("truncated_bytes", "recovered_segments", "rebuilt_indexes", "deleted_segments"):
                checker.stats[k] += getattr(lr, k)
            assert log.recovery_point == log.log_end_offset
            try:
                checker.check(log, rng)
            except AssertionError as e:
                raise AssertionError(f"round {round_no} (seed {seed}): {e}") from e
            # keep the data bounded: DeleteRecords past older data; the new log start offset
            # must survive the next crash through the log-start-offset checkpoint
            if log.size_in_bytes > RETAINED_BYTES:
                keep, i = 0, len(log.segments)
                while keep < RETAINED_BYTES // 2:
                    i -= 1
                    keep += log.segments[i].size
                seg = log.segments[i]
                target = rng.randrange(seg.base_offset, seg.next_offset)
                assert log.delete_records(target) == target
                assert log.log_start_offset == target
                assert log.segments[0].base_offset == seg.base_offset
                checker.expected_start = target
        except BaseException:
            abandon(manager)
            raise
        if round_no % 2 == 0:
            manager.shutdown()
            assert os.path.exists(os.path.join(data_dir, CLEAN_SHUTDOWN_FILE))
            rounds_clean += 1
        else:
            manager.checkpoint()
            abandon(manager)
    elapsed = time.monotonic() - t0
    # a final full check of everything retained, decoding every batch again
    manager = LogManager(data_dir, config, background=False, cleaner_enable=False)
    log = manager.get_log(W.TOPIC, W.PARTITION)
    assert log.log_start_offset == checker.expected_start
    read_all(log)
    for seg in log.segments:
        W.check_segment_indexes(seg, config.index_interval_bytes, active=seg is log.segments[-1], exact=False)
    manager.shutdown()
    with capsys.disabled():
        print(f"\n[sigkill loop] {'native' if NATIVE else 'twin'}: {kills} kills in {elapsed:.1f} s "
              f"(seed {seed}), {len(checker.acks)} acks, log end {checker.end_seen}, "
              f"{rounds_clean} clean / {kills - rounds_clean} unclean closes between rounds, {checker.stats}")
    assert kills >= MIN_KILLS


# ---------------------------------------------------------------------------------------
# A pristine multi-segment log to damage

DAMAGE_CONFIG = {"segment.bytes": 16384}
TOPIC_DIR = "dmg-0"


class Pristine:
    def __init__(self, root):
        self.dir = os.path.join(root, TOPIC_DIR)
        self.config = W.make_config(**DAMAGE_CONFIG)
        log = Log(self.dir, self.config)
        rng = random.Random(1234)
        while len(log.segments) < 7 or log.active_segment.size < 8000:
            o = log.log_end_offset  # small batches: many of them in every segment
            log.append(W.build_batch(o, rng.randint(1, 8), rng.choice(W.CODECS)))
        log.close()
        self.end = log.log_end_offset
        self.bases = [s.base_offset for s in log.segments]
        self.ends = [s.next_offset for s in log.segments]
        self.logs = []  # bytes of each segment
        self.batches = []  # per segment: [(position, base, last, max_ts, size)]
        for b in self.bases:
            data = W._read_file(os.path.join(self.dir, segment_file_name(b) + ".log"))
            self.logs.append(data)
            self.batches.append(W.batch_headers(data))
        self.files = {n: W._read_file(os.path.join(self.dir, n)) for n in os.listdir(self.dir)}

    def copy(self, dest):
        target = os.path.join(dest, TOPIC_DIR)
        shutil.copytree(self.dir, target)
        return target

    def path(self, d, k, suffix=".log"):
        return os.path.join(d, segment_file_name(self.bases[k]) + suffix)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    p = Pristine(str(tmp_path_factory.mktemp("pristine")))
    assert len(p.bases) >= 7
    assert all(len(b) >= 4 for b in p.batches[:-1])
    assert len(p.batches[-1]) >= 3
    return p


def check_whole_log(log, config, rng, *, exact_indexes=True):
    data, bounds = read_all(log)
    segments = log.segments
    for seg in segments:
        W.check_segment_indexes(seg, config.index_interval_bytes, active=seg is segments[-1], exact=exact_indexes)
    check_random_reads(log, bounds, rng)
    check_timestamps(log, bounds, rng)
    assert log.high_watermark == log.log_end_offset
    return data, bounds


def check_still_appendable(log, d, config, rng):
    """The repaired log takes appends at its end, and a clean close and reopen rescans nothing."""
    end = log.log_end_offset
    buf, n = W.build_append(rng, end)
    info = log.append(buf)
    assert (info.first_offset, info.last_offset) == (end, end + n - 1)
    data, bounds = read_all(log)
    log.close()
    again = Log(d, config, recovery_point=log.log_end_offset, clean_shutdown=True)
    assert again.load_result.recovered_segments == 0
    assert again.load_result.rebuilt_indexes == 0
    assert again.log_end_offset == end + n
    assert read_all(again)[0] == data
    again.close()


def _flip(path, pos, mask=0xFF):
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ mask]))


# Each damage returns (segment index k, position in segment k where the log must end).
def _dmg_flip(seg, batch, field):
    def damage(p, d, rng):
        k = seg if seg >= 0 else len(p.bases) + seg
        n = {"middle": len(p.batches[k]) // 2, "last": len(p.batches[k]) - 1}.get(batch, batch)
        pos, _base, _last, _ts, size = p.batches[k][n]
        if field == "body":  # anywhere the CRC covers: attributes to the end of the batch
            at = pos + rng.randrange(21, size)
        else:
            at = pos + {"length": 11, "magic": 16, "crc": 18, "attributes": 22, "last_delta": 26,
                        "max_ts": 40, "count": 60}[field]
        _flip(p.path(d, k), at, 0xFF if field != "body" else rng.randrange(1, 256))
        return k, pos
    return damage


def _dmg_offsets_backwards(p, d, rng):
    """The base offset is not covered by the CRC (Kafka's format); a batch whose offsets go
    backwards is still invalid."""
    k = 2
    n = len(p.batches[k]) // 2
    pos = p.batches[k][n][0]
    prev_base = p.batches[k][n - 1][1]
    with open(p.path(d, k), "r+b") as f:
        f.seek(pos)
        f.write(struct.pack(">q", prev_base))
    return k, pos


def _dmg_truncate(seg, into):
    def damage(p, d, rng):
        k = seg if seg >= 0 else len(p.bases) + seg
        n = len(p.batches[k]) // 2
        pos, _b, _l, _t, size = p.batches[k][n]
        cut = pos + (into if into > 0 else size // 2)
        os.truncate(p.path(d, k), cut)
        return k, pos
    return damage


def _dmg_append(kind):
    def damage(p, d, rng):
        k = len(p.bases) - 1
        with open(p.path(d, k), "ab") as f:
            if kind == "garbage":
                f.write(random.Random(99).randbytes(777))
            elif kind == "zeros":
                f.write(bytes(4096))
            elif kind == "half-batch":  # the start of a valid batch: a write cut short
                f.write(W.build_batch(p.end, 20, "none")[:150])
        return k, len(p.logs[k])
    return damage


def _dmg_zero_tail(p, d, rng):
    k = len(p.bases) - 1
    n = len(p.batches[k]) // 2
    pos, _b, _l, _t, size = p.batches[k][n]
    start = pos + size // 3
    with open(p.path(d, k), "r+b") as f:
        f.seek(start)
        f.write(bytes(len(p.logs[k]) - start))
    return k, pos


DAMAGES = {
    "flip-body-last-segment": _dmg_flip(-1, "middle", "body"),
    "flip-body-middle-segment": _dmg_flip(3, "middle", "body"),
    "flip-crc-middle-segment": _dmg_flip(2, 1, "crc"),
    "flip-magic-last-segment": _dmg_flip(-1, 1, "magic"),
    "flip-length-middle-segment": _dmg_flip(4, "middle", "length"),
    "flip-attributes-last-segment": _dmg_flip(-1, 0, "attributes"),
    "flip-last-delta-middle-segment": _dmg_flip(1, "middle", "last_delta"),
    "flip-max-timestamp-last-segment": _dmg_flip(-1, "middle", "max_ts"),
    "flip-count-middle-segment": _dmg_flip(3, 2, "count"),
    "flip-first-batch-of-log": _dmg_flip(0, 0, "body"),
    "flip-first-batch-of-middle-segment": _dmg_flip(3, 0, "body"),
    "flip-last-batch-of-middle-segment": _dmg_flip(2, "last", "body"),
    "offsets-go-backwards": _dmg_offsets_backwards,
    "truncate-last-segment-mid-batch": _dmg_truncate(-1, 0),
    "truncate-last-segment-mid-header": _dmg_truncate(-1, 5),
    "truncate-middle-segment-mid-batch": _dmg_truncate(2, 0),
    "garbage-appended": _dmg_append("garbage"),
    "zeros-appended": _dmg_append("zeros"),
    "half-batch-appended": _dmg_append("half-batch"),
    "zero-tail": _dmg_zero_tail,
}


@pytest.mark.parametrize("name", list(DAMAGES))
def test_damaged_log_is_cut_before_the_damage(pristine, tmp_path, name):
    p = pristine
    rng = random.Random(name)
    d = p.copy(str(tmp_path))
    k, cut_pos = DAMAGES[name](p, d, rng)
    damaged_size = os.path.getsize(p.path(d, k))
    n_segments = len(p.bases)

    log = Log(d, p.config, recovery_point=0, clean_shutdown=False)
    lr = log.load_result
    # the log ends exactly before the damaged batch
    kept_batches = [b for b in p.batches[k] if b[0] < cut_pos]
    expected_end = kept_batches[-1][2] + 1 if kept_batches else p.bases[k]
    assert log.log_end_offset == expected_end, (name, log.log_end_offset, expected_end)
    assert [s.base_offset for s in log.segments] == p.bases[:k + 1]
    assert log.segments[-1].size == cut_pos
    assert lr.truncated_bytes == damaged_size - cut_pos
    assert lr.deleted_segments == n_segments - k - 1
    assert lr.recovered_segments == k + 1
    assert lr.completed_swaps == 0
    assert log.recovery_point == expected_end and log.high_watermark == expected_end
    # every valid batch before the damage is kept byte for byte, on disk and through reads
    for j in range(k):
        assert W._read_file(p.path(d, j)) == p.logs[j]
    assert W._read_file(p.path(d, k)) == p.logs[k][:cut_pos]
    data, bounds = check_whole_log(log, p.config, rng)
    assert data == b"".join(p.logs[:k]) + p.logs[k][:cut_pos]
    # segments after a damaged one are gone, with their indexes
    names = files_in(d)
    for j in range(k + 1, n_segments):
        stem = segment_file_name(p.bases[j])
        assert not [n for n in names if n.startswith(stem)], (name, names)
    check_still_appendable(log, d, p.config, rng)


def test_undamaged_log_loses_nothing_in_a_full_recovery(pristine, tmp_path):
    """Control for the cases above: the same pristine log, undamaged, reopened unclean from 0:
    every segment is recovered and nothing is cut."""
    p = pristine
    d = p.copy(str(tmp_path))
    log = Log(d, p.config, recovery_point=0, clean_shutdown=False)
    lr = log.load_result
    assert (lr.recovered_segments, lr.truncated_bytes, lr.deleted_segments) == (len(p.bases), 0, 0)
    data, _ = check_whole_log(log, p.config, random.Random(5))
    assert data == b"".join(p.logs)
    log.close()
    # the rebuilt indexes are byte for byte the ones the appends wrote
    for name, content in p.files.items():
        assert W._read_file(os.path.join(d, name)) == content, name
    assert files_in(d) == sorted(p.files)


# ---------------------------------------------------------------------------------------
# Damaged index files with a clean shutdown

def _idx_garbage(seg, suffix):
    def damage(p, d):
        k = seg if seg >= 0 else len(p.bases) + seg
        path = p.path(d, k, suffix)
        size = os.path.getsize(path)
        assert size > 0
        with open(path, "wb") as f:
            f.write(random.Random(seg).randbytes(size))
        return k
    return damage


def _idx_extra_bytes(seg, suffix):
    def damage(p, d):
        k = seg if seg >= 0 else len(p.bases) + seg
        with open(p.path(d, k, suffix), "ab") as f:
            f.write(b"\x00\x01\x02")
        return k
    return damage


def _idx_short(seg, suffix):
    def damage(p, d):
        k = seg if seg >= 0 else len(p.bases) + seg
        path = p.path(d, k, suffix)
        os.truncate(path, os.path.getsize(path) - 5)
        return k
    return damage


def _idx_missing(seg, suffix):
    def damage(p, d):
        k = seg if seg >= 0 else len(p.bases) + seg
        os.unlink(p.path(d, k, suffix))
        return k
    return damage


def _idx_positions_past_log(seg):
    """Entries that are well-formed and ascending but point past the end of the log."""
    def damage(p, d):
        k = seg if seg >= 0 else len(p.bases) + seg
        path = p.path(d, k, ".index")
        n = os.path.getsize(path) // 8
        with open(path, "wb") as f:
            for i in range(n):
                f.write(struct.pack(">ii", i + 1, len(p.logs[k]) + 100 * (i + 1)))
        return k
    return damage


INDEX_DAMAGES = {
    "offset-index-garbage-middle": _idx_garbage(2, ".index"),
    "offset-index-garbage-last": _idx_garbage(-1, ".index"),
    "offset-index-wrong-size-middle": _idx_extra_bytes(3, ".index"),
    "offset-index-cut-mid-entry-last": _idx_short(-1, ".index"),
    "offset-index-missing-middle": _idx_missing(1, ".index"),
    "offset-index-missing-last": _idx_missing(-1, ".index"),
    "offset-index-past-log-end": _idx_positions_past_log(4),
    "time-index-garbage-middle": _idx_garbage(2, ".timeindex"),
    "time-index-wrong-size-last": _idx_extra_bytes(-1, ".timeindex"),
}


@pytest.mark.parametrize("name", list(INDEX_DAMAGES))
def test_damaged_index_is_rebuilt_after_clean_shutdown(pristine, tmp_path, name):
    p = pristine
    rng = random.Random(name)
    d = p.copy(str(tmp_path))
    INDEX_DAMAGES[name](p, d)
    log = Log(d, p.config, recovery_point=p.end, clean_shutdown=True)
    lr = log.load_result
    assert lr.truncated_bytes == 0 and lr.deleted_segments == 0
    assert lr.recovered_segments + lr.rebuilt_indexes >= 1, (name, vars(lr))
    assert log.log_end_offset == p.end
    # rebuilt indexes follow the index rule: byte-for-byte what appends wrote
    data, _bounds = check_whole_log(log, p.config, rng)
    assert data == b"".join(p.logs)
    for k in range(len(p.bases)):
        assert W._read_file(p.path(d, k)) == p.logs[k]
    check_still_appendable(log, d, p.config, rng)


def test_missing_time_index_after_clean_shutdown_reads_and_times_work(pristine, tmp_path):
    """A missing .timeindex (Kafka recreates it empty): reads and ListOffsets by time still
    give the right answers."""
    p = pristine
    rng = random.Random(3)
    d = p.copy(str(tmp_path))
    os.unlink(p.path(d, 2, ".timeindex"))
    log = Log(d, p.config, recovery_point=p.end, clean_shutdown=True)
    assert log.log_end_offset == p.end
    data, bounds = read_all(log)
    assert data == b"".join(p.logs)
    check_random_reads(log, bounds, rng)
    check_timestamps(log, bounds, rng, count=30)
    seg = log.segments[2]
    assert seg.max_timestamp_so_far == max(b[3] for b in p.batches[2])
    log.close()


# ---------------------------------------------------------------------------------------
# Leftovers and the cleaner's swap

def test_leftover_files_are_removed_on_open(pristine, tmp_path):
    p = pristine
    d = p.copy(str(tmp_path))
    junk = []

    def put(name, content):
        with open(os.path.join(d, name), "wb") as f:
            f.write(content)
        junk.append(name)

    s0, s3 = segment_file_name(p.bases[0]), segment_file_name(p.bases[3])
    put(s0 + ".log.deleted", p.logs[0][:1000])
    put(s0 + ".index.deleted", b"\x00" * 64)
    put(s0 + ".timeindex.deleted", b"\x00" * 96)
    put(s3 + ".log.cleaned", p.logs[3][:500])
    put(s3 + ".index.cleaned", b"")
    put(s3 + ".timeindex.cleaned", b"")
    put("partition.metadata.tmp", b"version: 0\n")
    put(segment_file_name(p.end + 1000) + ".index", b"\x00" * 80)  # index without a log
    put(segment_file_name(p.end + 1000) + ".timeindex", b"\x00" * 120)
    for clean in (True, False):
        log = Log(d, p.config, recovery_point=0, clean_shutdown=clean)
        names = files_in(d)
        for name in junk:
            assert name not in names, (clean, name)
        assert log.log_end_offset == p.end
        assert [s.base_offset for s in log.segments] == p.bases
        data, _ = check_whole_log(log, p.config, random.Random(1))
        assert data == b"".join(p.logs)
        log.close()


def _fresh_segment(p, tmp, base, end):
    """Files of a segment with base offset base holding the records base..end-1 (fewer than
    the live segments it replaces), written by a fresh log: what the cleaner would produce."""
    d = os.path.join(tmp, "fresh", TOPIC_DIR)
    config = W.make_config(**{"segment.bytes": 1 << 20, "segment.index.bytes": 1 << 16})
    log = Log(d, config, log_start_offset=base)
    assert log.active_segment.base_offset == base
    rng = random.Random(base)
    while log.log_end_offset < end:
        o = log.log_end_offset
        log.append(W.build_batch(o, min(end - o, rng.randint(1, 25)), rng.choice(W.CODECS)))
    assert log.log_end_offset == end and len(log.segments) == 1
    log.close()
    stem = os.path.join(d, segment_file_name(base))
    return {sfx: W._read_file(stem + sfx) for sfx in (".log", ".index", ".timeindex")}


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("shape", ["one-segment", "merged-two", "log-swap-only", "index-swaps-left"])
def test_swap_is_completed_on_open(pristine, tmp_path, shape, clean):
    """A crash inside the cleaner's rename sequence (.cleaned -> .swap, old -> .deleted,
    .swap -> live) is finished on open: the swap replaces the live segment(s) it covers."""
    p = pristine
    rng = random.Random(shape)
    d = p.copy(str(tmp_path))
    k = 2
    base = p.bases[k]
    if shape == "merged-two":
        end = p.bases[k + 2] - 7  # covers segment k and most of k+1
        replaced = [k, k + 1]
    else:
        end = p.bases[k + 1] - 5  # segment k without its last records
        replaced = [k]
    fresh = _fresh_segment(p, str(tmp_path), base, end)
    stem = os.path.join(d, segment_file_name(base))
    if shape in ("one-segment", "merged-two"):
        # crashed after .cleaned -> .swap, before the old segment went to .deleted
        for sfx, content in fresh.items():
            with open(stem + sfx + ".swap", "wb") as f:
                f.write(content)
    elif shape == "log-swap-only":
        # crashed while renaming .cleaned -> .swap: the log is .swap, the indexes still .cleaned
        with open(stem + ".log.swap", "wb") as f:
            f.write(fresh[".log"])
        for sfx in (".index", ".timeindex"):
            with open(stem + sfx + ".cleaned", "wb") as f:
                f.write(fresh[sfx])
    else:
        # crashed while renaming .swap -> live: the old segment is .deleted, the log is live,
        # its indexes still .swap
        for sfx in (".log", ".index", ".timeindex"):
            os.rename(stem + sfx, stem + sfx + ".deleted")
        with open(stem + ".log", "wb") as f:
            f.write(fresh[".log"])
        for sfx in (".index", ".timeindex"):
            with open(stem + sfx + ".swap", "wb") as f:
                f.write(fresh[sfx])

    log = Log(d, p.config, recovery_point=0 if not clean else p.end, clean_shutdown=clean)
    lr = log.load_result
    names = files_in(d)
    assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted"))], names
    if shape != "index-swaps-left":
        assert lr.completed_swaps == 1
    assert lr.truncated_bytes == 0 and lr.deleted_segments == 0
    expected_bases = [b for j, b in enumerate(p.bases) if j not in replaced[1:]]
    assert [s.base_offset for s in log.segments] == expected_bases
    seg = log.segments[k]
    assert seg.base_offset == base and seg.next_offset == end
    assert W._read_file(seg.log_path) == fresh[".log"]
    assert log.log_end_offset == p.end
    # the whole log: batches before, the swap's, batches after (a gap where records went)
    data, bounds = read_all(log, gaps=True)
    after = replaced[-1] + 1
    assert data == b"".join(p.logs[:k]) + fresh[".log"] + b"".join(p.logs[after:])
    gap_from, gap_to = end, p.bases[after]
    assert all(not (gap_from <= b <= gap_to - 1) for b, _ in bounds)
    sl = log.read(gap_from, 1 << 20)  # an offset in the gap reads from the next batch on
    assert W.check_batches(sl.read())[0][0] == gap_to
    for s in log.segments:
        W.check_segment_indexes(s, p.config.index_interval_bytes, active=s is log.segments[-1], exact=True)
    check_random_reads(log, bounds, rng)
    log.close()
    again = Log(d, p.config, recovery_point=p.end, clean_shutdown=True)
    assert again.load_result.completed_swaps == 0 and again.load_result.recovered_segments == 0
    assert read_all(again, gaps=True)[0] == data
    again.close()


# ---------------------------------------------------------------------------------------
# Recovery point semantics

def _flip_early_batch(p, d, k):
    """Flips a byte in an early batch of segment k, before its last offset index entry: a
    segment that is loaded without recovery never reads it."""
    idx = W._read_file(p.path(d, k, ".index"))
    assert len(idx) >= 16
    last_entry_pos = struct.unpack_from(">i", idx, len(idx) - 4)[0]
    pos, _b, _l, _t, size = p.batches[k][0]
    assert pos + size <= last_entry_pos
    _flip(p.path(d, k), pos + size // 2)


def test_clean_shutdown_rescans_nothing(pristine, tmp_path):
    p = pristine
    d = p.copy(str(tmp_path))
    _flip_early_batch(p, d, 1)  # would be cut by any recovery of segment 1
    log = Log(d, p.config, recovery_point=p.end, clean_shutdown=True)
    lr = log.load_result
    assert (lr.recovered_segments, lr.rebuilt_indexes, lr.truncated_bytes, lr.deleted_segments) == (0, 0, 0, 0)
    assert log.log_end_offset == p.end and log.recovery_point == p.end
    assert [s.base_offset for s in log.segments] == p.bases
    log.close()


@pytest.mark.parametrize("where", ["zero", "segment-base", "inside-segment", "last-segment", "log-end"])
def test_unclean_recovers_from_the_segment_holding_the_recovery_point(pristine, tmp_path, where):
    p = pristine
    d = p.copy(str(tmp_path))
    n = len(p.bases)
    k = {"zero": 0, "segment-base": 3, "inside-segment": 4, "last-segment": n - 1, "log-end": n - 1}[where]
    rp = {"zero": 0, "segment-base": p.bases[3], "inside-segment": p.bases[4] + 5,
          "last-segment": p.bases[n - 1] + 1, "log-end": p.end}[where]
    if k > 0:
        _flip_early_batch(p, d, k - 1)  # below the recovery point: not rescanned, so not cut
    log = Log(d, p.config, recovery_point=rp, clean_shutdown=False)
    lr = log.load_result
    assert lr.recovered_segments == n - k, (where, vars(lr))
    assert lr.rebuilt_indexes == 0 and lr.truncated_bytes == 0 and lr.deleted_segments == 0
    assert log.log_end_offset == p.end
    assert log.recovery_point == p.end
    for s in log.segments[k:]:
        W.check_segment_indexes(s, p.config.index_interval_bytes, active=s is log.segments[-1], exact=True)
    log.close()


def test_manager_recovers_from_its_checkpointed_recovery_point(tmp_path):
    """Through LogManager: the recovery point checkpoint written while running decides where
    recovery starts after a crash; with the clean-shutdown marker nothing is rescanned."""
    data_dir = str(tmp_path / "data")
    config = W.make_config(**DAMAGE_CONFIG)
    rng = random.Random(11)
    manager = LogManager(data_dir, config, background=False, cleaner_enable=False)
    log = manager.create_log("rp", 0)
    while len(log.segments) < 4:
        log.append(W.build_append(rng, log.log_end_offset)[0])
    # the rolled segments were flushed (inline scheduler): the recovery point is the active base
    assert log.recovery_point == log.active_segment.base_offset
    manager.checkpoint()
    checkpointed = OffsetCheckpointFile(os.path.join(data_dir, RECOVERY_POINT_CHECKPOINT)).read()[("rp", 0)]
    assert checkpointed == log.recovery_point
    while len(log.segments) < 7:
        log.append(W.build_append(rng, log.log_end_offset)[0])
    end = log.log_end_offset
    bases = [s.base_offset for s in log.segments]
    abandon(manager)  # crash: no shutdown, the checkpoint on disk is the old one

    manager = LogManager(data_dir, config, background=False, cleaner_enable=False)
    assert manager.had_clean_shutdown is False
    log = manager.get_log("rp", 0)
    lr = log.load_result
    holding = max(i for i, b in enumerate(bases) if b <= checkpointed)
    assert lr.recovered_segments == len(bases) - holding, (vars(lr), bases, checkpointed)
    assert log.log_end_offset == end
    data, _ = check_whole_log(log, config, rng, exact_indexes=False)
    manager.shutdown()

    manager = LogManager(data_dir, config, background=False, cleaner_enable=False)
    assert manager.had_clean_shutdown is True
    log = manager.get_log("rp", 0)
    assert log.load_result.recovered_segments == 0 and log.load_result.rebuilt_indexes == 0
    assert log.log_end_offset == end
    assert read_all(log)[0] == data
    manager.shutdown()


@pytest.mark.parametrize("where", ["batch-boundary", "inside-batch", "second-batch"])
def test_offset_for_timestamp_respects_a_log_start_inside_a_segment(pristine, tmp_path, where):
    """After DeleteRecords moves the log start offset into a segment (and a crash and reopen
    with the checkpointed log start offset), ListOffsets by timestamp answers from the records
    at or after the log start: Kafka's fetchOffsetByTimestamp skips records below it."""
    p = pristine
    d = p.copy(str(tmp_path))
    k = 2
    batches = p.batches[k]
    n = len(batches) // 2
    start = {"batch-boundary": batches[n][1], "inside-batch": batches[n][1] + 1,
             "second-batch": batches[1][1]}[where]
    if where == "inside-batch":
        n = next(i for i, b in enumerate(batches) if b[2] > b[1])  # a batch of 2+ records
        start = batches[n][1] + 1
    log = Log(d, p.config, recovery_point=p.end, clean_shutdown=True)
    assert log.delete_records(start) == start
    log.close()
    log = Log(d, p.config, recovery_point=p.end, log_start_offset=start, clean_shutdown=False)
    assert log.log_start_offset == start
    assert [s.base_offset for s in log.segments] == p.bases[k:]
    _data, bounds = read_all(log)
    check_timestamps(log, bounds, random.Random(where), count=4)
    log.close()


# ---------------------------------------------------------------------------------------
# Transactions: .txnindex files, the LSO and open transactions after a restart
# (docs/transactions.md 4.6, 4.7)

TXN_CONFIG = {"segment.bytes": 700, "index.interval.bytes": 100}
TXN_TS = 1_700_000_000_000
_ABORT, _COMMIT = 0, 1


def txn_batch(pid=-1, seq=-1, n=1, transactional=False):
    from kafkacore.record import RecordBatchBuilder
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                           transactional=transactional)
    for i in range(n):
        b.append(b"v%d/%d" % (pid, seq + i), key=b"k%d" % (i % 3), timestamp_ms=TXN_TS + i)
    return b.build()


class TxnModel:
    """What the log must say, computed from the batches of a log (offsets, producer ids,
    transactional and control bits, marker types), with Kafka's rules written independently
    of the engine: a transactional data batch opens its producer's transaction unless one is
    open; an ABORT of an open transaction is an AbortedTxn whose lastStableOffset is the first
    offset of the earliest other open transaction, else the marker's offset + 1; the LSO is the
    first offset of the earliest open transaction, else the log end; read_committed sees every
    non-transactional and committed record."""

    def __init__(self, batches, end):
        self.open = {}  # pid -> first offset
        self.entries = []  # (pid, first, last, lso)
        self.visible = set()
        pending = {}
        for base, last, pid, transactional, control, marker in batches:
            if control:
                first = self.open.pop(pid, None)
                recs = pending.pop(pid, [])
                if first is None:
                    continue
                if marker == _ABORT:
                    others = [f for p, f in self.open.items()]
                    self.entries.append((pid, first, base, min(others) if others else base + 1))
                else:
                    self.visible.update(recs)
            elif transactional:
                self.open.setdefault(pid, base)
                pending.setdefault(pid, []).extend(range(base, last + 1))
            else:
                self.visible.update(range(base, last + 1))
        self.lso = min(self.open.values()) if self.open else end

    def txnindex_files(self, bases):
        out = {}
        for e in self.entries:
            seg = bases[bisect.bisect_right(bases, e[2]) - 1]
            out.setdefault(f"{seg:020d}.txnindex", bytearray()).extend(struct.pack(">hqqqq", 0, *e))
        return {k: bytes(v) for k, v in out.items()}


def log_batches(lg):
    """(base, last, pid, transactional, control, marker type) of every batch of lg."""
    from kafkacore.record import iter_batches
    out = []
    for b in iter_batches(lg.read_batches_bytes()):
        marker = None
        if b.is_control:
            (rec,) = list(b)
            marker = struct.unpack(">hh", rec.key)[1]
        out.append((b.base_offset, b.last_offset, b.producer_id, b.is_transactional, b.is_control, marker))
    return out


def nonempty_txnindex_files(d):
    out = {}
    for n in sorted(os.listdir(d)):
        if n.endswith(".txnindex"):
            data = W._read_file(os.path.join(d, n))
            if data:
                out[n] = data
    return out


def read_committed_offsets(lg, max_bytes=900):
    """The offsets a read_committed consumer gets reading lg from its start (Kafka's
    CompletedFetch rule applied to each read_committed answer)."""
    from kafkacore.record import iter_batches
    out = set()
    offset = lg.log_start_offset
    while True:
        sl, aborted = lg.read_committed(offset, max_bytes)
        if len(sl) == 0:
            return out
        pending = sorted(aborted, key=lambda a: a.first_offset)
        active = set()
        for b in iter_batches(sl.read()):
            if b.producer_id >= 0:
                while pending and pending[0].first_offset <= b.last_offset:
                    active.add(pending.pop(0).producer_id)
                if b.is_control:
                    if b.count and struct.unpack(">hh", list(b)[0].key)[1] == _ABORT:
                        active.discard(b.producer_id)
                    offset = b.next_offset
                    continue
                if b.is_transactional and b.producer_id in active:
                    offset = b.next_offset
                    continue
            out.update(r.offset for r in b)
            offset = b.next_offset


def check_txn_state(lg, where=""):
    """The log's .txnindex files, open transactions, LSO and read_committed view against
    TxnModel of its batches."""
    end = lg.log_end_offset
    model = TxnModel(log_batches(lg), end)
    bases = [s.base_offset for s in lg.segments]
    assert nonempty_txnindex_files(lg.dir) == model.txnindex_files(bases), where
    assert lg.producer_state.ongoing == {f: p for p, f in model.open.items()}, where
    assert lg.last_stable_offset == model.lso, (where, lg.last_stable_offset, model.lso)
    assert [tuple(e) for e in lg.collect_aborted_transactions(lg.log_start_offset, end)] == model.entries, where
    assert read_committed_offsets(lg) == {o for o in model.visible if o < model.lso}, where
    return model


def txn_history(lg, rng, steps):
    """Random appends of 3 transactional producers and a plain one: data, COMMIT and ABORT
    markers (some for producers without an open transaction), interleaved."""
    seq = {}
    state = lg.producer_state
    for pid in (1, 2, 3):
        e = state.producers.get(pid)
        seq[pid] = e.last_seq + 1 if e is not None and e.batches else 0
    for _ in range(steps):
        pid = rng.choice((1, 2, 3))
        r = rng.random()
        e = state.producers.get(pid)
        is_open = e is not None and e.current_txn_first_offset >= 0
        if r < 0.2:
            lg.append(txn_batch(n=rng.randint(1, 3)))
        elif r < 0.65 or (not is_open and r < 0.9):
            n = rng.randint(1, 3)
            lg.append(txn_batch(pid, seq[pid], n, transactional=True))
            seq[pid] += n
        else:
            lg.append_marker(pid, 0, 0, commit=rng.random() < 0.4)


def _txn_log(d, seed, steps=120):
    from kafkacore.storage import LogConfig
    config = LogConfig(TXN_CONFIG)
    lg = Log(d, config)
    txn_history(lg, random.Random(seed), steps)
    for pid in (1, 2):  # two transactions left open, interleaved with plain data
        e = lg.producer_state.producers[pid]
        if e.current_txn_first_offset < 0:
            lg.append(txn_batch(pid, e.last_seq + 1, 2, transactional=True))
        lg.append(txn_batch(n=2))
    return lg, config


def _cut_txnindex(d, rng):
    names = sorted(n for n in os.listdir(d) if n.endswith(".txnindex"))
    assert names
    for n in names:
        p = os.path.join(d, n)
        size = os.path.getsize(p)
        with open(p, "r+b") as f:
            f.truncate(rng.randrange(0, size))


@pytest.mark.parametrize("damage", ["deleted", "cut", "corrupt-version", "corrupt-offset", "log-cut",
                                    "no-snapshots"])
def test_txnindex_rebuilt_byte_identical_after_a_crash(tmp_path, damage):
    """The .txnindex files a recovery writes are byte for byte the ones the appends wrote (and
    those of TxnModel, an independent reference), and the open transactions, the LSO and
    read_committed reads are right after the restart: .txnindex files deleted or cut by a
    crash (unclean start), one failing its sanity check after a clean shutdown (wrong version,
    an entry below the segment's base: only the checked file is damaged, the loader must find
    it), the log cut inside a batch, or no producer snapshot at all."""
    d = str(tmp_path / "t-0")
    rng = random.Random(damage)
    lg, config = _txn_log(d, seed=7)
    assert len(lg.segments) >= 6
    written_model = check_txn_state(lg, "as written")
    written = nonempty_txnindex_files(d)
    assert len(written) >= 3 and written_model.open, "the history should abort several and leave one open"
    end = lg.log_end_offset
    clean = damage.startswith("corrupt")
    if clean:
        lg.close()
    else:
        abandon(lg)
    names = sorted(written)
    if damage == "deleted":
        for n in names:
            os.unlink(os.path.join(d, n))
    elif damage == "cut":
        _cut_txnindex(d, rng)
    elif damage == "corrupt-version":
        with open(os.path.join(d, names[1]), "r+b") as f:
            f.write(struct.pack(">h", 1))
    elif damage == "corrupt-offset":
        p = os.path.join(d, names[1])
        with open(p, "r+b") as f:
            f.seek(18)  # lastOffset of the first entry, below the segment's base
            f.write(struct.pack(">q", int(names[1][:20]) - 1))
    elif damage == "log-cut":
        last = sorted(n for n in os.listdir(d) if n.endswith(".log"))[-2]  # a segment holding data
        p = os.path.join(d, last)
        os.truncate(p, os.path.getsize(p) - 5)  # inside its last batch
    elif damage == "no-snapshots":
        for n in os.listdir(d):
            if n.endswith(".snapshot"):
                os.unlink(os.path.join(d, n))
    again = Log(d, config, recovery_point=0 if not clean else end, clean_shutdown=clean)
    try:
        if clean:
            assert again.load_result.corrupt_txn_indexes == 1
            assert again.load_result.first_recovered_offset == int(names[1][:20])
        model = check_txn_state(again, damage)
        if damage == "log-cut":
            assert again.log_end_offset < end
            cut = again.log_end_offset
            assert model.entries == [e for e in written_model.entries if e[2] < cut]
        else:
            assert again.log_end_offset == end
            assert nonempty_txnindex_files(d) == written
            assert model.entries == written_model.entries
        # the rebuilt state takes appends as the original did
        pid, _first = sorted(model.open.items())[0]
        again.append_marker(pid, 0, 0, commit=False)
        check_txn_state(again, damage + " + abort")
    finally:
        again.close()


def test_recovery_from_the_recovery_point_keeps_earlier_txnindex_files(tmp_path):
    """An unclean start recovers from the segment holding the recovery point: the earlier
    segments' .txnindex files are trusted as they are (not rewritten), the later ones rebuilt
    identical."""
    d = str(tmp_path / "t-0")
    lg, config = _txn_log(d, seed=3)
    written = nonempty_txnindex_files(d)
    bases = [s.base_offset for s in lg.segments]
    rp = bases[len(bases) // 2] + 1
    kept = [n for n in written if int(n[:20]) < bases[len(bases) // 2]]
    assert kept and len(kept) < len(written)
    mtimes = {n: os.stat(os.path.join(d, n)).st_mtime_ns for n in kept}
    abandon(lg)
    time.sleep(0.01)  # not ordering: a rewrite after this would show in st_mtime_ns
    again = Log(d, config, recovery_point=rp, clean_shutdown=False)
    try:
        assert again.load_result.first_recovered_offset == bases[len(bases) // 2]
        assert nonempty_txnindex_files(d) == written
        assert {n: os.stat(os.path.join(d, n)).st_mtime_ns for n in kept} == mtimes
        check_txn_state(again)
    finally:
        again.close()


def test_retention_and_delete_records_with_an_open_transaction(tmp_path):
    """Retention deletes whole segments with their .txnindex; an open transaction whose first
    offset falls below the new log start keeps the LSO at the log start until it ends, across
    a clean and an unclean restart (docs/transactions.md 4.7)."""
    from kafkacore.storage import LogConfig
    d = str(tmp_path / "t-0")
    config = LogConfig({"segment.bytes": 400, "retention.bytes": 1500, "file.delete.delay.ms": 0})
    lg = Log(d, config)
    lg.append(txn_batch(1, 0, 2, transactional=True))  # 0-1: producer 1 opens
    lg.append(txn_batch(2, 0, 1, transactional=True))  # 2
    lg.append_marker(2, 0, 0, commit=False)  # 3: an entry in the first segment
    first_seg_txn = f"{lg.segments[-1].base_offset:020d}.txnindex"  # the marker's segment
    assert first_seg_txn in nonempty_txnindex_files(d)
    while len(lg.segments) < 8:
        lg.append(txn_batch(n=3))
    assert lg.last_stable_offset == 0
    assert lg.delete_old_segments() > 0
    start = lg.log_start_offset
    assert start > 3
    assert first_seg_txn not in os.listdir(d), "the .txnindex goes with its segment"
    assert lg.last_stable_offset == start and 1 in lg.producer_state.producers
    for clean in (True, False):
        if clean:
            lg.close()
        else:
            abandon(lg)
        lg = Log(d, config, recovery_point=0, log_start_offset=start, clean_shutdown=clean)
        assert lg.log_start_offset == start
        assert lg.producer_state.ongoing == {0: 1}, clean
        assert lg.last_stable_offset == start, clean
    lg.delete_records(start + 2)
    assert lg.last_stable_offset == start + 2
    lg.append_marker(1, 0, 0, commit=True)
    assert lg.last_stable_offset == lg.log_end_offset
    lg.close()


def test_sigkill_loop_with_transactions(tmp_path):
    """storage_writer.py in txn mode (transactional appends, COMMIT and ABORT markers, plain
    batches of four producers) killed with SIGKILL again and again on the same directory; after
    every restart (clean and unclean closes alternate between rounds) each acknowledged write
    is there, and the .txnindex files, the open transactions, the LSO, the aborted lists and
    the read_committed view are those TxnModel computes from the log's batches. Bounded at
    about 15 s."""
    data_dir = str(tmp_path / "data")
    config = W.make_config(**W.TXN_CONFIG)
    seed = int(os.environ.get("KAFKACORE_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    t0 = time.monotonic()
    kills = 0
    acked = {}  # first offset -> (kind, pid, last)
    stats = {"recovered_segments": 0, "truncated_bytes": 0, "aborted_entries": 0, "open_at_restart": 0}
    while kills < 4 or (time.monotonic() - t0 < 12 and kills < 30):
        ack_path = tmp_path / f"acks-{kills}.txt"
        err_path = tmp_path / f"err-{kills}.txt"
        with open(ack_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen([sys.executable, WRITER, data_dir, str(seed * 1000 + kills), "txn"],
                                    stdout=out, stderr=err, close_fds=True)
        try:
            _wait_first_ack(proc, ack_path, err_path, time.monotonic() + 60)
            time.sleep(rng.uniform(0.02, 0.25))  # pacing: the kill lands at a random point of the writes
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL, err_path.read_text(errors="replace")
        kills += 1
        for line in ack_path.read_bytes().split(b"\n")[:-1]:
            kind, pid, first, last = line.decode().split()
            acked[int(first)] = (kind, int(pid), int(last))
        manager = LogManager(data_dir, config, background=False, cleaner_enable=False)
        try:
            assert manager.had_clean_shutdown is False
            lg = manager.get_log(W.TXN_TOPIC, W.PARTITION)
            lr = lg.load_result
            stats["recovered_segments"] += lr.recovered_segments
            stats["truncated_bytes"] += lr.truncated_bytes
            batches = {b[0]: b for b in log_batches(lg)}
            for first, (kind, pid, last) in acked.items():
                b = batches.get(first)
                assert b is not None, (kills, seed, "acknowledged write lost", kind, first)
                want = {"d": (False, False, None), "t": (True, False, None), "c": (True, True, _COMMIT),
                        "a": (True, True, _ABORT)}[kind]
                assert (b[1], b[2]) == (last, pid) and (b[3], b[4], b[5]) == want, (kills, seed, b, kind)
            try:
                model = check_txn_state(lg, f"round {kills} (seed {seed})")
            except AssertionError as e:
                raise AssertionError(f"round {kills} (seed {seed}): {e}") from e
            stats["aborted_entries"] = len(model.entries)
            stats["open_at_restart"] += len(model.open)
        except BaseException:
            abandon(manager)
            raise
        if kills % 2:
            manager.shutdown()
        else:
            manager.checkpoint()
            abandon(manager)
    assert stats["aborted_entries"] >= 5 and stats["open_at_restart"] >= 2, stats
    print(f"[txn sigkill loop] {kills} kills in {time.monotonic() - t0:.1f} s (seed {seed}), "
          f"log end {lg.log_end_offset}, {stats}")
