"""Reading a kafkacore (or Kafka) data directory straight from its segment files, read-only.

Nothing here writes, locks or recovers: a broker may be running on the same directory, and a
reader sees a consistent prefix of every partition (its complete batches). The layout is
Kafka's: ``<topic>-<partition>/`` holding 20-digit ``.log`` and ``.index`` files, the log start
offsets in ``log-start-offset-checkpoint``.

The OffsetIndex of the active segment is preallocated (zeros past its entries), so the
entries in use are counted here: a real entry's position is never 0, because Kafka (and
kafkacore) only index a batch after more than ``index.interval.bytes`` of earlier data."""
import mmap
import os
import re
import struct
from dataclasses import dataclass

from kafkacore.record import decode_to_arrow
from kafkacore.record.errors import CorruptRecordError
from kafkacore.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile

_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")
_LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32
_HEADER = 61  # a whole record batch v2 header
READ_CHUNK = 16 << 20  # bytes read and decoded at a time by a task


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (deleted by retention), and failOnDataLoss is true."""


@dataclass(frozen=True)
class Segment:
    base_offset: int
    log_path: str
    index_path: str
    size: int  # bytes at planning time: a task reads no further, so its output is fixed


@dataclass(frozen=True)
class BatchHeader:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int


def list_partitions(data_dir: str) -> list[tuple[str, int]]:
    """Every (topic, partition) with a directory under data_dir."""
    out = []
    try:
        names = os.listdir(data_dir)
    except FileNotFoundError:
        raise FileNotFoundError(f"data directory {data_dir!r} does not exist") from None
    for name in names:
        m = _PARTITION_DIR.match(name)
        if m and os.path.isdir(os.path.join(data_dir, name)):
            out.append((m.group(1), int(m.group(2))))
    return sorted(out)


def walk_batches(fd: int, start: int, end: int):
    """BatchHeader of every complete batch from start to end (pread of each header)."""
    pos = start
    while pos + _LOG_OVERHEAD <= end:
        head = os.pread(fd, 43, pos)
        if len(head) < _LOG_OVERHEAD:
            return
        base, length = struct.unpack_from(">qi", head, 0)
        if length < _HEADER - _LOG_OVERHEAD or len(head) < 43:
            if pos + _LOG_OVERHEAD + max(length, 0) > end:
                return  # a partial batch at the end: a writer is still appending it
            raise CorruptRecordError(f"batch length {length} is below the v2 header size", pos)
        total = length + _LOG_OVERHEAD
        if pos + total > end:
            return
        delta = struct.unpack_from(">i", head, 23)[0]
        max_ts = struct.unpack_from(">q", head, 35)[0]
        yield BatchHeader(pos, base, base + delta, max_ts, total)
        pos += total


class PartitionFiles:
    """One partition directory, seen read-only."""

    def __init__(self, data_dir: str, topic: str, partition: int):
        self.data_dir = data_dir
        self.topic = topic
        self.partition = partition
        self.dir = os.path.join(data_dir, f"{topic}-{partition}")

    def segments(self) -> list[Segment]:
        out = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        for name in names:
            m = _SEGMENT_LOG.match(name)
            if not m:
                continue  # .deleted / .cleaned / .swap files are on their way in or out
            path = os.path.join(self.dir, name)
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                continue  # deleted by retention since the listing
            out.append(Segment(int(m.group(1)), path, path[:-4] + ".index", size))
        return sorted(out, key=lambda s: s.base_offset)

    # -- offsets ----------------------------------------------------------------------------
    def log_start_offset(self, segments=None) -> int:
        """The earliest offset: the first segment's base offset, or the checkpointed log start
        offset when DeleteRecords moved it further."""
        segments = self.segments() if segments is None else segments
        if not segments:
            return 0
        start = segments[0].base_offset
        try:
            checkpoint = OffsetCheckpointFile(os.path.join(self.data_dir, LOG_START_OFFSET_CHECKPOINT)).read()
        except Exception:
            checkpoint = {}  # the checkpoint is a hint; the segments are the truth
        return max(start, checkpoint.get((self.topic, self.partition), start))

    def log_end_offset(self, segments=None) -> int:
        """One past the last offset of the last complete batch (the high watermark of a
        single-node log)."""
        segments = self.segments() if segments is None else segments
        if not segments:
            return 0
        for seg in reversed(segments):
            last = None
            try:
                fd = os.open(seg.log_path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                start = index_position_at_or_below(seg, seg.size)
                for h in walk_batches(fd, start, seg.size):
                    last = h.last_offset
            finally:
                os.close(fd)
            if last is not None:
                return last + 1
            if seg is segments[-1]:
                return seg.base_offset  # an empty active segment: its base is the next offset
        return segments[-1].base_offset

    def offset_for_timestamp(self, timestamp: int, segments=None):
        """The first offset whose record timestamp is >= timestamp, or None (Kafka's
        ListOffsets by timestamp)."""
        segments = self.segments() if segments is None else segments
        for seg in segments:
            try:
                fd = os.open(seg.log_path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                for h in walk_batches(fd, 0, seg.size):
                    if h.max_timestamp < timestamp:
                        continue
                    batch = decode_to_arrow(os.pread(fd, h.size, h.position))
                    ts = batch.column("timestamp").cast("int64").to_numpy(zero_copy_only=False)
                    offs = batch.column("offset").to_numpy()
                    hit = offs[ts >= timestamp]
                    if len(hit):
                        return int(hit[0])
            finally:
                os.close(fd)
        return None

    # -- planning ---------------------------------------------------------------------------
    def splits(self, start: int, end: int, max_bytes: int, segments=None) -> list[tuple]:
        """(log path, first position, stop position) ranges covering offsets [start, end),
        cut at batch boundaries (index entries) into pieces of about max_bytes."""
        segments = self.segments() if segments is None else segments
        out = []
        for i, seg in enumerate(segments):
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if next_base is not None and next_base <= start:
                continue  # every offset of this segment is below start
            if seg.base_offset >= end:
                break
            first = index_position_for_offset(seg, start) if start > seg.base_offset else 0
            stop = seg.size
            if first >= stop:
                continue
            cuts = [first]
            target = first + max_bytes
            while target < stop:
                cut = index_position_at_or_below(seg, target)
                if cut > cuts[-1]:
                    cuts.append(cut)
                target = max(target, cut) + max_bytes
            cuts.append(stop)
            out.extend((seg.log_path, a, b) for a, b in zip(cuts, cuts[1:]))
        return out


# -- the offset index, read-only ------------------------------------------------------------
def _index_entries(m) -> int:
    """Entries in use: a binary search for the first slot whose position is 0."""
    n = len(m) // 8
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if struct.unpack_from(">i", m, mid * 8 + 4)[0] > 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _search_index(seg: Segment, key_of, target) -> int:
    """Position of the last index entry whose key is <= target; 0 when none."""
    try:
        with open(seg.index_path, "rb") as f:
            if os.fstat(f.fileno()).st_size < 8:
                return 0
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                n = _index_entries(m)
                lo, hi = 0, n
                while lo < hi:
                    mid = (lo + hi) // 2
                    rel, pos = struct.unpack_from(">ii", m, mid * 8)
                    if key_of(rel, pos) <= target:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo == 0:
                    return 0
                pos = struct.unpack_from(">i", m, (lo - 1) * 8 + 4)[0]
                return pos if pos <= seg.size else 0
    except FileNotFoundError:
        return 0  # no index (or deleted): walk from the start


def index_position_for_offset(seg: Segment, offset: int) -> int:
    """A batch boundary at or before the batch holding offset. An entry's offset is the last
    offset of the batch that starts at its position, so the entry must be below offset."""
    return _search_index(seg, lambda rel, pos: seg.base_offset + rel, offset - 1)


def index_position_at_or_below(seg: Segment, position: int) -> int:
    return _search_index(seg, lambda rel, pos: pos, position)


# -- reading (in the tasks) -----------------------------------------------------------------
class _BatchWalk:
    """Frames the batches at the start of a buffer and checks their base offsets, which the CRC
    does not cover: each at or above the segment's base offset and past the previous batch's
    last offset (compaction leaves gaps, never steps back)."""

    def __init__(self, min_base: int, end_offset: int, where: str):
        self.min_base = min_base
        self.end_offset = end_offset
        self.where = where  # "topic-partition (file" for errors

    def prefix(self, buf, at: int) -> tuple[int, bool]:
        """(bytes of the complete batches at the start of buf, stopped): stops before a batch
        whose base offset is at or past end_offset (stopped=True then). ``at`` is buf's file
        position, for errors."""
        pos, n = 0, len(buf)
        while pos + 27 <= n:
            base, length = struct.unpack_from(">qi", buf, pos)
            if length < _HEADER - _LOG_OVERHEAD:
                return n, False  # a corrupt length: the decoder's error names the position
            delta = struct.unpack_from(">i", buf, pos + 23)[0]
            if base < self.min_base or delta < 0:
                raise CorruptRecordError(
                    f"corrupt data in {self.where}, file position {at + pos}): batch base offset {base} "
                    f"(last offset delta {delta}) is below {self.min_base}, the first offset it may have there",
                    at + pos)
            if base >= self.end_offset:
                return pos, True
            if pos + _LOG_OVERHEAD + length > n:
                break
            self.min_base = base + delta + 1
            pos += _LOG_OVERHEAD + length
        return pos, False


def read_range(topic, partition, log_path, first, stop, start_offset, end_offset, aborted=None):
    """Arrow record batches of the records in [start_offset, end_offset) stored in bytes
    [first, stop) of one segment file. ``aborted`` reads committed: (producer id, first offset,
    last offset) of the aborted transactions overlapping the range (kafkacore.storage.txn_view);
    None reads uncommitted."""
    import pyarrow.compute as pc

    fd = os.open(log_path, os.O_RDONLY)  # FileNotFoundError: retention deleted it
    walk = _BatchWalk(int(os.path.basename(log_path)[:20]), end_offset, f"{topic}-{partition} ({log_path}")
    try:
        pos = first
        while pos < stop:
            want = min(READ_CHUNK, stop - pos)
            buf = os.pread(fd, want, pos)
            if not buf:
                raise DataLossError(f"{log_path} ends at {pos}, before {stop}: it was truncated or replaced")
            used, stopped = walk.prefix(buf, pos)
            if used == 0 and not stopped:
                # The batch at pos does not fit in buf. Planning saw every batch below the end
                # offset complete before stop, so one reaching past stop is corrupt: its
                # records would otherwise be skipped without a word.
                if len(buf) < 27:
                    break  # the start of a batch still being written when the query was planned
                length = struct.unpack_from(">i", buf, 8)[0]
                if pos + _LOG_OVERHEAD + length > stop:
                    raise CorruptRecordError(
                        f"corrupt data in {topic}-{partition} ({log_path}, file position {pos}): the batch "
                        f"claims {length} bytes, past the end of the data ({stop})", pos)
                buf = os.pread(fd, _LOG_OVERHEAD + length, pos)  # one batch bigger than the chunk
                used, stopped = walk.prefix(buf, pos)
            if used:
                chunk_aborted = None
                if aborted is not None:
                    # The decoder starts each chunk afresh, as a consumer's fetch from the
                    # chunk's first offset: it gets the transactions whose ABORT marker is at or
                    # after that offset (Kafka's lastOffset >= fetch offset). An earlier one
                    # would mark a later transaction of the same producer aborted.
                    chunk_base = struct.unpack_from(">q", buf, 0)[0]
                    chunk_aborted = [(pid, first_offset) for pid, first_offset, last_offset in aborted
                                     if last_offset >= chunk_base]
                try:
                    batch = decode_to_arrow(memoryview(buf)[:used], topic, partition, aborted=chunk_aborted)
                except CorruptRecordError as e:
                    at = pos + max(e.position, 0)
                    raise CorruptRecordError(
                        f"corrupt data in {topic}-{partition} ({log_path}, file position {at}): {e.reason}",
                        at) from e
                if batch.num_rows:
                    offsets = batch.column("offset")
                    lo = offsets[0].as_py()
                    hi = offsets[-1].as_py()
                    if lo < start_offset or hi >= end_offset:
                        keep = pc.and_(pc.greater_equal(offsets, start_offset), pc.less(offsets, end_offset))
                        batch = batch.filter(keep)
                    if batch.num_rows:
                        yield batch
            if stopped:
                break
            pos += used
    finally:
        os.close(fd)
