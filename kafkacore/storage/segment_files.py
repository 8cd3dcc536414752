"""A partition's files as Kafka lays them out, read-only: their names, the segments of a
directory, the batch headers of a ``.log`` file and the lookups of its ``.index`` and
``.timeindex``. The storage engine, the Spark source (kafkacore_spark.segments) and ``kafkacore
log dump`` all read the format through this module.

Nothing here writes, locks or recovers, so a broker may be appending to the files being read:

- A ``.log`` is read with ``pread`` up to a size the caller fixed (the size it listed), never
  past it, and every read is bounds-checked. A batch that does not end within that size is a
  torn tail (one still being appended, or cut by a crash): the walk ends before it. A batch
  that lies within the size but cannot be a v2 batch raises one CorruptRecordError naming
  its position.
- An index of the active segment is preallocated to ``segment.index.bytes`` with zeros past its
  entries, so the entries in use are counted: no real entry is all zeros (an offset index
  entry's position is never 0, since the first batch is never indexed; a time index entry's
  timestamp is positive past slot 0, and an all-zero slot 0 would say nothing).
- The binary searches are the storage engine's own (``kc_offset_index_lookup`` and friends, or
  their Python twins), shared with OffsetIndex and TimeIndex, which take their lookups from here.

Batch header offsets come from kafkacore.record.layout."""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from typing import NamedTuple

from ..record.errors import CorruptRecordError
from ..record.layout import CONTROL_FLAG_MASK, LENGTH_OFFSET, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from ._hot import hot

# -- names ------------------------------------------------------------------------------------
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"  # a producer state snapshot, named by its offset like a segment
FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)  # one segment's files
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
STATE_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)  # a file in the middle of a step


def segment_file_name(base_offset: int) -> str:
    """Kafka's file name stem: the base offset in 20 digits."""
    return f"{base_offset:020d}"


_STEM_LENGTH = len(segment_file_name(0))


class SegmentFileName(NamedTuple):
    base_offset: int
    suffix: str  # ".log", ".index", ".timeindex", ".txnindex", ".snapshot"...
    state: str | None  # "deleted", "cleaned" or "swap" for a file in one of those steps


def split_state_suffix(name: str) -> tuple[str, str | None]:
    """(name without it, "deleted" / "cleaned" / "swap") for a name carrying one of the suffixes
    of a deletion, a cleaning or a swap; (name, None) otherwise."""
    state = None
    for suffix in STATE_SUFFIXES:
        if name.endswith(suffix):
            name, state = name[:-len(suffix)], suffix[1:]
    return name, state


def parse_segment_file_name(name: str) -> SegmentFileName | None:
    """The parts of ``<20 digits><.suffix>[.deleted|.cleaned|.swap]``, suffix one dotted word;
    None for any other name."""
    rest, state = split_state_suffix(name)
    stem, dot, word = rest.partition(".")
    if len(stem) != _STEM_LENGTH or not (stem.isascii() and stem.isdigit()) or not word or "." in word:
        return None
    return SegmentFileName(int(stem), dot + word, state)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) from ``<topic>-<partition>``; None when the name is not one (a
    ``-delete`` or ``-future`` directory, a checkpoint file...)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not (partition.isascii() and partition.isdigit()):
        return None
    return topic, int(partition)


def list_partition_dirs(data_dir: str) -> list[tuple[str, int]]:
    """Every (topic, partition) with a directory under data_dir, sorted. FileNotFoundError
    when data_dir does not exist."""
    out = []
    for name in os.listdir(data_dir):
        parsed = parse_partition_dir(name)
        if parsed is not None and os.path.isdir(os.path.join(data_dir, name)):
            out.append(parsed)
    return sorted(out)


# -- a partition's segments -----------------------------------------------------------------
@dataclass(frozen=True)
class SegmentFiles:
    """One live segment of a partition directory: its files, and the size of its ``.log`` when
    it was listed (a reader that stops there reads a fixed prefix, whatever is appended since).
    The index files may be missing (a segment whose indexes were never written, or were
    deleted): their views are empty then."""
    base_offset: int
    log_path: str
    index_path: str
    time_index_path: str
    txn_index_path: str
    size: int

    def offset_index(self) -> OffsetIndexView:
        """The .index, read-only, its entries past the listed size not used."""
        return OffsetIndexView(self.index_path, self.base_offset, self.size)

    def time_index(self) -> TimeIndexView:
        return TimeIndexView(self.time_index_path, self.base_offset)


def list_segments(directory: str) -> list[SegmentFiles]:
    """The live segments of a partition directory (``<20 digits>.log``, not ``.deleted``,
    ``.cleaned`` or ``.swap`` ones, which are on their way in or out), by base offset; [] when
    the directory does not exist. A segment deleted between the listing and its stat is left
    out."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        parsed = parse_segment_file_name(name)
        if parsed is None or parsed.suffix != LOG_SUFFIX or parsed.state is not None:
            continue
        stem = os.path.join(directory, name[:-len(LOG_SUFFIX)])
        try:
            size = os.stat(stem + LOG_SUFFIX).st_size
        except FileNotFoundError:
            continue  # deleted by retention since the listing
        out.append(SegmentFiles(parsed.base_offset, stem + LOG_SUFFIX, stem + INDEX_SUFFIX, stem + TIME_INDEX_SUFFIX,
                                stem + TXN_INDEX_SUFFIX, size))
    out.sort(key=lambda s: s.base_offset)
    return out


# -- batch headers of a .log ------------------------------------------------------------------
# the whole v2 header in one unpack: baseOffset, batchLength, partitionLeaderEpoch, magic, crc,
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordsCount (the fields at record.layout's offsets, in that order)
_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
_LENGTH = struct.Struct(">i")
_MIN_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # what batchLength counts of the header
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_new_header = tuple.__new__  # BatchHeader without its Python-level __new__: one per batch


class BatchHeader(NamedTuple):
    """A v2 batch header, where the walk found it (RecordBatch's names)."""
    position: int  # of the batch in the file
    size: int  # of the whole batch, LOG_OVERHEAD included
    base_offset: int
    last_offset: int  # base_offset + lastOffsetDelta, as Java's long arithmetic gives it
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)


class HeaderWalk:
    """Iterating gives the BatchHeader of every whole batch in bytes [start, end) of a ``.log``,
    in order, reading only headers. ``source`` is the file's descriptor, read with ``pread``
    (never mapped: a broker may cut the file while it is read, and touching a mapped page past
    its new end would kill the reader with SIGBUS), or a buffer holding the whole file (an mmap
    an offline tool made).

    The walk ends quietly at a torn tail: fewer than LOG_OVERHEAD bytes left before end, or a
    batch reaching past end. A batch within end whose length cannot hold a v2 header, or whose
    header the file no longer holds (cut since the caller sized it), raises CorruptRecordError
    (its message starts with ``name`` when given). Nothing else is checked (magic, CRC, offsets):
    each caller checks what it relies on.

    ``position`` is where the next batch starts: once the walk ended by itself, the end of the
    last whole batch. ``read_size`` is how much one read takes: one header by default (batches
    are large); a walk over many small batches reads more at once and takes the headers out of
    what it read. ``batch_bytes(header)`` gives a yielded batch's bytes, out of that read when
    it holds them."""

    __slots__ = ("fd", "end", "position", "name", "read_size", "buffer", "buffer_at")

    def __init__(self, source, start: int, end: int, read_size: int = RECORD_BATCH_OVERHEAD, name: str = ""):
        if isinstance(source, int):
            self.fd, self.buffer = source, b""
        else:
            self.fd, self.buffer = None, source
        self.buffer_at = 0 if self.fd is None else start
        self.end = end
        self.position = start
        self.read_size = max(read_size, RECORD_BATCH_OVERHEAD)
        self.name = name

    def _read(self, pos: int, need: int):
        buf = os.pread(self.fd, min(max(self.read_size, need), self.end - pos), pos)
        self.buffer, self.buffer_at = buf, pos
        return buf

    def _corrupt(self, reason: str, pos: int) -> CorruptRecordError:
        return CorruptRecordError(f"{self.name}: {reason}" if self.name else reason, pos)

    def __iter__(self):
        end, fd = self.end, self.fd
        pos = self.position
        unpack_header, make = _HEADER.unpack_from, _new_header
        while end - pos >= LOG_OVERHEAD:
            buf = self.buffer  # batch_bytes may have read since the last header
            off = pos - self.buffer_at
            if len(buf) - off < RECORD_BATCH_OVERHEAD and fd is not None:
                buf, off = self._read(pos, RECORD_BATCH_OVERHEAD), 0
            if len(buf) - off < RECORD_BATCH_OVERHEAD:
                self._check_tail(buf, off, pos)  # raises, or the walk ends here
                break
            (base, length, epoch, magic, crc, attributes, delta, base_ts, max_ts, pid, producer_epoch, base_seq,
             count) = unpack_header(buf, off)
            size = LOG_OVERHEAD + length
            if length < _MIN_LENGTH or pos + size > end:
                self._check_tail(buf, off, pos)
                break
            last = base + delta
            if last > _INT64_MAX or last < _INT64_MIN:
                last = (last - _INT64_MIN) % (1 << 64) + _INT64_MIN
            self.position = pos = pos + size
            yield make(BatchHeader, (pos - size, size, base, last, epoch, magic, crc, attributes, base_ts, max_ts, pid,
                                     producer_epoch, base_seq, count))
        self.position = pos

    def _check_tail(self, buf, off: int, pos: int):
        """At a batch that is not whole (or whose header is not all there): returns when it is a
        torn tail, where the walk ends; raises CorruptRecordError when it cannot be a batch."""
        if len(buf) - off < LOG_OVERHEAD:
            return  # the file ends before end: cut since the caller sized it
        (length,) = _LENGTH.unpack_from(buf, off + LENGTH_OFFSET)
        if pos + LOG_OVERHEAD + max(length, 0) > self.end:
            return  # the start of a batch still being written
        if length < _MIN_LENGTH:
            raise self._corrupt(f"batch length {length} is below the v2 header size", pos)
        raise self._corrupt(f"the file ends inside the batch header at position {pos}: it was cut to "
                            f"{self.buffer_at + len(buf)} bytes, below the {self.end} read", pos)

    def batch_bytes(self, header: BatchHeader) -> memoryview:
        """The whole batch of a header this walk yielded: a view of what the walk read when that
        holds it, else one read (at least read_size, which the walk then goes on in)."""
        pos, size = header.position, header.size
        buf = self.buffer
        off = pos - self.buffer_at
        if off < 0 or off + size > len(buf):
            if self.fd is None:
                raise self._corrupt(f"the buffer ends inside the batch at position {pos}", pos)
            buf, off = self._read(pos, size), 0
            if len(buf) < size:
                raise self._corrupt(f"the file ends inside the batch at position {pos}: it was cut to {pos + len(buf)} "
                                    f"bytes, below the {self.end} read", pos)
        return memoryview(buf)[off:off + size]


def walk_batch_headers(source, start: int, end: int, read_size: int = RECORD_BATCH_OVERHEAD, name: str = ""):
    """iter(HeaderWalk(...)): the BatchHeader of every whole batch in [start, end) of a .log."""
    return iter(HeaderWalk(source, start, end, read_size, name))


# -- the offset and time indexes ------------------------------------------------------------
OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position (the batch's last offset, its start)
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
NO_TIMESTAMP = -1
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _int32(n: int) -> int:
    """n clamped to an int32, which keeps its order against every int32 key of an index."""
    return _INT32_MIN if n < _INT32_MIN else _INT32_MAX if n > _INT32_MAX else n


def index_entries(data, entry_size: int, exhaustive: bool = False) -> int:
    """The entries in use among an index file's bytes: the slots before the zeros that fill the
    rest of a preallocated (active) index. A binary search for the first all-zero slot: a few
    reads of a 10 MiB file. ``exhaustive`` looks for the last non-zero byte instead (a copy of
    all of it), for a verifier that must see damage after a zero slot; both give the same count
    for an index whose entries are sound."""
    n = len(data) // entry_size
    if exhaustive:
        used = len(bytes(data[:n * entry_size]).rstrip(b"\0"))
        return (used + entry_size - 1) // entry_size
    zero = bytes(entry_size)
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if data[mid * entry_size:(mid + 1) * entry_size] != zero:
            lo = mid + 1
        else:
            hi = mid
    return lo


def lookup_offset(index, entries: int, base_offset: int, offset: int) -> tuple[int, int]:
    """(offset, position) of the last offset index entry whose offset is <= offset, or
    (base_offset, 0) when none is (Kafka's OffsetIndex.lookup). ``index`` holds at least
    ``entries`` entries (it may be None when there are none)."""
    if entries:
        slot = hot.offset_index_lookup(index, entries, _int32(offset - base_offset))
        if slot >= 0:
            rel, position = OFFSET_INDEX_ENTRY.unpack_from(index, slot * OFFSET_INDEX_ENTRY.size)
            return base_offset + rel, position
    return base_offset, 0


def lookup_position(index, entries: int, position: int) -> int:
    """Position of the last offset index entry whose position is <= position; 0 when none is."""
    if entries:
        slot = hot.offset_index_lookup_position(index, entries, _int32(position))
        if slot >= 0:
            return OFFSET_INDEX_ENTRY.unpack_from(index, slot * OFFSET_INDEX_ENTRY.size)[1]
    return 0


def lookup_timestamp(index, entries: int, base_offset: int, timestamp: int) -> tuple[int, int]:
    """(timestamp, offset) of the last time index entry whose timestamp is <= timestamp, or
    (NO_TIMESTAMP, base_offset) when none is (Kafka's TimeIndex.lookup): the search for the first
    record at or after timestamp starts at that offset's batch."""
    if entries:
        slot = hot.time_index_lookup(index, entries, max(min(timestamp, _INT64_MAX), _INT64_MIN))
        if slot >= 0:
            ts, rel = TIME_INDEX_ENTRY.unpack_from(index, slot * TIME_INDEX_ENTRY.size)
            return ts, base_offset + rel
    return NO_TIMESTAMP, base_offset


def timestamp_search_start(offset_index, time_index, timestamp: int, starting_offset: int) -> int:
    """Where the search for the first record at or after timestamp (and starting_offset) begins in
    a segment: the offset index position for the later of the time index's answer and
    starting_offset (Kafka's LogSegment.findOffsetByTimestamp). Either kind of index serves:
    LogSegment's OffsetIndex and TimeIndex, or the read-only views below."""
    _ts, offset = time_index.lookup(timestamp)
    return offset_index.lookup(max(offset, starting_offset))[1]


class _IndexView:
    """An index file mapped read-only, its entries in use counted; empty when the file is missing
    or holds no whole entry. Close it (or use it as a context manager) to unmap it."""

    ENTRY: struct.Struct

    def __init__(self, path: str, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self.entries = 0
        self._map = None
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size >= self.ENTRY.size:
                    self._map = mmap.mmap(f.fileno(), size - size % self.ENTRY.size, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            return
        if self._map is not None:
            self.entries = index_entries(self._map, self.ENTRY.size)

    def entry(self, slot: int) -> tuple:
        return self.ENTRY.unpack_from(self._map, slot * self.ENTRY.size)

    def close(self):
        if self._map is not None:
            self._map.close()
            self._map = None
            self.entries = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class OffsetIndexView(_IndexView):
    """A segment's .index, read-only. With ``log_size``, an entry pointing past it (appended
    after the caller sized the log, or damaged) is not used: the lookups answer as if there were
    no entry."""

    ENTRY = OFFSET_INDEX_ENTRY

    def __init__(self, path: str, base_offset: int, log_size: int | None = None):
        super().__init__(path, base_offset)
        self.log_size = _INT64_MAX if log_size is None else log_size

    def entry(self, slot: int) -> tuple[int, int]:
        """(offset, position) of a slot below ``entries``."""
        rel, position = super().entry(slot)
        return self.base_offset + rel, position

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry whose offset is <= offset; (base offset, 0) if none."""
        found = lookup_offset(self._map, self.entries, self.base_offset, offset)
        return found if 0 <= found[1] <= self.log_size else (self.base_offset, 0)

    def lookup_position(self, position: int) -> int:
        """Position of the last entry whose position is <= position: a batch boundary; 0 if none."""
        found = lookup_position(self._map, self.entries, position)
        return found if 0 <= found <= self.log_size else 0


class TimeIndexView(_IndexView):
    """A segment's .timeindex, read-only."""

    ENTRY = TIME_INDEX_ENTRY

    def entry(self, slot: int) -> tuple[int, int]:
        """(timestamp, offset) of a slot below ``entries``."""
        ts, rel = super().entry(slot)
        return ts, self.base_offset + rel

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry whose timestamp is <= timestamp, or
        (NO_TIMESTAMP, base offset)."""
        return lookup_timestamp(self._map, self.entries, self.base_offset, timestamp)

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (NO_TIMESTAMP, base offset): the largest
        timestamp of a rolled segment (its final entry), a lower bound for the active one."""
        return self.entry(self.entries - 1) if self.entries else (NO_TIMESTAMP, self.base_offset)


def find_batch_by_timestamp(segment: SegmentFiles, fd: int, timestamp: int) -> BatchHeader | None:
    """The first batch of a listed segment (up to its listed size) whose maxTimestamp is >=
    timestamp, or None: the walk starts where the indexes say (timestamp_search_start), so it
    reads about index.interval.bytes of headers, not the whole segment. Its first record at or
    after timestamp is the one ListOffsets answers, when no earlier segment has one."""
    with segment.offset_index() as offset_index, segment.time_index() as time_index:
        start = timestamp_search_start(offset_index, time_index, timestamp, segment.base_offset)
    for header in walk_batch_headers(fd, start, segment.size):
        if header.max_timestamp >= timestamp:
            return header
    return None
