"""Pure-Python twin of kafkacore._ext.storage (bindings/storage.pyx, _native/kc_log.c).

Slow and plain on purpose: the test suite runs the storage engine on it too and compares the
two. Every function has the native one's name, arguments and results."""
import os
import struct

from ..checksum import crc32c
from ..errors import CorruptMessageError, InvalidRecordError, MessageTooLargeError
from ..record.errors import CorruptRecordError
from ..record.layout import (ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET, CRC_OFFSET, LAST_OFFSET_DELTA_OFFSET, LOG_OVERHEAD,
                             MAGIC_OFFSET, MAX_TIMESTAMP_OFFSET, PRODUCER_ID_OFFSET, RECORD_BATCH_OVERHEAD,
                             TIMESTAMP_TYPE_MASK)
from ..record.varint import read_varint, read_varlong

SCAN_OK, SCAN_TRUNCATED, SCAN_CORRUPT, SCAN_INDEX_FULL = 0, 1, 2, 6
SEEK_OFFSET, SEEK_TIMESTAMP, SEEK_BOUNDARY = 0, 1, 2

_INT32_MAX = 0x7FFFFFFF
_INT64_MAX = (1 << 63) - 1
_NO_TIMESTAMP = -1


def _bisect_last_le(entries, key_of, target):
    lo, hi = 0, entries
    while lo < hi:
        mid = (lo + hi) // 2
        if key_of(mid) <= target:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def offset_index_lookup(index, entries, target):
    mv = memoryview(index).cast("B")
    if len(mv) < entries * 8:
        raise ValueError("index buffer is shorter than its entry count")
    return _bisect_last_le(entries, lambda i: struct.unpack_from(">i", mv, i * 8)[0], target)


def offset_index_lookup_position(index, entries, position):
    mv = memoryview(index).cast("B")
    if len(mv) < entries * 8:
        raise ValueError("index buffer is shorter than its entry count")
    return _bisect_last_le(entries, lambda i: struct.unpack_from(">i", mv, i * 8 + 4)[0], position)


def time_index_lookup(index, entries, target):
    mv = memoryview(index).cast("B")
    if len(mv) < entries * 12:
        raise ValueError("index buffer is shorter than its entry count")
    return _bisect_last_le(entries, lambda i: struct.unpack_from(">q", mv, i * 12)[0], target)


def offset_index_sane(index, entries, log_size):
    mv = memoryview(index).cast("B")
    prev_off = prev_pos = -1
    for i in range(entries):
        off, pos = struct.unpack_from(">ii", mv, i * 8)
        if off <= prev_off or pos <= prev_pos or pos >= log_size:
            return False
        prev_off, prev_pos = off, pos
    return True


def time_index_sane(index, entries):
    mv = memoryview(index).cast("B")
    prev_ts, prev_off = None, -1
    for i in range(entries):
        ts, off = struct.unpack_from(">qi", mv, i * 12)
        if (prev_ts is not None and ts <= prev_ts) or off < prev_off or off < 0:
            return False
        prev_ts, prev_off = ts, off
    return True


class AppendInfo:
    __slots__ = ("batches", "records", "bytes", "max_timestamp", "max_timestamp_delta", "producer_id",
                 "producer_epoch", "attributes", "base_sequence", "last_sequence", "is_transactional",
                 "has_control")


def _header(mv, pos):
    """(base offset, batch length, magic, crc, attributes, last offset delta, max timestamp,
    producer id, producer epoch, base sequence, records count)."""
    base, blen, _epoch, magic, crc, attrs, delta, _base_ts, max_ts, pid, pepoch, bseq, count = \
        struct.unpack_from(">qiibIhiqqqhii", mv, pos)
    return base, blen, magic, crc, attrs, delta, max_ts, pid, pepoch, bseq, count


def _check_uncompressed(mv, start, end, count):
    """None, or (error, position) for records that are not exactly count records with offset
    deltas 0..count-1."""
    p = start
    for i in range(count):
        if p >= end:
            return "batch holds fewer records than its record count", p
        try:
            length, p2 = read_varint(mv, p, end)
            if length < 1 or end - p2 < length:
                return "record length is out of bounds", p
            rend = p2 + length
            q = p2 + 1
            _ts, q = read_varlong(mv, q, rend)
            delta, q = read_varint(mv, q, rend)
            klen, q = read_varint(mv, q, rend)
            if klen < -1 or (klen > 0 and rend - q < klen):
                return "record key length is out of bounds", p
            q += max(klen, 0)
            vlen, q = read_varint(mv, q, rend)
            if vlen < -1 or (vlen > 0 and rend - q < vlen):
                return "record value length is out of bounds", p
            q += max(vlen, 0)
            nh, q = read_varint(mv, q, rend)
            if nh < 0:
                return "negative header count", p
            for _ in range(nh):
                hk, q = read_varint(mv, q, rend)
                if hk < 0 or rend - q < hk:
                    return "header key length is out of bounds", p
                q += hk
                hv, q = read_varint(mv, q, rend)
                if hv < -1 or (hv > 0 and rend - q < hv):
                    return "header value length is out of bounds", p
                q += max(hv, 0)
            if q != rend:
                return "record has bytes left after its headers", p
        except (CorruptRecordError, ValueError, IndexError):
            return "record varint is truncated or too long", p
        if delta != i:
            return "record offset deltas are not consecutive from 0", p
        p = rend
    if p != end:
        return "batch has bytes left after its last record", p
    return None


def validate_records(buf, max_batch_bytes, allow_control=False):
    mv = memoryview(buf).cast("B")
    n = len(mv)
    if n == 0:
        raise InvalidRecordError("no record batches (at byte 0)")
    info = AppendInfo()
    info.batches = info.records = 0
    info.max_timestamp, info.max_timestamp_delta = _NO_TIMESTAMP, 0
    info.producer_id, info.producer_epoch, info.base_sequence, info.last_sequence = -1, -1, -1, -1
    info.attributes = 0
    info.is_transactional = info.has_control = False
    pos = 0
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            raise CorruptMessageError(f"records end inside a batch (truncated) (at byte {pos})")
        blen = struct.unpack_from(">i", mv, pos + 8)[0]
        if blen < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptMessageError(f"batch length is less than the record batch v2 overhead (at byte {pos})")
        if n - pos > MAGIC_OFFSET and mv[pos + MAGIC_OFFSET] != 2:
            raise CorruptMessageError(f"unsupported magic (only record batch v2 is supported) (at byte {pos})")
        total = blen + LOG_OVERHEAD
        if n - pos < total:
            raise CorruptMessageError(f"records end inside a batch (truncated) (at byte {pos})")
        _base, _blen, _magic, crc, attrs, delta, max_ts, pid, pepoch, bseq, count = _header(mv, pos)
        if total > max_batch_bytes:
            raise MessageTooLargeError(f"batch is larger than max.message.bytes (at byte {pos})")
        if crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + total]) != crc:
            raise CorruptMessageError(f"CRC-32C of the batch does not match its contents (at byte {pos})")
        if count <= 0 or delta < 0 or delta + 1 != count:
            raise InvalidRecordError(f"inconsistent batch offset range and record count (at byte {pos})")
        if attrs & 0x07 > 4:
            raise CorruptMessageError(f"unknown compression codec (Kafka defines ids 0 to 4) (at byte {pos})")
        if attrs & 0x20 and not allow_control:
            raise InvalidRecordError(f"clients may not write control batches (at byte {pos})")
        if attrs & 0x07 == 0:
            bad = _check_uncompressed(mv, pos + RECORD_BATCH_OVERHEAD, pos + total, count)
            if bad:
                raise InvalidRecordError(f"{bad[0]} (at byte {bad[1]})")
        if info.batches == 0:
            info.producer_id, info.producer_epoch, info.base_sequence, info.attributes = pid, pepoch, bseq, attrs
        info.last_sequence = -1 if bseq < 0 else (bseq + delta) % (1 << 31)
        if max_ts > info.max_timestamp:
            info.max_timestamp, info.max_timestamp_delta = max_ts, info.records + delta
        info.is_transactional = info.is_transactional or bool(attrs & 0x10)
        info.has_control = info.has_control or bool(attrs & 0x20)
        info.records += count
        info.batches += 1
        pos += total
    info.bytes = n
    return info


def assign_offsets(buf, first_offset, leader_epoch, log_append_time):
    mv = memoryview(buf).cast("B")
    if mv.readonly:
        raise BufferError("assign_offsets needs a writable buffer")
    n, pos, nxt = len(mv), 0, first_offset
    while pos + RECORD_BATCH_OVERHEAD <= n:
        blen = struct.unpack_from(">i", mv, pos + 8)[0]
        if blen < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or blen + LOG_OVERHEAD > n - pos:
            break
        total = blen + LOG_OVERHEAD
        struct.pack_into(">q", mv, pos, nxt)
        struct.pack_into(">i", mv, pos + 12, leader_epoch)
        if log_append_time >= 0:
            attrs = struct.unpack_from(">h", mv, pos + ATTRIBUTES_OFFSET)[0]
            struct.pack_into(">h", mv, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
            struct.pack_into(">q", mv, pos + MAX_TIMESTAMP_OFFSET, log_append_time)
            struct.pack_into(">I", mv, pos + CRC_OFFSET, crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + total]))
        nxt += struct.unpack_from(">i", mv, pos + LAST_OFFSET_DELTA_OFFSET)[0] + 1
        pos += total
    return nxt


class SegmentScanner:
    def __init__(self, base_offset, index_interval, check_crc=True):
        self.base_offset = base_offset
        self.index_interval = index_interval
        self.check_crc = check_crc
        self.position = 0
        self.last_index_position = 0
        self.next_offset = base_offset
        self.max_timestamp = _NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.last_time_index_timestamp = _NO_TIMESTAMP
        self.batches = 0
        self.error = None

    def scan(self, buf):
        mv = memoryview(buf).cast("B")
        n, pos = len(mv), 0
        offsets, times = bytearray(), bytearray()
        self.error = None
        while pos < n:
            if n - pos < LOG_OVERHEAD:
                return SCAN_TRUNCATED, pos, bytes(offsets), bytes(times)
            blen = struct.unpack_from(">i", mv, pos + 8)[0]
            if blen < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                self.error = "batch length is less than the record batch v2 overhead"
                return SCAN_CORRUPT, pos, bytes(offsets), bytes(times)
            if n - pos > MAGIC_OFFSET and mv[pos + MAGIC_OFFSET] != 2:
                self.error = "unsupported magic (only record batch v2 is supported)"
                return SCAN_CORRUPT, pos, bytes(offsets), bytes(times)
            total = blen + LOG_OVERHEAD
            if n - pos < total:
                return SCAN_TRUNCATED, pos, bytes(offsets), bytes(times)
            base, _blen, _magic, crc, _attrs, delta, max_ts, *_ = _header(mv, pos)
            if self.check_crc and crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + total]) != crc:
                self.error = "CRC-32C of the batch does not match its contents"
                return SCAN_CORRUPT, pos, bytes(offsets), bytes(times)
            if delta < 0 or base < self.base_offset or base > _INT64_MAX - delta:
                self.error = "batch offsets are out of range for the segment"
                return SCAN_CORRUPT, pos, bytes(offsets), bytes(times)
            last = base + delta
            if base < self.next_offset:
                self.error = "batch offsets go backwards"
                return SCAN_CORRUPT, pos, bytes(offsets), bytes(times)
            if last - self.base_offset > _INT32_MAX:
                self.error = "batch offset does not fit the segment's 32-bit relative offsets"
                return SCAN_CORRUPT, pos, bytes(offsets), bytes(times)
            position = self.position
            if position > _INT32_MAX:
                self.error = "batch lies beyond the 2 GiB a segment's index can address"
                return SCAN_CORRUPT, pos, bytes(offsets), bytes(times)
            if max_ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_ts, last
            if position - self.last_index_position > self.index_interval:
                offsets += struct.pack(">ii", last - self.base_offset, position)
                self.last_index_position = position
                if self.max_timestamp > self.last_time_index_timestamp:
                    times += struct.pack(">qi", self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
                    self.last_time_index_timestamp = self.max_timestamp
            self.next_offset = last + 1
            self.position += total
            self.batches += 1
            pos += total
        return SCAN_OK, pos, bytes(offsets), bytes(times)


def seek(fd, start, end, mode, target):
    pos, first = start, True
    while pos < end:
        head = os.pread(fd, min(43, end - pos), pos)
        if len(head) < LOG_OVERHEAD:
            break  # a partial header at the end: no more batches
        blen = struct.unpack_from(">i", head, 8)[0]
        if blen < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptRecordError("batch header is not a record batch v2", start)
        total = blen + LOG_OVERHEAD
        if pos + total > end:
            break  # an incomplete batch: nothing from it on counts
        if mode == SEEK_BOUNDARY:
            if pos + total > target:
                return pos + total if first else pos
        else:
            # the header up to the max timestamp's end, or to the last offset delta's
            need = PRODUCER_ID_OFFSET if mode == SEEK_TIMESTAMP else BASE_TIMESTAMP_OFFSET
            if len(head) < need:
                return None
            if head[MAGIC_OFFSET] != 2:
                raise CorruptRecordError("batch header is not a record batch v2", start)
            base = struct.unpack_from(">q", head, 0)[0]
            delta = struct.unpack_from(">i", head, LAST_OFFSET_DELTA_OFFSET)[0]
            if delta < 0 or base > _INT64_MAX - delta:
                raise CorruptRecordError("batch header is not a record batch v2", start)
            last = base + delta
            max_ts = struct.unpack_from(">q", head, MAX_TIMESTAMP_OFFSET)[0] if mode == SEEK_TIMESTAMP else 0
            if (mode == SEEK_OFFSET and last >= target) or (mode == SEEK_TIMESTAMP and max_ts >= target):
                return pos, base, last, max_ts, min(total, _INT32_MAX)
        pos += total
        first = False
    if mode == SEEK_BOUNDARY and not first:
        return pos
    return None


def translate(index, entries, base_offset, fd, end, target, read_hint=8192):
    start = 0
    if entries > 0:
        slot = offset_index_lookup(index, entries, min(target - base_offset, _INT32_MAX))
        if slot >= 0:
            start = struct.unpack_from(">i", memoryview(index).cast("B"), slot * 8 + 4)[0]
    return seek(fd, start, end, SEEK_OFFSET, target)


def record_spans(section, count):
    mv = memoryview(section).cast("B")
    end, p, out = len(mv), 0, []
    for i in range(count):
        if p >= end:
            raise CorruptRecordError("fewer records than the count", p)
        bad = _check_uncompressed(mv, p, end, 1)
        if bad and bad[0] not in ("record offset deltas are not consecutive from 0",
                                  "batch has bytes left after its last record"):
            raise CorruptRecordError(bad[0], bad[1])
        length, p2 = read_varint(mv, p, end)
        rend = p2 + length
        q = p2 + 1
        ts_delta, q = read_varlong(mv, q, rend)
        off_delta, q = read_varint(mv, q, rend)
        klen, q = read_varint(mv, q, rend)
        key = None if klen < 0 else bytes(mv[q:q + klen])
        q += max(klen, 0)
        vlen, q = read_varint(mv, q, rend)
        out.append((off_delta, ts_delta, key, vlen < 0, p, rend))
        p = rend
    return out
