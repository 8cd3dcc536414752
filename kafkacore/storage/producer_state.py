"""Idempotent and transactional producer state of one partition (Kafka's ProducerStateManager,
ProducerStateEntry and ProducerAppendInfo; docs/transactions.md, section 4.1).

For every producer id that wrote to the partition: its epoch, the coordinator epoch of its last
transaction marker, its last timestamp, the first offset of its open transaction (-1: none) and
the metadata of its last five data batches (first/last sequence, first/last offset, max
timestamp). An append is checked against it before it is written, by where it comes from
(Kafka's AppendOrigin):

- ``client`` (Produce): an epoch below the entry's is INVALID_PRODUCER_EPOCH; a batch equal
  (same epoch, same first and last sequence) to one of the last five is a retry of something
  already written: it is not written again, and the original's offsets are returned; a newer
  epoch must start at sequence 0; in the same epoch the first sequence must follow the last
  one (wrapping after 2^31-1), otherwise OUT_OF_ORDER_SEQUENCE_NUMBER. A producer with no
  state (never seen, or its batches all deleted by retention) may start at any sequence, as in
  Kafka. A non-transactional batch from a producer with an open transaction is
  INVALID_TXN_STATE.
- ``coordinator`` (transaction markers, transactional offset commits): the epoch check and the
  open-transaction check, no sequence check; a marker whose coordinator epoch is below the
  entry's is TRANSACTION_COORDINATOR_FENCED.
- ``replication`` (a follower writing the leader's batches, and the replay of the log on load):
  nothing is refused (the leader decided); the state follows the batches.

A transactional data batch from a producer without an open transaction opens one at its base
offset. A marker completes the open transaction (a CompletedTxn; none when the producer wrote
no data since its last marker) and takes the marker's epoch: a new epoch clears the batch
metadata, so sequences restart at 0. The manager keeps the open transactions by first offset
and the completed ones whose marker is not yet below the high watermark (``unreplicated``);
the smallest first offset among both is the first unstable offset, from which the log derives
its last stable offset.

State survives restarts through ``<20-digit offset>.snapshot`` files in the partition directory,
in Kafka's format (kafka-protocol/coordinator/ProducerSnapshot.json, preceded by an int16
version; the CRC32C covers the bytes after the CRC field, as Kafka's ProducerStateManager
writes it). Entries carry ``CurrentTxnFirstOffset`` and ``CoordinatorEpoch``; a producer whose
batches were cleared by a marker's new epoch is written as Kafka writes it (``LastSequence``
-1, ``LastOffset`` -1, ``OffsetDelta`` 0). A snapshot is taken when a segment rolls (named by
the new segment's base offset) and when the log closes (named by the log end offset). On load,
the latest snapshot at or below the log end is read (its open transactions reopened) and the
batches after it are replayed from the log.
"""
from __future__ import annotations

import collections
import logging
import os
import struct

from ..checksum import crc32c
from ..errors import (CorruptMessageError, InvalidProducerEpochError, InvalidTxnStateError,
                      OutOfOrderSequenceNumberError, TransactionCoordinatorFencedError)
from ..protocol.coordinator.producer_snapshot import ProducerEntry, ProducerSnapshot
from ..protocol.wire import ProtocolDecodeError, Reader, Writer
from ..record import CorruptRecordError
from ..record.control import ABORT, COMMIT, parse_control_key, parse_end_txn_marker_value
from ..record.layout import CONTROL_FLAG_MASK, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG_MASK
from ..record.varint import read_varint, read_varlong
from .batch_rewrite import records_section
from .segment_files import SNAPSHOT_SUFFIX, segment_file_name

log = logging.getLogger(__name__)

SNAPSHOT_VERSION = 1
BATCHES_KEPT = 5  # Kafka's NUM_BATCHES_TO_RETAIN (max.in.flight.requests.per.connection <= 5)
INT_MAX = (1 << 31) - 1
NO_SEQUENCE = -1
NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1


class AppendOrigin:
    """Where an append comes from (Kafka's AppendOrigin): decides which checks apply."""
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"
    ALL = frozenset((CLIENT, COORDINATOR, REPLICATION))


# v2 batch header fields (Kafka's DefaultRecordBatch offsets)
_HEADER = struct.Struct(">qiibIhiqqqhii")  # baseOffset .. recordsCount


class BatchMetadata:
    __slots__ = ("first_seq", "last_seq", "first_offset", "last_offset", "timestamp")

    def __init__(self, first_seq, last_seq, first_offset, last_offset, timestamp):
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.timestamp = timestamp


class ProducerStateEntry:
    __slots__ = ("epoch", "batches", "coordinator_epoch", "last_timestamp", "current_txn_first_offset")

    def __init__(self, epoch, coordinator_epoch=-1, last_timestamp=NO_TIMESTAMP, current_txn_first_offset=-1):
        self.epoch = epoch
        self.batches = collections.deque(maxlen=BATCHES_KEPT)
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset  # -1: no open transaction

    @property
    def last_seq(self):
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self):
        """Kafka's lastDataOffset: the last offset of the last data batch, -1 without one."""
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch, first_seq, last_seq):
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def _take_epoch(self, epoch):
        # Kafka's maybeUpdateProducerEpoch: a new epoch forgets the batches (its sequences
        # start again at 0), the transaction and coordinator state stay
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def copy(self):
        e = ProducerStateEntry(self.epoch, self.coordinator_epoch, self.last_timestamp,
                               self.current_txn_first_offset)
        e.batches.extend(self.batches)  # BatchMetadata is never mutated: sharing is fine
        return e

    def __repr__(self):
        return (f"ProducerStateEntry(epoch={self.epoch}, last_seq={self.last_seq}, "
                f"last_data_offset={self.last_data_offset}, coordinator_epoch={self.coordinator_epoch}, "
                f"current_txn_first_offset={self.current_txn_first_offset})")


class BatchProducerFields:
    """The producer fields of one v2 data batch about to be appended (MarkerBatch for a control
    batch). The marker fields are class attributes here, so an idempotent batch costs no more
    than it did before transactions."""

    __slots__ = ("producer_id", "epoch", "first_seq", "last_seq", "offset_delta", "max_timestamp",
                 "transactional")
    control = False
    marker = None
    coordinator_epoch = -1

    def __init__(self, producer_id, epoch, first_seq, offset_delta, max_timestamp, transactional):
        self.producer_id = producer_id
        self.epoch = epoch
        self.first_seq = first_seq
        self.offset_delta = offset_delta
        self.last_seq = _seq_add(first_seq, offset_delta)
        self.max_timestamp = max_timestamp
        self.transactional = transactional


class MarkerBatch(BatchProducerFields):
    """A control batch: ``marker`` is ABORT or COMMIT (None for an empty control batch, which a
    cleaner leaves when a transaction's data is all gone: Kafka skips it) and
    ``coordinator_epoch`` the marker's."""

    __slots__ = ("marker", "coordinator_epoch")
    control = True

    def __init__(self, producer_id, epoch, first_seq, offset_delta, max_timestamp, transactional, marker,
                 coordinator_epoch):
        super().__init__(producer_id, epoch, first_seq, offset_delta, max_timestamp, transactional)
        self.marker = marker
        self.coordinator_epoch = coordinator_epoch


class CompletedTxn:
    """A transaction a marker ended (Kafka's CompletedTxn): last_offset is the marker's offset."""

    __slots__ = ("producer_id", "first_offset", "last_offset", "is_aborted")

    def __init__(self, producer_id, first_offset, last_offset, is_aborted):
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.is_aborted = is_aborted

    def __eq__(self, other):
        return (isinstance(other, CompletedTxn) and (self.producer_id, self.first_offset, self.last_offset,
                                                     self.is_aborted)
                == (other.producer_id, other.first_offset, other.last_offset, other.is_aborted))

    __hash__ = None

    def __repr__(self):
        return (f"CompletedTxn(producer_id={self.producer_id}, first_offset={self.first_offset}, "
                f"last_offset={self.last_offset}, is_aborted={self.is_aborted})")


def _seq_add(seq, delta):
    s = seq + delta
    return s - INT_MAX - 1 if s > INT_MAX else s


def _in_sequence(last_seq, next_seq):
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def parse_marker(batch):
    """(control type, coordinator epoch) of a control batch (bytes-like, whole batch) from its
    first record (Kafka's EndTransactionMarker.deserialize); None when it holds no record.
    CorruptRecordError when the record is malformed or not an end-transaction marker."""
    mv = memoryview(batch).cast("B")
    if _HEADER.unpack_from(mv, 0)[12] <= 0:
        return None
    section = records_section(mv)  # markers are never compressed, but a reader copes
    end = len(section)
    length, pos = read_varint(section, 0, end)
    rend = pos + length
    if length < 1 or rend > end:
        raise CorruptRecordError("control record length is out of bounds", 0)
    pos += 1  # record attributes
    _ts, pos = read_varlong(section, pos, rend)
    _delta, pos = read_varint(section, pos, rend)
    klen, pos = read_varint(section, pos, rend)
    if klen < 0 or pos + klen > rend:
        raise CorruptRecordError("control record key length is out of bounds", pos)
    key = bytes(section[pos:pos + klen])
    pos += klen
    vlen, pos = read_varint(section, pos, rend)
    if vlen < 0 or pos + vlen > rend:
        raise CorruptRecordError("control record value length is out of bounds", pos)
    value = bytes(section[pos:pos + vlen])
    marker_type = parse_control_key(key)
    if marker_type not in (ABORT, COMMIT):
        raise CorruptRecordError(f"control record type {marker_type} is not an end-transaction marker "
                                 "(0 ABORT, 1 COMMIT)", 0)
    return marker_type, parse_end_txn_marker_value(value)


def producer_batches(buf):
    """BatchProducerFields for every batch in buf that carries a producer id (already validated).
    CorruptMessageError for a control batch whose record is not an end-transaction marker."""
    mv = memoryview(buf)
    n = mv.nbytes
    pos = 0
    out = []
    while pos + RECORD_BATCH_OVERHEAD <= n:
        (base, blen, _epoch, _magic, _crc, attrs, last_delta, _base_ts, max_ts, pid, pepoch, base_seq,
         _count) = _HEADER.unpack_from(mv, pos)
        if pid >= 0:
            if attrs & CONTROL_FLAG_MASK:
                try:
                    parsed = parse_marker(mv[pos:pos + LOG_OVERHEAD + blen])
                except CorruptRecordError as e:
                    raise CorruptMessageError(f"control batch at offset {base} of producer {pid}: {e}") from None
                marker, coordinator_epoch = parsed if parsed is not None else (None, -1)
                out.append(MarkerBatch(pid, pepoch, base_seq, last_delta, max_ts, bool(attrs & TRANSACTIONAL_FLAG_MASK),
                                       marker, coordinator_epoch))
            else:
                out.append(BatchProducerFields(pid, pepoch, base_seq, last_delta, max_ts, bool(attrs & TRANSACTIONAL_FLAG_MASK)))
        pos += LOG_OVERHEAD + blen
    return out


def snapshot_path(log_dir, offset):
    return os.path.join(log_dir, segment_file_name(offset) + SNAPSHOT_SUFFIX)


def list_snapshots(log_dir):
    """[(offset, path)] sorted by offset."""
    out = []
    try:
        names = os.listdir(log_dir)
    except FileNotFoundError:
        return out
    for name in names:
        if name.endswith(SNAPSHOT_SUFFIX):
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():  # any number of digits, as Kafka's offsetFromFile reads them
                out.append((int(stem), os.path.join(log_dir, name)))
    out.sort()
    return out


class CorruptSnapshotError(ValueError):
    pass


def encode_snapshot(producers: dict) -> bytes:
    """Kafka's writeSnapshot: every producer, batch-less ones with LastSequence -1, LastOffset
    -1 and OffsetDelta 0 (Kafka's lastSeq / lastDataOffset / lastOffsetDelta of an empty entry)."""
    entries = []
    for pid, entry in sorted(producers.items()):
        if entry.batches:
            last = entry.batches[-1]
            last_seq, last_offset, delta = last.last_seq, last.last_offset, last.last_offset - last.first_offset
        else:
            last_seq, last_offset, delta = NO_SEQUENCE, -1, 0
        entries.append(ProducerEntry(
            producer_id=pid, epoch=entry.epoch, last_sequence=last_seq, last_offset=last_offset,
            offset_delta=delta, timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
            current_txn_first_offset=entry.current_txn_first_offset))
    w = Writer()
    w.int16(SNAPSHOT_VERSION)
    ProducerSnapshot(crc=0, producer_entries=entries).write(w, SNAPSHOT_VERSION)
    data = w.buf
    struct.pack_into(">I", data, 2, crc32c(bytes(data[6:])))
    return bytes(data)


def decode_snapshot(data: bytes) -> dict:
    """{producer id: ProducerStateEntry} of a snapshot (Kafka's readSnapshot: an entry with
    LastOffset < 0 has no batch; CurrentTxnFirstOffset >= 0 is an open transaction)."""
    try:
        r = Reader(data)
        version = r.int16()
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"snapshot version {version}, expected {SNAPSHOT_VERSION}")
        snap = ProducerSnapshot.read(r, SNAPSHOT_VERSION)
    except ProtocolDecodeError as e:
        raise CorruptSnapshotError(str(e)) from None
    if r.remaining():
        raise CorruptSnapshotError(f"{r.remaining()} bytes after the entries")
    if snap.crc != crc32c(bytes(data[6:])):
        raise CorruptSnapshotError("CRC mismatch")
    producers = {}
    for e in snap.producer_entries:
        entry = ProducerStateEntry(e.epoch, e.coordinator_epoch, e.timestamp,
                                   e.current_txn_first_offset if e.current_txn_first_offset >= 0 else -1)
        if e.last_offset >= 0:
            first_seq = e.last_sequence - e.offset_delta
            if first_seq < 0 <= e.last_sequence:
                first_seq += INT_MAX + 1
            entry.batches.append(BatchMetadata(first_seq, e.last_sequence, e.last_offset - e.offset_delta,
                                               e.last_offset, e.timestamp))
        producers[e.producer_id] = entry
    return producers


class ProducerStateManager:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.producers: dict[int, ProducerStateEntry] = {}
        # Kafka's ongoingTxns and unreplicatedTxns, keyed by first offset: {first offset:
        # producer id} and {first offset: (producer id, marker offset)}. Both stay small (one
        # entry per producer at most in ongoing), so their minimum is found by a scan when they
        # change, never on a read.
        self.ongoing: dict[int, int] = {}
        self.unreplicated: dict[int, tuple] = {}
        self.last_snapshot_offset = -1

    # -- the append path ----------------------------------------------------------------------
    def check(self, batch: BatchProducerFields, origin=AppendOrigin.CLIENT):
        """Checks batch against the producer's state for an append from origin. Returns the
        BatchMetadata of the original when a client batch is a retry of a recent one, else
        None (it may be appended); raises INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER,
        INVALID_TXN_STATE or TRANSACTION_COORDINATOR_FENCED by the rules of the module doc.
        The state is not changed."""
        entry = self.producers.get(batch.producer_id)
        if entry is None or origin == AppendOrigin.REPLICATION:
            return None
        if batch.epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {batch.producer_id} epoch {batch.epoch} is older than the current epoch {entry.epoch}")
        if batch.control:
            if batch.marker is not None and batch.coordinator_epoch < entry.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"marker for producer {batch.producer_id}: coordinator epoch {batch.coordinator_epoch} (zombie) "
                    f"is older than the current one {entry.coordinator_epoch}")
            return None
        if origin == AppendOrigin.CLIENT:
            dup = entry.find_duplicate(batch.epoch, batch.first_seq, batch.last_seq)
            if dup is not None:
                return dup
            if batch.epoch != entry.epoch:
                if batch.first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceNumberError(
                        f"producer {batch.producer_id}: a new epoch {batch.epoch} must start at sequence 0, "
                        f"not {batch.first_seq}")
            elif not _in_sequence(entry.last_seq, batch.first_seq) and entry.epoch != NO_PRODUCER_EPOCH:
                # an entry without batches (a marker bumped the epoch) wants sequence 0 (Kafka's
                # checkSequence: in sequence after NO_SEQUENCE)
                raise OutOfOrderSequenceNumberError(
                    f"producer {batch.producer_id} epoch {batch.epoch}: sequence {batch.first_seq} does not follow "
                    f"the last written sequence {entry.last_seq}")
        if entry.current_txn_first_offset >= 0 and not batch.transactional:
            raise InvalidTxnStateError(
                f"producer {batch.producer_id} has a transaction open since offset {entry.current_txn_first_offset}: "
                "a non-transactional write is refused until it ends")
        return None

    def update(self, batch: BatchProducerFields, first_offset, last_offset, timestamp, origin=AppendOrigin.CLIENT):
        """Applies an appended batch (already checked). A data batch records its metadata and
        opens a transaction when it is transactional and none is open; a marker returns the
        CompletedTxn of the open transaction (None when there is none), which the caller then
        indexes and passes to complete_txn. Nothing is refused here."""
        pid = batch.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = ProducerStateEntry(batch.epoch)
            self.producers[pid] = entry
        if not batch.control:
            if batch.epoch != entry.epoch:  # Kafka's maybeUpdateProducerEpoch, inlined: the hot path
                if origin == AppendOrigin.REPLICATION and batch.epoch < entry.epoch:
                    log.warning("%s: batch of producer %d at offset %d has epoch %d, older than %d (replicated)",
                                self.log_dir, pid, first_offset, batch.epoch, entry.epoch)
                entry.batches.clear()
                entry.epoch = batch.epoch
            entry.batches.append(BatchMetadata(batch.first_seq, batch.last_seq, first_offset, last_offset, timestamp))
            entry.last_timestamp = timestamp
            if batch.transactional or entry.current_txn_first_offset >= 0:
                self._transactional_data(pid, entry, batch, first_offset)
            return None
        return self._marker(pid, entry, batch, first_offset, timestamp, origin)

    def _transactional_data(self, pid, entry, batch, first_offset):
        if batch.transactional:
            if entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = first_offset
                self.ongoing[first_offset] = pid
        else:
            # only a replicated batch gets here (check refuses the others): the leader wrote it
            log.warning("%s: non-transactional batch of producer %d at offset %d inside its transaction opened "
                        "at %d (replicated)", self.log_dir, pid, first_offset, entry.current_txn_first_offset)

    def _marker(self, pid, entry, batch, first_offset, timestamp, origin):
        if batch.marker is None:
            return None  # an empty control batch: its transaction's data is gone (Kafka)
        if origin == AppendOrigin.REPLICATION:
            if batch.epoch < entry.epoch:
                log.warning("%s: marker of producer %d at offset %d has epoch %d, older than %d (replicated)",
                            self.log_dir, pid, first_offset, batch.epoch, entry.epoch)
            if batch.coordinator_epoch < entry.coordinator_epoch:
                log.info("%s: marker of producer %d at offset %d has coordinator epoch %d, older than %d "
                         "(replicated)", self.log_dir, pid, first_offset, batch.coordinator_epoch,
                         entry.coordinator_epoch)
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(pid, entry.current_txn_first_offset, first_offset, batch.marker == ABORT)
        # Kafka's ProducerStateEntry.update(epoch, coordinatorEpoch, timestamp)
        entry._take_epoch(batch.epoch)
        entry.coordinator_epoch = batch.coordinator_epoch
        entry.last_timestamp = timestamp
        entry.current_txn_first_offset = -1
        return completed

    def last_stable_offset(self, completed: CompletedTxn):
        """The lastStableOffset of completed's .txnindex entry, taken before complete_txn (Kafka's
        ProducerStateManager.lastStableOffset): the first offset of the earliest transaction
        still open from another producer, else the marker's offset + 1."""
        others = [first for first, pid in self.ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn):
        """The transaction leaves the open set and waits in the unreplicated one until the high
        watermark passes its marker (Kafka's completeTxn)."""
        if self.ongoing.get(completed.first_offset) != completed.producer_id:
            raise ValueError(f"{self.log_dir}: completing {completed}, which was not open")
        del self.ongoing[completed.first_offset]
        self.unreplicated[completed.first_offset] = (completed.producer_id, completed.last_offset)

    def on_high_watermark_updated(self, high_watermark):
        """Completed transactions whose marker is below the high watermark are stable (Kafka's
        removeUnreplicatedTransactions). True when any went."""
        if not self.unreplicated:
            return False
        gone = [first for first, (_pid, last) in self.unreplicated.items() if last < high_watermark]
        for first in gone:
            del self.unreplicated[first]
        return bool(gone)

    def first_unstable_offset(self):
        """The smallest first offset of an open or unreplicated transaction; None when none."""
        first = min(self.ongoing) if self.ongoing else None
        if self.unreplicated:
            u = min(self.unreplicated)
            if first is None or u < first:
                first = u
        return first

    def apply_replayed(self, batch, first_offset, last_offset):
        """A batch of the log replayed on load or after a truncation: applied as a replicated
        append, its transaction completed at once (the .txnindex already holds what the append
        wrote)."""
        completed = self.update(batch, first_offset, last_offset, batch.max_timestamp, AppendOrigin.REPLICATION)
        if completed is not None:
            self.complete_txn(completed)

    def _reset_transactions(self):
        self.ongoing = {}
        self.unreplicated = {}
        for pid, entry in self.producers.items():
            if entry.current_txn_first_offset >= 0:
                self.ongoing[entry.current_txn_first_offset] = pid

    # -- snapshots ----------------------------------------------------------------------------
    def take_snapshot(self, offset):
        """Writes ``<offset>.snapshot`` (temp file, fsync, rename) unless one exists there."""
        path = snapshot_path(self.log_dir, offset)
        if offset == self.last_snapshot_offset and os.path.exists(path):
            return
        data = encode_snapshot(self.producers)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.last_snapshot_offset = offset

    def load(self, log_end_offset, replay, index_from=None, index=None, snapshot_at=()):
        """Restores state from the latest readable snapshot at or below log_end_offset
        (reopening its open transactions), then ``replay(from_offset)`` yields (BatchProducerFields,
        first_offset, last_offset) for the batches after it. Snapshots above log_end_offset (a
        truncated log, or the part a recovery rescans) are deleted, unreadable ones are skipped
        and deleted. Transactions the replay completes are left unreplicated: the log drops
        them as its high watermark passes their markers. With index, every transaction the
        replay aborts with its marker at or above index_from is passed to
        ``index(completed, last_stable_offset)`` before it completes, as an append does (the
        recovery rebuilding the .txnindex files). ``snapshot_at``: offsets (the bases of the
        segments the recovery rescans) where a snapshot is taken as the replay passes them,
        the ones the rolls wrote, so the next recovery starts there."""
        self.producers = {}
        start = 0
        for offset, path in reversed(list_snapshots(self.log_dir)):
            if offset > log_end_offset:
                _unlink(path)
                continue
            try:
                with open(path, "rb") as f:
                    self.producers = decode_snapshot(f.read())
                start = offset
                self.last_snapshot_offset = offset
                break
            except (OSError, CorruptSnapshotError) as e:
                log.warning("%s: producer snapshot %s is unreadable (%s); it is deleted", self.log_dir, path, e)
                _unlink(path)
        self._reset_transactions()
        boundaries = sorted(b for b in snapshot_at if b > start)
        if index is None:
            for batch, first, last in replay(start):
                while boundaries and first >= boundaries[0]:
                    self.take_snapshot(boundaries.pop(0))
                self.apply_replayed(batch, first, last)
        else:
            for batch, first, last in replay(start):
                while boundaries and first >= boundaries[0]:
                    self.take_snapshot(boundaries.pop(0))
                completed = self.update(batch, first, last, batch.max_timestamp, AppendOrigin.REPLICATION)
                if completed is not None:
                    if completed.is_aborted and completed.last_offset >= index_from:
                        index(completed, self.last_stable_offset(completed))
                    self.complete_txn(completed)
        for b in boundaries:  # no producer batch after them: the state there is the final one
            self.take_snapshot(b)

    def truncate_head(self, log_start_offset):
        """Retention or DeleteRecords moved the log start: producers whose last batch is gone
        are forgotten (they may then start at any sequence, as in Kafka) unless their
        transaction is open, completed transactions whose marker is gone are no longer
        unreplicated (Kafka's onLogStartOffsetIncremented), and snapshots of deleted segments go
        (the newest one at or below the log start stays)."""
        for pid in [pid for pid, e in self.producers.items()
                    if e.batches and e.batches[-1].last_offset < log_start_offset
                    and e.current_txn_first_offset < 0]:
            del self.producers[pid]
        for first in [f for f, (_pid, last) in self.unreplicated.items() if last < log_start_offset]:
            del self.unreplicated[first]
        self.delete_snapshots_below(log_start_offset)

    def remove_expired_producers(self, now_ms, expiration_ms):
        """Forgets producers idle for expiration_ms (their last timestamp that long before
        now_ms) that have no open transaction (Kafka's removeExpiredProducers with
        producer.id.expiration.ms). Returns how many went."""
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def delete_snapshots_below(self, offset):
        snaps = list_snapshots(self.log_dir)
        keep = max((o for o, _p in snaps if o <= offset), default=None)
        for o, path in snaps:
            if o < offset and o != keep:
                _unlink(path)

    def truncate(self):
        """All state forgotten (the log was emptied: a follower starting over)."""
        self.producers = {}
        self.ongoing = {}
        self.unreplicated = {}


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
