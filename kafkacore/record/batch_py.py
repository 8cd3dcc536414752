"""Pure-Python twin of the native record batch builder and reader (format v2).

Slow and written to be obviously correct: the native module must produce the same bytes
and decode the same values. Layout facts from Kafka's DefaultRecordBatch documentation:

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2) |
    crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32 |
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
    baseSequence int32 | recordsCount int32 | records...

    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint |
    (headerKeyLength varint | headerKey | headerValueLength varint | headerValue)*
"""
import struct

from ..clock import wall_ms
from . import codecs
from .errors import CorruptRecordError
from .layout import (CONTROL_FLAG_MASK, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK,
                     TRANSACTIONAL_FLAG_MASK)
from .varint import read_varint, read_varlong, write_varlong
from ..checksum import crc32c

_HEADER = struct.Struct(">qiiBIhiqqqhii")
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount: the CRC-covered header part
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _wrap64(v: int) -> int:
    return ((v + (1 << 63)) % (1 << 64)) - (1 << 63)



def _as_bytes(obj, what: str):
    if obj is None:
        return None
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, str):
        raise TypeError(f"{what} must be bytes-like or None, not str (encode it first)")
    try:
        return bytes(memoryview(obj).cast("B"))
    except TypeError:
        raise TypeError(f"{what} must be bytes-like or None, not {type(obj).__name__}") from None


def _check_timestamp(ts) -> int:
    if isinstance(ts, bool) or not hasattr(ts, "__index__"):
        raise TypeError(f"timestamp_ms must be an int, not {type(ts).__name__}")
    ts = ts.__index__()
    if not INT64_MIN <= ts <= INT64_MAX:
        raise OverflowError("timestamp_ms does not fit in 64 bits")
    return ts


def _encode_headers(headers):
    out = []
    for item in headers:
        try:
            k, v = item
        except (TypeError, ValueError):
            raise TypeError("headers must be a list of (key, value) pairs") from None
        if isinstance(k, str):
            k = k.encode("utf-8")
        elif isinstance(k, (bytes, bytearray, memoryview)):
            k = bytes(k)
            k.decode("utf-8")  # header keys are strings in Kafka: reject bytes that are not UTF-8
        else:
            raise TypeError(f"header key must be str, not {type(k).__name__}")
        out.append((k, _as_bytes(v, "header value")))
    return out


def encode_record(out: bytearray, ts_delta: int, offset_delta: int, key, value, headers) -> None:
    body = bytearray()
    body.append(0)
    write_varlong(body, ts_delta)
    write_varlong(body, offset_delta)
    for field in (key, value):
        if field is None:
            write_varlong(body, -1)
        else:
            write_varlong(body, len(field))
            body += field
    write_varlong(body, len(headers))
    for hk, hv in headers:
        write_varlong(body, len(hk))
        body += hk
        if hv is None:
            write_varlong(body, -1)
        else:
            write_varlong(body, len(hv))
            body += hv
    write_varlong(out, len(body))
    out += body


class RecordBatchBuilder:
    """Builds one record batch v2. ``append`` adds a record; ``build`` returns the bytes."""

    def __init__(self, compression="none", base_offset=0, producer_id=-1, producer_epoch=-1,
                 base_sequence=-1, transactional=False, log_append_time=False,
                 partition_leader_epoch=-1, control=False):
        self._codec = codecs.codec_id(compression)
        self.compression = codecs.CODEC_NAMES[self._codec]
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.partition_leader_epoch = partition_leader_epoch
        self.transactional = bool(transactional)
        self.log_append_time = bool(log_append_time)
        self.control = bool(control)
        # Fail on out-of-range header values now rather than at build().
        try:
            struct.pack(">qqhii", base_offset, producer_id, producer_epoch, base_sequence, partition_leader_epoch)
        except struct.error as e:
            raise OverflowError(f"batch header field out of range: {e}") from None
        self._records = bytearray()
        self._count = 0
        self._base_ts = None
        self._max_ts = None
        self._view = None  # build_view's buffer, once handed out
        self.size_hint = 0  # bytes the batch is expected to reach (the native builder sizes its buffer by it)

    def __len__(self):
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed size of the batch so far (header + records)."""
        return RECORD_BATCH_OVERHEAD + len(self._records)

    def set_producer_state(self, producer_id, producer_epoch, base_sequence, transactional=False) -> None:
        """Stamps the idempotent producer's id, epoch and first sequence (a producer assigns the
        sequence when the batch is drained, after its records were appended), and whether the
        batch belongs to a transaction (attribute bit 0x10), set either way as Kafka's
        MemoryRecordsBuilder.setProducerState does."""
        if self._view is not None:
            raise BufferError("the batch was already built in place by build_view()")
        try:
            struct.pack(">qhi", producer_id, producer_epoch, base_sequence)
        except struct.error as e:
            raise OverflowError(f"producer state out of range: {e}") from None
        self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence
        self.transactional = bool(transactional)

    def append(self, value, key=None, timestamp_ms=None, headers=None) -> None:
        if self._view is not None:
            raise BufferError("cannot append to a batch built in place by build_view()")
        value = _as_bytes(value, "value")
        key = _as_bytes(key, "key")
        ts = wall_ms() if timestamp_ms is None else _check_timestamp(timestamp_ms)
        hdrs = _encode_headers(headers) if headers else []
        if self._count >= 0x7FFFFFFF:
            raise OverflowError("a record batch holds at most 2^31-1 records")
        if self._base_ts is None:
            self._base_ts = self._max_ts = ts
        encode_record(self._records, _wrap64(ts - self._base_ts), self._count, key, value, hdrs)
        if ts > self._max_ts:
            self._max_ts = ts
        self._count += 1

    def extend(self, values, keys=None, timestamps_ms=None) -> None:
        # Snapshots: conversions below may run user code that mutates the caller's lists.
        values = tuple(values)
        keys = None if keys is None else tuple(keys)
        timestamps_ms = None if timestamps_ms is None else tuple(timestamps_ms)
        n = len(values)
        if keys is not None and len(keys) != n:
            raise ValueError(f"keys has {len(keys)} items but values has {n}")
        if timestamps_ms is not None and len(timestamps_ms) != n:
            raise ValueError(f"timestamps_ms has {len(timestamps_ms)} items but values has {n}")
        now = wall_ms() if timestamps_ms is None else None
        for i in range(n):
            self.append(values[i], None if keys is None else keys[i],
                        now if timestamps_ms is None else _check_timestamp(timestamps_ms[i]))

    def build(self) -> bytes:
        if self._count == 0:
            raise ValueError("cannot build a record batch with no records")
        records = codecs.compress(self._codec, self._records) if self._codec else bytes(self._records)
        attributes = self._codec
        if self.log_append_time:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self.control:
            attributes |= CONTROL_FLAG_MASK
        tail = _TAIL.pack(attributes, self._count - 1, self._base_ts, self._max_ts, self.producer_id,
                          self.producer_epoch, self.base_sequence, self._count)
        crc = crc32c(records, crc32c(tail))
        total = RECORD_BATCH_OVERHEAD + len(records)
        head = struct.pack(">qiiBI", self.base_offset, total - LOG_OVERHEAD, self.partition_leader_epoch, 2, crc)
        return head + tail + records

    def build_view(self) -> memoryview:
        """The finished batch as a writable buffer, and the end of the builder: it takes no
        more records (the native builder hands out its own memory here, without a copy)."""
        if self._view is None:
            self._view = memoryview(bytearray(self.build()))
        return self._view


class Record:
    __slots__ = ("offset", "timestamp_ms", "key", "value", "headers")

    def __init__(self, offset, timestamp_ms, key, value, headers):
        self.offset = offset
        self.timestamp_ms = timestamp_ms
        self.key = key
        self.value = value
        self.headers = headers

    def __eq__(self, other):
        if not hasattr(other, "timestamp_ms"):
            return NotImplemented
        return (self.offset, self.timestamp_ms, self.key, self.value, list(self.headers)) == (
            other.offset, other.timestamp_ms, other.key, other.value, list(other.headers))

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp_ms={self.timestamp_ms}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


def parse_records(data, start: int, end: int, count: int, base_offset: int, base_ts: int,
                  max_ts: int, log_append: bool, error_position, whole: bool = True):
    """Decodes `count` records from data[start:end]; error_position(pos) maps a position in
    data to the one reported. Returns a list of Record. ``whole=False`` allows bytes after
    them (reading only a batch's first records)."""
    out = []
    pos = start
    for _ in range(count):
        rec_start = pos
        try:
            if pos >= end:
                raise CorruptRecordError("batch holds fewer records than its record count", pos)
            length, pos = read_varint(data, pos, end)
            if length < 1 or length > end - pos:
                raise CorruptRecordError("record length is out of bounds", pos)
            rend = pos + length
            pos += 1
            ts_delta, pos = read_varlong(data, pos, rend)
            offset_delta, pos = read_varint(data, pos, rend)
            fields = []
            for _f in range(2):
                n, pos = read_varint(data, pos, rend)
                if n < -1:
                    raise CorruptRecordError("record key or value has a negative length other than -1", pos)
                if n == -1:
                    fields.append(None)
                else:
                    if n > rend - pos:
                        raise CorruptRecordError("record key or value runs past the end of the record", pos)
                    fields.append(bytes(data[pos : pos + n]))
                    pos += n
            hcount, pos = read_varint(data, pos, rend)
            if hcount < 0:
                raise CorruptRecordError("record has a negative header count", pos)
            headers = []
            for _h in range(hcount):
                kl, pos = read_varint(data, pos, rend)
                if kl < 0:
                    raise CorruptRecordError("header key is null or has a negative length", pos)
                if kl > rend - pos:
                    raise CorruptRecordError("header runs past the end of its record", pos)
                hk = bytes(data[pos : pos + kl])
                pos += kl
                vl, pos = read_varint(data, pos, rend)
                if vl < -1:
                    raise CorruptRecordError("header value has a negative length", pos)
                if vl == -1:
                    hv = None
                else:
                    if vl > rend - pos:
                        raise CorruptRecordError("header runs past the end of its record", pos)
                    hv = bytes(data[pos : pos + vl])
                    pos += vl
                # Lenient like Kafka's readers (Java's new String(bytes, UTF_8)).
                headers.append((hk.decode("utf-8", "replace"), hv))
            if pos != rend:
                raise CorruptRecordError("record has bytes left after its last field", pos)
        except CorruptRecordError as e:
            raise CorruptRecordError(e.reason, error_position(rec_start)) from None
        ts = max_ts if log_append else _wrap64(base_ts + ts_delta)
        out.append(Record(_wrap64(base_offset + offset_delta), ts, fields[0], fields[1], headers))
    if whole and pos != end:
        raise CorruptRecordError("batch has bytes left after its last record", error_position(pos))
    return out


class RecordBatch:
    """A view of one record batch v2 inside a larger buffer; nothing is copied until read."""

    def __init__(self, buf: memoryview, position: int, size: int):
        self._buf = buf
        self.position = position
        self.size_in_bytes = size
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic, self.crc,
         self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
         self.producer_id, self.producer_epoch, self.base_sequence, self.count) = _HEADER.unpack_from(buf, position)
        self.aborted = False  # set by iter_batches(aborted=...): a read_committed reader drops its records

    @property
    def last_offset(self) -> int:
        return _wrap64(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> int:
        return _wrap64(self.last_offset + 1)

    @property
    def compression_type(self) -> int:
        return self.attributes & 0x07

    @property
    def compression(self) -> str:
        return codecs.CODEC_NAMES.get(self.attributes & 0x07, f"unknown({self.attributes & 0x07})")

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    def to_bytes(self) -> bytes:
        return bytes(self._buf[self.position : self.position + self.size_in_bytes])

    def _records_section(self):
        start = self.position + RECORD_BATCH_OVERHEAD
        end = self.position + self.size_in_bytes
        codec = self.attributes & 0x07
        if codec == 0:
            return self._buf, start, end, lambda p: p
        if codec not in codecs.CODEC_NAMES:
            raise CorruptRecordError(f"unknown compression codec id {codec}", self.position)
        data = codecs.decompress(codec, self._buf[start:end], self.position)
        return data, 0, len(data), lambda p: self.position

    def validate(self, records: bool = True) -> None:
        """CorruptRecordError unless the CRC and header are sound; with ``records`` (the
        default) every record is parsed too, decompressing if needed."""
        if self.count < 0:
            raise CorruptRecordError("negative record count", self.position)
        if self.count > 0 and self.last_offset_delta < self.count - 1:
            raise CorruptRecordError("last offset delta is below the record count", self.position)
        computed = crc32c(self._buf[self.position + 21 : self.position + self.size_in_bytes])
        if computed != self.crc:
            raise CorruptRecordError(
                f"CRC-32C mismatch: stored {self.crc:#010x}, computed {computed:#010x}", self.position)
        if records:
            data, start, end, where = self._records_section()
            for rec in parse_records(data, start, end, self.count, 0, 0, 0, False, where):
                if not 0 <= rec.offset <= self.last_offset_delta:
                    raise CorruptRecordError("record offset delta is outside the batch's offset range",
                                             self.position)

    def __iter__(self):
        if self.count < 0:
            raise CorruptRecordError("negative record count", self.position)
        data, start, end, where = self._records_section()
        return iter(parse_records(data, start, end, self.count, self.base_offset, self.base_timestamp,
                                  self.max_timestamp, bool(self.attributes & TIMESTAMP_TYPE_MASK), where))

    def __repr__(self):
        return (f"RecordBatch(base_offset={self.base_offset}, count={self.count}, "
                f"compression={self.compression!r}, size={self.size_in_bytes})")


# -- read_committed (KIP-98): the twin of kc_aborted / kc_control_type in _native/kc_record.c --
KEEP, ABORTED, MARKER = 0, 1, 2  # AbortedFilter.batch verdicts (KC_TXN_*)
CONTROL_NONE, CONTROL_ABORT, CONTROL_COMMIT = -1, 0, 1  # ControlRecordType; NONE: a marker without records


def _int64(v, what: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"aborted transaction {what} must be an int, not {type(v).__name__}")
    v = v.__index__()
    if not INT64_MIN <= v <= INT64_MAX:
        raise OverflowError(f"aborted transaction {what} {v} does not fit in 64 bits")
    return v


def aborted_pairs(aborted) -> list:
    """[(producer_id, first_offset)] from an iterable of such pairs or of objects with those
    attributes (a Fetch response's AbortedTransaction). Shared by the native decoders."""
    out = []
    try:
        items = iter(aborted)
    except TypeError:
        raise TypeError(f"aborted must be an iterable of (producer_id, first_offset), not "
                        f"{type(aborted).__name__}") from None
    for item in items:
        if isinstance(item, (tuple, list)):
            if len(item) != 2:
                raise TypeError(f"an aborted transaction is (producer_id, first_offset), got {item!r}")
            pid, first = item
        else:
            try:
                pid, first = item.producer_id, item.first_offset
            except AttributeError:
                raise TypeError(f"an aborted transaction is (producer_id, first_offset) or has those "
                                f"attributes, got {type(item).__name__}") from None
        out.append((_int64(pid, "producer_id"), _int64(first, "first_offset")))
    return out


class AbortedFilter:
    """Kafka's consumer rules for a Fetch response's aborted transactions (CompletedFetch):
    batches are shown in offset order; a listed transaction whose first offset is at or below
    the last offset of a batch with a producer id makes its producer aborting, until that
    producer's ABORT marker; its transactional data batches meanwhile are dropped."""

    def __init__(self, aborted):
        self._txns = sorted(aborted_pairs(aborted), key=lambda t: t[1])
        self._next = 0
        self._active = set()

    def batch(self, batch) -> int:
        if batch.producer_id < 0:  # Kafka's hasProducerId()
            return KEEP
        last = batch.last_offset
        txns = self._txns
        while self._next < len(txns) and txns[self._next][1] <= last:
            self._active.add(txns[self._next][0])
            self._next += 1
        if batch.is_control:
            return MARKER
        if batch.is_transactional and batch.producer_id in self._active:
            return ABORTED
        return KEEP

    def end(self, producer_id: int) -> None:
        self._active.discard(producer_id)


def control_type(batch) -> int:
    """The ControlRecordType in the key of a control batch's first record (decompressing it if
    need be); CONTROL_NONE when the batch has no records; CorruptRecordError (at the batch's
    position) for a malformed key."""
    if batch.count < 0:
        raise CorruptRecordError("control batch: negative record count", batch.position)
    if batch.count == 0:
        return CONTROL_NONE
    data, start, end, _where = batch._records_section()
    try:
        (rec,) = parse_records(data, start, end, 1, 0, 0, 0, False, lambda p: batch.position, whole=False)
    except CorruptRecordError as e:
        raise CorruptRecordError(f"control batch: {e.reason}", batch.position) from None
    key = rec.key
    if key is None or len(key) < 4:
        raise CorruptRecordError("control batch: control record key is null or shorter than 4 bytes",
                                 batch.position)
    version, marker_type = struct.unpack_from(">hh", key)
    if version < 0:
        raise CorruptRecordError("control batch: control record key has a negative version", batch.position)
    return marker_type


def iter_batches(buf, aborted=None):
    """Yields each batch of a buffer of concatenated batches (a segment, a fetch response's
    records). A truncated final batch ends the iteration quietly; a batch whose length or
    magic can't be v2 raises CorruptRecordError.

    ``aborted`` (a Fetch response's aborted transactions, see AbortedFilter) sets each batch's
    ``aborted``: whether a read_committed reader drops its records. Markers are read for that
    (a malformed one raises CorruptRecordError); CRCs are not checked (validate() does)."""
    mv = memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return _iter_batches(mv, None if aborted is None else AbortedFilter(aborted))


def _iter_batches(mv, txn):
    n = len(mv)
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        (blen,) = struct.unpack_from(">i", mv, pos + 8)
        if blen < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptRecordError("batch length is less than the record batch v2 overhead", pos)
        if n - pos > 16 and mv[pos + 16] != 2:
            raise CorruptRecordError("unsupported magic (only record batch v2 is supported)", pos)
        total = blen + LOG_OVERHEAD
        if n - pos < total:
            return
        batch = RecordBatch(mv, pos, total)
        if txn is not None:
            verdict = txn.batch(batch)
            if verdict == MARKER and control_type(batch) == CONTROL_ABORT:
                txn.end(batch.producer_id)
            batch.aborted = verdict == ABORTED
        yield batch
        pos += total
