"""Kafka's LogSegment: one ``<base offset>.log`` file of record batches with its ``.index``,
``.timeindex`` and, once an aborted transaction's marker lands in it, ``.txnindex``
(txn_index.py). Only the last segment of a log (the active one) is appended to.

The index rule is Kafka's, the same whether a batch arrives by append or by recovery: a batch
gets an offset index entry (its last offset, its position) when more than index.interval.bytes
lie between the batch of the previous entry and it, and a time index entry (largest timestamp so
far, offset of the batch holding it) along with it when that timestamp grew. So a rebuilt index
is byte-for-byte the index that appends wrote."""
import os

from ..errors import CorruptMessageError, KafkaStorageError, RecordListTooLargeError
from ..record.layout import MAX_TIMESTAMP_OFFSET, PRODUCER_ID_OFFSET, RECORD_BATCH_OVERHEAD
from ._hot import hot
from .file_slice import FileSlice, SegmentFile
from .offset_index import OffsetIndex
from .segment_files import (FILE_SUFFIXES, INDEX_SUFFIX, LOG_SUFFIX, NO_TIMESTAMP, TIME_INDEX_SUFFIX,
                            TXN_INDEX_SUFFIX, segment_file_name, timestamp_search_start)
from .time_index import TimeIndex
from .txn_index import AbortedTxn, TransactionIndex

__all__ = ["LogSegment", "SCAN_CHUNK", "segment_file_name"]

SCAN_CHUNK = 8 << 20  # recovery reads the log in pieces of this size


class LogSegment:
    def __init__(self, directory, base_offset, config, *, suffix="", mutable=False, created_ms=None):
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        self.suffix = suffix
        stem = os.path.join(directory, segment_file_name(base_offset))
        try:
            self.file = SegmentFile(stem + LOG_SUFFIX + suffix, os.O_RDWR | os.O_CREAT)
            st = os.fstat(self.file.fd)
        except OSError as e:
            raise KafkaStorageError(f"opening segment {stem}{LOG_SUFFIX} failed: {e}") from e
        self.size = st.st_size
        self.created_ms = created_ms if created_ms is not None else st.st_mtime_ns // 1_000_000
        index_bytes = config.segment_index_bytes
        self.offset_index = OffsetIndex(stem + INDEX_SUFFIX + suffix, base_offset, index_bytes, mutable)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX + suffix, base_offset, index_bytes, mutable)
        # no file until the first entry (Kafka's TransactionIndex)
        self.txn_index = TransactionIndex(stem + TXN_INDEX_SUFFIX + suffix, base_offset)
        self.next_offset = base_offset  # offset after the last batch; set by load/recover/append
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = -1
        self.first_batch_timestamp = None  # maxTimestamp of the first batch: segment.ms rolls on it
        self.scanner = None  # index-building state while active
        # a walk from an index entry to a batch spans about index.interval.bytes: one pread
        self._read_hint = min(8192, config.index_interval_bytes + 128)
        self.deleted = False

    @classmethod
    def create(cls, directory, base_offset, config, created_ms):
        """A new, empty active segment; on failure its files are removed and
        KafkaStorageError raised."""
        stem = os.path.join(directory, segment_file_name(base_offset))
        existing = {s for s in FILE_SUFFIXES if os.path.exists(stem + s)}
        segment = None
        try:
            segment = cls(directory, base_offset, config, created_ms=created_ms)
            segment.load(active=True)
            return segment
        except (OSError, KafkaStorageError) as e:
            if segment is not None:
                segment.offset_index.close()
                segment.time_index.close()
            for suffix in FILE_SUFFIXES:
                if suffix not in existing:
                    try:
                        os.unlink(stem + suffix)
                    except OSError:
                        pass
            if isinstance(e, KafkaStorageError):
                raise
            raise KafkaStorageError(f"creating segment {stem} failed: {e}") from e

    # -- loading ----------------------------------------------------------------------------
    @property
    def log_path(self):
        return self.file.path

    @property
    def mutable(self):
        return self.scanner is not None

    def indexes_sane(self) -> bool:
        """Kafka's sanity check on open, plus: a missing index file of a non-empty segment
        must be rebuilt (an empty new file would pass for an index without entries)."""
        if self.size > 0 and not (self.offset_index.existed and self.time_index.existed):
            return False
        return self.offset_index.sane(self.size) and self.time_index.sane()

    def resumed_scanner(self, position, index_interval_bytes):
        """A scanner that goes on from ``position``, the start of the batch after the last offset
        index entry kept: the time index's last entry is the state it resumes with (the indexes
        then grow exactly as if the segment had been written through to there)."""
        ts, ts_offset = self.time_index.last_entry()
        scanner = hot.SegmentScanner(self.base_offset, index_interval_bytes, False)
        scanner.position = position
        scanner.last_index_position = position
        scanner.max_timestamp = ts
        scanner.offset_of_max_timestamp = ts_offset if ts != NO_TIMESTAMP else -1
        scanner.last_time_index_timestamp = ts
        return scanner

    def load(self, active):
        """Open a segment that needs no recovery: learn its next offset and largest timestamp
        from the indexes and the batches after the last offset index entry."""
        _last_offset, position = self.offset_index.last_entry()
        scanner = self.resumed_scanner(position, self.config.index_interval_bytes)
        status, _error = self._scan(scanner, write_index=False)
        if status != "ok":
            raise CorruptMessageError(f"segment {self.log_path} is damaged at {scanner.position}; "
                                      f"it needs recovery")
        self._adopt(scanner)
        self._learn_first_batch_timestamp()
        if active:
            self.offset_index.make_mutable()
            self.time_index.make_mutable()
            self.scanner = scanner

    def recover(self, active):
        """Kafka's LogSegment.recover: rebuild both indexes from the log, checking every batch
        (size, magic, CRC-32C, offsets ascending and within the segment), and cut the log at the
        first byte that is not part of a valid batch. Returns the number of bytes cut."""
        self.offset_index.make_mutable()
        self.time_index.make_mutable()
        self.offset_index.reset()
        self.time_index.reset()
        scanner = hot.SegmentScanner(self.base_offset, self.config.index_interval_bytes, True)
        status, _error = self._scan(scanner, write_index=True)
        cut = self.size - scanner.position
        if cut > 0:
            try:
                os.ftruncate(self.file.fd, scanner.position)
            except OSError as e:
                raise KafkaStorageError(f"truncating {self.log_path} failed: {e}") from e
            self.size = scanner.position
        self._adopt(scanner)
        self._learn_first_batch_timestamp()
        if active:
            self.scanner = scanner
        else:
            self.become_inactive(flush=False)
        return cut

    def _adopt(self, scanner):
        self.next_offset = max(scanner.next_offset, self.base_offset)
        self.max_timestamp_so_far = scanner.max_timestamp
        self.offset_of_max_timestamp_so_far = scanner.offset_of_max_timestamp

    def _learn_first_batch_timestamp(self):
        if self.size >= RECORD_BATCH_OVERHEAD:
            head = os.pread(self.file.fd, PRODUCER_ID_OFFSET, 0)  # the header up to the max timestamp's end
            if len(head) == PRODUCER_ID_OFFSET:
                self.first_batch_timestamp = int.from_bytes(head[MAX_TIMESTAMP_OFFSET:PRODUCER_ID_OFFSET], "big",
                                                            signed=True)

    def _scan(self, scanner, write_index):
        """Feeds the log from scanner.position to the end through scanner, a chunk at a time.
        Returns ("ok" | "truncated" | "corrupt", error). scanner.position ends at the end of the
        last valid batch."""
        fd = self.file.fd
        buf = bytearray(min(SCAN_CHUNK, max(self.size - scanner.position, 64)))
        while scanner.position < self.size:
            pos = scanner.position
            want = min(len(buf), self.size - pos)
            view = memoryview(buf)[:want]
            got = os.preadv(fd, [view], pos)
            status, consumed, offsets, times = scanner.scan(view[:got])
            if write_index:  # a segment with more entries than the index holds keeps what fits
                room = max(0, self.offset_index.max_entries - self.offset_index.entries)
                self.offset_index.append_entries(offsets[:room * self.offset_index.ENTRY_SIZE])
                room = max(0, self.time_index.max_entries - 1 - self.time_index.entries)
                self.time_index.append_entries(times[:room * self.time_index.ENTRY_SIZE])
            if status == hot.SCAN_CORRUPT:
                return "corrupt", scanner.error
            if status == hot.SCAN_INDEX_FULL:
                return "corrupt", "the index is full (segment.index.bytes is too small for this segment)"
            if status == hot.SCAN_TRUNCATED:
                if pos + got >= self.size:
                    return "truncated", "the log ends inside a batch"
                if consumed == 0:  # one batch larger than the buffer: make room for it
                    head = os.pread(fd, 12, pos)
                    need = int.from_bytes(head[8:12], "big", signed=True) + 12
                    if pos + need > self.size:
                        return "truncated", "the log ends inside a batch"
                    buf = bytearray(need)
            if got == 0:
                return "truncated", "the log file is shorter than expected"
        return "ok", None

    # -- append -----------------------------------------------------------------------------
    def append(self, buf, first_batch_max_timestamp):
        """Writes validated batches whose offsets are stamped. On a failed write nothing of it
        stays: the file is cut back and the indexes and scan state restored."""
        sc = self.scanner
        saved = (sc.position, sc.last_index_position, sc.next_offset, sc.max_timestamp,
                 sc.offset_of_max_timestamp, sc.last_time_index_timestamp)
        status, _consumed, offsets, times = sc.scan(buf)
        if status != hot.SCAN_OK:
            self._restore(saved)
            raise CorruptMessageError(f"batches cannot be appended to {self.log_path}: {sc.error}")
        if (self.offset_index.is_full(len(offsets) // self.offset_index.ENTRY_SIZE)
                or self.time_index.is_full(len(times) // self.time_index.ENTRY_SIZE)):
            self._restore(saved)
            raise RecordListTooLargeError(
                f"the append needs more index entries than segment.index.bytes leaves in {self.log_path}")
        entries = (self.offset_index.entries, self.time_index.entries)
        pos = self.size
        try:
            view = memoryview(buf)
            while view:
                written = os.pwrite(self.file.fd, view, pos)
                if written <= 0:
                    raise OSError("short write")
                view = view[written:]
                pos += written
            self.offset_index.append_entries(offsets)
            self.time_index.append_entries(times)
        except Exception as e:  # nothing of a failed append may stay, whatever failed
            self._restore(saved)
            self._undo_write(entries)
            if isinstance(e, OSError):
                raise KafkaStorageError(f"writing to {self.log_path} failed: {e}") from e
            raise
        self.size = pos
        self.next_offset = sc.next_offset
        self.max_timestamp_so_far = sc.max_timestamp
        self.offset_of_max_timestamp_so_far = sc.offset_of_max_timestamp
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = first_batch_max_timestamp

    def _restore(self, saved):
        sc = self.scanner
        (sc.position, sc.last_index_position, sc.next_offset, sc.max_timestamp,
         sc.offset_of_max_timestamp, sc.last_time_index_timestamp) = saved

    def _undo_write(self, entries):
        try:
            os.ftruncate(self.file.fd, self.size)
            self.offset_index.truncate_to_entries(entries[0])
            self.time_index.truncate_to_entries(entries[1])
        except OSError:
            # Reads stop at self.size and recovery cuts the tail, so leftover bytes past it are
            # never served; the next append writes over them.
            pass

    def would_overflow(self, nbytes, last_offset):
        return (self.size + nbytes > self.config.segment_bytes
                or last_offset - self.base_offset > 0x7FFFFFFF
                or self.offset_index.is_full() or self.time_index.is_full())

    # -- reads ------------------------------------------------------------------------------
    def translate_offset(self, offset, end=None):
        """(position, base offset, last offset, max timestamp, size) of the first batch whose
        last offset is >= offset, or None when no batch in the segment reaches it."""
        end = self.size if end is None else end
        index = self.offset_index
        entries = index.entries
        return hot.translate(index.buffer(entries), entries, self.base_offset, self.file.fd, end, offset,
                             self._read_hint)

    def read(self, offset, max_bytes, max_position=None, min_one_batch=True):
        """FileSlice from the batch holding offset, ending on a batch boundary at most
        max_bytes later (one whole batch at least, with min_one_batch), not past max_position.
        None when the segment has nothing at or after offset."""
        size = self.size
        end = size if max_position is None else min(max_position, size)
        found = self.translate_offset(offset, size)
        if found is None:
            return None
        start = found[0]
        if start >= end:
            return FileSlice(self.file, start, 0, found[1])
        limit = start + max_bytes
        if limit >= end:
            stop = end
        elif found[4] >= max_bytes:  # the first batch alone fills max_bytes
            stop = start + found[4] if min_one_batch or found[4] == max_bytes else start
        else:
            # from the last index entry at or before the limit, walk to the boundary
            from_pos = max(start, self.offset_index.lookup_position(limit))
            stop = hot.seek(self.file.fd, from_pos, end, hot.SEEK_BOUNDARY, limit)
            if stop is None:  # no complete batch after from_pos (cannot happen below the end)
                stop = from_pos
            elif stop > limit and from_pos > start:
                # the walk's "one whole batch" applies to the slice, which already holds the
                # batches before from_pos
                stop = from_pos
        return FileSlice(self.file, start, stop - start, found[1])

    def fetch_upper_bound_offset(self, start_position, fetch_size):
        """Kafka's LogSegment.fetchUpperBoundOffset: the offset of the first offset index entry
        at or after the end of a read of fetch_size bytes from start_position (an offset no
        record of the read reaches), None when no entry lies there."""
        found = self.offset_index.upper_bound_for_position(start_position + fetch_size)
        return None if found is None else found[0]

    def update_txn_index(self, completed, last_stable_offset):
        """Kafka's LogSegment.updateTxnIndex: an aborted transaction whose marker is in this
        segment gets its .txnindex entry (a committed one gets none)."""
        if completed.is_aborted:
            self.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                             last_stable_offset))

    def collect_aborted_txns(self, fetch_offset, upper_bound_offset):
        """(entries, complete): txn_index.TransactionIndex.collect."""
        return self.txn_index.collect(fetch_offset, upper_bound_offset)

    def timestamp_search_start(self, timestamp, starting_offset):
        """Where the search for the first record at or after timestamp (and starting_offset)
        begins in this segment (segment_files.timestamp_search_start)."""
        return timestamp_search_start(self.offset_index, self.time_index, timestamp, starting_offset)

    def next_batch_by_timestamp(self, timestamp, position):
        """(position, base, last, max timestamp, size) of the first batch at or after position
        whose maxTimestamp is >= timestamp, or None."""
        return hot.seek(self.file.fd, position, self.size, hot.SEEK_TIMESTAMP, timestamp)

    def read_bytes(self, position, length):
        return os.pread(self.file.fd, length, position)

    @property
    def largest_timestamp(self):
        """Largest record timestamp, or the file's modification time when none (Kafka's rule)."""
        if self.max_timestamp_so_far > NO_TIMESTAMP:
            return self.max_timestamp_so_far
        try:
            return os.stat(self.log_path).st_mtime_ns // 1_000_000
        except OSError:
            return self.created_ms

    # -- lifecycle --------------------------------------------------------------------------
    def become_inactive(self, flush=True):
        """The segment stops taking appends (roll or close): the time index gets its final
        entry, both indexes are trimmed to their entries, and with flush everything is fsynced."""
        if self.max_timestamp_so_far > NO_TIMESTAMP and self.time_index.mutable:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
        if self.offset_index.mutable:
            self.offset_index.trim()
        if self.time_index.mutable:
            self.time_index.trim()
        self.scanner = None
        if flush:
            self.flush()

    def flush(self):
        try:
            if self.file.fd >= 0:
                os.fsync(self.file.fd)
            if self.offset_index.fd >= 0:
                self.offset_index.flush()
            if self.time_index.fd >= 0:
                self.time_index.flush()
            self.txn_index.flush()
        except OSError as e:
            raise KafkaStorageError(f"fsync of {self.log_path} failed: {e}") from e

    def close(self):
        if self.mutable:
            self.become_inactive(flush=True)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        # the log file closes with its last holder: a FileSlice being sent may still use it

    def paths(self):
        """The segment's files (the .txnindex only when it exists)."""
        out = [self.log_path, self.offset_index.path, self.time_index.path]
        if self.txn_index.exists:
            out.append(self.txn_index.path)
        return out

    def change_suffix(self, old, new):
        """Renames the segment's files from suffix old to suffix new (the swap protocol and
        deletion); the .txnindex goes along when it exists (Kafka's renameTo)."""
        for holder in (self.file, self.offset_index, self.time_index, self.txn_index):
            path = holder.path
            if old and not path.endswith(old):
                raise ValueError(f"{path} does not end with {old}")
            target = (path[:-len(old)] if old else path) + new
            if holder is self.txn_index:
                holder.rename(target)
            else:
                os.rename(path, target)
                holder.path = target
        self.suffix = new

    def delete_files(self):
        """Unlinks the segment's files (whatever suffix they carry now)."""
        self.deleted = True
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.delete()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self):
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
