# cython: language_level=3
"""Storage hot paths (kafkacore._ext.storage): index binary search over mmapped index files,
produce-path validation and in-place offset stamping, the segment scan behind recovery and
index building, and the batch-header walk behind every read lookup. The C is in
_native/kc_log.c; the pure-Python twin is kafkacore/storage/_hot_py.py."""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport uint8_t, int16_t, int32_t, int64_t
from libc.stdlib cimport malloc, free
from libc.errno cimport errno
from libc.string cimport strerror

from native cimport *

from kafkacore.errors import CorruptMessageError, InvalidRecordError, MessageTooLargeError
from kafkacore.record.errors import CorruptRecordError

kc_crc32c_init()

SCAN_OK = KC_OK
SCAN_TRUNCATED = KC_TRUNCATED
SCAN_CORRUPT = KC_CORRUPT
SCAN_INDEX_FULL = KC_INDEX_FULL
SEEK_OFFSET = KC_SEEK_OFFSET
SEEK_TIMESTAMP = KC_SEEK_TIMESTAMP
SEEK_BOUNDARY = KC_SEEK_BOUNDARY

cdef enum:
    SEEK_SCRATCH = 8192  # covers index.interval.bytes (4096) plus the next batch's header


cdef inline const uint8_t *_index_data(Py_buffer *view, object index, size_t entries, size_t entry_size) except NULL:
    PyObject_GetBuffer(index, view, PyBUF_SIMPLE)
    if <size_t>view.len < entries * entry_size:
        PyBuffer_Release(view)
        raise ValueError("index buffer is shorter than its entry count")
    # a non-NULL pointer even for an empty buffer, so `except NULL` means an error
    return <const uint8_t *>view.buf if view.buf != NULL else <const uint8_t *>b""


def offset_index_lookup(index, size_t entries, int32_t target):
    """Slot of the last offset index entry whose relative offset is <= target, or -1."""
    cdef Py_buffer view
    cdef const uint8_t *p = _index_data(&view, index, entries, KC_OFFSET_INDEX_ENTRY)
    cdef long slot = kc_offset_index_lookup(p, entries, target)
    PyBuffer_Release(&view)
    return slot


def offset_index_lookup_position(index, size_t entries, int32_t position):
    """Slot of the last offset index entry whose position is <= position, or -1."""
    cdef Py_buffer view
    cdef const uint8_t *p = _index_data(&view, index, entries, KC_OFFSET_INDEX_ENTRY)
    cdef long slot = kc_offset_index_lookup_position(p, entries, position)
    PyBuffer_Release(&view)
    return slot


def time_index_lookup(index, size_t entries, int64_t target):
    """Slot of the last time index entry whose timestamp is <= target, or -1."""
    cdef Py_buffer view
    cdef const uint8_t *p = _index_data(&view, index, entries, KC_TIME_INDEX_ENTRY)
    cdef long slot = kc_time_index_lookup(p, entries, target)
    PyBuffer_Release(&view)
    return slot


def offset_index_sane(index, size_t entries, int64_t log_size):
    cdef Py_buffer view
    cdef const uint8_t *p = _index_data(&view, index, entries, KC_OFFSET_INDEX_ENTRY)
    cdef int ok = kc_offset_index_sane(p, entries, log_size)
    PyBuffer_Release(&view)
    return ok == 1


def time_index_sane(index, size_t entries):
    cdef Py_buffer view
    cdef const uint8_t *p = _index_data(&view, index, entries, KC_TIME_INDEX_ENTRY)
    cdef int ok = kc_time_index_sane(p, entries)
    PyBuffer_Release(&view)
    return ok == 1


@cython.final
cdef class AppendInfo:
    """What the batches of one append hold (see kc_append_info)."""
    cdef readonly int32_t batches
    cdef readonly int64_t records, bytes, max_timestamp, max_timestamp_delta, producer_id
    cdef readonly int16_t producer_epoch, attributes
    cdef readonly int32_t base_sequence, last_sequence
    cdef readonly bint is_transactional, has_control


def validate_records(buf, int64_t max_batch_bytes, bint allow_control=False):
    """Checks the batches of a produce request without decompressing them; returns AppendInfo
    or raises CorruptMessageError, InvalidRecordError or MessageTooLargeError."""
    cdef Py_buffer view
    cdef kc_append_info info
    cdef int st
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if view.len >= 65536:
            with nogil:
                st = kc_log_validate(<const uint8_t *>view.buf, <size_t>view.len, max_batch_bytes,
                                     allow_control, &info)
        else:
            st = kc_log_validate(<const uint8_t *>view.buf, <size_t>view.len, max_batch_bytes,
                                 allow_control, &info)
    finally:
        PyBuffer_Release(&view)
    if st != KC_OK:
        reason = f"{info.err.decode()} (at byte {info.err_at})"
        if st == KC_TOO_LARGE:
            raise MessageTooLargeError(reason)
        if st == KC_INVALID:
            raise InvalidRecordError(reason)
        raise CorruptMessageError(reason)
    cdef AppendInfo out = AppendInfo.__new__(AppendInfo)
    out.batches = info.batches
    out.records = info.records
    out.bytes = info.bytes
    out.max_timestamp = info.max_timestamp
    out.max_timestamp_delta = info.max_timestamp_delta
    out.producer_id = info.producer_id
    out.producer_epoch = info.producer_epoch
    out.base_sequence = info.base_sequence
    out.last_sequence = info.last_sequence
    out.attributes = info.attributes
    out.is_transactional = info.is_transactional != 0
    out.has_control = info.has_control != 0
    return out


def assign_offsets(buf, int64_t first_offset, int32_t leader_epoch, int64_t log_append_time):
    """Stamps consecutive base offsets and the leader epoch into validated batches, in place;
    log_append_time >= 0 makes them LogAppendTime batches. Returns the next offset."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
    try:
        return kc_log_assign_offsets(<uint8_t *>view.buf, <size_t>view.len, first_offset, leader_epoch,
                                     log_append_time)
    finally:
        PyBuffer_Release(&view)


@cython.final
cdef class SegmentScanner:
    """Walks a segment's batches chunk by chunk (kc_log_scan) and yields the index entries
    Kafka's LogSegment writes for them."""
    cdef kc_scan s

    def __cinit__(self, int64_t base_offset, int64_t index_interval, bint check_crc=True):
        self.s.base_offset = base_offset
        self.s.index_interval = index_interval
        self.s.check_crc = check_crc
        self.s.position = 0
        self.s.last_index_position = 0
        self.s.next_offset = base_offset
        self.s.max_timestamp = -1
        self.s.offset_of_max_timestamp = -1
        self.s.last_time_index_timestamp = -1
        self.s.batches = 0
        self.s.err = NULL

    property position:
        def __get__(self): return self.s.position
        def __set__(self, int64_t v): self.s.position = v
    property last_index_position:
        def __get__(self): return self.s.last_index_position
        def __set__(self, int64_t v): self.s.last_index_position = v
    property next_offset:
        def __get__(self): return self.s.next_offset
        def __set__(self, int64_t v): self.s.next_offset = v
    property max_timestamp:
        def __get__(self): return self.s.max_timestamp
        def __set__(self, int64_t v): self.s.max_timestamp = v
    property offset_of_max_timestamp:
        def __get__(self): return self.s.offset_of_max_timestamp
        def __set__(self, int64_t v): self.s.offset_of_max_timestamp = v
    property last_time_index_timestamp:
        def __get__(self): return self.s.last_time_index_timestamp
        def __set__(self, int64_t v): self.s.last_time_index_timestamp = v
    property batches:
        def __get__(self): return self.s.batches
    property error:
        def __get__(self): return None if self.s.err == NULL else self.s.err.decode()

    def scan(self, buf):
        """-> (status, consumed, offset index entries, time index entries), entries as bytes in
        the index files' format."""
        cdef Py_buffer view
        cdef size_t consumed = 0, cap
        cdef int st
        cdef int64_t step = self.s.index_interval + 1
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            if step < KC_RECORD_BATCH_OVERHEAD:
                step = KC_RECORD_BATCH_OVERHEAD
            cap = <size_t>(view.len // step) + 2
            self.s.offset_entries = <uint8_t *>malloc(cap * KC_OFFSET_INDEX_ENTRY)
            self.s.time_entries = <uint8_t *>malloc(cap * KC_TIME_INDEX_ENTRY)
            if self.s.offset_entries == NULL or self.s.time_entries == NULL:
                raise MemoryError()
            self.s.offset_capacity = cap
            self.s.time_capacity = cap
            self.s.offset_count = 0
            self.s.time_count = 0
            with nogil:
                st = kc_log_scan(&self.s, <const uint8_t *>view.buf, <size_t>view.len, &consumed)
            offsets = PyBytes_FromStringAndSize(<char *>self.s.offset_entries,
                                                self.s.offset_count * KC_OFFSET_INDEX_ENTRY)
            times = PyBytes_FromStringAndSize(<char *>self.s.time_entries,
                                              self.s.time_count * KC_TIME_INDEX_ENTRY)
            return st, consumed, offsets, times
        finally:
            free(self.s.offset_entries)
            free(self.s.time_entries)
            self.s.offset_entries = NULL
            self.s.time_entries = NULL
            self.s.offset_capacity = 0
            self.s.time_capacity = 0
            PyBuffer_Release(&view)


def seek(int fd, int64_t start, int64_t end, int mode, int64_t target):
    """Walks batch headers of fd in [start, end) (kc_log_seek). Returns (position, base offset,
    last offset, max timestamp, size) or None; a header that cannot be a batch raises
    CorruptRecordError."""
    cdef uint8_t scratch[SEEK_SCRATCH]
    cdef kc_seek_result r
    cdef int st = kc_log_seek(fd, start, end, mode, target, scratch, SEEK_SCRATCH, &r)
    if st == KC_OK:
        if mode == KC_SEEK_BOUNDARY:
            return r.position
        return (r.position, r.base_offset, r.last_offset, r.max_timestamp, r.size)
    if st == KC_NOT_FOUND:
        return None
    if st == KC_CORRUPT:
        raise CorruptRecordError("batch header is not a record batch v2", start)
    raise OSError(errno, f"reading log file descriptor {fd} failed: {strerror(errno).decode()}")


def translate(index, size_t entries, int64_t base_offset, int fd, int64_t end, int64_t target,
              size_t read_hint=SEEK_SCRATCH):
    """A segment's offset lookup in one call: binary search of the offset index (index may be
    None when it has no entries), then the header walk from that entry's position to the
    first batch whose last offset is >= target. read_hint bounds the first pread (the walk
    from an index entry covers about index.interval.bytes). Same result as seek."""
    cdef uint8_t scratch[SEEK_SCRATCH]
    cdef kc_seek_result r
    cdef Py_buffer view
    cdef const uint8_t *p
    cdef long slot = -1
    cdef int64_t start = 0
    cdef int64_t rel = target - base_offset
    if entries > 0:
        p = _index_data(&view, index, entries, KC_OFFSET_INDEX_ENTRY)
        slot = kc_offset_index_lookup(p, entries, <int32_t>(rel if rel < 0x7FFFFFFF else 0x7FFFFFFF))
        if slot >= 0:
            start = (<int64_t>p[slot * 8 + 4] << 24) | (<int64_t>p[slot * 8 + 5] << 16) | \
                    (<int64_t>p[slot * 8 + 6] << 8) | <int64_t>p[slot * 8 + 7]
        PyBuffer_Release(&view)
    if read_hint < 64:
        read_hint = 64
    if read_hint > SEEK_SCRATCH:
        read_hint = SEEK_SCRATCH
    cdef int st = kc_log_seek(fd, start, end, KC_SEEK_OFFSET, target, scratch, read_hint, &r)
    if st == KC_OK:
        return (r.position, r.base_offset, r.last_offset, r.max_timestamp, r.size)
    if st == KC_NOT_FOUND:
        return None
    if st == KC_CORRUPT:
        raise CorruptRecordError("batch header is not a record batch v2", start)
    raise OSError(errno, f"reading log file descriptor {fd} failed: {strerror(errno).decode()}")


def record_spans(section, int32_t count):
    """The records of a decompressed records section, for the log cleaner: a list of
    (offset delta, timestamp delta, key or None, value is null, start, end) per record, start
    and end being the record's bytes (length prefix included) within section."""
    cdef Py_buffer view
    cdef kc_record r
    cdef const char *err = NULL
    cdef const uint8_t *base
    cdef const uint8_t *p
    cdef const uint8_t *end
    cdef int32_t i
    out = []
    PyObject_GetBuffer(section, &view, PyBUF_SIMPLE)
    try:
        base = <const uint8_t *>view.buf
        p = base
        end = base + view.len
        for i in range(count):
            if p >= end or kc_record_parse_inline(p, end, &r, &err) != KC_OK:
                raise CorruptRecordError(err.decode() if err != NULL else "fewer records than the count",
                                         p - base)
            key = None if r.key == NULL else PyBytes_FromStringAndSize(<const char *>r.key, r.key_len)
            out.append((r.offset_delta, r.timestamp_delta, key, r.value == NULL, p - base, r.end - base))
            p = r.end
    finally:
        PyBuffer_Release(&view)
    return out
