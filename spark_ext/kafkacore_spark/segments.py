"""Reading a kafkacore (or Kafka) data directory straight from its segment files, read-only.

Nothing here writes, locks or recovers: a broker may be running on the same directory, and a
reader sees a consistent prefix of every partition (its complete batches). The layout is
Kafka's: ``<topic>-<partition>/`` holding 20-digit ``.log`` and ``.index`` files, the log start
offsets in ``log-start-offset-checkpoint``. The files are read through
kafkacore.storage.segment_files (names, segments, batch headers, index lookups), as the broker
and ``kafkacore log dump`` read them."""
import os
import struct

from kafkacore.record import decode_to_arrow
from kafkacore.record.errors import CorruptRecordError
from kafkacore.record.layout import (BASE_OFFSET_OFFSET, BASE_TIMESTAMP_OFFSET, LAST_OFFSET_DELTA_OFFSET, LENGTH_OFFSET,
                                     LOG_OVERHEAD, RECORD_BATCH_OVERHEAD)
from kafkacore.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile
from kafkacore.storage.segment_files import (SegmentFiles, find_batch_by_timestamp, list_partition_dirs, list_segments,
                                             parse_segment_file_name, walk_batch_headers)

READ_CHUNK = 16 << 20  # bytes read and decoded at a time by a task
# a batch's base offset, length and last offset delta: the header up to the base timestamp
_FRAMING = BASE_TIMESTAMP_OFFSET
_BASE_LEN = struct.Struct(">qi")  # baseOffset, then batchLength at LENGTH_OFFSET
_INT32 = struct.Struct(">i")


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (deleted by retention), and failOnDataLoss is true."""


def list_partitions(data_dir: str) -> list[tuple[str, int]]:
    """Every (topic, partition) with a directory under data_dir."""
    try:
        return list_partition_dirs(data_dir)
    except FileNotFoundError:
        raise FileNotFoundError(f"data directory {data_dir!r} does not exist") from None


def segment_base_offset(log_path: str) -> int:
    """The base offset a segment file is named by."""
    return parse_segment_file_name(os.path.basename(log_path)).base_offset


class PartitionFiles:
    """One partition directory, seen read-only."""

    def __init__(self, data_dir: str, topic: str, partition: int):
        self.data_dir = data_dir
        self.topic = topic
        self.partition = partition
        self.dir = os.path.join(data_dir, f"{topic}-{partition}")

    def segments(self) -> list[SegmentFiles]:
        return list_segments(self.dir)

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
                with seg.offset_index() as index:
                    start = index.lookup_position(seg.size)
                for h in walk_batch_headers(fd, start, seg.size):
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
        ListOffsets by timestamp). In each segment the indexes say where to start
        (find_batch_by_timestamp): a segment wholly older than timestamp costs the headers
        after its last time index entry, so a query for the last hour of a week reads a few
        headers per segment and one batch."""
        segments = self.segments() if segments is None else segments
        for seg in segments:
            try:
                fd = os.open(seg.log_path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                header = find_batch_by_timestamp(seg, fd, timestamp)
                while header is not None:
                    # the batch's max timestamp reaches timestamp, so one of its records does,
                    # unless it is a control batch (a marker holds no record)
                    batch = decode_to_arrow(os.pread(fd, header.size, header.position))
                    ts = batch.column("timestamp").cast("int64").to_numpy(zero_copy_only=False)
                    hit = batch.column("offset").to_numpy()[ts >= timestamp]
                    if len(hit):
                        return int(hit[0])
                    header = next((h for h in walk_batch_headers(fd, header.position + header.size, seg.size)
                                   if h.max_timestamp >= timestamp), None)
            finally:
                os.close(fd)
        return None

    # -- planning ---------------------------------------------------------------------------
    def splits(self, start: int, end: int, max_bytes: int, segments=None, exact: bool = False) -> list[tuple]:
        """(log path, first position, stop position) ranges covering offsets [start, end),
        cut at batch boundaries (index entries) into pieces of about max_bytes. ``exact``: the
        range comes from pushed filters, usually a small part of the log, so its ends are
        found to the batch: reading starts at the batch holding start (not at the index entry
        before it) and stops before the batch at end (not at the segment's end), walking a few
        headers from the index entries below them."""
        segments = self.segments() if segments is None else segments
        out = []
        for i, seg in enumerate(segments):
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if next_base is not None and next_base <= start:
                continue  # every offset of this segment is below start
            if seg.base_offset >= end:
                break
            with seg.offset_index() as index:
                # an entry's offset is the last of the batch at its position: the entry must be
                # below start for its batch to end before the one holding start
                first = index.lookup(start - 1)[1] if start > seg.base_offset else 0
                stop = seg.size
                if exact and start > seg.base_offset:
                    first = self._first_batch(seg, first, lambda h: h.last_offset >= start)
                if exact and (next_base is None or end < next_base):
                    stop = self._first_batch(seg, index.lookup(end - 1)[1], lambda h: h.base_offset >= end)
                if first >= stop:
                    continue
                cuts = [first]
                target = first + max_bytes
                while target < stop:
                    cut = index.lookup_position(target)
                    if cut > cuts[-1]:
                        cuts.append(cut)
                    target = max(target, cut) + max_bytes
            cuts.append(stop)
            out.extend((seg.log_path, a, b) for a, b in zip(cuts, cuts[1:]))
        return out

    @staticmethod
    def _first_batch(seg: SegmentFiles, from_position: int, wanted) -> int:
        """Where the first batch whose header is ``wanted`` starts, walking the headers from
        from_position (a batch boundary); the segment's size if none is."""
        fd = os.open(seg.log_path, os.O_RDONLY)
        try:
            for h in walk_batch_headers(fd, from_position, seg.size):
                if wanted(h):
                    return h.position
        finally:
            os.close(fd)
        return seg.size


# -- reading (in the tasks) -----------------------------------------------------------------
class _BatchWalk:
    """Frames the batches at the start of a buffer and checks their base offsets, which the CRC
    does not cover: each at or above the segment's base offset and past the previous batch's
    last offset (compaction leaves gaps, never steps back).

    A task's own framing, not segment_files' header walk: it frames whole batches inside a
    chunk already read, so that the chunk is decoded in one native call, and a bad base offset
    anywhere in the chunk fails it before any of its records is served."""

    def __init__(self, min_base: int, end_offset: int, where: str):
        self.min_base = min_base
        self.end_offset = end_offset
        self.where = where  # "topic-partition (file" for errors

    def prefix(self, buf, at: int) -> tuple[int, bool]:
        """(bytes of the complete batches at the start of buf, stopped): stops before a batch
        whose base offset is at or past end_offset (stopped=True then). ``at`` is buf's file
        position, for errors."""
        pos, n = 0, len(buf)
        while pos + _FRAMING <= n:
            base, length = _BASE_LEN.unpack_from(buf, pos + BASE_OFFSET_OFFSET)
            if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                return n, False  # a corrupt length: the decoder's error names the position
            delta = _INT32.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)[0]
            if base < self.min_base or delta < 0:
                raise CorruptRecordError(
                    f"corrupt data in {self.where}, file position {at + pos}): batch base offset {base} "
                    f"(last offset delta {delta}) is below {self.min_base}, the first offset it may have there",
                    at + pos)
            if base >= self.end_offset:
                return pos, True
            if pos + LOG_OVERHEAD + length > n:
                break
            self.min_base = base + delta + 1
            pos += LOG_OVERHEAD + length
        return pos, False


def read_range(topic, partition, log_path, first, stop, start_offset, end_offset, aborted=None):
    """Arrow record batches of the records in [start_offset, end_offset) stored in bytes
    [first, stop) of one segment file. ``aborted`` reads committed: (producer id, first offset,
    last offset) of the aborted transactions overlapping the range (kafkacore.storage.txn_view);
    None reads uncommitted."""
    import pyarrow.compute as pc

    fd = os.open(log_path, os.O_RDONLY)  # FileNotFoundError: retention deleted it
    walk = _BatchWalk(segment_base_offset(log_path), end_offset, f"{topic}-{partition} ({log_path}")
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
                if len(buf) < _FRAMING:
                    break  # the start of a batch still being written when the query was planned
                length = _INT32.unpack_from(buf, LENGTH_OFFSET)[0]
                if pos + LOG_OVERHEAD + length > stop:
                    raise CorruptRecordError(
                        f"corrupt data in {topic}-{partition} ({log_path}, file position {pos}): the batch "
                        f"claims {length} bytes, past the end of the data ({stop})", pos)
                buf = os.pread(fd, LOG_OVERHEAD + length, pos)  # one batch bigger than the chunk
                used, stopped = walk.prefix(buf, pos)
            if used:
                chunk_aborted = None
                if aborted is not None:
                    # The decoder starts each chunk afresh, as a consumer's fetch from the
                    # chunk's first offset: it gets the transactions whose ABORT marker is at or
                    # after that offset (Kafka's lastOffset >= fetch offset). An earlier one
                    # would mark a later transaction of the same producer aborted.
                    chunk_base = _BASE_LEN.unpack_from(buf, BASE_OFFSET_OFFSET)[0]
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
