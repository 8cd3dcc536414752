"""Kafka's LogCleaner: compaction of logs with ``cleanup.policy`` containing ``compact``.

One pass over a log (``clean_log``):
1. The cleanable range ends at the active segment, or earlier at the first segment with records
   younger than ``min.compaction.lag.ms`` or reaching the last stable offset (so every
   transaction the cleaner sees is decided and the ``.txnindex`` lists the aborted ones). The dirty part starts at the first dirty offset
   (``cleaner-offset-checkpoint``; the log start offset the first time).
2. An offset map is built over the dirty part: xxh3-128 of each key -> its latest offset
   (Kafka's SkimpyOffsetMap keeps a 16-byte hash of the key the same way). Batches of aborted
   transactions and control batches are not mapped: an aborted write never hides an older
   committed value.
3. Every cleanable segment is rewritten to ``<base>.log.cleaned``: a record stays if it is the
   latest for its key (or its key is not in the map); records without a key go; a tombstone
   (null value) goes once its segment's newest record is older than ``delete.retention.ms``.
   Original offsets stay (gaps are normal); a batch that keeps all its records is copied as is,
   one that keeps some is rebuilt with its codec, header and record bytes; empty batches go.
   Transactions (Kafka's LogCleaner and CleanedTransactionMetadata, docs/transactions.md 4.8):
   batches of aborted transactions go whatever their keys; an ABORT marker stays while the
   pass still sees a batch of its transaction (its AbortedTxn then goes to the cleaned
   segment's ``.txnindex``), a COMMIT marker while the pass saw a batch of its transaction;
   a marker without them goes once its segment is older than ``delete.retention.ms`` (the
   tombstone rule: Kafka's horizon before KIP-534). The batch holding a known producer's last
   data offset, and a marker that is a producer's last entry, stay as a header-only batch if
   nothing else of them would (Kafka's RETAIN_EMPTY), so sequences and epochs survive a reload.
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

from ..clock import wall_ms
from ..errors import KafkaStorageError
from ._hot import hot
from ..record.control import ABORT
from ..record.errors import CorruptRecordError
from ..record.layout import (COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK, MAX_TIMESTAMP_OFFSET, RECORD_BATCH_OVERHEAD,
                             TRANSACTIONAL_FLAG_MASK)
from .batch_rewrite import build_batch, empty_batch, records_section
from .checkpoints import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from .log_segment import LogSegment
from .producer_state import parse_marker
from .segment_files import CLEANED_SUFFIX, FILE_SUFFIXES, HeaderWalk, segment_file_name

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
    """(position, batch memoryview) for the batches of an inactive segment, read in chunks; a
    batch that is not whole within end is a KafkaStorageError."""
    end = segment.size if end is None else end
    walk = HeaderWalk(segment.file.fd, 0, end, read_size=_READ_CHUNK)
    try:
        for header in walk:
            yield header.position, walk.batch_bytes(header)
    except CorruptRecordError as e:
        raise KafkaStorageError(f"{segment.log_path}: bad batch length at {e.position}") from e
    if walk.position < end:
        raise KafkaStorageError(f"{segment.log_path}: bad batch length at {walk.position}")


def _key_hash(key):
    return xxhash.xxh3_128_intdigest(key)


# a v2 batch header from baseOffset to recordsCount (Kafka's DefaultRecordBatch)
_HDR = struct.Struct(">qiibIhiqqqhii")


class CleanedTransactionMetadata:
    """Kafka's CleanedTransactionMetadata: the transactions met while walking batches in offset
    order. aborted: the AbortedTxn entries (txn_index.py) collected for the range walked."""

    def __init__(self, aborted):
        self._aborted = sorted(aborted, key=lambda a: a.first_offset)
        self._next = 0
        self._committed = set()  # producers whose transaction's batches were seen, not yet ended
        self._aborted_open = {}  # producer id -> [AbortedTxn, a batch of it was seen]
        self.cleaned_index = None  # the .txnindex of the segment being written (cleaning only)

    def _consume_up_to(self, offset):
        aborted, i = self._aborted, self._next
        while i < len(aborted) and aborted[i].first_offset <= offset:
            self._aborted_open.setdefault(aborted[i].producer_id, [aborted[i], False])
            i += 1
        self._next = i

    def on_control_batch(self, batch, producer_id, last_offset):
        """True when the control batch may go (Kafka's onControlBatchRead): an ABORT whose
        transaction has no batch left in the walk, a COMMIT whose transaction had none, an
        empty control batch. A kept ABORT's entry is appended to cleaned_index."""
        self._consume_up_to(last_offset)
        parsed = parse_marker(batch)  # CorruptRecordError for a control record that is no marker
        if parsed is None:
            return True  # emptied by an earlier pass
        if parsed[0] == ABORT:
            open_txn = self._aborted_open.pop(producer_id, None)
            if open_txn is not None and open_txn[1]:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(open_txn[0])
                return False
            return True
        if producer_id in self._committed:
            self._committed.discard(producer_id)
            return False
        return True

    def on_data_batch(self, producer_id, last_offset):
        """A transactional data batch: True when its transaction was aborted (Kafka's
        onBatchRead)."""
        self._consume_up_to(last_offset)
        open_txn = self._aborted_open.get(producer_id)
        if open_txn is not None:
            open_txn[1] = True
            return True
        self._committed.add(producer_id)
        return False


def filter_batch(batch, offset_map, retain_deletes, stats, txns=None, producers=None):
    """The batch to write in place of batch: batch itself, a rebuilt one, a header-only one, or
    None. retain_deletes: the segment is younger than delete.retention.ms (tombstones and
    markers without data stay); txns: the pass's CleanedTransactionMetadata; producers:
    {producer id: (last data offset or -1, epoch)} of the log's producers."""
    (base, _len, _epoch, _magic, _crc, attrs, delta, base_ts, _max_ts, pid, pepoch, _seq,
     count) = _HDR.unpack_from(batch, 0)
    stats.records_read += count
    discard = False
    retain_empty = False
    if pid >= 0:
        if attrs & (TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK) and txns is not None:
            if attrs & CONTROL_FLAG_MASK:
                discard = txns.on_control_batch(batch, pid, base + delta) and not retain_deletes
            else:
                discard = txns.on_data_batch(pid, base + delta)
        last = producers.get(pid) if producers else None
        if last is not None:  # Kafka's isBatchLastRecordOfProducer
            retain_empty = (base + delta == last[0] if last[0] >= 0
                            else bool(attrs & CONTROL_FLAG_MASK) and pepoch == last[1])
    if discard:
        if retain_empty:
            return batch if count == 0 else empty_batch(batch)
        return None
    if attrs & CONTROL_FLAG_MASK:  # a marker that stays keeps its record
        if count == 0 and not retain_empty:
            return None
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
        if value_is_null and not retain_deletes:
            continue
        kept.append((start, end, ts_delta))
    stats.records_kept += len(kept)
    if not kept:
        if retain_empty:
            return batch if count == 0 else empty_batch(batch)
        return None
    if len(kept) == count:
        return batch
    raw = b"".join(section[s:e] for s, e, _t in kept)
    max_ts = base_ts + max(t for _s, _e, t in kept)
    return build_batch(batch[:RECORD_BATCH_OVERHEAD], raw, len(kept), attrs & COMPRESSION_CODEC_MASK, max_ts)


def _last_entries(producers):
    """{producer id: (last data offset or -1, epoch)} (Kafka's lastRecordsOfActiveProducers),
    read without the log's lock (the cleaner never waits for it but to swap): the copies of the
    dict and of each entry's batches are single C-level operations, so an append racing them
    gives an older or newer entry, never a torn one. A newer last batch lies in the active
    segment, which this pass does not clean; keeping the older one as well is harmless."""
    out = {}
    for pid, entry in list(producers.items()):
        batches = tuple(entry.batches)
        out[pid] = (batches[-1].last_offset if batches else -1, entry.epoch)
    return out


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
        lso = lg.last_stable_offset
        for seg in segments[:-1]:  # nothing at or above the LSO: its transactions are undecided
            if seg.next_offset > lso:
                end = min(end, seg.base_offset)
                break
        if lag > 0:
            for seg in segments[:-1]:
                if seg.next_offset > first_dirty and seg.largest_timestamp > now - lag:
                    end = min(end, seg.base_offset)
                    break
        cleanable = [s for s in segments[:-1] if s.base_offset < end and s.next_offset > lg.log_start_offset]
        dirty_bytes = sum(s.size for s in cleanable if s.next_offset > first_dirty)
        return cleanable, first_dirty, dirty_bytes, sum(s.size for s in cleanable)

    def filthiest_log(self, now=None):
        now = wall_ms() if now is None else now
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
            return self._clean(lg, wall_ms() if now is None else now)

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
        txns = CleanedTransactionMetadata(lg.collect_aborted_transactions(first_dirty, dirty[-1].next_offset))
        for seg in dirty:
            for _pos, batch in iter_segment_batches(seg):
                base, _len, _epoch, _magic, _crc, attrs, delta, _bts, _mts, pid, _pe, _seq, count = \
                    _HDR.unpack_from(batch, 0)
                last = base + delta
                if attrs & (TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK) and pid >= 0:
                    # markers and aborted batches never enter the map (Kafka's buildOffsetMapForSegment)
                    if attrs & CONTROL_FLAG_MASK:
                        txns.on_control_batch(batch, pid, last)
                        continue
                    if txns.on_data_batch(pid, last):
                        continue
                elif attrs & CONTROL_FLAG_MASK:
                    continue
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
        to_clean = [seg for seg in cleanable if seg.base_offset < map_end]
        # one walk over the pass's transactions, and each producer's last entry, as Kafka takes
        # them when the pass starts
        txns = CleanedTransactionMetadata(lg.collect_aborted_transactions(to_clean[0].base_offset, map_end))
        producers = _last_entries(lg.producer_state.producers)
        for seg in to_clean:
            if self._stop.is_set() or lg.closed:
                return stats
            self._clean_segment(lg, seg, offset_map, seg.largest_timestamp > horizon, stats, txns, producers)
        key = (lg.topic, lg.partition)
        self.first_dirty[key] = map_end
        self._write_checkpoint()
        stats.seconds = time.monotonic() - started
        self.last_stats = stats
        return stats

    def _clean_segment(self, lg, seg, offset_map, retain_deletes, stats, txns, producers):
        stale = os.path.join(lg.dir, segment_file_name(seg.base_offset))
        for suffix in FILE_SUFFIXES:
            try:
                os.unlink(stale + suffix + CLEANED_SUFFIX)
            except FileNotFoundError:
                pass
        cleaned = LogSegment(lg.dir, seg.base_offset, lg.config, suffix=CLEANED_SUFFIX)
        cleaned.load(active=True)
        # the AbortedTxn of every ABORT marker kept goes here (.txnindex.cleaned, swapped in
        # with the segment)
        txns.cleaned_index = cleaned.txn_index
        try:
            for _pos, batch in iter_segment_batches(seg):
                stats.bytes_read += len(batch)
                out = filter_batch(batch, offset_map, retain_deletes, stats, txns, producers)
                if out is None:
                    continue
                buf = bytearray(out) if isinstance(out, memoryview) else out
                cleaned.append(buf, struct.unpack_from(">q", buf, MAX_TIMESTAMP_OFFSET)[0])
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
