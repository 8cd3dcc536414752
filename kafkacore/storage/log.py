"""Kafka's UnifiedLog for one partition: the replicated log over its segments. The segments and
their files (rolling, flushing, the recovery point, reading slices, removing, replacing and
cutting segments) are the LocalLog's (local_log.py), as in Kafka; this module holds what gives
the offsets their meaning: the log start offset, high watermark and last stable offset, the
producers' state, the leader epochs, and the checks of every append.

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
cleaner's swaps take the log's lock (shared with its LocalLog) briefly. The cleaner does its
work outside the lock."""
import bisect
import os
import struct
import threading

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
from .local_log import LocalLog
from .log_loader import load_segments
from .producer_state import (AppendOrigin, MarkerBatch, BatchProducerFields, ProducerStateManager, list_snapshots,
                             parse_marker, producer_batches)
from .scheduler import InlineScheduler
from .segment_files import HeaderWalk
from .time_index import NO_TIMESTAMP

_PID = struct.Struct(">q")
_BASE_LEN = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
# a v2 batch header from baseOffset to recordsCount (Kafka's DefaultRecordBatch)
_HEADER = struct.Struct(">qiibIhiqqqhii")
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
        self.lock = threading.RLock()
        os.makedirs(directory, exist_ok=True)
        self._metadata = PartitionMetadataFile(directory)
        self.topic_id = self._metadata.read()
        if topic_id is not None and self.topic_id is None:
            self._metadata.write(topic_id)
            self.topic_id = topic_id
        loaded = load_segments(directory, config, recovery_point, log_start_offset, clean_shutdown)
        self.load_result = loaded
        self.local = LocalLog(directory, config, loaded.segments, recovery_point,
                              scheduler or InlineScheduler(), self.lock)
        self.log_start_offset = max(log_start_offset, loaded.segments[0].base_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.high_watermark = self.log_end_offset
        self.replicated = False  # until make_replicated(): appends move the high watermark
        self.checkpointed_high_watermark = checkpointed_high_watermark  # replication-offset-checkpoint
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
                                     snapshot_at=[b for b in self.local._view[1][1:] if b > recovered])
        if loaded.recovered_segments or loaded.rebuilt_indexes or loaded.truncated_bytes:
            # fsync what recovery checked and rebuilt (from the first segment it touched, the
            # rebuilt .txnindex files too); only then is the recovery point the end of the log
            self.local.recovery_point = min(self.local.recovery_point, loaded.first_repaired_offset)
            self.flush()
        if replicated:
            self.make_replicated()
        else:
            self.producer_state.on_high_watermark_updated(self.high_watermark)
        self._update_first_unstable()

    # -- the segments and their files: the LocalLog's ---------------------------------------------
    dir = property(lambda self: self.local.dir)
    name = property(lambda self: self.local.name)
    topic = property(lambda self: self.local.topic)
    partition = property(lambda self: self.local.partition)
    scheduler = property(lambda self: self.local.scheduler)
    segments = property(lambda self: self.local.segments)
    active_segment = property(lambda self: self.local._view[0][-1])
    log_end_offset = property(lambda self: self.local._view[0][-1].next_offset)
    size_in_bytes = property(lambda self: self.local.size_in_bytes)
    last_flush_ms = property(lambda self: self.local.last_flush_ms)

    @property
    def config(self):
        return self.local.config

    @config.setter
    def config(self, config):
        self.local.config = config

    @property
    def recovery_point(self):
        return self.local.recovery_point

    @property
    def closed(self):
        return self.local.closed

    @closed.setter
    def closed(self, closed):
        self.local.closed = closed

    # -- leader epochs --------------------------------------------------------------------------
    def _load_leader_epoch_cache(self):
        """The cache from leader-epoch-checkpoint; without the file, rebuilt from the batches'
        partitionLeaderEpoch (a log written before the file existed, or a crash inside
        truncate_fully_and_start_at, which removes the file first). Then cut to the log, as
        Kafka's loader does: a crash may leave entries past the end (they are written before
        the records) or below the log start."""
        cache = LeaderEpochFileCache(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT))
        if not cache.file_existed and any(seg.size for seg in self.local._view[0]):
            cache.assign_all(self._epoch_starts())
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        return cache

    def _epoch_starts(self):
        """(epoch, base offset) of every batch that starts a higher epoch (negative epochs,
        from clients that never had one, are skipped as Kafka's recovery skips them)."""
        latest = -1
        for segment in self.local._view[0]:
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
            if self.local.should_roll(segment, len(buf), last, info.batches, message_ts, now):
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
            flush_now = self.local.appended(info.records)
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
            flush_now = self.local.appended(records_count)
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
                    or self.local.should_roll(segment, nbytes, batches[-1].last, n - i, suffix_max_ts[i], now)):
                j = i + 1
                one = batches[i]
                if self.local.should_roll(segment, one.size, one.last, 1, one.max_ts, now):
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
            self.local.close_on_failure()
            raise KafkaStorageError(f"{self.name}: the .txnindex entry of {completed} was not written ({e}); "
                                    "the log is closed") from e
        state.complete_txn(completed)

    def _rebuild_txn_entry(self, completed, last_stable_offset):
        """The .txnindex entry of an ABORT met by the recovery replay, in the segment holding
        its marker (what _complete_txn wrote when the marker was appended)."""
        self.local.segment_holding(completed.last_offset).update_txn_index(completed, last_stable_offset)

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

    # -- rolling and flushing: the LocalLog's, with the producers' snapshot at each roll ----------
    def roll(self):
        with self.lock:
            return self._roll(wall_ms())

    def _roll(self, now):
        # Kafka snapshots producer state at every roll, named by the new segment's base, empty or
        # not: recovery of a later segment then starts its replay there instead of at the log
        # start (which costs a pass over every batch of the log)
        return self.local.roll(now, self.producer_state.take_snapshot)

    def flush(self):
        """fsync every segment holding unflushed data; the recovery point becomes the end."""
        self.local.flush()

    def maybe_flush(self, now=None):
        """flush.ms: flush when that long has passed since the last flush."""
        self.local.maybe_flush(now)

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
        upper = LocalLog.fetch_upper_bound_offset(segments, read_index, sl)
        return sl, LocalLog.collect_aborted(segments, i, offset, upper)

    def collect_aborted_transactions(self, start_offset, upper_bound_offset):
        """The AbortedTxn entries overlapping [start_offset, upper_bound_offset), from the
        segment holding start_offset on (Kafka's LocalLog.collectAbortedTransactions)."""
        segments, bases = self.local._view
        i = max(0, bisect.bisect_right(bases, start_offset) - 1)
        return LocalLog.collect_aborted(segments, i, start_offset, upper_bound_offset)

    def _read(self, offset, max_bytes, max_offset, min_one_batch):
        """(slice, segments, index of the segment holding offset, index of the segment read)."""
        local = self.local
        for _attempt in range(3):
            if local.closed:
                raise KafkaStorageError(f"log {self.name} is closed")
            segments, bases = local._view
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
                sl, read_index = local.read_from(segments, i, offset, max_bytes, max_offset, end, min_one_batch)
                return sl, segments, i, read_index
            except (OSError, ValueError, KafkaStorageError) as e:
                if local.closed:
                    raise KafkaStorageError(f"log {self.name} was closed during the read") from None
                if not any(s.deleted for s in segments):
                    if isinstance(e, KafkaStorageError):
                        raise
                    raise KafkaStorageError(f"reading {self.name} at {offset} failed: {e}") from e
                # a segment went (retention, cleaner) under this snapshot: read again
        raise KafkaStorageError(f"read of {self.name} at {offset} kept racing segment deletion")

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
        segments = self.local._view[0]
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
        local = self.local
        with self.lock:
            if local.closed:
                return 0
            segments = list(local._view[0])
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
            remaining = local.remove_segments(doomed)
            lso = self.last_stable_offset
            self.log_start_offset = max(self.log_start_offset, remaining[0].base_offset)
            for seg in doomed:
                local.retire(seg)
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
            if offset < self.local._view[0][0].base_offset:
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
            self.local.close_on_failure()
            if isinstance(e, KafkaStorageError):
                raise
            if isinstance(e, OSError):
                raise KafkaStorageError(f"truncating {self.name} to {offset} failed: {e}") from e
            raise

    def _truncate(self, offset):
        # until the producer state is rebuilt below, nothing is stable past the log start: a
        # transaction whose marker is cut is open again
        self._first_unstable = self.log_start_offset
        new_end, doomed_bases = self.local.truncate_to(offset)
        for snap_offset, path in list_snapshots(self.dir):
            if snap_offset > new_end or snap_offset in doomed_bases:
                os.unlink(path)
        fsync_dir(self.dir)
        self.leader_epoch_cache.truncate_from_end(new_end)
        self.log_start_offset = min(self.log_start_offset, new_end)
        self.high_watermark = min(self.high_watermark, new_end)
        self.local.recovery_point = min(self.local.recovery_point, new_end)
        self.producer_state.last_snapshot_offset = -1
        self.producer_state.load(new_end, self._replay_producers)
        self.producer_state.on_high_watermark_updated(self.high_watermark)
        self._update_first_unstable()

    def _truncate_fully(self, offset):
        for _snap_offset, path in list_snapshots(self.dir):
            os.unlink(path)
        fsync_dir(self.dir)
        self.leader_epoch_cache.checkpoint.delete()
        self.local.truncate_fully_and_start_at(offset)
        self.leader_epoch_cache.clear()
        self.producer_state.truncate()
        self.producer_state.last_snapshot_offset = -1
        self.log_start_offset = offset
        self.high_watermark = offset
        self._first_unstable = None

    # -- the cleaner's swap ------------------------------------------------------------------
    def replace_segment(self, old, cleaned):
        """Puts cleaned in place of old (LocalLog.replace_segment); False when old is gone."""
        return self.local.replace_segment(old, cleaned)

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self):
        """Snapshots the producers' state, flushes, trims the active segment's indexes and
        closes the indexes."""
        with self.lock:
            if self.local.closed:
                return
            self.active_segment.become_inactive(flush=False)
            try:
                self.producer_state.take_snapshot(self.log_end_offset)
            except OSError:
                pass  # a restart replays the batches after the previous snapshot instead
            self.local.close()

    def delete(self):
        """Deletes the partition (topic deletion): closed, renamed to
        ``<dir>.<id>-delete`` (as Kafka does), and removed in the background."""
        self.close()
        self.local.delete_directory()

    def __repr__(self):
        return (f"Log({self.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
                f"segments={len(self.local._view[0])})")


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
    64 KiB (a batch larger than that costs one read of its header). The segment was checked by
    the load, so anything but whole batches is a storage error."""
    size = segment.size
    walk = HeaderWalk(segment.file.fd, 0, size, read_size=_HEADER_WALK_CHUNK, name=segment.log_path)
    try:
        for header in walk:
            yield header.base_offset, header.partition_leader_epoch
    except CorruptRecordError as e:
        raise KafkaStorageError(str(e)) from None
    except OSError as e:
        raise KafkaStorageError(f"reading {segment.log_path} failed: {e}") from e
    if walk.position < size:
        raise KafkaStorageError(f"{segment.log_path}: a batch header is cut short at byte {walk.position}")
