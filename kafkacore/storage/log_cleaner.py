"""Kafka's LogCleaner: compaction of logs with ``cleanup.policy`` containing ``compact``.

One pass over a log (``clean_log``):
1. The cleanable range ends at the active segment, or earlier at the first segment with records
   younger than ``min.compaction.lag.ms``. The dirty part starts at the first dirty offset
   (``cleaner-offset-checkpoint``; the log start offset the first time).
2. An offset map is built over the dirty part: xxh3-128 of each key -> its latest offset
   (Kafka's SkimpyOffsetMap keeps a 16-byte hash of the key the same way).
3. Every cleanable segment is rewritten to ``<base>.log.cleaned``: a record stays if it is the
   latest for its key (or its key is not in the map); records without a key go; a tombstone
   (null value) goes once its segment's newest record is older than ``delete.retention.ms``.
   Original offsets stay (gaps are normal); a batch that keeps all its records is copied as is,
   one that keeps some is rebuilt with its codec, header and record bytes; empty batches go.
4. Each cleaned segment is fsynced and swapped in (``.cleaned`` -> ``.swap`` -> live, see
   Log.replace_segment); a crash at any point leaves either the old or the new segment.
5. The first dirty offset moves to the end of the mapped range and is checkpointed.

Appends and reads never wait for the cleaner: it reads inactive (immutable) segments through
its own file descriptors and takes the log's lock only for the renames of the swap."""
import logging
import os
import struct
import threading
import time

import xxhash

from ..errors import KafkaStorageError
from ._hot import hot
from .batch_rewrite import HEADER, build_batch, records_section
from .checkpoints import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from .log_segment import CLEANED_SUFFIX, LogSegment, now_ms

log = logging.getLogger("kafkacore.storage")

_ENTRY_BYTES = 24  # Kafka sizes its offset map as 16-byte hash + 8-byte offset per key
_READ_CHUNK = 8 << 20


class CleanerStats:
    def __init__(self):
        self.bytes_read = 0
        self.bytes_written = 0
        self.records_read = 0
        self.records_kept = 0
        self.segments = 0
        self.seconds = 0.0
        self.first_dirty_offset = 0
        self.end_offset = 0

    def __repr__(self):
        return (f"CleanerStats(read={self.bytes_read}B/{self.records_read} records, "
                f"written={self.bytes_written}B/{self.records_kept} records, segments={self.segments}, "
                f"range=[{self.first_dirty_offset}, {self.end_offset}), {self.seconds:.3f}s)")


def iter_segment_batches(segment, end=None):
    """(position, batch memoryview) for the batches of an inactive segment, read in chunks."""
    fd = segment.file.fd
    end = segment.size if end is None else end
    pos = 0
    while pos < end:
        chunk = os.pread(fd, min(_READ_CHUNK, end - pos), pos)
        mv = memoryview(chunk)
        at = 0
        while at + 12 <= len(mv):
            total = struct.unpack_from(">i", mv, at + 8)[0] + 12
            if total < HEADER:
                raise KafkaStorageError(f"{segment.log_path}: bad batch length at {pos + at}")
            if at + total > len(mv):
                break
            yield pos + at, mv[at:at + total]
            at += total
        if at == 0:  # a batch larger than the chunk
            head = os.pread(fd, 12, pos)
            total = struct.unpack_from(">i", head, 8)[0] + 12
            if total < HEADER or pos + total > end:
                raise KafkaStorageError(f"{segment.log_path}: bad batch length at {pos}")
            yield pos, memoryview(os.pread(fd, total, pos))
            at = total
        pos += at


def _key_hash(key):
    return xxhash.xxh3_128_intdigest(key)


def _batch_fields(batch):
    base, = struct.unpack_from(">q", batch, 0)
    attrs, = struct.unpack_from(">h", batch, 21)
    base_ts, = struct.unpack_from(">q", batch, 27)
    count, = struct.unpack_from(">i", batch, 57)
    return base, attrs, base_ts, count


def filter_batch(batch, offset_map, retain_tombstones, stats):
    """The batch to write in place of batch: batch itself, a rebuilt one, or None."""
    base, attrs, base_ts, count = _batch_fields(batch)
    stats.records_read += count
    if attrs & 0x20:  # control batches (transaction markers) stay
        stats.records_kept += count
        return batch
    section = records_section(batch)
    kept = []
    for offset_delta, ts_delta, key, value_is_null, start, end in hot.record_spans(section, count):
        if key is None:
            continue
        latest = offset_map.get(_key_hash(key))
        if latest is not None and base + offset_delta < latest:
            continue
        if value_is_null and not retain_tombstones:
            continue
        kept.append((start, end, ts_delta))
    stats.records_kept += len(kept)
    if len(kept) == count:
        return batch
    if not kept:
        return None
    raw = b"".join(section[s:e] for s, e, _t in kept)
    max_ts = base_ts + max(t for _s, _e, t in kept)
    return build_batch(batch[:HEADER], raw, len(kept), attrs & 0x07, max_ts)


class LogCleaner:
    def __init__(self, data_dir, logs, *, backoff_ms=15000, dedupe_buffer_size=128 << 20, background=True):
        """logs: a callable returning the current {(topic, partition): Log}."""
        self.logs = logs
        self.backoff_ms = backoff_ms
        self.max_map_entries = max(1, dedupe_buffer_size // _ENTRY_BYTES)
        self.checkpoint = OffsetCheckpointFile(os.path.join(data_dir, CLEANER_OFFSET_CHECKPOINT))
        self.first_dirty = self.checkpoint.read()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.last_stats = None
        self.failures = 0
        self._thread = None
        if background:
            self._thread = threading.Thread(target=self._run, name="kafka-log-cleaner", daemon=True)
            self._thread.start()

    # -- choosing ---------------------------------------------------------------------------
    def _cleanable(self, lg, now):
        """(segments to clean, first dirty offset, dirty bytes, total bytes) of a log."""
        segments = lg.segments
        end = segments[-1].base_offset
        lag = lg.config.min_compaction_lag_ms
        first_dirty = max(self.first_dirty.get((lg.topic, lg.partition), 0), lg.log_start_offset)
        if lag > 0:
            for seg in segments[:-1]:
                if seg.next_offset > first_dirty and seg.largest_timestamp > now - lag:
                    end = min(end, seg.base_offset)
                    break
        cleanable = [s for s in segments[:-1] if s.base_offset < end and s.next_offset > lg.log_start_offset]
        dirty_bytes = sum(s.size for s in cleanable if s.next_offset > first_dirty)
        return cleanable, first_dirty, dirty_bytes, sum(s.size for s in cleanable)

    def filthiest_log(self, now=None):
        now = now_ms() if now is None else now
        best, best_ratio = None, -1.0
        for lg in list(self.logs().values()):
            if not lg.config.compact or lg.closed:
                continue
            cleanable, first_dirty, dirty, total = self._cleanable(lg, now)
            if not dirty:
                continue
            ratio = dirty / total
            overdue = any(s.next_offset > first_dirty and now - s.largest_timestamp > lg.config.max_compaction_lag_ms
                          for s in cleanable)
            if (ratio >= lg.config.min_cleanable_dirty_ratio or overdue) and ratio > best_ratio:
                best, best_ratio = lg, ratio
        return best

    # -- cleaning ---------------------------------------------------------------------------
    def clean_log(self, lg, now=None):
        """One compaction pass over lg (whatever its dirty ratio). Returns CleanerStats, or
        None when nothing is cleanable."""
        with self._lock:
            return self._clean(lg, now_ms() if now is None else now)

    def _clean(self, lg, now):
        started = time.monotonic()
        cleanable, first_dirty, dirty_bytes, _total = self._cleanable(lg, now)
        dirty = [s for s in cleanable if s.next_offset > first_dirty]
        if not dirty:
            return None
        stats = CleanerStats()
        stats.first_dirty_offset = first_dirty
        offset_map = {}
        map_end = first_dirty
        for seg in dirty:
            for _pos, batch in iter_segment_batches(seg):
                base, attrs, _ts, count = _batch_fields(batch)
                if attrs & 0x20:
                    continue
                last = base + struct.unpack_from(">i", batch, 23)[0]
                if last < first_dirty:
                    continue
                for offset_delta, _t, key, _n, _s, _e in hot.record_spans(records_section(batch), count):
                    if key is not None and base + offset_delta >= first_dirty:
                        offset_map[_key_hash(key)] = base + offset_delta
            map_end = seg.next_offset
            if len(offset_map) >= self.max_map_entries:
                break  # the rest waits for the next pass, as Kafka's full map does
        stats.end_offset = map_end
        horizon = now - lg.config.delete_retention_ms
        for seg in cleanable:
            if seg.base_offset >= map_end:
                break
            if self._stop.is_set() or lg.closed:
                return stats
            self._clean_segment(lg, seg, offset_map, seg.largest_timestamp > horizon, stats)
        key = (lg.topic, lg.partition)
        self.first_dirty[key] = map_end
        self._write_checkpoint()
        stats.seconds = time.monotonic() - started
        self.last_stats = stats
        return stats

    def _clean_segment(self, lg, seg, offset_map, retain_tombstones, stats):
        stale = os.path.join(lg.dir, f"{seg.base_offset:020d}")
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            try:
                os.unlink(stale + suffix + CLEANED_SUFFIX)
            except FileNotFoundError:
                pass
        cleaned = LogSegment(lg.dir, seg.base_offset, lg.config, suffix=CLEANED_SUFFIX)
        cleaned.load(active=True)
        try:
            # This pass keeps every transactional batch and marker, so the segment's aborted
            # transactions stay as they are: its .txnindex goes along, swapped with the segment
            # (docs/transactions.md 4.8 has the cleaner that drops aborted data: plan step 5).
            for entry in seg.txn_index.entries:
                cleaned.txn_index.append(entry)
            for _pos, batch in iter_segment_batches(seg):
                stats.bytes_read += len(batch)
                out = filter_batch(batch, offset_map, retain_tombstones, stats)
                if out is None:
                    continue
                buf = bytearray(out) if isinstance(out, memoryview) else out
                cleaned.append(buf, struct.unpack_from(">q", buf, 35)[0])
                stats.bytes_written += len(buf)
            if cleaned.max_timestamp_so_far < 0 <= seg.largest_timestamp:
                # Emptied: its age falls back to the file's time, so it keeps the original's age
                # (Kafka copies the original's last-modified time for the same reason).
                ns = seg.largest_timestamp * 1_000_000
                os.utime(cleaned.log_path, ns=(ns, ns))
            cleaned.become_inactive(flush=True)
        except Exception:
            cleaned.delete_files()
            raise
        stats.segments += 1
        if not lg.replace_segment(seg, cleaned):
            log.info("segment %s of %s went away while being cleaned", seg.base_offset, lg.name)

    def forget(self, topic, partition, log_to_delete=None):
        """Drops a partition's cleaning state; with log_to_delete, deletes that log while no
        cleaning pass runs (one in progress finishes first)."""
        with self._lock:
            if log_to_delete is not None:
                log_to_delete.delete()
            if self.first_dirty.pop((topic, partition), None) is not None:
                self._write_checkpoint()

    def _write_checkpoint(self):
        live = self.logs()
        self.checkpoint.write({k: v for k, v in self.first_dirty.items() if k in live})

    # -- thread -----------------------------------------------------------------------------
    def _run(self):
        while not self._stop.is_set():
            lg = None
            try:
                lg = self.filthiest_log()
                if lg is not None:
                    self.clean_log(lg)
            except Exception:
                self.failures += 1
                log.exception("cleaning %s failed", lg.name if lg is not None else "a log")
                lg = None
            if lg is None:
                self._stop.wait(self.backoff_ms / 1000)

    def shutdown(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
