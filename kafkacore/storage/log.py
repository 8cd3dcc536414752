"""Kafka's (Unified)Log for one partition: a directory ``<topic>-<partition>`` of segments, the
last one active.

- ``append(records)``: validate natively (no decompression), stamp base offsets and the leader
  epoch in place (LogAppendTime also stamps maxTimestamp and the CRC), roll when needed, write
  to the page cache. Returns LogAppendInfo.
- ``read(offset, max_bytes, max_offset=None)``: a FileSlice from the batch holding offset to a
  batch boundary, for os.sendfile. ``read_committed(offset, max_bytes)``: the same bounded by
  the last stable offset, with the aborted transactions a read_committed consumer needs.
- Offsets: log start offset, high watermark (= log end offset on a single broker, where acks=-1
  means the leader wrote it), recovery point; ``offset_for_timestamp`` (ListOffsets).
- Retention (``delete_old_segments``) and DeleteRecords (``delete_records``).

Transactions (docs/transactions.md, sections 4.1-4.5): ``append(..., origin=)`` takes
transactional batches (attributes bit 0x10) from clients and the coordinator, ``append_marker``
writes a COMMIT or ABORT marker (a control batch) for the coordinator; the producer state keeps
the open transactions, each ABORT of a transaction that wrote data gets an entry in its
segment's ``.txnindex`` (txn_index.py), and ``last_stable_offset`` (Kafka's LSO) is kept up to
date on appends, markers, high watermark and log start moves, so reading it costs nothing.

Replication (Kafka's UnifiedLog, ZooKeeper-mode broker):

- ``leader_epoch_cache``: the partition's LeaderEpochFileCache (``leader-epoch-checkpoint``).
  A leader's ``append(records, leader_epoch=E)`` assigns E at the first offset when E is above
  the latest epoch; ``append_as_follower(records)`` writes the leader's batches as they are
  (offsets and epochs kept) and assigns each new epoch at its batch's base offset.
- ``high_watermark``: = log end offset after every append while ``replicated`` is False (a
  single node); once ``make_replicated()``, only ``update_high_watermark`` moves it.
- ``truncate_to(offset)`` (a follower cutting what the leader does not have) and
  ``truncate_fully_and_start_at(offset)`` (a follower behind the leader's log start).

Readers take a snapshot of the segment list without a lock; appends, rolls, retention and the
cleaner's swaps take the log's lock briefly. The cleaner does its work outside the lock."""
import bisect
import os
import shutil
import struct
import threading
import uuid

from ..clock import wall_ms
from ..checksum import crc32c
from ..errors import (CorruptMessageError, DuplicateSequenceNumberError, InvalidRecordError, KafkaStorageError, OffsetOutOfRangeError,
                      RecordListTooLargeError)
from ..record import CorruptRecordError, codecs, iter_batches
from ..record.control import end_txn_marker_batch
from ..record.layout import (ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK, LAST_OFFSET_DELTA_OFFSET,
                             LOG_OVERHEAD, PRODUCER_ID_OFFSET, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG_MASK)
from ._hot import hot
from .batch_rewrite import records_section, recompress
from .checkpoints import LEADER_EPOCH_CHECKPOINT, PartitionMetadataFile, fsync_dir
from .file_slice import FileSlice
from .leader_epoch_cache import LeaderEpochFileCache
from .log_loader import load_segments
from .log_segment import DELETED_SUFFIX, SCAN_CHUNK, LogSegment
from .producer_state import (AppendOrigin, MarkerBatch, BatchProducerFields, ProducerStateManager, list_snapshots,
                             parse_marker, producer_batches)
from .scheduler import InlineScheduler
from .time_index import NO_TIMESTAMP

_PID = struct.Struct(">q")
_BASE_LEN = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
_BASE_LEN_EPOCH = struct.Struct(">qii")
# a v2 batch header from baseOffset to recordsCount (Kafka's DefaultRecordBatch)
_HEADER = struct.Struct(">qiibIhiqqqhii")
# A rolled segment is fsynced this long after the roll, not at once as Kafka does. By then the
# kernel has written its pages back on its own (vm.dirty_expire_centisecs defaults to 30 s), so
# the fsync only confirms it. At once, it forced the whole segment out while appends to the new
# one ran, and on ext4 those waited for the journal commit behind it: a follower catching up
# 1 GiB in 256 MiB segments ran 20 % slower (bench/RESULTS.md, 2026-11-26 evening). The
# recovery point is persisted only every log.flush.offset.checkpoint.interval.ms (60 s), so a
# crash costs at most a longer rescan, never data: recovery starts from an older point.
ROLLED_SEGMENT_FLUSH_DELAY_MS = 30_000
_HEADER_WALK_CHUNK = 1 << 16

_CLIENT, _COORDINATOR = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


def _record_validation_error(record_errors):
    """INVALID_RECORD for [(batch index, message)], with the summary Kafka's
    LogValidator.processRecordErrors sends as the partition's error_message: the count and the
    first three errors as Java prints its RecordErrors (clients and logs may match on it)."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
    return InvalidRecordError(
        f"One or more records have been rejected due to {len(record_errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]", record_errors)


class UnexpectedAppendOffsetError(OffsetOutOfRangeError):
    """A follower append whose first offset is below the log end offset (Kafka's
    UnexpectedAppendOffsetException); first_offset and last_offset are the append's."""

    def __init__(self, message, first_offset, last_offset):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetsOutOfOrderError(CorruptMessageError):
    """A follower append whose batches' offsets do not increase (Kafka's
    OffsetsOutOfOrderException)."""


def parse_partition_dir(name):
    """(topic, partition) from ``<topic>-<partition>``; None when the name is not one."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogAppendInfo:
    __slots__ = ("first_offset", "last_offset", "log_append_time", "max_timestamp",
                 "offset_of_max_timestamp", "records", "bytes", "log_start_offset", "duplicate")

    def __init__(self, first_offset, last_offset, log_append_time, max_timestamp, offset_of_max_timestamp,
                 records, nbytes, log_start_offset, duplicate=False):
        self.duplicate = duplicate  # an idempotent retry of a batch already in the log
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_append_time = log_append_time
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.records = records
        self.bytes = nbytes
        self.log_start_offset = log_start_offset

    def __repr__(self):
        return (f"LogAppendInfo(first_offset={self.first_offset}, last_offset={self.last_offset}, "
                f"log_append_time={self.log_append_time}, records={self.records})")


class Log:
    def __init__(self, directory, config, *, recovery_point=0, log_start_offset=0, clean_shutdown=True,
                 scheduler=None, topic_id=None, checkpointed_high_watermark=None, replicated=False):
        self.dir = directory
        self.name = os.path.basename(directory)
        parsed = parse_partition_dir(self.name)
        self.topic, self.partition = parsed if parsed else (self.name, 0)
        self.config = config
        self.scheduler = scheduler or InlineScheduler()
        self.lock = threading.RLock()
        self.closed = False
        # bumped by every truncation: a flush that began before one must not move the recovery
        # point past the new end
        self._truncations = 0
        os.makedirs(directory, exist_ok=True)
        self._metadata = PartitionMetadataFile(directory)
        self.topic_id = self._metadata.read()
        if topic_id is not None and self.topic_id is None:
            self._metadata.write(topic_id)
            self.topic_id = topic_id
        loaded = load_segments(directory, config, recovery_point, log_start_offset, clean_shutdown)
        self.load_result = loaded
        self._set_segments(loaded.segments)
        self.log_start_offset = max(log_start_offset, loaded.segments[0].base_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self.high_watermark = self.log_end_offset
        self.replicated = False  # until make_replicated(): appends move the high watermark
        self.checkpointed_high_watermark = checkpointed_high_watermark  # replication-offset-checkpoint
        self._unflushed = 0
        self.last_flush_ms = wall_ms()
        self.append_listeners = []  # fn(log) after every append (the broker's fetch wake-up)
        # fn(log) after truncate_to / truncate_fully_and_start_at, under the log's lock (the
        # LogManager writes its checkpoints, so a stale recovery point cannot outlive the cut)
        self.truncation_listeners = []
        self.leader_epoch_cache = self._load_leader_epoch_cache()
        # the first offset of the earliest open or unreplicated transaction, raised to the log
        # start (None: none); with the high watermark it makes the LSO
        self._first_unstable = None
        self.producer_state = ProducerStateManager(directory)
        recovered = loaded.first_recovered_offset
        if recovered is None:
            self.producer_state.load(self.log_end_offset, self._replay_producers)
        else:
            # Kafka's LogLoader order (docs/transactions.md 4.6): the loader deleted the
            # .txnindex files from the first recovered segment on; the state comes from the
            # latest snapshot at or below its base (later ones are deleted: they may describe
            # what recovery cut), and the replay writes the entries of every ABORT marker from
            # there on, as the appends did
            self.producer_state.load(recovered, self._replay_producers, index_from=recovered,
                                     index=self._rebuild_txn_entry,
                                     snapshot_at=[b for b in self._view[1][1:] if b > recovered])
        if loaded.recovered_segments or loaded.rebuilt_indexes or loaded.truncated_bytes:
            # fsync what recovery checked and rebuilt (from the first segment it touched, the
            # rebuilt .txnindex files too); only then is the recovery point the end of the log
            self.recovery_point = min(self.recovery_point, loaded.first_repaired_offset)
            self.flush()
        if replicated:
            self.make_replicated()
        else:
            self.producer_state.on_high_watermark_updated(self.high_watermark)
        self._update_first_unstable()

    @property
    def config(self):
        return self._config

    @config.setter
    def config(self, config):
        """A new topic config applies at once, to the active segment too (a lower
        segment.bytes rolls at the next append, as in Kafka)."""
        self._config = config
        view = getattr(self, "_view", None)
        if view is not None:
            for segment in view[0]:
                segment.config = config

    # -- segments ---------------------------------------------------------------------------
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

    # -- leader epochs --------------------------------------------------------------------------
    def _load_leader_epoch_cache(self):
        """The cache from leader-epoch-checkpoint; without the file, rebuilt from the batches'
        partitionLeaderEpoch (a log written before the file existed, or a crash inside
        truncate_fully_and_start_at, which removes the file first). Then cut to the log, as
        Kafka's loader does: a crash may leave entries past the end (they are written before
        the records) or below the log start."""
        cache = LeaderEpochFileCache(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT))
        if not cache.file_existed and any(seg.size for seg in self._view[0]):
            cache.assign_all(self._epoch_starts())
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        return cache

    def _epoch_starts(self):
        """(epoch, base offset) of every batch that starts a higher epoch (negative epochs,
        from clients that never had one, are skipped as Kafka's recovery skips them)."""
        latest = -1
        for segment in self._view[0]:
            for base, epoch in _batch_epochs(segment):
                if epoch > latest:
                    latest = epoch
                    yield epoch, base

    @property
    def latest_epoch(self):
        """The latest leader epoch in the cache, -1 when none."""
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch):
        """Kafka's UnifiedLog.endOffsetForEpoch: (epoch, end offset), or None when the cache
        cannot place leader_epoch."""
        epoch, end = self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
        return None if end < 0 else (epoch, end)

    def maybe_assign_epoch_start_offset(self, leader_epoch, start_offset):
        """Kafka's name for assign on this log's cache (a new leader assigns its epoch at the
        log end offset)."""
        with self.lock:
            return self.leader_epoch_cache.assign(leader_epoch, start_offset)

    # -- high watermark -------------------------------------------------------------------------
    def make_replicated(self):
        """Switches the log to replication: appends no longer move the high watermark;
        update_high_watermark does. The high watermark becomes the checkpointed one (0 when
        none), bounded by the log start and end offsets, as Kafka initialises it. A log already
        replicated keeps its high watermark. Returns it."""
        with self.lock:
            if not self.replicated:
                self.replicated = True
                checkpointed = self.checkpointed_high_watermark
                self.high_watermark = self._bounded(0 if checkpointed is None else checkpointed)
                if self.producer_state.on_high_watermark_updated(self.high_watermark):
                    self._update_first_unstable()
            return self.high_watermark

    def update_high_watermark(self, offset):
        """Sets the high watermark to offset bounded by [log start offset, log end offset]
        (Kafka's updateHighWatermark; it may move down, as a follower taking the leader's
        does). Transactions whose marker it passed become stable (the LSO moves with it). A
        change wakes the append listeners (long-polling fetches read up to it). Returns the
        new high watermark."""
        with self.lock:
            if self.closed:
                raise KafkaStorageError(f"log {self.name} is closed")
            hw = self._bounded(offset)
            changed = hw != self.high_watermark
            # the high watermark first, then the first unstable offset: a reader of the LSO
            # reads them in the other order, so it never sees a later pair of values mixed
            # with an earlier one in the unsafe direction (see last_stable_offset)
            self.high_watermark = hw
            if changed and self.producer_state.on_high_watermark_updated(hw):
                self._update_first_unstable()
        if changed:
            for listener in self.append_listeners:
                listener(self)
        return hw

    def _bounded(self, offset):
        return min(max(offset, self.log_start_offset), self.log_end_offset)

    # -- last stable offset ---------------------------------------------------------------------
    @property
    def last_stable_offset(self):
        """Kafka's UnifiedLog.lastStableOffset: the first unstable offset (the first offset of
        the earliest transaction still open, or completed with its marker at or above the high
        watermark, raised to the log start) when it is below the high watermark, else the high
        watermark. O(1), without the lock: the high watermark is read first and writers
        publish a transaction's first offset before a high watermark covering its data (and
        move the high watermark past a marker before dropping the transaction), so a reader
        never gets an LSO above an undecided record."""
        hw = self.high_watermark
        fu = self._first_unstable
        return fu if fu is not None and fu < hw else hw

    @property
    def first_unstable_offset(self):
        """The first offset of the earliest open or unreplicated transaction (raised to the log
        start), None when there is none."""
        return self._first_unstable

    def _update_first_unstable(self):
        """Recomputes the first unstable offset after a transaction opened, completed or became
        replicated, or the log start moved (under the lock)."""
        fu = self.producer_state.first_unstable_offset()
        if fu is not None and fu < self.log_start_offset:
            fu = self.log_start_offset  # Kafka's maybeIncrementFirstUnstableOffset
        self._first_unstable = fu

    # -- append -----------------------------------------------------------------------------
    def append(self, records, leader_epoch=0, allow_control=False, origin=AppendOrigin.CLIENT):
        """Appends produced batches (one or more, bytes-like) as the leader. origin is Kafka's
        AppendOrigin: ``client`` (Produce: sequences checked), ``coordinator`` (markers and
        transactional offset commits: epochs checked, sequences not; control batches allowed, as
        with allow_control). Raises CorruptMessageError, InvalidRecordError,
        MessageTooLargeError, RecordListTooLargeError, the producer state's errors
        (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE,
        TRANSACTION_COORDINATOR_FENCED) or KafkaStorageError; on any of them but the last the
        log is unchanged."""
        if origin is not _CLIENT:  # (the default: one identity test)
            if origin == _COORDINATOR:
                allow_control = True
            elif origin != _CLIENT:
                raise ValueError(f"append origin {origin!r}: client or coordinator (a follower uses append_as_follower)")
        config = self.config
        info = hot.validate_records(records, config.max_message_bytes, allow_control)
        # one test per append: transactional and control batches take the slower path below,
        # everything else runs as it did before transactions
        txn = info.is_transactional or info.has_control
        if txn:
            self._check_transactional(records)
        if config.compact:
            self._check_keys(records)
        buf = records
        target = config.compression_type
        if target != "producer" and not info.has_control:  # a marker is never recompressed
            codec = codecs.codec_id("none" if target == "uncompressed" else target)
            if codec != info.attributes & 0x07 or info.batches > 1:
                try:
                    buf = recompress(records, codec)
                except CorruptRecordError as e:
                    raise CorruptMessageError(f"batch does not decompress: {e}") from None
                info = hot.validate_records(buf, config.max_message_bytes, allow_control)
        if isinstance(buf, (bytes, memoryview)) and memoryview(buf).readonly:
            buf = bytearray(buf)  # offsets are stamped in place
        if len(buf) > config.segment_bytes:
            raise RecordListTooLargeError(f"{len(buf)} bytes of records exceed segment.bytes={config.segment_bytes}")
        index_slots = min(config.segment_index_bytes // 8, config.segment_index_bytes // 12 - 1)
        if info.batches > index_slots:  # (each batch may need an index entry in one segment)
            raise RecordListTooLargeError(
                f"{info.batches} batches in one append exceed what segment.index.bytes="
                f"{config.segment_index_bytes} indexes in a segment ({index_slots})")
        # the idempotence fields: byte 43 of a v2 batch holds its producer id
        pbatches = producer_batches(buf) if info.batches > 1 or _PID.unpack_from(buf, PRODUCER_ID_OFFSET)[0] >= 0 else ()
        with self.lock:
            if self.closed:
                raise KafkaStorageError(f"log {self.name} is closed")
            first = self.log_end_offset
            if pbatches:
                dup = self._check_producers(pbatches, origin)
                if dup is not None:
                    return LogAppendInfo(dup.first_offset, dup.last_offset, -1, dup.timestamp, dup.last_offset, 0, 0,
                                         self.log_start_offset, duplicate=True)
            last = first + info.records - 1
            now = wall_ms()
            log_append_time = now if config.log_append_time else -1
            hot.assign_offsets(buf, first, leader_epoch, log_append_time)
            segment = self.active_segment
            message_ts = log_append_time if log_append_time >= 0 else info.max_timestamp
            if self._should_roll(segment, len(buf), last, info.batches, message_ts, now):
                segment = self._roll(now)
            if leader_epoch > self.leader_epoch_cache.latest_epoch:
                # before the records, as Kafka does: a crash then leaves an entry past the end,
                # which the next load cuts, never records without their epoch's entry
                self.leader_epoch_cache.assign(leader_epoch, first)
            segment.append(buf, log_append_time if log_append_time >= 0 else info.max_timestamp)
            if pbatches:
                # before the high watermark moves: a transaction opened here is unstable
                # before a reader can see its data below the high watermark
                self._update_producers(buf, pbatches, first, log_append_time, origin, segment, txn)
            if not self.replicated:
                self.high_watermark = segment.next_offset
                if txn and self.producer_state.on_high_watermark_updated(self.high_watermark):
                    self._update_first_unstable()  # a single node's markers are replicated at once
            self._unflushed += info.records
            flush_now = self._unflushed >= config.flush_messages
        if flush_now:
            self.flush()
        for listener in self.append_listeners:
            listener(self)
        if log_append_time >= 0:
            max_ts, max_ts_offset = log_append_time, last
        else:
            max_ts, max_ts_offset = info.max_timestamp, first + info.max_timestamp_delta
        return LogAppendInfo(first, last, log_append_time, max_ts, max_ts_offset, info.records, len(buf),
                             self.log_start_offset)

    def append_marker(self, producer_id, producer_epoch, coordinator_epoch, commit, leader_epoch=0,
                      timestamp_ms=None):
        """Writes the COMMIT (commit=True) or ABORT marker of producer_id's transaction: a
        control batch (record/control.py) appended with coordinator origin. Refused with
        INVALID_PRODUCER_EPOCH when producer_epoch is below the partition's epoch for the
        producer, TRANSACTION_COORDINATOR_FENCED when coordinator_epoch is below the last one
        seen. The open transaction completes (an ABORT of one that wrote data gets its
        .txnindex entry) and the LSO moves; a producer without an open transaction only takes
        the epochs (a retried marker is harmless). Wakes the append listeners like any append.
        Returns the LogAppendInfo (first_offset is the marker's offset)."""
        marker = end_txn_marker_batch(producer_id, producer_epoch, coordinator_epoch, commit,
                                      wall_ms() if timestamp_ms is None else timestamp_ms)
        return self.append(bytearray(marker), leader_epoch=leader_epoch, origin=AppendOrigin.COORDINATOR)

    def append_as_follower(self, records):
        """Appends the leader's batches as they are (Kafka's appendAsFollower): offsets, leader
        epochs and timestamps kept, nothing stamped. Checked as Kafka checks a follower's
        append: whole batches of magic 2 with their CRC, a known codec, offsets increasing, the
        first batch not below the log end offset (UnexpectedAppendOffsetError, else nothing is
        written; a gap above it is fine: a compacted leader has them). Record-level checks
        and max.message.bytes are the leader's business (a cleaned batch holds fewer records
        than its offset range, which a produce would refuse).

        Each batch starting a new leader epoch is assigned in the leader epoch cache; the
        producers' state follows the batches without sequence checks (the leader decided), so
        this replica can lead with it. Segments roll by the append rules, decided per batch, so
        a follower fed the leader's appends rolls where the leader did. The high watermark does
        not move. On a failed write the log keeps the batches written before it."""
        batches = _follower_batches(records)
        config = self.config
        txn = False
        for b in batches:
            if b.size > config.segment_bytes:
                raise RecordListTooLargeError(
                    f"a {b.size}-byte batch at offset {b.base} exceeds segment.bytes={config.segment_bytes}")
            if b.producer_id >= 0:
                b.pb = _follower_producer_batch(records, b)
                txn = txn or b.attributes & 0x30
        first, last = batches[0].base, batches[-1].last
        with self.lock:
            if self.closed:
                raise KafkaStorageError(f"log {self.name} is closed")
            end = self.log_end_offset
            if first < end:
                raise UnexpectedAppendOffsetError(
                    f"unexpected offset in a follower append to {self.name}: first offset {first} is below the "
                    f"log end offset {end} (last offset in the append {last}, log start offset "
                    f"{self.log_start_offset})", first, last)
            cache = self.leader_epoch_cache
            latest = cache.latest_epoch
            epochs = []
            for b in batches:
                if b.epoch >= 0 and b.epoch != latest:
                    epochs.append((b.epoch, b.base))
                    latest = b.epoch
            if epochs:
                cache.assign_all(epochs)  # before the records (see append)
            try:
                self._write_as_follower(records, batches, txn)
            except BaseException:
                if epochs:  # entries for batches that were not written
                    cache.truncate_from_end(self.log_end_offset)
                raise
            records_count = sum(max(b.count, 0) for b in batches)
            self._unflushed += records_count
            flush_now = self._unflushed >= config.flush_messages
        if flush_now:
            self.flush()
        for listener in self.append_listeners:
            listener(self)
        top = max(batches, key=lambda b: b.max_ts)  # the first batch with the largest maxTimestamp
        return LogAppendInfo(first, last, -1, top.max_ts, top.last, records_count, len(memoryview(records).cast("B")),
                             self.log_start_offset)

    def _write_as_follower(self, records, batches, txn=False):
        """Writes batches (already checked) into segments: the rest of them at once when they
        need no roll, else one batch (rolling first if it needs one) and look again. The
        producer state follows each piece written (replication origin: nothing refused), and a
        marker's .txnindex entry goes to the segment the piece went to, as on the leader."""
        config = self.config
        mv = memoryview(records).cast("B")
        index_slots = min(config.segment_index_bytes // 8, config.segment_index_bytes // 12 - 1)
        n = len(batches)
        suffix_max_ts = [0] * n
        running = NO_TIMESTAMP
        for k in range(n - 1, -1, -1):
            running = max(running, batches[k].max_ts)
            suffix_max_ts[k] = running
        now = wall_ms()
        i = 0
        while i < n:
            segment = self.active_segment
            start = batches[i].pos
            nbytes = batches[-1].pos + batches[-1].size - start
            j = n
            if (nbytes > config.segment_bytes or n - i > index_slots
                    or self._should_roll(segment, nbytes, batches[-1].last, n - i, suffix_max_ts[i], now)):
                j = i + 1
                one = batches[i]
                if self._should_roll(segment, one.size, one.last, 1, one.max_ts, now):
                    segment = self._roll(now)
            stop = batches[j - 1].pos + batches[j - 1].size
            segment.append(mv[start:stop], batches[i].max_ts)
            state = self.producer_state
            for b in batches[i:j]:
                if b.producer_id >= 0:
                    completed = state.update(b.pb, b.base, b.last, b.max_ts, AppendOrigin.REPLICATION)
                    if completed is not None:
                        self._complete_txn(segment, completed)
            i = j
        if txn:
            self._update_first_unstable()

    def _check_producers(self, pbatches, origin):
        """Sequence, epoch and transaction checks of every producer batch, in order (a second
        batch of the same producer in one append must follow the first). Returns the
        original's metadata when a single batch is a retry; raises on an error, state
        unchanged."""
        state = self.producer_state
        if len(pbatches) == 1:
            return state.check(pbatches[0], origin)
        scratch = ProducerStateManager(self.dir)
        scratch.producers = {pid: e.copy() for pid, e in state.producers.items()
                             if pid in {b.producer_id for b in pbatches}}
        for b in pbatches:
            if scratch.check(b, origin) is not None:
                raise DuplicateSequenceNumberError(
                    f"producer {b.producer_id}: a batch of a multi-batch append repeats sequence {b.first_seq}")
            scratch.update(b, 0, b.offset_delta, b.max_timestamp, origin)
        return None

    def _check_transactional(self, records):
        """A transactional data batch must carry a producer id: without one it could neither
        open nor end a transaction, and a read_committed reader would take it as committed.
        (kafkacore's rule; Kafka stores such a batch as plain data.)"""
        mv = memoryview(records).cast("B")
        pos = 0
        while pos + RECORD_BATCH_OVERHEAD <= mv.nbytes:
            base, blen, _e, _m, _c, attrs, *_rest, pid, _pe, _bs, _n = _HEADER.unpack_from(mv, pos)
            if attrs & TRANSACTIONAL_FLAG_MASK and not attrs & CONTROL_FLAG_MASK and pid < 0:
                raise InvalidRecordError(f"a transactional batch needs a producer id (at byte {pos})")
            pos += LOG_OVERHEAD + blen

    def _update_producers(self, buf, pbatches, first, log_append_time, origin, segment, txn):
        offsets = {}
        mv = memoryview(buf)
        pos = 0
        while pos + RECORD_BATCH_OVERHEAD <= mv.nbytes:  # first offset of each producer batch, as stamped
            base, blen = _BASE_LEN.unpack_from(mv, pos)
            if _PID.unpack_from(mv, pos + PRODUCER_ID_OFFSET)[0] >= 0:
                offsets.setdefault(len(offsets), base)
            pos += LOG_OVERHEAD + blen
        state = self.producer_state
        if not txn:
            for i, b in enumerate(pbatches):
                base = offsets.get(i, first)
                ts = log_append_time if log_append_time >= 0 else b.max_timestamp
                state.update(b, base, base + b.offset_delta, ts, origin)
            return
        for i, b in enumerate(pbatches):
            base = offsets.get(i, first)
            ts = log_append_time if log_append_time >= 0 else b.max_timestamp
            completed = state.update(b, base, base + b.offset_delta, ts, origin)
            if completed is not None:
                self._complete_txn(segment, completed)
        self._update_first_unstable()

    def _complete_txn(self, segment, completed):
        """Kafka's order after a marker: the .txnindex entry (an ABORT) with the LSO taken
        before the completion, then the transaction leaves the open set. Each marker is done
        before the next batch is applied, so an append split differently (a follower's fetch)
        writes the same entries. A failed index write closes the log (its files and this
        object disagree until a reopen) and raises KafkaStorageError."""
        state = self.producer_state
        lso = state.last_stable_offset(completed)
        try:
            segment.update_txn_index(completed, lso)
        except (KafkaStorageError, ValueError) as e:
            state.complete_txn(completed)
            self._update_first_unstable()
            self._close_on_failure()
            raise KafkaStorageError(f"{self.name}: the .txnindex entry of {completed} was not written ({e}); "
                                    "the log is closed") from e
        state.complete_txn(completed)

    def _rebuild_txn_entry(self, completed, last_stable_offset):
        """The .txnindex entry of an ABORT met by the recovery replay, in the segment holding
        its marker (what _complete_txn wrote when the marker was appended)."""
        segments, bases = self._view
        segment = segments[max(0, bisect.bisect_right(bases, completed.last_offset) - 1)]
        segment.update_txn_index(completed, last_stable_offset)

    def _replay_producers(self, from_offset):
        """(BatchProducerFields, first offset, last offset) of every batch from from_offset on (log
        load: the batches after the latest producer snapshot)."""
        offset = max(from_offset, self.log_start_offset)
        while offset < self.log_end_offset:
            data = self.read(offset, 1 << 22).read()
            if not data:
                break
            mv = memoryview(data)
            pos = 0
            nxt = offset
            while pos + RECORD_BATCH_OVERHEAD <= len(data):
                base, blen = _BASE_LEN.unpack_from(mv, pos)
                if pos + LOG_OVERHEAD + blen > len(data):
                    break
                # (a batch without a producer id changes nothing: skipped at the cost of a read)
                if base >= from_offset and _PID.unpack_from(mv, pos + PRODUCER_ID_OFFSET)[0] >= 0:
                    for b in producer_batches(mv[pos:pos + LOG_OVERHEAD + blen]):
                        yield b, base, base + b.offset_delta
                nxt = base + _LAST_DELTA.unpack_from(mv, pos + LAST_OFFSET_DELTA_OFFSET)[0] + 1
                pos += LOG_OVERHEAD + blen
            if nxt <= offset:
                break
            offset = nxt

    def _check_keys(self, records):
        """A compacted topic takes only keyed records. As in Kafka's LogValidator, a batch
        holding keyless records is refused whole with INVALID_RECORD naming each of them by its
        index in the batch (KIP-467 record errors); with several batches, the first such batch.
        This reads inside compressed batches: bytes that do not decompress are CORRUPT_MESSAGE,
        records that do not parse INVALID_RECORD."""
        for batch in iter_batches(records):
            if batch.is_control:
                continue
            try:
                section = records_section(batch.to_bytes())
            except CorruptRecordError as e:
                raise CorruptMessageError(f"batch at offset delta 0 does not decompress: {e}") from None
            try:
                spans = hot.record_spans(section, batch.count)
            except CorruptRecordError as e:
                raise InvalidRecordError(f"malformed record in a compressed batch: {e}") from None
            for rec in spans:
                if rec[2] is None:
                    # only now, with the batch already refused, name every keyless record (a
                    # plain loop keeps the keyed batches' check as cheap as before)
                    message = ("Compacted topic cannot accept message without key in topic partition "
                               f"{self.topic}-{self.partition}")
                    raise _record_validation_error([(i, message) for i, r in enumerate(spans) if r[2] is None])

    def _should_roll(self, segment, nbytes, last_offset, batches, message_ts, now):
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
        return waited > self.config.segment_ms - self.config.segment_jitter_ms

    def roll(self):
        with self.lock:
            return self._roll(wall_ms())

    def _roll(self, now):
        old = self.active_segment
        new_base = self.log_end_offset
        if old.size == 0:
            return old  # an empty active segment is already the roll's result
        # The new segment first: if its files cannot be made (disk full), the old one stays
        # active and untouched, and the append fails with KAFKA_STORAGE_ERROR.
        new = LogSegment.create(self.dir, new_base, self.config, now)
        try:
            old.become_inactive(flush=False)
            # Kafka snapshots producer state at every roll, named by the new segment's base,
            # empty or not: recovery of a later segment then starts its replay there instead
            # of at the log start (which costs a pass over every batch of the log)
            self.producer_state.take_snapshot(new_base)
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
        if self.config.flush_ms < (1 << 62) and now - self.last_flush_ms >= self.config.flush_ms:
            self.flush()

    # -- reads ------------------------------------------------------------------------------
    def read(self, offset, max_bytes, max_offset=None, min_one_batch=True):
        """FileSlice of whole batches from the one holding offset, about max_bytes long (one
        batch at least with min_one_batch), never past max_offset (exclusive; e.g. the high
        watermark). OffsetOutOfRangeError below the log start offset or past the end."""
        return self._read(offset, max_bytes, max_offset, min_one_batch)[0]

    def read_committed(self, offset, max_bytes, min_one_batch=True):
        """A read_committed fetch (isolation_level 1): (FileSlice, aborted) where the slice is
        read's bounded by the last stable offset and aborted lists the AbortedTxn entries
        (txn_index.py; producer_id and first_offset go into the Fetch response) of every
        aborted transaction overlapping [offset, upper), upper being Kafka's
        fetchUpperBoundOffset: the offset of the first offset index entry at or after the
        slice's end, else the next segment's base offset, else the log end offset (Kafka's
        LocalLog.read with includeAbortedTxns). Nothing read: an empty list."""
        lso = self.last_stable_offset
        sl, segments, i, read_index = self._read(offset, max_bytes, lso, min_one_batch)
        if sl.length == 0:
            return sl, []
        segment = segments[read_index]
        upper = segment.fetch_upper_bound_offset(sl.position, sl.length)
        if upper is None:
            upper = segments[read_index + 1].base_offset if read_index + 1 < len(segments) \
                else segments[-1].next_offset
        return sl, self._collect_aborted(segments, i, offset, upper)

    def collect_aborted_transactions(self, start_offset, upper_bound_offset):
        """The AbortedTxn entries overlapping [start_offset, upper_bound_offset), from the
        segment holding start_offset on (Kafka's LocalLog.collectAbortedTransactions)."""
        segments, bases = self._view
        i = max(0, bisect.bisect_right(bases, start_offset) - 1)
        return self._collect_aborted(segments, i, start_offset, upper_bound_offset)

    @staticmethod
    def _collect_aborted(segments, i, start_offset, upper_bound_offset):
        out = []
        for segment in segments[i:]:
            found, complete = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            out += found
            if complete:
                break
        return out

    def _read(self, offset, max_bytes, max_offset, min_one_batch):
        """(slice, segments, index of the segment holding offset, index of the segment read)."""
        for _attempt in range(3):
            if self.closed:
                raise KafkaStorageError(f"log {self.name} is closed")
            segments, bases = self._view
            end = segments[-1].next_offset
            start = self.log_start_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} of {self.name} is outside the log's range [{start}, {end}]")
            if offset == end or (max_offset is not None and offset >= max_offset):
                return FileSlice(segments[-1].file, segments[-1].size, 0, offset), segments, len(segments) - 1, \
                    len(segments) - 1
            i = max(0, bisect.bisect_right(bases, offset) - 1)
            try:
                sl, read_index = self._read_from(segments, i, offset, max_bytes, max_offset, end, min_one_batch)
                return sl, segments, i, read_index
            except (OSError, ValueError, KafkaStorageError) as e:
                if self.closed:
                    raise KafkaStorageError(f"log {self.name} was closed during the read") from None
                if not any(s.deleted for s in segments):
                    if isinstance(e, KafkaStorageError):
                        raise
                    raise KafkaStorageError(f"reading {self.name} at {offset} failed: {e}") from e
                # a segment went (retention, cleaner) under this snapshot: read again
        raise KafkaStorageError(f"read of {self.name} at {offset} kept racing segment deletion")

    def _read_from(self, segments, i, offset, max_bytes, max_offset, end, min_one_batch):
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

    def read_batches_bytes(self, offset=None, max_bytes=1 << 62):
        """All bytes from offset (default: the log start) to the end, for tests and tools."""
        out = bytearray()
        offset = self.log_start_offset if offset is None else offset
        while offset < self.log_end_offset:
            sl = self.read(offset, max_bytes)
            if sl.length == 0:
                break
            data = sl.read()
            out += data
            last_batch_next = None
            for batch in iter_batches(data):
                last_batch_next = batch.next_offset
            offset = last_batch_next
        return bytes(out)

    def offset_for_timestamp(self, timestamp):
        """ListOffsets: (offset, timestamp) or None. -2 earliest (log start offset), -1 latest
        (high watermark), -3 the record with the largest timestamp; a timestamp >= 0 gives the
        first record at or after it (Kafka's fetchOffsetByTimestamp)."""
        if self.closed:
            raise KafkaStorageError(f"log {self.name} is closed")
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return self.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self.high_watermark, -1
        segments = self._view[0]
        start = self.log_start_offset
        if timestamp == MAX_TIMESTAMP:
            best = None
            for segment in segments:
                if segment.next_offset > start and segment.max_timestamp_so_far > -1:
                    if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
                        best = segment
            if best is None:
                return None
            return self._first_record_at(best, best.max_timestamp_so_far, start, exact=True)
        if timestamp < 0:
            return None
        for segment in segments:
            if segment.next_offset <= start or segment.max_timestamp_so_far < timestamp:
                continue
            found = self._first_record_at(segment, timestamp, start)
            if found is not None:
                return found
        return None

    def _first_record_at(self, segment, timestamp, start, exact=False):
        """Kafka's searchForTimestamp: walk batches from the index position; in the first ones
        whose maxTimestamp reaches timestamp, the first record at or after start that does."""
        starting = max(start, segment.base_offset)
        position = segment.timestamp_search_start(timestamp, starting)
        while True:
            found = segment.next_batch_by_timestamp(timestamp, position)
            if found is None:
                return None
            position, _base, last, _max_ts, size = found
            if last >= starting:
                for batch in iter_batches(segment.read_bytes(position, size)):
                    for rec in batch:
                        if rec.offset >= starting and (rec.timestamp_ms == timestamp if exact
                                                       else rec.timestamp_ms >= timestamp):
                            return rec.offset, rec.timestamp_ms
            position += size

    # -- retention ---------------------------------------------------------------------------
    def delete_records(self, offset):
        """DeleteRecords: the log start offset moves up to offset (not past the high watermark);
        segments wholly below it are deleted. Returns the new log start offset."""
        with self.lock:
            if self.closed:
                raise KafkaStorageError(f"log {self.name} is closed")
            if offset < 0 or offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records of {self.name} before {offset}: the high watermark is {self.high_watermark}")
            lso = self.last_stable_offset
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                self.producer_state.truncate_head(offset)
                self._update_first_unstable()
                self.leader_epoch_cache.truncate_from_start(offset)
            moved = self.last_stable_offset != lso
        self._delete_segments(lambda seg, next_base: next_base is not None and next_base <= self.log_start_offset)
        if moved:  # read_committed fetches waiting on the LSO
            for listener in self.append_listeners:
                listener(self)
        return self.log_start_offset

    def delete_old_segments(self, now=None):
        """Kafka's retention pass: segments past retention.ms, segments over retention.bytes
        (oldest first), and segments wholly below the log start offset. Returns how many went."""
        now = wall_ms() if now is None else now
        config = self.config
        deleted = self._delete_segments(
            lambda seg, next_base: next_base is not None and next_base <= self.log_start_offset)
        if not config.delete:
            return deleted
        if config.retention_ms >= 0:
            deleted += self._delete_segments(lambda seg, nb: now - seg.largest_timestamp > config.retention_ms)
        if config.retention_bytes >= 0:
            excess = [self.size_in_bytes - config.retention_bytes]

            def over_size(seg, _next_base):
                if excess[0] - seg.size >= 0:
                    excess[0] -= seg.size
                    return True
                return False
            deleted += self._delete_segments(over_size)
        return deleted

    def _delete_segments(self, predicate):
        with self.lock:
            if self.closed:
                return 0
            segments = list(self._view[0])
            doomed = []
            for i, seg in enumerate(segments):
                next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
                if next_base is None and seg.size == 0:
                    break
                upper = next_base if next_base is not None else self.log_end_offset
                if self.high_watermark < upper or not predicate(seg, next_base):
                    break
                doomed.append(seg)
            if not doomed:
                return 0
            if doomed[-1] is segments[-1]:
                self._roll(wall_ms())  # keep an (empty) active segment
                segments = list(self._view[0])
            remaining = segments[len(doomed):]
            self._set_segments(remaining)
            lso = self.last_stable_offset
            self.log_start_offset = max(self.log_start_offset, remaining[0].base_offset)
            for seg in doomed:
                self._retire(seg)
            self.producer_state.truncate_head(self.log_start_offset)
            self._update_first_unstable()
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            moved = self.last_stable_offset != lso
        if moved:
            for listener in self.append_listeners:
                listener(self)
        return len(doomed)

    def remove_expired_producers(self, expiration_ms, now=None):
        """producer.id.expiration.ms: forgets the producers idle that long without an open
        transaction (the cleaner then no longer keeps their last batch). Returns how many."""
        now = wall_ms() if now is None else now
        with self.lock:
            if self.closed:
                return 0
            return self.producer_state.remove_expired_producers(now, expiration_ms)

    def _retire(self, segment):
        """Rename to .deleted now; unlink after file.delete.delay.ms (readers of an older
        snapshot of the segment list may still be using it)."""
        segment.deleted = True
        try:
            segment.change_suffix("", DELETED_SUFFIX)
        except OSError as e:
            raise KafkaStorageError(f"renaming {segment.log_path} for deletion failed: {e}") from e
        self.scheduler.schedule(self.config.file_delete_delay_ms, segment.delete_files)

    # -- truncation (replication) --------------------------------------------------------------
    def truncate_to(self, offset):
        """Removes every record at offset and after (Kafka's UnifiedLog.truncateTo, a follower
        cutting what the leader does not have). Segments above offset are deleted; the one
        holding offset is cut at the start of the batch holding it, as Kafka's
        LogSegment.truncateTo cuts, so the log end offset becomes that batch's base offset
        (offset itself on a batch boundary; Kafka would claim offset even when the cut batch
        started below it, which a restart would not confirm). Below the first segment's base
        it is truncate_fully_and_start_at(offset). The producers' state is rebuilt for the new
        end, leader epochs from it on go, and the high watermark, recovery point and log start
        offset come down to it. A segment left empty goes too (unless it is the first): the
        log is then the one that never rolled there. Nothing happens for offset >= the log end
        offset, except that a leader epoch entry at the end goes (Kafka's rule too). Returns
        True when records went.

        Crash safety: the segments above go newest first, each rename made durable before the
        next, then the cut (fsynced), then the producer snapshots past the end, then the epoch
        cache: a crash anywhere leaves a prefix of the log, which the next load reconciles
        (epoch entries and snapshots past its end are dropped there). A failure part way
        closes the log (KAFKA_STORAGE_ERROR on every call) and raises; reopening recovers it."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to a negative offset ({offset})")
        with self.lock:
            if self.closed:
                raise KafkaStorageError(f"log {self.name} is closed")
            end = self.log_end_offset
            if offset >= end:
                self.leader_epoch_cache.truncate_from_end(end)
                return False
            if offset < self._view[0][0].base_offset:
                self._guarded(self._truncate_fully, offset)
            else:
                self._guarded(self._truncate, offset)
            for listener in self.truncation_listeners:
                listener(self)
        return True

    def truncate_fully_and_start_at(self, offset):
        """Deletes every segment and starts empty at offset: log start offset = log end offset
        = high watermark = recovery point = offset, no leader epochs, no producers (Kafka's
        truncateFullyAndStartAt, for a follower whose fetch offset is below the leader's log
        start). Crash safety: the producer snapshots and the epoch file go first (a crash then
        rebuilds both from whatever segments remain), then the segments newest first, then the
        new segment is made."""
        if offset < 0:
            raise ValueError(f"cannot start {self.name} at a negative offset ({offset})")
        with self.lock:
            if self.closed:
                raise KafkaStorageError(f"log {self.name} is closed")
            self._guarded(self._truncate_fully, offset)
            for listener in self.truncation_listeners:
                listener(self)

    def _guarded(self, fn, offset):
        try:
            fn(offset)
        except BaseException as e:
            self._close_on_failure()
            if isinstance(e, KafkaStorageError):
                raise
            if isinstance(e, OSError):
                raise KafkaStorageError(f"truncating {self.name} to {offset} failed: {e}") from e
            raise

    def _close_on_failure(self):
        """The files and this object may disagree now: refuse everything until a reopen, whose
        load reconciles whatever state the files are in."""
        self.closed = True
        for seg in self._view[0]:  # close() will not run on a closed log
            seg.offset_index.close()
            seg.time_index.close()
            seg.txn_index.close()

    def _truncate(self, offset):
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
        # until the producer state is rebuilt below, nothing is stable past the log start: a
        # transaction whose marker is cut is open again
        self._first_unstable = self.log_start_offset
        for i in range(len(segments) - 1, k, -1):
            self._retire(segments[i])
            self._set_segments(segments[:i])  # the view keeps every segment not retired
            fsync_dir(self.dir)
        if keep is segments[-1]:
            active = keep
        else:
            # A new object for the files: the cleaner may be copying this segment as it was, and
            # its swap must find the old object gone (replace_segment then drops the copy).
            active = LogSegment(self.dir, keep.base_offset, self.config, created_ms=keep.created_ms)
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
        new_end = active.next_offset
        doomed_bases = {seg.base_offset for seg in doomed}
        for snap_offset, path in list_snapshots(self.dir):
            if snap_offset > new_end or snap_offset in doomed_bases:
                os.unlink(path)
        fsync_dir(self.dir)
        self.leader_epoch_cache.truncate_from_end(new_end)
        self.log_start_offset = min(self.log_start_offset, new_end)
        self.high_watermark = min(self.high_watermark, new_end)
        self.recovery_point = min(self.recovery_point, new_end)
        self.producer_state.last_snapshot_offset = -1
        self.producer_state.load(new_end, self._replay_producers)
        self.producer_state.on_high_watermark_updated(self.high_watermark)
        self._update_first_unstable()

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
        ts, ts_offset = ti.last_entry()
        scanner = hot.SegmentScanner(seg.base_offset, self.config.index_interval_bytes, False)
        scanner.position = resume
        scanner.last_index_position = resume
        scanner.max_timestamp = ts
        scanner.offset_of_max_timestamp = ts_offset if ts != NO_TIMESTAMP else -1
        scanner.last_time_index_timestamp = ts
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
                head = os.pread(fd, 12, pos)  # one batch longer than the read: read it whole
                need = int.from_bytes(head[8:12], "big", signed=True) + 12 if len(head) == 12 else 0
                if need < RECORD_BATCH_OVERHEAD or pos + need > end:
                    raise KafkaStorageError(f"{seg.log_path}: no whole batch at byte {pos}")
                status, _consumed, offsets, times = scanner.scan(os.pread(fd, need, pos))
            if status not in (hot.SCAN_OK, hot.SCAN_TRUNCATED) or scanner.position == pos:
                raise KafkaStorageError(f"{seg.log_path}: cannot rescan at byte {pos}: {scanner.error}")
            # entries only when index.interval.bytes changed since the segment was written
            seg.offset_index.append_entries(offsets)
            seg.time_index.append_entries(times)

    def _truncate_fully(self, offset):
        self._truncations += 1
        for _snap_offset, path in list_snapshots(self.dir):
            os.unlink(path)
        fsync_dir(self.dir)
        self.leader_epoch_cache.checkpoint.delete()
        for seg in reversed(self._view[0]):
            self._retire(seg)
            fsync_dir(self.dir)
        new = LogSegment.create(self.dir, offset, self.config, wall_ms())
        self._set_segments([new])
        fsync_dir(self.dir)
        self.leader_epoch_cache.clear()
        self.producer_state.truncate()
        self.producer_state.last_snapshot_offset = -1
        self.log_start_offset = offset
        self.high_watermark = offset
        self._first_unstable = None
        self.recovery_point = offset
        self._unflushed = 0

    # -- the cleaner's swap ------------------------------------------------------------------
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
        self.scheduler.schedule(self.config.file_delete_delay_ms, old.delete_files)
        return True

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self):
        """Flushes, trims the active segment's indexes and closes the indexes."""
        with self.lock:
            if self.closed:
                return
            segments = self._view[0]
            segments[-1].become_inactive(flush=False)
            try:
                self.producer_state.take_snapshot(self.log_end_offset)
            except OSError:
                pass  # a restart replays the batches after the previous snapshot instead
            # every segment past the recovery point (a rolled one whose background flush has
            # not run yet, too) is on disk before the recovery point may say so
            self._fsync([s for s in segments if s.next_offset > self.recovery_point or s is segments[-1]])
            self.closed = True
            for segment in segments:
                segment.close()
            self.recovery_point = self.log_end_offset

    def delete(self):
        """Deletes the partition (topic deletion): closed, renamed to
        ``<dir>.<id>-delete`` (as Kafka does), and removed in the background."""
        self.close()
        target = f"{self.dir}.{uuid.uuid4().hex}-delete"
        os.rename(self.dir, target)
        self.scheduler.schedule(self.config.file_delete_delay_ms, lambda: shutil.rmtree(target, ignore_errors=True))

    def __repr__(self):
        return (f"Log({self.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
                f"segments={len(self._view[0])})")


class _FollowerBatch:
    __slots__ = ("pos", "size", "base", "last", "epoch", "max_ts", "count", "producer_id", "producer_epoch",
                 "base_sequence", "attributes", "pb")

    def __init__(self, pos, size, base, last, epoch, max_ts, count, producer_id, producer_epoch, base_sequence,
                 attributes):
        self.pos = pos
        self.size = size
        self.base = base
        self.last = last
        self.epoch = epoch
        self.max_ts = max_ts
        self.count = count
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.attributes = attributes
        self.pb = None  # the BatchProducerFields of a batch with a producer id


def _follower_producer_batch(records, b):
    """The BatchProducerFields of a follower's batch, its marker read before anything is written
    (CorruptMessageError when a control batch holds no end-transaction marker)."""
    if b.attributes & CONTROL_FLAG_MASK:
        try:
            parsed = parse_marker(memoryview(records).cast("B")[b.pos:b.pos + b.size])
        except CorruptRecordError as e:
            raise CorruptMessageError(f"control batch at offset {b.base} of producer {b.producer_id}: {e}") from None
        marker, coordinator_epoch = parsed if parsed is not None else (None, -1)
        return MarkerBatch(b.producer_id, b.producer_epoch, b.base_sequence, b.last - b.base, b.max_ts,
                           bool(b.attributes & TRANSACTIONAL_FLAG_MASK), marker, coordinator_epoch)
    return BatchProducerFields(b.producer_id, b.producer_epoch, b.base_sequence, b.last - b.base, b.max_ts,
                         bool(b.attributes & TRANSACTIONAL_FLAG_MASK))


def _follower_batches(records):
    """The batches of a follower append, checked as Kafka's analyzeAndValidateRecords checks
    them for a follower: size, magic, CRC-32C (ensureValid), a known codec, offsets
    increasing. CorruptMessageError / OffsetsOutOfOrderError / InvalidRecordError name the
    byte where the problem is."""
    mv = memoryview(records).cast("B")
    n = mv.nbytes
    if n == 0:
        raise InvalidRecordError("no record batches (at byte 0)")
    out = []
    pos = 0
    prev_last = None
    while pos < n:
        if n - pos < RECORD_BATCH_OVERHEAD:
            raise CorruptMessageError(f"records end inside a batch header (truncated) (at byte {pos})")
        (base, blen, epoch, magic, crc, attrs, delta, _base_ts, max_ts, pid, pepoch, bseq,
         count) = _HEADER.unpack_from(mv, pos)
        if blen < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptMessageError(f"batch length is less than the record batch v2 overhead (at byte {pos})")
        if magic != 2:
            raise CorruptMessageError(f"unsupported magic {magic} (only record batch v2 is supported) (at byte {pos})")
        size = blen + LOG_OVERHEAD
        if n - pos < size:
            raise CorruptMessageError(f"records end inside a batch (truncated) (at byte {pos})")
        if crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + size]) != crc:
            raise CorruptMessageError(f"CRC-32C of the batch does not match its contents (at byte {pos})")
        if attrs & COMPRESSION_CODEC_MASK > 4:
            raise CorruptMessageError(f"unknown compression codec (Kafka defines ids 0 to 4) (at byte {pos})")
        if delta < 0:
            raise CorruptMessageError(f"negative last offset delta (at byte {pos})")
        if prev_last is not None and base <= prev_last:
            raise OffsetsOutOfOrderError(
                f"out of order offsets in a follower append: batch at offset {base} follows offset {prev_last} "
                f"(at byte {pos})")
        prev_last = base + delta
        out.append(_FollowerBatch(pos, size, base, prev_last, epoch, max_ts, count, pid, pepoch, bseq, attrs))
        pos += size
    return out


def _batch_epochs(segment):
    """(base offset, partitionLeaderEpoch) of each batch of a segment: a header walk in reads of
    64 KiB (a batch larger than that costs one read of its header)."""
    fd = segment.file.fd
    size = segment.size
    pos = 0
    buf = b""
    buf_at = 0
    while pos < size:
        rel = pos - buf_at
        if rel + 16 > len(buf):
            try:
                buf = os.pread(fd, min(_HEADER_WALK_CHUNK, size - pos), pos)
            except OSError as e:
                raise KafkaStorageError(f"reading {segment.log_path} failed: {e}") from e
            buf_at, rel = pos, 0
            if len(buf) < 16:
                raise KafkaStorageError(f"{segment.log_path}: a batch header is cut short at byte {pos}")
        base, blen, epoch = _BASE_LEN_EPOCH.unpack_from(buf, rel)
        if blen < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise KafkaStorageError(f"{segment.log_path}: bad batch length at byte {pos}")
        yield base, epoch
        pos += blen + LOG_OVERHEAD
