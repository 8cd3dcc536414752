"""Kafka's LocalLog: a partition's directory of segments, the last one active, and what is only
about those files: rolling, flushing and the recovery point, reading a slice of batches,
removing and replacing segments, and cutting them for a truncation.

It knows nothing of offsets' meaning beyond the segments' own (no log start offset, high
watermark, producers or leader epochs): those are the replicated log's, ``Log`` (log.py, Kafka's
UnifiedLog), which holds one LocalLog and calls it under its lock. The split is Kafka's own, so
a reader of Kafka's LocalLog finds the same duties here.

Readers take a snapshot of the segment list (``_view``) without the lock; every change to the
list is one tuple assignment, so a reader sees the old list or the new one, never a mix."""
import bisect
import os
import shutil
import uuid

from ..clock import wall_ms
from ..errors import KafkaStorageError
from ..record.layout import LENGTH_OFFSET, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from ._hot import hot
from .checkpoints import fsync_dir
from .file_slice import FileSlice
from .log_segment import SCAN_CHUNK, LogSegment
from .segment_files import DELETED_SUFFIX, parse_partition_dir

# A rolled segment is fsynced this long after the roll, not at once as Kafka does. By then the
# kernel has written its pages back on its own (vm.dirty_expire_centisecs defaults to 30 s), so
# the fsync only confirms it. At once, it forced the whole segment out while appends to the new
# one ran, and on ext4 those waited for the journal commit behind it: a follower catching up
# 1 GiB in 256 MiB segments ran 20 % slower (bench/RESULTS.md, 2026-11-26 evening). The
# recovery point is persisted only every log.flush.offset.checkpoint.interval.ms (60 s), so a
# crash costs at most a longer rescan, never data: recovery starts from an older point.
ROLLED_SEGMENT_FLUSH_DELAY_MS = 30_000


class LocalLog:
    """The segments of one partition directory. ``lock`` is the replicated log's: every
    method that changes the segment list is called with it held (or takes it)."""

    def __init__(self, directory, config, segments, recovery_point, scheduler, lock):
        self.dir = directory
        self.name = os.path.basename(directory)
        parsed = parse_partition_dir(self.name)
        self.topic, self.partition = parsed if parsed else (self.name, 0)
        self.scheduler = scheduler
        self.lock = lock
        self.closed = False
        self._view = ((), ())
        self._config = config
        self._set_segments(segments)
        self.recovery_point = min(recovery_point, self.log_end_offset)
        # bumped by every truncation: a flush that began before one must not move the recovery
        # point past the new end
        self._truncations = 0
        self._unflushed = 0  # records appended since the last flush (flush.messages)
        self.last_flush_ms = wall_ms()

    @property
    def config(self):
        return self._config

    @config.setter
    def config(self, config):
        """A new topic config applies at once, to the active segment too (a lower
        segment.bytes rolls at the next append, as in Kafka)."""
        self._config = config
        for segment in self._view[0]:
            segment.config = config

    # -- the segment list -----------------------------------------------------------------------
    def _set_segments(self, segments):
        # one tuple assignment: a reader sees the old list or the new one, never a mix
        self._view = (tuple(segments), tuple(s.base_offset for s in segments))

    @property
    def segments(self):
        return list(self._view[0])

    @property
    def active_segment(self):
        return self._view[0][-1]

    @property
    def log_end_offset(self):
        return self._view[0][-1].next_offset

    @property
    def size_in_bytes(self):
        return sum(s.size for s in self._view[0])

    def segment_holding(self, offset):
        """The segment whose range holds offset (the first one below it, else the first)."""
        segments, bases = self._view
        return segments[max(0, bisect.bisect_right(bases, offset) - 1)]

    # -- rolling and flushing -------------------------------------------------------------------
    def should_roll(self, segment, nbytes, last_offset, batches, message_ts, now):
        """Kafka's LogSegment.shouldRoll: size, time (segment.ms from the first batch's
        timestamp, or the segment's creation when there is none), full indexes, or offsets that
        no longer fit the 32-bit relative offsets."""
        if segment.size == 0:
            return last_offset - segment.base_offset > 0x7FFFFFFF
        if segment.would_overflow(nbytes, last_offset) or segment.offset_index.is_full(batches) \
                or segment.time_index.is_full(batches):
            return True
        first_ts = segment.first_batch_timestamp
        waited = (message_ts - first_ts) if first_ts is not None and first_ts >= 0 else now - segment.created_ms
        return waited > self._config.segment_ms - self._config.segment_jitter_ms

    def roll(self, now, on_roll):
        """A new active segment at the log end offset (under the lock). ``on_roll(new_base)``
        runs once the old segment is inactive and before the new one is in the list (the
        producer state's snapshot, as Kafka takes one at every roll); its OSError, like the
        old segment's, leaves the log as it was and raises KafkaStorageError. An empty active
        segment is already the roll's result."""
        old = self.active_segment
        new_base = self.log_end_offset
        if old.size == 0:
            return old
        # The new segment first: if its files cannot be made (disk full), the old one stays
        # active and untouched, and the append fails with KAFKA_STORAGE_ERROR.
        new = LogSegment.create(self.dir, new_base, self._config, now)
        try:
            old.become_inactive(flush=False)
            on_roll(new_base)
        except OSError as e:  # the final time index entry could not be written (disk full)
            new.delete_files()
            raise KafkaStorageError(f"rolling {self.name} failed: {e}") from e
        self._set_segments(self._view[0] + (new,))
        # Flushed in the background, later than Kafka does (ROLLED_SEGMENT_FLUSH_DELAY_MS); the
        # recovery point moves past it once that is done.
        truncations = self._truncations
        self.scheduler.schedule(ROLLED_SEGMENT_FLUSH_DELAY_MS,
                                lambda: self._flush_rolled(old, new_base, truncations))
        return new

    def _flush_rolled(self, segment, new_base, truncations):
        if segment.deleted or self.closed:
            return
        segment.flush()
        with self.lock:
            # a truncation since the roll may have cut below new_base
            if new_base > self.recovery_point and truncations == self._truncations:
                self.recovery_point = new_base

    def appended(self, records):
        """Counts records appended (under the lock); True when flush.messages says flush now."""
        self._unflushed += records
        return self._unflushed >= self._config.flush_messages

    def flush(self):
        """fsync every segment holding unflushed data; the recovery point becomes the end."""
        with self.lock:
            if self.closed:
                return
            end = self.log_end_offset
            truncations = self._truncations
            segments = [s for s in self._view[0] if s.next_offset > self.recovery_point or s.mutable]
            self._unflushed = 0
        self._fsync(segments)
        with self.lock:
            if truncations == self._truncations:  # else end may be past the truncated log's end
                self.recovery_point = max(self.recovery_point, end)
            self.last_flush_ms = wall_ms()

    @staticmethod
    def _fsync(segments):
        for segment in segments:
            if not segment.deleted:
                segment.flush()

    def maybe_flush(self, now=None):
        """flush.ms: flush when that long has passed since the last flush."""
        now = wall_ms() if now is None else now
        if self._config.flush_ms < (1 << 62) and now - self.last_flush_ms >= self._config.flush_ms:
            self.flush()

    # -- reads ------------------------------------------------------------------------------------
    @staticmethod
    def read_from(segments, i, offset, max_bytes, max_offset, end, min_one_batch):
        """(FileSlice, index of the segment read) from segments[i] on: whole batches from the
        one holding offset, never past max_offset (exclusive) when it is below end."""
        while i < len(segments):
            segment = segments[i]
            max_position = None
            if max_offset is not None and max_offset < end:
                if max_offset <= segment.base_offset:
                    break
                if max_offset < segment.next_offset:
                    found = segment.translate_offset(max_offset)
                    max_position = found[0] if found else None
            result = segment.read(offset, max_bytes, max_position, min_one_batch)
            if result is not None:
                return result, i
            i += 1  # nothing at or after offset here (the cleaner left a gap): the next segment
        last = segments[-1]
        return FileSlice(last.file, last.size, 0, offset), len(segments) - 1

    @staticmethod
    def fetch_upper_bound_offset(segments, read_index, sl):
        """Kafka's fetchUpperBoundOffset for a slice read from segments[read_index]: the offset
        of the first offset index entry at or after the slice's end, else the next segment's
        base offset, else the log end offset."""
        upper = segments[read_index].fetch_upper_bound_offset(sl.position, sl.length)
        if upper is None:
            upper = segments[read_index + 1].base_offset if read_index + 1 < len(segments) \
                else segments[-1].next_offset
        return upper

    @staticmethod
    def collect_aborted(segments, i, start_offset, upper_bound_offset):
        """The AbortedTxn entries overlapping [start_offset, upper_bound_offset) in the
        .txnindex files from segments[i] on (Kafka's LocalLog.collectAbortedTransactions)."""
        out = []
        for segment in segments[i:]:
            found, complete = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            out += found
            if complete:
                break
        return out

    # -- removing and replacing segments ----------------------------------------------------------
    def remove_segments(self, doomed):
        """Takes the oldest ``len(doomed)`` segments out of the list (under the lock; the
        caller keeps an active segment). Returns the segments left."""
        remaining = self._view[0][len(doomed):]
        self._set_segments(remaining)
        return remaining

    def retire(self, segment):
        """Rename to .deleted now; unlink after file.delete.delay.ms (readers of an older
        snapshot of the segment list may still be using it)."""
        segment.deleted = True
        try:
            segment.change_suffix("", DELETED_SUFFIX)
        except OSError as e:
            raise KafkaStorageError(f"renaming {segment.log_path} for deletion failed: {e}") from e
        self.scheduler.schedule(self._config.file_delete_delay_ms, segment.delete_files)

    def replace_segment(self, old, cleaned):
        """Puts cleaned (files with suffix .cleaned, fsynced) in place of old with Kafka's
        crash-safe order: .cleaned -> .swap, old -> .deleted, .swap -> live. False (and the
        cleaned files removed) when old is no longer in the log."""
        with self.lock:
            segments = list(self._view[0])
            if self.closed or old not in segments or old.deleted or old is segments[-1]:
                cleaned.delete_files()
                return False
            cleaned.change_suffix(".cleaned", ".swap")
            old.deleted = True
            old.change_suffix("", DELETED_SUFFIX)
            cleaned.change_suffix(".swap", "")
            segments[segments.index(old)] = cleaned
            self._set_segments(segments)
        self.scheduler.schedule(self._config.file_delete_delay_ms, old.delete_files)
        return True

    # -- truncation ---------------------------------------------------------------------------------
    def truncate_to(self, offset):
        """Cuts the segments at the start of the batch holding offset (under the lock; offset
        below the log end offset and not below the first segment's base). Segments above go,
        newest first, each rename made durable before the next; the segment holding the cut
        is cut and fsynced; a segment left empty goes too unless it is the first. Returns (the
        new log end offset, the base offsets of the segments that went)."""
        segments = list(self._view[0])
        k = max(bisect.bisect_left(self._view[1], offset) - 1, 0)  # the last segment with base < offset
        if k > 0:
            found = segments[k].translate_offset(offset)
            if found is not None and found[0] == 0:
                # nothing of segment k stays: it goes, and the one before ends the log, as in a
                # log that never rolled there
                k -= 1
        keep, doomed = segments[k], segments[k + 1:]
        self._truncations += 1
        for i in range(len(segments) - 1, k, -1):
            self.retire(segments[i])
            self._set_segments(segments[:i])  # the view keeps every segment not retired
            fsync_dir(self.dir)
        if keep is segments[-1]:
            active = keep
        else:
            # A new object for the files: the cleaner may be copying this segment as it was, and
            # its swap must find the old object gone (replace_segment then drops the copy).
            active = LogSegment(self.dir, keep.base_offset, self._config, created_ms=keep.created_ms)
            active.first_batch_timestamp = keep.first_batch_timestamp
        try:
            self._cut(active, offset)
        except BaseException:
            if active is not keep:
                active.offset_index.close()
                active.time_index.close()
                active.txn_index.close()
            raise
        self._set_segments(segments[:k] + [active])
        if active is not keep:
            keep.deleted = True  # readers holding the old list read again
            keep.offset_index.close()
            keep.time_index.close()
            keep.txn_index.close()
        return active.next_offset, {seg.base_offset for seg in doomed}

    def _cut(self, seg, offset):
        """Cuts seg (made the active segment) before the first batch whose last offset is >=
        offset. The indexes keep their entries for the batches before the cut, except a final
        time entry the segment got when it became inactive; the scan state resumes from the
        last offset entry kept. So the segment, its indexes and the appends that follow are
        byte for byte those of a segment only ever written up to the cut."""
        found = seg.translate_offset(offset)
        pos = seg.size if found is None else found[0]
        oi, ti = seg.offset_index, seg.time_index
        for index in (oi, ti):
            if not index.mutable:
                if index.entries <= index.max_entries:
                    index.make_mutable()
                else:  # segment.index.bytes shrank since: full, so the next append rolls first
                    index.mutable = True
        kept = 0
        if oi.entries and pos > 0:
            kept = hot.offset_index_lookup_position(oi.buffer(oi.entries), oi.entries, pos - 1) + 1
        oi.truncate_to_entries(kept)
        if kept:
            # the time entries written along with the offset entries kept; a final entry of an
            # inactive segment is for a batch after its last offset entry, so it goes
            last_indexed, resume = oi.entry(kept - 1)
            ti.truncate_to_offset(last_indexed + 1)
        else:
            resume = 0
            ti.truncate_to_entries(0)
        scanner = seg.resumed_scanner(resume, self._config.index_interval_bytes)
        self._scan_to(seg, scanner, pos)
        try:
            os.ftruncate(seg.file.fd, pos)
        except OSError as e:
            raise KafkaStorageError(f"truncating {seg.log_path} failed: {e}") from e
        seg.size = pos
        seg.next_offset = max(scanner.next_offset, seg.base_offset)
        # entries of markers cut go (Kafka's TransactionIndex.truncateTo); later segments'
        # files went with their segments
        seg.txn_index.truncate_to(seg.next_offset)
        seg.max_timestamp_so_far = scanner.max_timestamp
        seg.offset_of_max_timestamp_so_far = scanner.offset_of_max_timestamp
        seg.scanner = scanner
        if pos == 0:  # as Kafka resets an emptied segment's roll clock
            seg.first_batch_timestamp = None
            seg.created_ms = wall_ms()
        seg.flush()  # the cut is durable before the epoch cache forgets what was cut

    @staticmethod
    def _scan_to(seg, scanner, end):
        """Feeds seg's batches from scanner.position to end through scanner (no CRC check: they
        were checked when written or recovered)."""
        fd = seg.file.fd
        while scanner.position < end:
            pos = scanner.position
            data = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
            status, _consumed, offsets, times = scanner.scan(data)
            if status == hot.SCAN_TRUNCATED and scanner.position == pos:
                head = os.pread(fd, LOG_OVERHEAD, pos)  # one batch longer than the read: read it whole
                need = int.from_bytes(head[LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD \
                    if len(head) == LOG_OVERHEAD else 0
                if need < RECORD_BATCH_OVERHEAD or pos + need > end:
                    raise KafkaStorageError(f"{seg.log_path}: no whole batch at byte {pos}")
                status, _consumed, offsets, times = scanner.scan(os.pread(fd, need, pos))
            if status not in (hot.SCAN_OK, hot.SCAN_TRUNCATED) or scanner.position == pos:
                raise KafkaStorageError(f"{seg.log_path}: cannot rescan at byte {pos}: {scanner.error}")
            # entries only when index.interval.bytes changed since the segment was written
            seg.offset_index.append_entries(offsets)
            seg.time_index.append_entries(times)

    def truncate_fully_and_start_at(self, offset):
        """Retires every segment, newest first (each rename durable before the next), and
        starts one empty segment at offset, which is then the recovery point (under the
        lock)."""
        self._truncations += 1
        for seg in reversed(self._view[0]):
            self.retire(seg)
            fsync_dir(self.dir)
        new = LogSegment.create(self.dir, offset, self._config, wall_ms())
        self._set_segments([new])
        fsync_dir(self.dir)
        self.recovery_point = offset
        self._unflushed = 0

    def close_on_failure(self):
        """The files and this object may disagree now: refuse everything until a reopen, whose
        load reconciles whatever state the files are in."""
        self.closed = True
        for seg in self._view[0]:  # close() will not run on a closed log
            seg.offset_index.close()
            seg.time_index.close()
            seg.txn_index.close()

    # -- lifecycle ----------------------------------------------------------------------------------
    def close(self):
        """fsyncs every segment past the recovery point and the active one, then closes them
        (under the lock; the active segment is already inactive)."""
        segments = self._view[0]
        # every segment past the recovery point (a rolled one whose background flush has not run
        # yet, too) is on disk before the recovery point may say so
        self._fsync([s for s in segments if s.next_offset > self.recovery_point or s is segments[-1]])
        self.closed = True
        for segment in segments:
            segment.close()
        self.recovery_point = self.log_end_offset

    def delete_directory(self):
        """Renames the (closed) directory to ``<dir>.<id>-delete``, as Kafka does, and removes
        it in the background."""
        target = f"{self.dir}.{uuid.uuid4().hex}-delete"
        os.rename(self.dir, target)
        self.scheduler.schedule(self._config.file_delete_delay_ms,
                                lambda: shutil.rmtree(target, ignore_errors=True))
