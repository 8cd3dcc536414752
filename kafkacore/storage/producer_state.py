"""Idempotent producer state of one partition (Kafka's ProducerStateManager).

For every producer id that wrote to the partition: its epoch and the metadata of its last five
batches (first/last sequence, first/last offset, max timestamp). An append is checked against it
before it is written:

- a batch equal (same epoch, same first and last sequence) to one of the last five is a retry
  of something already written: it is not written again, and the original's offsets are
  returned (Kafka answers such a retry with success);
- an older epoch is INVALID_PRODUCER_EPOCH; a newer epoch must start at sequence 0;
- in the same epoch the first sequence must follow the last one (wrapping after 2^31-1),
  otherwise OUT_OF_ORDER_SEQUENCE_NUMBER. A producer with no state (never seen, or its batches
  all deleted by retention) may start at any sequence, as in Kafka.

State survives restarts through ``<20-digit offset>.snapshot`` files in the partition directory,
in Kafka's format (kafka-protocol/coordinator/ProducerSnapshot.json, preceded by an int16
version; the CRC32C covers the bytes after the CRC field, as Kafka's ProducerStateManager
writes it). A snapshot is taken when a segment rolls (named by the new segment's base offset)
and when the log closes (named by the log end offset). On load, the latest snapshot at or
below the log end is read and the batches after it are replayed from the log.
"""
from __future__ import annotations

import collections
import os
import struct

from ..checksum import crc32c
from ..errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from ..protocol.coordinator.producer_snapshot import ProducerEntry, ProducerSnapshot
from ..protocol.wire import ProtocolDecodeError, Reader, Writer

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
BATCHES_KEPT = 5  # Kafka's NUM_BATCHES_TO_RETAIN (max.in.flight.requests.per.connection <= 5)
INT_MAX = (1 << 31) - 1
NO_SEQUENCE = -1

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
    __slots__ = ("epoch", "batches", "coordinator_epoch")

    def __init__(self, epoch):
        self.epoch = epoch
        self.batches = collections.deque(maxlen=BATCHES_KEPT)
        self.coordinator_epoch = -1

    @property
    def last_seq(self):
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch, first_seq, last_seq):
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class ProducerBatch:
    """The idempotence fields of one v2 batch about to be appended."""

    __slots__ = ("producer_id", "epoch", "first_seq", "last_seq", "offset_delta", "max_timestamp",
                 "transactional")

    def __init__(self, producer_id, epoch, first_seq, offset_delta, max_timestamp, transactional):
        self.producer_id = producer_id
        self.epoch = epoch
        self.first_seq = first_seq
        self.offset_delta = offset_delta
        self.last_seq = _seq_add(first_seq, offset_delta)
        self.max_timestamp = max_timestamp
        self.transactional = transactional


def _seq_add(seq, delta):
    s = seq + delta
    return s - INT_MAX - 1 if s > INT_MAX else s


def _in_sequence(last_seq, next_seq):
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def producer_batches(buf):
    """ProducerBatch for every batch in buf that carries a producer id (already validated)."""
    mv = memoryview(buf)
    n = mv.nbytes
    pos = 0
    out = []
    while pos + 61 <= n:
        (_base, blen, _epoch, _magic, _crc, attrs, last_delta, _base_ts, max_ts, pid, pepoch, base_seq,
         _count) = _HEADER.unpack_from(mv, pos)
        if pid >= 0:
            out.append(ProducerBatch(pid, pepoch, base_seq, last_delta, max_ts, bool(attrs & 0x10)))
        pos += 12 + blen
    return out


def snapshot_path(log_dir, offset):
    return os.path.join(log_dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")


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
            if stem.isdigit():
                out.append((int(stem), os.path.join(log_dir, name)))
    out.sort()
    return out


class CorruptSnapshotError(ValueError):
    pass


def encode_snapshot(producers: dict) -> bytes:
    entries = []
    for pid, entry in sorted(producers.items()):
        if not entry.batches:
            continue
        last = entry.batches[-1]
        entries.append(ProducerEntry(
            producer_id=pid, epoch=entry.epoch, last_sequence=last.last_seq, last_offset=last.last_offset,
            offset_delta=last.last_offset - last.first_offset, timestamp=last.timestamp,
            coordinator_epoch=entry.coordinator_epoch, current_txn_first_offset=-1))
    w = Writer()
    w.int16(SNAPSHOT_VERSION)
    ProducerSnapshot(crc=0, producer_entries=entries).write(w, SNAPSHOT_VERSION)
    data = w.buf
    struct.pack_into(">I", data, 2, crc32c(bytes(data[6:])))
    return bytes(data)


def decode_snapshot(data: bytes) -> dict:
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
        entry = ProducerStateEntry(e.epoch)
        entry.coordinator_epoch = e.coordinator_epoch
        first_seq = e.last_sequence - e.offset_delta
        if first_seq < 0:
            first_seq += INT_MAX + 1
        entry.batches.append(BatchMetadata(first_seq, e.last_sequence, e.last_offset - e.offset_delta,
                                           e.last_offset, e.timestamp))
        producers[e.producer_id] = entry
    return producers


class ProducerStateManager:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.producers: dict[int, ProducerStateEntry] = {}
        self.last_snapshot_offset = -1

    # -- the append path ----------------------------------------------------------------------
    def check(self, batch: ProducerBatch):
        """The BatchMetadata of the original when batch is a retry of a recent one; None when it
        may be appended; raises OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH."""
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            return None
        if batch.epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {batch.producer_id} epoch {batch.epoch} is older than the current epoch {entry.epoch}")
        dup = entry.find_duplicate(batch.epoch, batch.first_seq, batch.last_seq)
        if dup is not None:
            return dup
        if batch.epoch != entry.epoch:
            if batch.first_seq != 0:
                raise OutOfOrderSequenceNumberError(
                    f"producer {batch.producer_id}: a new epoch {batch.epoch} must start at sequence 0, "
                    f"not {batch.first_seq}")
        elif entry.batches and not _in_sequence(entry.last_seq, batch.first_seq):
            raise OutOfOrderSequenceNumberError(
                f"producer {batch.producer_id} epoch {batch.epoch}: sequence {batch.first_seq} does not follow "
                f"the last written sequence {entry.last_seq}")
        return None

    def update(self, batch: ProducerBatch, first_offset, last_offset, timestamp):
        entry = self.producers.get(batch.producer_id)
        if entry is None or entry.epoch != batch.epoch:
            entry = ProducerStateEntry(batch.epoch)
            self.producers[batch.producer_id] = entry
        entry.batches.append(BatchMetadata(batch.first_seq, batch.last_seq, first_offset, last_offset, timestamp))

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

    def load(self, log_end_offset, replay):
        """Restores state from the latest readable snapshot at or below the log end, then
        ``replay(from_offset)`` yields (ProducerBatch, first_offset, last_offset) for the
        batches after it. Snapshots above the log end (a truncated log) are deleted, unreadable
        ones are skipped and deleted."""
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
            except (OSError, CorruptSnapshotError):
                _unlink(path)
        for batch, first, last in replay(start):
            self.update(batch, first, last, batch.max_timestamp)

    def truncate_head(self, log_start_offset):
        """Retention or DeleteRecords moved the log start: producers whose last batch is gone
        are forgotten (they may then start at any sequence, as in Kafka), and snapshots of
        deleted segments go (the newest one at or below the log start stays)."""
        for pid in [pid for pid, e in self.producers.items()
                    if e.batches and e.batches[-1].last_offset < log_start_offset]:
            del self.producers[pid]
        self.delete_snapshots_below(log_start_offset)

    def delete_snapshots_below(self, offset):
        snaps = list_snapshots(self.log_dir)
        keep = max((o for o, _p in snaps if o <= offset), default=None)
        for o, path in snaps:
            if o < offset and o != keep:
                _unlink(path)

    def truncate(self):
        """All state forgotten (DeleteRecords / retention removed every batch)."""
        self.producers = {}


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
