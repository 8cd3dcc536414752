"""``kafkacore log dump PATH...``: the files of a Kafka data directory, decoded offline (no
broker), readable by people (tables) or scripts (-o json / jsonl).

Which decoder a file gets is decided by its name, as Kafka names them: ``<20 digits>.log``
(record batches v2), ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot`` (producer state),
the offset checkpoints, ``leader-epoch-checkpoint``, ``meta.properties``, ``partition.metadata``,
``.kafka_cleanshutdown``, and kafkacore's own ``kafkacore-topic-configs.json`` and
``kafkacore-producer-ids``; a ``.deleted``, ``.cleaned`` or ``.swap`` suffix is looked through. A
file named otherwise is read as a log segment when named on the command line, and skipped
(listed) when met in a directory. A directory dumps every file in it and below it.

The decoders are kafkacore's own (kafkacore.record, kafkacore.storage): what this prints is
what the broker reads.

Problems make the exit code 1, each printed (stdout) under its file and the first named on
stderr: a log that is not record batches, a truncated last batch, a malformed checkpoint or
snapshot. ``--verify`` looks deeper: every batch's CRC-32C and records (decompressed),
offsets increasing from the segment's base offset, each offset index entry pointing at the
start of a batch whose last offset it names, time index timestamps increasing, each time
entry naming a batch's last offset and that batch's largest timestamp, each .txnindex entry
naming an ABORT marker of its producer. An active segment's preallocated index slots (zeros
after the last entry) are counted, not read as entries.
"""
from __future__ import annotations

import json
import mmap
import os
import sys

from .clients import TIMESTAMP_TYPES
from .common import EXIT_FAILED, EXIT_OK, ToolError, add_noun, add_verb, plural
from .output import iso_utc, show_bytes, table
from .progress import Progress

SEGMENT, OFFSET_INDEX, TIME_INDEX, TXN_INDEX, SNAPSHOT = "segment", "offset-index", "time-index", "txn-index", \
    "producer-snapshot"
OFFSET_CHECKPOINT, EPOCH_CHECKPOINT = "offset-checkpoint", "leader-epoch-checkpoint"
META_PROPERTIES, PARTITION_METADATA, CLEAN_SHUTDOWN = "meta-properties", "partition-metadata", "clean-shutdown"
TOPIC_CONFIGS, PRODUCER_IDS, LOCK = "topic-configs", "producer-ids", "lock"
PROGRESS_MIN_BYTES = 16 << 20  # segments smaller than this are decoded too quickly to need a bar
PROGRESS_DELAY = 0.5  # seconds before the bar appears: a segment decoded by then never shows one


def register(sub, common):
    verbs = add_noun(sub, "log", "offline tools for a data directory's files (no broker)")
    d = add_verb(verbs, "dump", common, run, "decode segments, indexes, snapshots and checkpoints",
                 "Decode the files of a Kafka data directory: .log segments (record batches), .index, .timeindex, "
                 ".txnindex, producer .snapshot files and checkpoints. A directory dumps every file in it. Exit "
                 "code 1 when a file has problems (--verify checks CRCs and indexes).")
    d.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    d.add_argument("--records", action="store_true", help="also show every record of every batch")
    d.add_argument("--verify", action="store_true",
                   help="check CRCs, records, offsets and index entries; exit 1 on any problem")
    d.add_argument("--summary", action="store_true", help="one summary line per file, no entries")


# -- what a file is ----------------------------------------------------------------------------
def _storage_names():
    from ..coordinator.producer_id_manager import FILE_NAME as PRODUCER_IDS_FILE
    from ..storage import checkpoints as cp
    from ..storage.dir_lock import LOCK_FILE
    from ..storage.log_manager import TOPIC_CONFIGS_FILE

    return {cp.RECOVERY_POINT_CHECKPOINT: OFFSET_CHECKPOINT, cp.LOG_START_OFFSET_CHECKPOINT: OFFSET_CHECKPOINT,
            cp.CLEANER_OFFSET_CHECKPOINT: OFFSET_CHECKPOINT, cp.REPLICATION_OFFSET_CHECKPOINT: OFFSET_CHECKPOINT,
            cp.LEADER_EPOCH_CHECKPOINT: EPOCH_CHECKPOINT, cp.META_PROPERTIES: META_PROPERTIES,
            cp.PARTITION_METADATA: PARTITION_METADATA, cp.CLEAN_SHUTDOWN_FILE: CLEAN_SHUTDOWN,
            TOPIC_CONFIGS_FILE: TOPIC_CONFIGS, PRODUCER_IDS_FILE: PRODUCER_IDS, LOCK_FILE: LOCK}


def _suffix_kinds():
    from ..storage.segment_files import INDEX_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX

    return {LOG_SUFFIX: SEGMENT, INDEX_SUFFIX: OFFSET_INDEX, TIME_INDEX_SUFFIX: TIME_INDEX,
            TXN_INDEX_SUFFIX: TXN_INDEX, SNAPSHOT_SUFFIX: SNAPSHOT}


def classify(path: str):
    """(kind, base offset or None, state) by the file's name; kind None when it is not a name
    Kafka gives. ``state``: 'deleted', 'cleaned' or 'swap' for a file in one of those steps."""
    from ..storage.segment_files import parse_segment_file_name, split_state_suffix

    name, state = split_state_suffix(os.path.basename(path))
    kind = _storage_names().get(name)
    if kind is not None:
        return kind, None, state
    parsed = parse_segment_file_name(name)
    if parsed is not None and parsed.suffix in _suffix_kinds():
        return _suffix_kinds()[parsed.suffix], parsed.base_offset, state
    return None, None, state


def _segment_of(dump):
    """The .log beside an index file (in the same state: a .index.deleted goes with the
    .log.deleted), or None."""
    from ..storage.segment_files import LOG_SUFFIX, segment_file_name

    name = segment_file_name(dump.base_offset) + LOG_SUFFIX + (f".{dump.state}" if dump.state else "")
    candidate = os.path.join(os.path.dirname(dump.path), name)
    return candidate if os.path.isfile(candidate) else None


class NotKafkaFile(Exception):
    """The file is not in the format its name (or the command line) says."""


# -- one file's dump ---------------------------------------------------------------------------
class FileDump:
    """What dumping a file gives: ``entries()`` yields one dict per batch / index entry /
    checkpoint line as it is decoded; afterwards ``summary`` and ``problems`` are complete."""

    kind = ""
    columns: list = []

    def __init__(self, path, base_offset, state, opts, logs):
        self.path = path
        self.base_offset = base_offset
        self.state = state
        self.opts = opts
        self.logs = logs  # shared _LogHeaders: sibling segments' batch boundaries, walked once
        self.summary = {}
        self.problems = []

    def precheck(self):
        """NotKafkaFile when the file cannot be what its kind says (before anything prints)."""

    def problem(self, message, position=None, offset=None):
        self.problems.append({"file": self.path, "position": position, "offset": offset, "message": message})

    def entries(self):
        return iter(())

    def summary_text(self) -> str:
        n = self.summary.get("entries", 0)
        return f"{n} entr{'y' if n == 1 else 'ies'}"


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class SegmentDump(FileDump):
    kind = SEGMENT
    columns = [("base_offset", "BASE"), ("last_offset", "LAST"), ("count", "COUNT"), ("position", "POSITION"),
               ("size", "SIZE"), ("partition_leader_epoch", "EPOCH"), ("crc_hex", "CRC"), ("compression", "CODEC"),
               ("max_time", "MAX TIMESTAMP"), ("producer", "PRODUCER"), ("base_sequence", "SEQ"), ("flags", "FLAGS")]

    def precheck(self):
        """The first batch header must be one: a length, magic 2, and the whole batch there."""
        from ..record.layout import LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, RECORD_BATCH_OVERHEAD
        from ..record.control import MAGIC_V2

        with open(self.path, "rb") as f:
            head = f.read(MAGIC_OFFSET + 1)
            size = os.fstat(f.fileno()).st_size
        if size == 0:
            return
        if len(head) <= MAGIC_OFFSET:
            raise NotKafkaFile(f"not a Kafka log segment: {self.path} ({size} bytes, less than a batch header)")
        total = LOG_OVERHEAD + int.from_bytes(head[LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True)
        if head[MAGIC_OFFSET] != MAGIC_V2 or total < RECORD_BATCH_OVERHEAD:
            raise NotKafkaFile(f"not a Kafka log segment: {self.path} (no record batch v2 at byte 0: "
                               f"magic {head[MAGIC_OFFSET]}, batch size {total})")
        if total > size:
            raise NotKafkaFile(f"not a Kafka log segment: {self.path} (the first batch says {total} bytes, "
                               f"the file has {size})")

    def entries(self):
        from ..record import CorruptRecordError, iter_batches

        size = os.path.getsize(self.path)
        s = self.summary = {"base_offset": self.base_offset, "bytes": size, "batches": 0, "records": 0,
                            "first_offset": None, "last_offset": None, "codecs": {}, "control_batches": 0,
                            "transactional_batches": 0, "max_timestamp": None}
        if size == 0:
            return
        with open(self.path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        bar = Progress(size, os.path.basename(self.path), unit="B", delay=PROGRESS_DELAY,
                       enabled=None if size >= PROGRESS_MIN_BYTES else False)
        end, prev_last, batch = 0, None, None
        try:
            try:
                for batch in iter_batches(mm):
                    entry = self._batch(batch, prev_last)
                    prev_last = batch.last_offset
                    end = batch.position + batch.size_in_bytes
                    bar.update(end)
                    yield entry
                batch = None
            except CorruptRecordError as e:
                batch = None
                if s["batches"] == 0:
                    raise NotKafkaFile(f"not a Kafka log segment: {self.path} ({e.reason} at byte {e.position})") \
                        from None
                self.problem(f"not a record batch: {e.reason}", e.position)
                return
            if end < size:
                self._trailing(mm, end, size)
        finally:
            batch = None
            bar.close()
            try:
                mm.close()
            except BufferError:  # a record still refers to the map; it goes with that record
                pass

    def _trailing(self, mm, end, size):
        left = size - end
        if self.summary["batches"] == 0:
            raise NotKafkaFile(f"not a Kafka log segment: {self.path} ({left} bytes, no whole record batch)")
        from ..record.layout import LENGTH_OFFSET, LOG_OVERHEAD

        if left >= LOG_OVERHEAD:
            declared = int.from_bytes(mm[end + LENGTH_OFFSET:end + LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
            self.problem(f"truncated batch: {left} bytes left at the end, the batch header says {declared}", end)
        else:
            self.problem(f"truncated batch: {left} bytes at the end, less than a batch header", end)

    def _batch(self, b, prev_last):
        s = self.summary
        entry = {"base_offset": b.base_offset, "last_offset": b.last_offset, "count": b.count, "position": b.position,
                 "size": b.size_in_bytes, "partition_leader_epoch": b.partition_leader_epoch, "magic": b.magic,
                 "crc": b.crc, "attributes": b.attributes, "compression": b.compression,
                 "timestamp_type": TIMESTAMP_TYPES[b.timestamp_type], "transactional": b.is_transactional,
                 "control": b.is_control, "base_timestamp": b.base_timestamp, "max_timestamp": b.max_timestamp,
                 "producer_id": b.producer_id, "producer_epoch": b.producer_epoch, "base_sequence": b.base_sequence}
        s["batches"] += 1
        s["records"] += max(b.count, 0)
        if s["first_offset"] is None:
            s["first_offset"] = b.base_offset
        s["last_offset"] = b.last_offset
        s["codecs"][b.compression] = s["codecs"].get(b.compression, 0) + 1
        s["control_batches"] += b.is_control
        s["transactional_batches"] += b.is_transactional
        s["max_timestamp"] = b.max_timestamp if s["max_timestamp"] is None else max(s["max_timestamp"],
                                                                                     b.max_timestamp)
        where = {"position": b.position, "offset": b.base_offset}
        if prev_last is not None and b.base_offset <= prev_last:
            self.problem(f"offsets go backwards: batch {b.base_offset}-{b.last_offset} after offset {prev_last}",
                         **where)
        elif prev_last is None and self.base_offset is not None and b.base_offset < self.base_offset:
            self.problem(f"batch {b.base_offset}-{b.last_offset} is below the segment's base offset "
                         f"{self.base_offset}", **where)
        records = None
        if self.opts.verify:
            try:
                b.validate()
            except Exception as e:  # noqa: BLE001 - CorruptRecordError, or a codec's own error
                self.problem(getattr(e, "reason", None) or str(e), **where)
                records = []  # the records cannot be trusted (or read)
        if b.is_control:
            try:
                marker, epoch = _marker(b)
                entry["marker"], entry["coordinator_epoch"] = marker, epoch
            except Exception as e:  # noqa: BLE001 - a malformed control record
                self.problem(f"control batch: {getattr(e, 'reason', e)}", **where)
        if self.opts.records and records is None:
            try:
                records = [_record(r, b.is_control) for r in b]
            except Exception as e:  # noqa: BLE001 - corrupt compressed data, bad varints...
                self.problem(f"records cannot be read: {getattr(e, 'reason', e)}", **where)
                records = []
        if self.opts.records:
            entry["records"] = records
        return entry

    def summary_text(self):
        s = self.summary
        if not s.get("batches"):
            return f"empty ({s.get('bytes', 0)} bytes)"
        codecs = ", ".join(f"{c} {n}" for c, n in sorted(s["codecs"].items()))
        extra = []
        if s["transactional_batches"]:
            extra.append(f"{s['transactional_batches']} transactional")
        if s["control_batches"]:
            extra.append(f"{s['control_batches']} control")
        return (f"{s['batches']} batch{'es' if s['batches'] != 1 else ''} ({codecs}"
                + (", " + ", ".join(extra) if extra else "") + f"), {plural(s['records'], 'record')}, "
                f"offsets {s['first_offset']}-{s['last_offset']}, {s['bytes']} bytes, "
                f"max timestamp {_when(s['max_timestamp'])}")


def _marker(batch):
    """(COMMIT or ABORT, coordinator epoch) of a control batch, by kafkacore's control-record
    readers; (None, None) for a control batch without records."""
    for r in batch:
        return _control(r)
    return None, None


def _control(record):
    """(COMMIT, ABORT or 'type N', coordinator epoch or None) of a control record."""
    from ..record.control import ABORT, COMMIT, parse_control_key, parse_end_txn_marker_value

    kind = parse_control_key(record.key)
    if kind not in (ABORT, COMMIT):
        return f"type {kind}", None
    return ("COMMIT" if kind == COMMIT else "ABORT"), parse_end_txn_marker_value(record.value)


def _record(r, control):
    out = {"offset": r.offset, "timestamp": r.timestamp_ms}
    if control:
        out["marker"], out["coordinator_epoch"] = _control(r)
        return out
    out.update(key=show_bytes(r.key), value=show_bytes(r.value), headers=[[k, show_bytes(v)] for k, v in r.headers])
    return out


class _LogHeaders:
    """The batch boundaries of segments, by a header walk (no CRC, no records), cached per
    file: what the index checks compare with. The walk stops where the segment's own dump
    stops reading: at a batch that is not v2 or not whole."""

    def __init__(self):
        self._cache = {}

    def get(self, path):
        if path not in self._cache:
            from ..record import CorruptRecordError
            from ..record.control import MAGIC_V2
            from ..storage.segment_files import walk_batch_headers

            batches = []
            try:
                with open(path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size:
                        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                        try:
                            for h in walk_batch_headers(mm, 0, size):
                                if h.magic != MAGIC_V2:
                                    break
                                batches.append((h.position, h.base_offset, h.last_offset, h.max_timestamp,
                                                h.is_control, h.producer_id))
                        finally:
                            mm.close()
            except (OSError, CorruptRecordError):
                pass  # the segment's own dump reports it; the index is checked against what reads
            self._cache[path] = batches
        return self._cache[path]


class _IndexDump(FileDump):
    entry_size = 0

    def _slots(self):
        """(entries as bytes, preallocated empty slots): an active segment's index is
        preallocated with zeros past its last entry. Every slot up to the last non-zero byte is
        an entry here, so damage after a zero slot is shown, not taken for free slots."""
        from ..storage.segment_files import index_entries

        data = _read(self.path)
        if len(data) % self.entry_size:
            self.problem(f"{len(data)} bytes is not a whole number of {self.entry_size}-byte entries")
        used = index_entries(data, self.entry_size, exhaustive=True) * self.entry_size
        return data[:used], len(data) // self.entry_size - used // self.entry_size

    def summary_text(self):
        s = self.summary
        text = f"{s['entries']} entr{'y' if s['entries'] == 1 else 'ies'}"
        if s.get("empty_slots"):
            text += f", {s['empty_slots']} empty preallocated slots (an active segment)"
        return text


class OffsetIndexDump(_IndexDump):
    kind = OFFSET_INDEX
    columns = [("slot", "SLOT"), ("offset", "OFFSET"), ("position", "POSITION")]

    def entries(self):
        from ..storage.segment_files import OFFSET_INDEX_ENTRY as ENTRY

        self.entry_size = ENTRY.size
        data, empty = self._slots()
        base = self.base_offset or 0
        self.summary = {"base_offset": self.base_offset, "entries": len(data) // ENTRY.size, "empty_slots": empty}
        log = _segment_of(self) if self.opts.verify else None
        batches = {p: (first, last) for p, first, last, *_ in self.logs.get(log)} if log else None
        prev = None
        for slot, (rel, pos) in enumerate(ENTRY.iter_unpack(data)):
            offset = base + rel
            where = {"position": pos, "offset": offset}
            if prev is not None and (offset <= prev[0] or pos <= prev[1]):
                self.problem(f"entry {slot} ({offset} at {pos}) does not follow entry {slot - 1} "
                             f"({prev[0]} at {prev[1]}): offsets and positions must increase", **where)
            if rel < 0:
                self.problem(f"entry {slot}: offset {offset} is below the base offset {base}", **where)
            if batches is not None:
                found = batches.get(pos)
                if found is None:
                    self.problem(f"entry {slot}: no batch of {os.path.basename(log)} starts at position {pos}",
                                 **where)
                elif found[1] != offset:
                    self.problem(f"entry {slot}: the batch at position {pos} holds offsets {found[0]}-{found[1]}, "
                                 f"the entry says {offset}", **where)
            prev = (offset, pos)
            yield {"slot": slot, "offset": offset, "position": pos}


class TimeIndexDump(_IndexDump):
    kind = TIME_INDEX
    columns = [("slot", "SLOT"), ("timestamp", "TIMESTAMP"), ("time", "TIME"), ("offset", "OFFSET")]

    def entries(self):
        from ..storage.segment_files import TIME_INDEX_ENTRY as ENTRY

        self.entry_size = ENTRY.size
        data, empty = self._slots()
        base = self.base_offset or 0
        self.summary = {"base_offset": self.base_offset, "entries": len(data) // ENTRY.size, "empty_slots": empty}
        log = _segment_of(self) if self.opts.verify else None
        batches = {last: max_ts for _p, _f, last, max_ts, *_ in self.logs.get(log)} if log else None
        prev = None
        for slot, (ts, rel) in enumerate(ENTRY.iter_unpack(data)):
            offset = base + rel
            where = {"offset": offset}
            if prev is not None and (ts <= prev[0] or offset < prev[1]):
                self.problem(f"entry {slot} ({ts}, offset {offset}) does not follow entry {slot - 1} ({prev[0]}, "
                             f"offset {prev[1]}): timestamps must increase and offsets not decrease", **where)
            if rel < 0:
                self.problem(f"entry {slot}: offset {offset} is below the base offset {base}", **where)
            if batches is not None:
                max_ts = batches.get(offset)
                if max_ts is None:
                    self.problem(f"entry {slot}: no batch of {os.path.basename(log)} ends at offset {offset}",
                                 **where)
                elif max_ts != ts:
                    self.problem(f"entry {slot}: the batch ending at offset {offset} has max timestamp {max_ts}, "
                                 f"the entry says {ts}", **where)
            prev = (ts, offset)
            yield {"slot": slot, "timestamp": ts, "time": iso_utc(ts), "offset": offset}


class TxnIndexDump(FileDump):
    kind = TXN_INDEX
    columns = [("producer_id", "PRODUCER"), ("first_offset", "FIRST OFFSET"), ("last_offset", "LAST OFFSET"),
               ("last_stable_offset", "LAST STABLE OFFSET")]

    def entries(self):
        from ..errors import KafkaStorageError
        from ..storage.txn_index import TransactionIndex

        try:
            entries = TransactionIndex(self.path, self.base_offset or 0).entries
        except KafkaStorageError as e:
            self.problem(f"not a transaction index: {e.message}")
            entries = []
        self.summary = {"base_offset": self.base_offset, "entries": len(entries)}
        log = _segment_of(self) if self.opts.verify else None
        aborts = None
        if log:
            aborts = {}
            for pos, first, _last, _ts, control, pid in self.logs.get(log):
                if control:
                    aborts[first] = pid
        prev = None
        for e in entries:
            where = {"offset": e.last_offset}
            if prev is not None and e.last_offset <= prev:
                self.problem(f"last offset {e.last_offset} does not follow {prev}: it must increase", **where)
            if e.first_offset > e.last_offset:
                self.problem(f"first offset {e.first_offset} is after the last offset {e.last_offset}", **where)
            if self.base_offset is not None and e.last_offset < self.base_offset:
                self.problem(f"last offset {e.last_offset} is below the segment's base offset {self.base_offset}",
                             **where)
            if aborts is not None and aborts.get(e.last_offset) != e.producer_id:
                self.problem(f"no control batch of producer {e.producer_id} at offset {e.last_offset} in "
                             f"{os.path.basename(log)}", **where)
            prev = e.last_offset
            yield {"producer_id": e.producer_id, "first_offset": e.first_offset, "last_offset": e.last_offset,
                   "last_stable_offset": e.last_stable_offset}

    def summary_text(self):
        n = self.summary["entries"]
        return f"{n} aborted transaction{'s' if n != 1 else ''}"


class SnapshotDump(FileDump):
    kind = SNAPSHOT
    columns = [("producer_id", "PRODUCER"), ("epoch", "EPOCH"), ("last_sequence", "LAST SEQ"),
               ("last_offset", "LAST OFFSET"), ("first_offset", "FIRST OFFSET"), ("timestamp_text", "TIMESTAMP"),
               ("coordinator_epoch", "COORD EPOCH"), ("current_txn_first_offset", "OPEN TXN AT")]

    def entries(self):
        from ..storage.producer_state import CorruptSnapshotError, decode_snapshot

        try:
            producers = decode_snapshot(_read(self.path))
        except CorruptSnapshotError as e:
            self.problem(f"not a producer snapshot: {e}")
            producers = {}
        self.summary = {"offset": self.base_offset, "entries": len(producers),
                        "open_transactions": sum(e.current_txn_first_offset >= 0 for e in producers.values())}
        for pid, e in sorted(producers.items()):
            last = e.batches[-1] if e.batches else None
            yield {"producer_id": pid, "epoch": e.epoch, "last_sequence": last.last_seq if last else -1,
                   "last_offset": last.last_offset if last else -1, "first_offset": last.first_offset if last else -1,
                   "timestamp": e.last_timestamp, "timestamp_text": iso_utc(e.last_timestamp),
                   "coordinator_epoch": e.coordinator_epoch,
                   "current_txn_first_offset": e.current_txn_first_offset if e.current_txn_first_offset >= 0
                   else None}

    def summary_text(self):
        s = self.summary
        return (f"{s['entries']} producer{'s' if s['entries'] != 1 else ''}, {s['open_transactions']} open "
                f"transaction{'s' if s['open_transactions'] != 1 else ''}")


class _TextDump(FileDump):
    """The small text files: parsed by kafkacore's readers, malformed ones reported."""

    def entries(self):
        try:
            rows = list(self.read())
        except Exception as e:  # noqa: BLE001 - each reader's own error (KafkaStorageError, ValueError...)
            self.problem(f"cannot read as {self.kind}: {getattr(e, 'message', None) or e}")
            rows = []
        self.summary = {"entries": len(rows)}
        yield from rows

    def read(self):
        return []


class OffsetCheckpointDump(_TextDump):
    kind = OFFSET_CHECKPOINT
    columns = [("topic", "TOPIC"), ("partition", "PARTITION"), ("offset", "OFFSET")]

    def read(self):
        from ..storage.checkpoints import OffsetCheckpointFile

        for (topic, partition), offset in sorted(OffsetCheckpointFile(self.path).read().items()):
            yield {"topic": topic, "partition": partition, "offset": offset}


class EpochCheckpointDump(_TextDump):
    kind = EPOCH_CHECKPOINT
    columns = [("epoch", "EPOCH"), ("start_offset", "START OFFSET")]

    def read(self):
        from ..storage.checkpoints import LeaderEpochCheckpointFile

        for epoch, start in LeaderEpochCheckpointFile(self.path).read():
            yield {"epoch": epoch, "start_offset": start}


class _KeyValueDump(_TextDump):
    columns = [("key", "KEY"), ("value", "VALUE")]

    def read(self):
        for k, v in self.pairs():
            yield {"key": k, "value": v}


class MetaPropertiesDump(_KeyValueDump):
    kind = META_PROPERTIES

    def pairs(self):
        from .common import read_properties

        try:
            return sorted(read_properties(self.path).items())
        except ToolError as e:
            raise ValueError(e.message) from None


class PartitionMetadataDump(_KeyValueDump):
    kind = PARTITION_METADATA

    def pairs(self):
        pairs = {}
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if not sep:
                    raise ValueError(f"{line.strip()!r} is not 'key: value'")
                pairs[key.strip()] = value.strip()
        if "topic_id" not in pairs:
            raise ValueError("no topic_id line")
        return sorted(pairs.items())


class CleanShutdownDump(_KeyValueDump):
    kind = CLEAN_SHUTDOWN

    def pairs(self):
        with open(self.path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        return sorted((k, json.dumps(v)) for k, v in data.items())


class TopicConfigsDump(_TextDump):
    kind = TOPIC_CONFIGS
    columns = [("topic", "TOPIC"), ("config", "CONFIG"), ("value", "VALUE")]

    def read(self):
        with open(self.path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object of topics")
        for topic, configs in sorted(data.items()):
            for k, v in sorted((configs or {}).items()):
                yield {"topic": topic, "config": k, "value": v}


class ProducerIdsDump(_KeyValueDump):
    kind = PRODUCER_IDS

    def pairs(self):
        with open(self.path, encoding="utf-8") as f:
            text = f.read().strip()
        return [("next_block_start", int(text or 0))]


class LockDump(_KeyValueDump):
    kind = LOCK

    def pairs(self):
        with open(self.path, encoding="utf-8", errors="replace") as f:
            text = f.read().strip()
        return [("holder", text or None)]


DUMPERS = {c.kind: c for c in (SegmentDump, OffsetIndexDump, TimeIndexDump, TxnIndexDump, SnapshotDump,
                                OffsetCheckpointDump, EpochCheckpointDump, MetaPropertiesDump, PartitionMetadataDump,
                                CleanShutdownDump, TopicConfigsDump, ProducerIdsDump, LockDump)}


# -- the command -------------------------------------------------------------------------------
def _files(paths):
    """(path, explicit) for every file to dump: named ones, and those under named directories."""
    for path in paths:
        if not os.path.exists(path):
            raise ToolError(f"cannot read {path}: no such file or directory", EXIT_FAILED)
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs.sort()
                for name in sorted(names, key=_order):
                    if not name.endswith(".tmp"):
                        yield os.path.join(root, name), False
        else:
            yield path, True


def _order(name):
    """Segment files grouped by base offset, the log first and then its indexes and snapshot;
    the other files after them, by name."""
    stem, dot, rest = name.partition(".")
    if dot and len(stem) == 20 and stem.isdigit():
        kinds = list(_suffix_kinds())
        suffix = "." + rest.split(".")[0]
        return 0, stem, kinds.index(suffix) if suffix in kinds else len(kinds), name
    return 1, "", 0, name


def run(args) -> int:
    out = sys.stdout
    printer = _PRINTERS[args.output](args, out)
    logs = _LogHeaders()
    problems, skipped = [], []
    for path, explicit in _files(args.paths):
        kind, base, state = classify(path)
        if kind is None:
            if not explicit:
                skipped.append(path)
                continue
            kind = SEGMENT  # named on the command line: read it as what people dump most
        dump = DUMPERS[kind](path, base, state, args, logs)
        try:
            dump.precheck()
            printer.file(dump)
        except NotKafkaFile as e:
            if explicit and len(args.paths) == 1:
                raise ToolError(str(e), EXIT_FAILED) from None
            dump.problem(str(e))
            printer.problems(dump)
        except OSError as e:
            dump.problem(f"cannot read: {e.strerror or e}")
            printer.problems(dump)
        problems += dump.problems
    printer.end(problems, skipped)
    if problems:
        first = problems[0]
        where = _where(first)
        raise ToolError(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found; first: {first['file']}"
                        f"{': ' + where if where else ''}: {first['message']}", EXIT_FAILED)
    return EXIT_OK


def _where(problem) -> str:
    parts = []
    if problem.get("position") is not None:
        parts.append(f"position {problem['position']}")
    if problem.get("offset") is not None:
        parts.append(f"offset {problem['offset']}")
    return ", ".join(parts)


def _title(dump) -> str:
    extra = [dump.kind]
    if dump.base_offset is not None:
        extra.append(f"{'at' if dump.kind == SNAPSHOT else 'base'} offset {dump.base_offset}")
    if dump.state:
        extra.append(dump.state)
    return f"{dump.path}  ({', '.join(extra)})"


class _TablePrinter:
    def __init__(self, args, out):
        self.args, self.out = args, out

    def file(self, dump):
        out = self.out
        out.write(_title(dump) + "\n")
        if self.args.summary:
            for _ in dump.entries():
                pass
        elif dump.kind == SEGMENT and self.args.records:
            for batch in dump.entries():
                out.write(_batch_line(batch) + "\n")
                for r in batch.get("records") or ():
                    out.write("    " + _record_line(r) + "\n")
        else:
            rows = [_table_row(dump.kind, e) for e in dump.entries()]
            if rows:
                table(rows, dump.columns, out)
        out.write(f"  {dump.summary_text()}\n")
        self.problems(dump)
        out.write("\n")

    def problems(self, dump):
        for p in dump.problems:
            where = _where(p)
            self.out.write(f"  PROBLEM{' at ' + where if where else ''}: {p['message']}\n")

    def end(self, problems, skipped):
        if skipped:
            self.out.write(f"skipped {len(skipped)} file{'s' if len(skipped) != 1 else ''} not in a Kafka format: "
                           + ", ".join(skipped) + "\n")
        if self.args.verify and not problems:
            self.out.write("verify: no problems\n")


def _table_row(kind, e):
    if kind != SEGMENT:
        return e
    flags = [e["timestamp_type"]] if e["timestamp_type"] != TIMESTAMP_TYPES[0] else []
    if e["transactional"]:
        flags.append("transactional")
    if e["control"]:
        flags.append(e.get("marker") or "control")
    return dict(e, crc_hex=f"{e['crc']:#010x}", max_time=iso_utc(e["max_timestamp"]),
                producer=f"{e['producer_id']}/{e['producer_epoch']}" if e["producer_id"] >= 0 else None,
                base_sequence=e["base_sequence"] if e["base_sequence"] >= 0 else None,
                flags=",".join(flags) or None)


def _when(ms) -> str:
    """A timestamp in a line of text: ISO-8601 UTC, or the number itself when there is none (-1)."""
    return iso_utc(ms) or str(ms)


def _batch_line(e) -> str:
    parts = [f"batch {e['base_offset']}-{e['last_offset']}", f"count {e['count']}", f"position {e['position']}",
             f"size {e['size']}", f"epoch {e['partition_leader_epoch']}", f"crc {e['crc']:#010x}",
             f"codec {e['compression']}", e["timestamp_type"], f"max {_when(e['max_timestamp'])}"]
    if e["producer_id"] >= 0:
        parts.append(f"producer {e['producer_id']} epoch {e['producer_epoch']} seq {e['base_sequence']}")
    if e["transactional"]:
        parts.append("transactional")
    if e["control"]:
        parts.append(f"control {e.get('marker') or ''}".rstrip())
    return "  ".join(parts)


def _record_line(r) -> str:
    head = f"offset {r['offset']}  {_when(r['timestamp'])}"
    if "marker" in r:
        return f"{head}  {r['marker']}  coordinator epoch {r['coordinator_epoch']}"
    text = f"{head}  key {_shown(r['key'])}  value {_shown(r['value'])}"
    if r["headers"]:
        text += "  headers " + ",".join(f"{k}={_shown(v)}" for k, v in r["headers"])
    return text


def _shown(v) -> str:
    return "null" if v is None else v


class _JsonPrinter:
    """-o json: one document, {"files": [...], "problems": [...], "skipped": [...]}."""

    def __init__(self, args, out):
        self.args, self.out = args, out
        self.files = []

    def file(self, dump):
        entries = list(dump.entries())
        self._add(dump, entries)

    def _add(self, dump, entries):
        item = {"file": dump.path, "kind": dump.kind, "base_offset": dump.base_offset, "state": dump.state,
                "summary": dump.summary}
        if not self.args.summary:
            item["batches" if dump.kind == SEGMENT else "entries"] = entries
        item["problems"] = dump.problems
        self.files.append(item)

    def problems(self, dump):
        self._add(dump, [])

    def end(self, problems, skipped):
        self.out.write(json.dumps({"files": self.files, "problems": problems, "skipped": skipped}, indent=2)
                       + "\n")


class _JsonLinesPrinter:
    """-o jsonl: a line per batch or entry as it is decoded ({"type": "batch"|"entry", "file":
    ..., ...}), then a "summary" line per file and a "problem" line per problem."""

    def __init__(self, args, out):
        self.args, self.out = args, out

    def file(self, dump):
        kind = "batch" if dump.kind == SEGMENT else "entry"
        for e in dump.entries():
            if not self.args.summary:
                self.out.write(json.dumps({"type": kind, "file": dump.path, "kind": dump.kind, **e}) + "\n")
        self.out.write(json.dumps({"type": "summary", "file": dump.path, "kind": dump.kind,
                                   "base_offset": dump.base_offset, "state": dump.state, **dump.summary}) + "\n")
        self.problems(dump)

    def problems(self, dump):
        for p in dump.problems:
            self.out.write(json.dumps({"type": "problem", **p}) + "\n")

    def end(self, problems, skipped):
        for path in skipped:
            self.out.write(json.dumps({"type": "skipped", "file": path}) + "\n")


_PRINTERS = {"table": _TablePrinter, "json": _JsonPrinter, "jsonl": _JsonLinesPrinter}
