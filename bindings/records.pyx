# cython: language_level=3
"""Record batch v2: builder, zero-copy batch views, record iteration and the columnar
decoder. The byte-level work is in _native/ (kc_record.c, kc_columns.c); this module moves
Python objects in and out. Its pure-Python twin is kafkacore/record/batch_py.py.

numpy and pyarrow are not imported with this module (importing kafkacore must not load
them: the broker never uses them). pyarrow and the Arrow schema are loaded by the first
decode_to_arrow call; numpy is only looked at when extend is given a numpy array, which
means it is already loaded. Arrays are read through the buffer protocol, not the numpy C API
(no cimport numpy / import_array)."""
import os
import sys

cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact,
                            PyBytes_FromStringAndSize)
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.long cimport PyLong_CheckExact, PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from libc.stdint cimport uintptr_t, uint8_t, uint32_t, int16_t, int32_t, int64_t, uint64_t, INT64_MAX, INT64_MIN
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from posix.time cimport clock_gettime, timespec, CLOCK_REALTIME
from posix.types cimport off_t
from posix.unistd cimport pread
from libc.errno cimport errno, EINTR

from native cimport *

from kafkacore.record import codecs
from kafkacore.record.errors import CorruptRecordError

kc_crc32c_init()

# pyarrow and kafkacore.record.arrow_schema (which imports it), set by _load_arrow on the
# first decode_to_arrow; C globals, so the column helpers read them without a dict lookup.
cdef object pa = None
cdef object SPARK_KAFKA_SCHEMA = None
cdef object HEADERS_TYPE = None
cdef object HEADER_TYPE = None
cdef object constant_columns = None


cdef int _load_arrow() except -1:
    global pa, SPARK_KAFKA_SCHEMA, HEADERS_TYPE, HEADER_TYPE, constant_columns
    import pyarrow
    from kafkacore.record import arrow_schema
    SPARK_KAFKA_SCHEMA = arrow_schema.SPARK_KAFKA_SCHEMA
    HEADERS_TYPE = arrow_schema.HEADERS_TYPE
    HEADER_TYPE = arrow_schema.HEADER_TYPE
    constant_columns = arrow_schema.constant_columns
    pa = pyarrow  # last: a failed import above leaves everything unset, to be retried
    return 0


cdef inline int _need_arrow() except -1:
    if pa is None:
        _load_arrow()
    return 0

cdef enum:
    GIL_RELEASE_BYTES = 65536  # below this, releasing the GIL costs more than it saves
    MAX_STACK_HEADERS = 16

cdef object _CODEC_NAMES = codecs.CODEC_NAMES
cdef int32_t INT32_MAX_ = 0x7FFFFFFF


cdef object _np = None  # numpy and numpy.ndarray, once something has imported numpy
cdef object _ndarray = None


cdef inline bint _is_ndarray(object x) except -1:
    """isinstance(x, numpy.ndarray), without importing numpy: a numpy array can only exist
    once numpy has been imported by whoever made it."""
    global _np, _ndarray
    if _ndarray is None:
        np = sys.modules.get("numpy")
        if np is None:
            return False
        _ndarray = np.ndarray
        _np = np
    return isinstance(x, _ndarray)


cdef inline int64_t _now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef inline int64_t _wrap_add(int64_t a, int64_t b) noexcept nogil:
    # Two's-complement wrap, as Java's long arithmetic; unsigned math avoids signed overflow UB.
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef int64_t _timestamp_arg(object ts) except? -1:
    cdef int overflow = 0
    cdef long long v
    if PyLong_CheckExact(ts):
        # AndOverflow walks the digits directly; plain AsLongLong goes through a byte-array
        # conversion for multi-digit ints (every millisecond timestamp) on CPython 3.11.
        v = PyLong_AsLongLongAndOverflow(ts, &overflow)
        if overflow:
            raise OverflowError("timestamp_ms does not fit in 64 bits")
        return v
    if isinstance(ts, bool) or not hasattr(ts, "__index__"):
        raise TypeError(f"timestamp_ms must be an int, not {type(ts).__name__}")
    v = ts.__index__()
    if not INT64_MIN <= v <= INT64_MAX:
        raise OverflowError("timestamp_ms does not fit in 64 bits")
    return <int64_t>v


cdef struct _Arg:
    # A borrowed view of a bytes-like argument; lives on the caller's stack, so nested or
    # concurrent calls can't disturb each other's views.
    Py_buffer view
    bint has_view
    const uint8_t *ptr
    int32_t length  # -1: None


cdef int _arg_get(_Arg *a, object obj, str what) except -1:
    a.has_view = False
    if obj is None:
        a.ptr = NULL
        a.length = -1
        return 0
    if PyBytes_CheckExact(obj):
        if PyBytes_GET_SIZE(obj) > INT32_MAX_:
            raise ValueError(f"{what} is larger than 2 GiB")
        a.ptr = <const uint8_t *>PyBytes_AS_STRING(obj)  # the caller holds a reference to obj
        a.length = <int32_t>PyBytes_GET_SIZE(obj)
        return 0
    if isinstance(obj, str):
        raise TypeError(f"{what} must be bytes-like or None, not str (encode it first)")
    try:
        PyObject_GetBuffer(obj, &a.view, PyBUF_SIMPLE)
    except TypeError:
        raise TypeError(f"{what} must be bytes-like or None, not {type(obj).__name__}") from None
    a.has_view = True
    if a.view.len > INT32_MAX_:
        _arg_release(a)
        raise ValueError(f"{what} is larger than 2 GiB")
    a.ptr = <const uint8_t *>a.view.buf
    a.length = <int32_t>a.view.len
    return 0


cdef inline void _arg_release(_Arg *a):
    if a.has_view:
        PyBuffer_Release(&a.view)
        a.has_view = False


cdef class _Bytes:
    """A heap-held _Arg, for the few places that need a variable number of them (headers)."""
    cdef _Arg a

    cdef int set(self, object obj, str what) except -1:
        self.release()
        return _arg_get(&self.a, obj, what)

    cdef inline void release(self):
        _arg_release(&self.a)

    def __dealloc__(self):
        self.release()


cdef inline void _readonly_bytes_view(Py_buffer *view, const void *buf, Py_ssize_t length,
                                      Py_ssize_t *shape):
    """Fills a one-dimensional read-only byte view (the caller sets view.obj)."""
    view.buf = <void *>buf
    view.len = length
    view.readonly = 1
    view.itemsize = 1
    view.format = NULL
    view.ndim = 1
    if shape != NULL:
        shape[0] = length
    view.shape = shape
    view.strides = NULL
    view.suboffsets = NULL
    view.internal = NULL


cdef class _BuilderRecords:
    """Exports a builder's encoded records to a compressor. While any view of it exists the
    builder refuses appends: compressors release the GIL, and an append could otherwise
    move the memory under them."""
    cdef RecordBatchBuilder builder

    def __getbuffer__(self, Py_buffer *view, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("the records of a batch being built are read-only")
        b = self.builder
        view.obj = self
        _readonly_bytes_view(view, b.buf.data + KC_RECORD_BATCH_OVERHEAD,
                             <Py_ssize_t>(b.buf.len - KC_RECORD_BATCH_OVERHEAD), NULL)
        b._exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self.builder._exports -= 1


cdef class _BuilderBatch:
    """Exports the whole batch a builder built in place (build_view): header and records, in
    the builder's own memory. Writable, because a broker stamps offsets and the leader epoch in
    place (fields outside the CRC); the builder takes no more records once it handed it out."""
    cdef RecordBatchBuilder builder

    def __getbuffer__(self, Py_buffer *view, int flags):
        b = self.builder
        view.obj = self
        _readonly_bytes_view(view, b.buf.data, <Py_ssize_t>b.buf.len, NULL)
        view.readonly = 0


cdef class RecordBatchBuilder:
    """Builds one record batch v2.

    RecordBatchBuilder(compression="none", base_offset=0, producer_id=-1, producer_epoch=-1,
                       base_sequence=-1, transactional=False, log_append_time=False,
                       partition_leader_epoch=-1, control=False)

    Records are encoded in place into one growing buffer that starts with room for the
    61-byte batch header, so ``build`` of an uncompressed batch is a single copy."""
    cdef kc_buf buf
    cdef int32_t count
    cdef int64_t base_ts, max_ts
    cdef int codec
    cdef kc_batch_header header
    cdef readonly str compression
    cdef readonly bint transactional, log_append_time, control
    cdef int _exports  # live views of the records (see _BuilderRecords)
    cdef bint _sealed  # build_view handed the buffer out: it belongs to the batch now
    cdef bint _pooled  # buf.data is a block of the block cache (kc_pool.c), not of malloc
    cdef public Py_ssize_t size_hint  # bytes the batch is expected to reach (0: not known)

    def __cinit__(self, *args, **kwargs):
        # Everything a method relies on is set here, so an object made without __init__
        # (RecordBatchBuilder.__new__, a subclass) is a valid empty builder.
        memset(&self.buf, 0, sizeof(kc_buf))
        memset(&self.header, 0, sizeof(kc_batch_header))
        if kc_buf_reserve(&self.buf, 4096):
            raise MemoryError()
        memset(self.buf.data, 0, KC_RECORD_BATCH_OVERHEAD)
        self.buf.len = KC_RECORD_BATCH_OVERHEAD
        self.compression = "none"
        self.header.producer_id = -1
        self.header.producer_epoch = -1
        self.header.base_sequence = -1
        self.header.partition_leader_epoch = -1

    def __init__(self, compression="none", long long base_offset=0, long long producer_id=-1,
                 int producer_epoch=-1, int base_sequence=-1, transactional=False,
                 log_append_time=False, int partition_leader_epoch=-1, control=False):
        if self._exports:
            raise BufferError("the batch is being built in another thread")
        if self._sealed:
            raise BufferError("the builder's buffer was handed out by build_view()")
        self.codec = codecs.codec_id(compression)
        self.compression = _CODEC_NAMES[self.codec]
        if not -32768 <= producer_epoch <= 32767:
            raise OverflowError("producer_epoch must fit in 16 bits")
        self.transactional = bool(transactional)
        self.log_append_time = bool(log_append_time)
        self.control = bool(control)
        memset(&self.header, 0, sizeof(kc_batch_header))
        self.header.base_offset = base_offset
        self.header.producer_id = producer_id
        self.header.producer_epoch = <int16_t>producer_epoch
        self.header.base_sequence = base_sequence
        self.header.partition_leader_epoch = partition_leader_epoch
        self.count = 0
        self.buf.len = KC_RECORD_BATCH_OVERHEAD

    def __dealloc__(self):
        if self._pooled:
            kc_pool_free(self.buf.data, self.buf.cap)
            self.buf.data = NULL
        else:
            kc_buf_free(&self.buf)

    def __len__(self):
        return self.count

    @property
    def base_offset(self):
        return self.header.base_offset

    @property
    def producer_id(self):
        return self.header.producer_id

    @property
    def producer_epoch(self):
        return self.header.producer_epoch

    @property
    def base_sequence(self):
        return self.header.base_sequence

    @property
    def partition_leader_epoch(self):
        return self.header.partition_leader_epoch

    @property
    def size_in_bytes(self):
        """Uncompressed size of the batch so far (header + records)."""
        return self.buf.len

    def set_producer_state(self, long long producer_id, int producer_epoch, int base_sequence,
                           transactional=False):
        """Stamps the idempotent producer's id, epoch and first sequence (a producer assigns the
        sequence when the batch is drained, after its records were appended), and whether the
        batch belongs to a transaction (attribute bit 0x10), set either way as Kafka's
        MemoryRecordsBuilder.setProducerState does."""
        if self._sealed:
            raise BufferError("the batch was already built in place by build_view()")
        if not -32768 <= producer_epoch <= 32767:
            raise OverflowError("producer_epoch must fit in 16 bits")
        self.header.producer_id = producer_id
        self.header.producer_epoch = <int16_t>producer_epoch
        self.header.base_sequence = base_sequence
        self.transactional = bool(transactional)

    cdef int _add(self, const uint8_t *value, int32_t value_len, const uint8_t *key, int32_t key_len,
                  int64_t ts, const kc_header_in *headers, int32_t n_headers) except -1:
        cdef int64_t delta
        cdef size_t size
        if self._exports:
            raise BufferError("cannot append while the batch is being built (compressed) in another thread")
        if self._sealed:
            raise BufferError("cannot append to a batch built in place by build_view()")
        if self.count == INT32_MAX_:
            raise OverflowError("a record batch holds at most 2^31-1 records")
        if self.count == 0:
            self.base_ts = ts
            self.max_ts = ts
        delta = <int64_t>(<uint64_t>ts - <uint64_t>self.base_ts)
        size = kc_record_encoded_size(delta, self.count, key_len, value_len, headers, n_headers)
        if self.buf.len + size > <size_t>INT32_MAX_:
            raise OverflowError("a record batch is limited to 2 GiB")
        if self.buf.cap - self.buf.len < size:
            self._grow(size)
        self.buf.len += kc_record_encode(self.buf.data + self.buf.len, delta, self.count, key, key_len,
                                         value, value_len, headers, n_headers)
        if ts > self.max_ts:
            self.max_ts = ts
        self.count += 1
        return 0

    cdef int _grow(self, size_t extra) except -1:
        """Makes room for ``extra`` more bytes: kc_batch_grow (malloc while small, then blocks
        of the block cache toward ``size_hint``)."""
        cdef int pooled = self._pooled
        if kc_batch_grow(&self.buf, extra, <size_t>self.size_hint if self.size_hint > 0 else 0, &pooled):
            raise MemoryError()
        self._pooled = pooled
        return 0

    cdef int _add_with_headers(self, _Arg *value, _Arg *key, int64_t ts, object headers) except -1:
        cdef kc_header_in stack_headers[MAX_STACK_HEADERS]
        cdef kc_header_in *hs = stack_headers
        cdef Py_ssize_t n = len(headers), i
        cdef list keep = []  # keeps encoded keys and value buffers alive while encoding
        cdef _Bytes hv
        if n > INT32_MAX_:
            raise OverflowError("too many headers")
        if n > MAX_STACK_HEADERS:
            hs = <kc_header_in *>malloc(n * sizeof(kc_header_in))
            if hs == NULL:
                raise MemoryError()
        try:
            for i in range(n):
                try:
                    hk, hval = headers[i]
                except (TypeError, ValueError):
                    raise TypeError("headers must be a list of (key, value) pairs") from None
                if isinstance(hk, str):
                    hk = (<str>hk).encode("utf-8")
                elif isinstance(hk, (bytes, bytearray, memoryview)):
                    hk = bytes(hk)
                    hk.decode("utf-8")  # header keys are strings in Kafka
                else:
                    raise TypeError(f"header key must be str, not {type(hk).__name__}")
                if len(hk) > INT32_MAX_:
                    raise ValueError("header key is larger than 2 GiB")
                hv = _Bytes()
                hv.set(hval, "header value")
                keep.append(hk)
                keep.append(hv)
                hs[i].key = <const uint8_t *>PyBytes_AS_STRING(hk)
                hs[i].key_len = <int32_t>PyBytes_GET_SIZE(hk)
                hs[i].value = hv.a.ptr
                hs[i].value_len = hv.a.length
            self._add(value.ptr, value.length, key.ptr, key.length, ts, hs, <int32_t>n)
        finally:
            if hs != stack_headers:
                free(hs)
        return 0

    def append(self, value, key=None, timestamp_ms=None, headers=None):
        """append(value, key=None, timestamp_ms=None, headers=None): add one record.

        value and key: bytes-like or None. timestamp_ms defaults to now. headers: a list of
        (str, bytes-or-None) pairs."""
        cdef int64_t ts = _now_ms() if timestamp_ms is None else _timestamp_arg(timestamp_ms)
        cdef _Arg v, k
        _arg_get(&v, value, "value")
        try:
            _arg_get(&k, key, "key")
            try:
                if headers:
                    self._add_with_headers(&v, &k, ts, headers)
                else:
                    self._add(v.ptr, v.length, k.ptr, k.length, ts, NULL, 0)
            finally:
                _arg_release(&k)
        finally:
            _arg_release(&v)

    def extend(self, values, keys=None, timestamps_ms=None):
        """extend(values, keys=None, timestamps_ms=None): add many records in one C loop.

        values/keys: lists or tuples of bytes (None allowed), or any sequence of bytes-like;
        timestamps_ms: a sequence or numpy array of ints; all records get 'now' when omitted."""
        # Tuples: items stay referenced and in place even if user code run by a conversion
        # below (an __index__, a buffer export) mutates the caller's list.
        values = tuple(values)
        cdef Py_ssize_t n = len(values), i
        if keys is not None:
            keys = tuple(keys)
            if len(keys) != n:
                raise ValueError(f"keys has {len(keys)} items but values has {n}")
        cdef _BufferRef ts_ref = None  # holds the int64 array while the loop reads it
        cdef const int64_t *ts_ptr = NULL
        if timestamps_ms is not None:
            if len(timestamps_ms) != n:
                raise ValueError(f"timestamps_ms has {len(timestamps_ms)} items but values has {n}")
            if _is_ndarray(timestamps_ms):
                np = _np
                if timestamps_ms.dtype.kind not in "iu":
                    raise TypeError("timestamps_ms must hold integers")
                if timestamps_ms.dtype.kind == "u" and timestamps_ms.size and timestamps_ms.max() > INT64_MAX:
                    raise OverflowError("timestamp_ms does not fit in 64 bits")
                ts_arr = np.ascontiguousarray(timestamps_ms, dtype=np.int64)
                ts_ref = _BufferRef(ts_arr)
                if <uintptr_t>ts_ref.data % sizeof(int64_t):
                    # ascontiguousarray passes a misaligned int64 array through as is;
                    # reading that as int64_t would be undefined behaviour: read a copy.
                    ts_ref = _BufferRef(ts_arr.copy())
                ts_ptr = <const int64_t *>ts_ref.data
            else:
                timestamps_ms = tuple(timestamps_ms)
        cdef int64_t now = _now_ms()
        cdef int64_t ts
        cdef PyObject *vo
        cdef PyObject *ko
        cdef _Arg v, k
        for i in range(n):
            if ts_ptr != NULL:
                ts = ts_ptr[i]
            elif timestamps_ms is not None:
                ts = _timestamp_arg(timestamps_ms[i])
            else:
                ts = now
            vo = PyTuple_GET_ITEM(values, i)
            ko = NULL if keys is None else PyTuple_GET_ITEM(keys, i)
            # Fast path: exact bytes (or None) in both slots, no buffer requests.
            if PyBytes_CheckExact(<object>vo) and (ko == NULL or <object>ko is None):
                if PyBytes_GET_SIZE(<object>vo) > INT32_MAX_:
                    raise ValueError("value is larger than 2 GiB")
                self._add(<const uint8_t *>PyBytes_AS_STRING(<object>vo), <int32_t>PyBytes_GET_SIZE(<object>vo),
                          NULL, -1, ts, NULL, 0)
                continue
            _arg_get(&v, <object>vo, "value")
            try:
                _arg_get(&k, None if ko == NULL else <object>ko, "key")
                try:
                    self._add(v.ptr, v.length, k.ptr, k.length, ts, NULL, 0)
                finally:
                    _arg_release(&k)
            finally:
                _arg_release(&v)

    cdef void _fill_header(self, kc_batch_header *h):
        h[0] = self.header
        h.attributes = <int16_t>self.codec
        if self.log_append_time:
            h.attributes |= KC_ATTR_TIMESTAMP_TYPE
        if self.transactional:
            h.attributes |= KC_ATTR_TRANSACTIONAL
        if self.control:
            h.attributes |= KC_ATTR_CONTROL
        h.last_offset_delta = self.count - 1
        h.base_timestamp = self.base_ts
        h.max_timestamp = self.max_ts
        h.records_count = self.count

    def build(self):
        """The finished batch as bytes (the builder stays usable; build again after more appends)."""
        cdef kc_batch_header h
        cdef bytes out
        cdef uint8_t *dst
        cdef size_t total
        cdef _Arg c
        cdef _BuilderRecords exporter
        if self.count == 0:
            raise ValueError("cannot build a record batch with no records")
        if self.codec == 0:
            # Header fields and the copy are taken together under the GIL, so no append can
            # come between them; the private copy is then finished without the GIL.
            self._fill_header(&h)
            total = self.buf.len
            out = PyBytes_FromStringAndSize(<char *>self.buf.data, <Py_ssize_t>total)
            dst = <uint8_t *>PyBytes_AS_STRING(out)
            with nogil:
                kc_batch_write_header(dst, total, &h)
            return out
        # Lock the records (appends get BufferError) before reading the header fields, then
        # compress; compressors release the GIL while they work.
        exporter = _BuilderRecords.__new__(_BuilderRecords)
        exporter.builder = self
        records = memoryview(exporter)
        try:
            self._fill_header(&h)
            compressed = codecs.compress(self.codec, records)
        finally:
            records.release()
        total = KC_RECORD_BATCH_OVERHEAD + len(compressed)
        if total > <size_t>INT32_MAX_:
            raise OverflowError("a record batch is limited to 2 GiB")
        out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
        dst = <uint8_t *>PyBytes_AS_STRING(out)
        _arg_get(&c, compressed, "compressed records")
        memcpy(dst + KC_RECORD_BATCH_OVERHEAD, c.ptr, <size_t>c.length)
        _arg_release(&c)
        with nogil:
            kc_batch_write_header(dst, total, &h)
        return out

    def build_view(self):
        """The finished batch as a writable buffer, and the end of the builder: it takes no
        more records. An uncompressed batch is finished in the builder's own memory (the header
        written in front of the records, the CRC computed without the GIL): no copy, where
        build() copies the whole batch into new bytes while holding the GIL. A compressed
        batch is a new buffer, as with build()."""
        cdef kc_batch_header h
        cdef _BuilderBatch exporter
        if self.count == 0:
            raise ValueError("cannot build a record batch with no records")
        if self._exports:
            raise BufferError("the batch is being built in another thread")
        if self.codec != 0:
            out = bytearray(self.build())
            self._sealed = True
            return memoryview(out)
        if not self._sealed:
            self._fill_header(&h)
            self._sealed = True
            with nogil:
                kc_batch_write_header(self.buf.data, self.buf.len, &h)
        exporter = _BuilderBatch.__new__(_BuilderBatch)
        exporter.builder = self
        return memoryview(exporter)


@cython.freelist(512)
cdef class Record:
    """One decoded record: offset, timestamp_ms, key, value, headers."""
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp_ms
    cdef readonly object key
    cdef readonly object value
    cdef object _headers  # None until a record has headers: most have none

    @property
    def headers(self):
        return [] if self._headers is None else self._headers

    def __eq__(self, other):
        if not hasattr(other, "timestamp_ms"):
            return NotImplemented
        return (self.offset, self.timestamp_ms, self.key, self.value, self.headers) == (
            other.offset, other.timestamp_ms, other.key, other.value, list(other.headers))

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp_ms={self.timestamp_ms}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


cdef class _BufferRef:
    """Holds a buffer request on the caller's object for as long as batch views use it.
    It re-exports that buffer, so sections handed to Python code (decompressors) are views
    of this object: a view that outlives a call (kept by a traceback, say) keeps the
    caller's buffer held, never dangling."""
    cdef Py_buffer view
    cdef bint held
    cdef const uint8_t *data
    cdef size_t length

    def __cinit__(self, obj):
        PyObject_GetBuffer(obj, &self.view, PyBUF_SIMPLE)
        self.held = True
        self.data = <const uint8_t *>self.view.buf
        self.length = <size_t>self.view.len

    def __getbuffer__(self, Py_buffer *view, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("record batch input is exported read-only")
        view.obj = self
        _readonly_bytes_view(view, self.data, <Py_ssize_t>self.length, NULL)

    def __releasebuffer__(self, Py_buffer *view):
        pass

    cdef object section(self, size_t start, size_t end):
        return memoryview(self)[start:end]

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)


cdef inline uint32_t _batch_crc(const uint8_t *batch, size_t total) noexcept nogil:
    """CRC-32C of a batch as stored in its header: attributes to the end."""
    return kc_crc32c(0, batch + KC_ATTRIBUTES_OFFSET, total - KC_ATTRIBUTES_OFFSET)


cdef str _crc_mismatch(uint32_t stored, uint32_t computed):
    return f"CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}"


cdef object _corrupt(str reason, Py_ssize_t position):
    return CorruptRecordError(reason, position)


# -- read_committed (KIP-98): Kafka's consumer rules for aborted transactions, in kc_record.c
# (kc_aborted, kc_control_type); the twin is batch_py.AbortedFilter / control_type.

cdef object _aborted_pairs = None  # batch_py.aborted_pairs, imported on first use


cdef class _AbortedState:
    """The C filter (kc_aborted) over one Fetch response's aborted transactions."""
    cdef kc_aborted a

    def __cinit__(self):
        memset(&self.a, 0, sizeof(kc_aborted))

    def __dealloc__(self):
        kc_aborted_free(&self.a)


cdef _AbortedState _aborted_state(object aborted):
    """None for None (read_uncommitted), else the filter for ``aborted``. The input is checked
    by the twin's aborted_pairs, so both implementations accept and refuse the same things."""
    global _aborted_pairs
    cdef _AbortedState s
    cdef kc_aborted_txn *txns = NULL
    cdef Py_ssize_t i, n
    cdef int st
    if aborted is None:
        return None
    if _aborted_pairs is None:
        from kafkacore.record.batch_py import aborted_pairs
        _aborted_pairs = aborted_pairs
    pairs = _aborted_pairs(aborted)
    n = len(pairs)
    s = _AbortedState.__new__(_AbortedState)
    if n == 0:
        kc_aborted_init(&s.a, NULL, 0)  # cannot fail: nothing to allocate
        return s
    txns = <kc_aborted_txn *>malloc(<size_t>n * sizeof(kc_aborted_txn))
    if txns == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            txns[i].producer_id = pairs[i][0]
            txns[i].first_offset = pairs[i][1]
        st = kc_aborted_init(&s.a, txns, <size_t>n)
    finally:
        free(txns)
    if st != KC_OK:
        raise MemoryError()
    return s


cdef int _marker_type(_BufferRef ref, size_t pos, size_t total, const kc_batch_header *h) except? -2:
    """The ControlRecordType of the control batch at pos, KC_CONTROL_NONE without records.
    Kafka never compresses markers, but a compressed control batch is read like Kafka's
    consumer does: decompressed. ``except?``: the type is any int16 a key holds, -2 included
    (a plain ``except -2`` took such a key for an error and crashed; found by fuzzing)."""
    cdef int t = KC_CONTROL_NONE
    cdef const char *err = NULL
    cdef int st
    cdef bytes data
    cdef int codec = h.attributes & 0x07
    if codec and h.records_count > 0:
        if codec not in _CODEC_NAMES:
            raise _corrupt(f"unknown compression codec id {codec}", <Py_ssize_t>pos)
        data = codecs.decompress(codec, ref.section(pos + KC_RECORD_BATCH_OVERHEAD, pos + total), <Py_ssize_t>pos)
        st = kc_control_type(<const uint8_t *>PyBytes_AS_STRING(data),
                             <const uint8_t *>PyBytes_AS_STRING(data) + PyBytes_GET_SIZE(data),
                             h.records_count, &t, &err)
    else:
        st = kc_control_type(ref.data + pos + KC_RECORD_BATCH_OVERHEAD, ref.data + pos + total,
                             h.records_count, &t, &err)
    if st != KC_OK:
        raise _corrupt(f"control batch: {err.decode()}", <Py_ssize_t>pos)
    return t


@cython.final
cdef class _RecordIterator:
    """Decodes a batch's records one per __next__, as Kafka's own reader does: a record the
    caller drops is freed before the next is made, so records and their bytes come from
    warm free lists instead of a list of all of them. An error is raised at the record where
    it is found, naming its position (the record's own byte offset for uncompressed data,
    else the batch's)."""
    cdef object owner  # keeps the bytes under p alive: the batch, or a decompressed section
    cdef const uint8_t *p
    cdef const uint8_t *start
    cdef const uint8_t *end
    cdef kc_batch_header h
    cdef int32_t remaining
    cdef Py_ssize_t section_position
    cdef bint position_is_exact
    cdef bint done

    def __iter__(self):
        return self

    cdef inline Py_ssize_t _where(self):
        return self.section_position + (self.p - self.start if self.position_is_exact else 0)

    def __next__(self):
        cdef kc_record r
        cdef const char *err = NULL
        cdef const uint8_t *hp
        cdef const uint8_t *hk
        cdef const uint8_t *hv
        cdef int32_t hkl, hvl, j
        cdef Record rec
        cdef list headers
        if self.done:
            raise StopIteration
        if self.remaining == 0:
            self.done = True
            if self.p != self.end:
                raise _corrupt("batch has bytes left after its last record", self._where())
            raise StopIteration
        if self.p >= self.end:
            self.done = True
            raise _corrupt("batch holds fewer records than its record count", self._where())
        if kc_record_parse_inline(self.p, self.end, &r, &err) != KC_OK:
            self.done = True
            raise _corrupt(err.decode(), self._where())
        rec = Record.__new__(Record)
        rec.offset = _wrap_add(self.h.base_offset, r.offset_delta)
        rec.timestamp_ms = (self.h.max_timestamp if self.h.attributes & KC_ATTR_TIMESTAMP_TYPE
                            else _wrap_add(self.h.base_timestamp, r.timestamp_delta))
        rec.key = None if r.key == NULL else PyBytes_FromStringAndSize(<const char *>r.key, r.key_len)
        rec.value = None if r.value == NULL else PyBytes_FromStringAndSize(<const char *>r.value, r.value_len)
        if r.headers_count:
            headers = []
            hp = r.headers
            for j in range(r.headers_count):
                if kc_header_next_inline(&hp, r.end, &hk, &hkl, &hv, &hvl, &err) != KC_OK:
                    self.done = True  # not reached: parse checked the headers
                    raise _corrupt(err.decode(), self._where())
                # Lenient like Kafka's readers: ill-formed bytes read as U+FFFD.
                name = PyUnicode_DecodeUTF8(<const char *>hk, hkl, "replace")
                headers.append((name, None if hv == NULL else PyBytes_FromStringAndSize(<const char *>hv, hvl)))
            rec._headers = headers
        self.p = r.end
        self.remaining -= 1
        return rec


cdef _RecordIterator _record_iterator(object owner, const uint8_t *p, const uint8_t *end,
                                      const kc_batch_header *h, Py_ssize_t section_position,
                                      bint position_is_exact):
    cdef _RecordIterator it = _RecordIterator.__new__(_RecordIterator)
    it.owner = owner
    it.p = it.start = p
    it.end = end
    it.h = h[0]
    it.remaining = h.records_count
    it.section_position = section_position
    it.position_is_exact = position_is_exact
    return it


cdef class RecordBatch:
    """A view of one record batch v2 inside a buffer; records are decoded when iterated."""
    cdef _BufferRef _ref
    cdef kc_batch_header h
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t size_in_bytes
    cdef readonly bint aborted  # set by iter_batches(aborted=...): a read_committed reader drops its records

    @property
    def base_offset(self): return self.h.base_offset
    @property
    def batch_length(self): return self.h.batch_length
    @property
    def partition_leader_epoch(self): return self.h.partition_leader_epoch
    @property
    def magic(self): return self.h.magic
    @property
    def crc(self): return self.h.crc
    @property
    def attributes(self): return self.h.attributes
    @property
    def last_offset_delta(self): return self.h.last_offset_delta
    @property
    def last_offset(self): return _wrap_add(self.h.base_offset, self.h.last_offset_delta)
    @property
    def next_offset(self): return _wrap_add(self.h.base_offset, <int64_t>self.h.last_offset_delta + 1)
    @property
    def base_timestamp(self): return self.h.base_timestamp
    @property
    def max_timestamp(self): return self.h.max_timestamp
    @property
    def producer_id(self): return self.h.producer_id
    @property
    def producer_epoch(self): return self.h.producer_epoch
    @property
    def base_sequence(self): return self.h.base_sequence
    @property
    def count(self): return self.h.records_count
    @property
    def compression_type(self): return self.h.attributes & 0x07
    @property
    def compression(self):
        c = self.h.attributes & 0x07
        return _CODEC_NAMES.get(c, f"unknown({c})")
    @property
    def timestamp_type(self): return 1 if self.h.attributes & KC_ATTR_TIMESTAMP_TYPE else 0
    @property
    def is_transactional(self): return (self.h.attributes & KC_ATTR_TRANSACTIONAL) != 0
    @property
    def is_control(self): return (self.h.attributes & KC_ATTR_CONTROL) != 0

    cdef inline const uint8_t *_start(self) except NULL:
        if self._ref is None:
            raise TypeError("RecordBatch objects come from iter_batches()")
        return self._ref.data + self.position

    def to_bytes(self):
        return PyBytes_FromStringAndSize(<const char *>self._start(), self.size_in_bytes)

    cdef bytes _decompressed(self):
        cdef int codec = self.h.attributes & 0x07
        if codec not in _CODEC_NAMES:
            raise _corrupt(f"unknown compression codec id {codec}", self.position)
        self._start()  # checks that this batch views a buffer
        return codecs.decompress(codec, self._ref.section(self.position + KC_RECORD_BATCH_OVERHEAD,
                                                          self.position + self.size_in_bytes), self.position)

    def validate(self, records=True):
        """CorruptRecordError unless the header and CRC-32C are sound; with ``records`` (the
        default) every record is parsed too, decompressing if needed."""
        cdef const uint8_t *p = self._start()
        cdef size_t total = <size_t>self.size_in_bytes
        cdef int ok
        cdef size_t err_at = 0
        cdef const char *err = NULL
        cdef int st
        cdef bytes data
        cdef uint32_t computed
        if self.h.records_count < 0:
            raise _corrupt("negative record count", self.position)
        if self.h.records_count > 0 and self.h.last_offset_delta < self.h.records_count - 1:
            raise _corrupt("last offset delta is below the record count", self.position)
        if total >= GIL_RELEASE_BYTES:
            with nogil:
                computed = _batch_crc(p, total)
        else:
            computed = _batch_crc(p, total)
        if computed != self.h.crc:
            raise _corrupt(_crc_mismatch(self.h.crc, computed), self.position)
        if not records:
            return
        if self.h.attributes & 0x07:
            data = self._decompressed()
            st = kc_records_check(<const uint8_t *>PyBytes_AS_STRING(data),
                                  <const uint8_t *>PyBytes_AS_STRING(data) + PyBytes_GET_SIZE(data),
                                  self.h.records_count, self.h.last_offset_delta, &err_at, &err)
            if st != KC_OK:
                raise _corrupt(err.decode(), self.position)
        else:
            st = kc_records_check(p + KC_RECORD_BATCH_OVERHEAD, p + total, self.h.records_count,
                                  self.h.last_offset_delta, &err_at, &err)
            if st != KC_OK:
                raise _corrupt(err.decode(), self.position + KC_RECORD_BATCH_OVERHEAD + <Py_ssize_t>err_at)

    def __iter__(self):
        cdef const uint8_t *p = self._start()
        cdef bytes data
        if self.h.records_count < 0:
            raise _corrupt("negative record count", self.position)
        if self.h.attributes & 0x07:
            data = self._decompressed()
            return _record_iterator(data, <const uint8_t *>PyBytes_AS_STRING(data),
                                    <const uint8_t *>PyBytes_AS_STRING(data) + PyBytes_GET_SIZE(data),
                                    &self.h, self.position, False)
        return _record_iterator(self, p + KC_RECORD_BATCH_OVERHEAD, p + self.size_in_bytes, &self.h,
                                self.position + KC_RECORD_BATCH_OVERHEAD, True)

    def __repr__(self):
        return (f"RecordBatch(base_offset={self.base_offset}, count={self.count}, "
                f"compression={self.compression!r}, size={self.size_in_bytes})")


cdef class _BatchIterator:
    cdef _BufferRef ref
    cdef size_t pos
    cdef _AbortedState txn  # None: read_uncommitted

    def __iter__(self):
        return self

    def __next__(self):
        cdef kc_batch_header h
        cdef size_t total
        cdef const char *err = NULL
        if self.ref is None:
            raise TypeError("batch iterators come from iter_batches()")
        cdef int st = kc_batch_frame(self.ref.data + self.pos, self.ref.length - self.pos, &h, &total, &err)
        cdef RecordBatch b
        if st == KC_TRUNCATED:
            raise StopIteration
        if st != KC_OK:
            raise _corrupt(err.decode(), <Py_ssize_t>self.pos)
        b = RecordBatch.__new__(RecordBatch)
        b._ref = self.ref
        b.h = h
        b.position = <Py_ssize_t>self.pos
        b.size_in_bytes = <Py_ssize_t>total
        if self.txn is not None:
            verdict = kc_aborted_batch(&self.txn.a, &h)
            if verdict == KC_TXN_MARKER and _marker_type(self.ref, self.pos, total, &h) == KC_CONTROL_ABORT:
                kc_aborted_end(&self.txn.a, h.producer_id)
            b.aborted = verdict == KC_TXN_ABORTED
        self.pos += total
        return b


def iter_batches(buf, aborted=None):
    """iter_batches(buf, aborted=None): each RecordBatch of a buffer of concatenated batches (a
    segment, a fetch response). A truncated final batch ends the iteration quietly; a batch
    whose length or magic can't be v2 raises CorruptRecordError.

    ``aborted``: a Fetch response's aborted transactions, (producer_id, first_offset) pairs or
    objects with those attributes. Every batch is still yielded; ``RecordBatch.aborted`` tells
    whether a read_committed reader drops its records. Markers are read for that (a malformed
    one raises CorruptRecordError); CRCs are not checked (validate() does)."""
    cdef _BatchIterator it = _BatchIterator.__new__(_BatchIterator)
    it.ref = _BufferRef(buf)
    it.pos = 0
    it.txn = _aborted_state(aborted)
    return it


@cython.auto_pickle(False)  # owns raw memory: never pickled
cdef class _OwnedBuffer:
    """Column memory handed to pyarrow without a copy; freed (or given back to the block
    cache) with the last Arrow array that uses it."""
    cdef uint8_t *data
    cdef Py_ssize_t length
    cdef size_t cap
    cdef bint pooled
    cdef Py_ssize_t shape[1]

    def __getbuffer__(self, Py_buffer *view, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("decoded column memory is read-only")
        view.obj = self
        _readonly_bytes_view(view, self.data if self.data != NULL else <uint8_t *>"", self.length, self.shape)

    def __releasebuffer__(self, Py_buffer *view):
        pass

    def __dealloc__(self):
        if self.pooled:
            kc_pool_free(self.data, self.cap)
        else:
            free(self.data)


def read_pooled(int fd, Py_ssize_t position, Py_ssize_t length):
    """read_pooled(fd, position, length) -> buffer

    ``length`` bytes of file ``fd`` from ``position`` (fewer where the file ends), read without
    the GIL into a block of the block cache (kc_pool.c): a read-only buffer whose block goes back
    to the cache with its last user. A recycled block's pages are already mapped; reading into
    fresh memory costs a fault and a clear per page, about as much as the copy itself. The
    pure-Python twin is FileSlice.read (os.pread)."""
    cdef _OwnedBuffer o
    cdef size_t cap = 0
    cdef ssize_t got
    cdef Py_ssize_t done = 0
    cdef int err = 0
    if position < 0 or length < 0:
        raise ValueError(f"position and length must be >= 0, not {position} and {length}")
    o = _OwnedBuffer.__new__(_OwnedBuffer)
    o.data = <uint8_t *>kc_pool_alloc(<size_t>length, &cap)
    if o.data == NULL:
        raise MemoryError()
    o.cap = cap
    o.pooled = True
    with nogil:
        while done < length:
            got = pread(fd, o.data + done, <size_t>(length - done), <off_t>(position + done))
            if got < 0:
                if errno == EINTR:
                    continue
                err = errno
                break
            if got == 0:
                break
            done += got
    if err:
        raise OSError(err, os.strerror(err))
    o.length = done
    return o


cdef object _arrow_buffer(kc_buf *b):
    """Hands a malloc'd kc_buf to Arrow (b is left empty)."""
    cdef _OwnedBuffer o = _OwnedBuffer.__new__(_OwnedBuffer)
    o.length = <Py_ssize_t>b.len
    o.data = kc_buf_release(b)
    return pa.py_buffer(o)


cdef void _adopt(kc_buf *b, size_t size, str name, dict holders) except *:
    cdef _OwnedBuffer o = _OwnedBuffer.__new__(_OwnedBuffer)
    cdef size_t cap = 0
    o.data = <uint8_t *>kc_pool_alloc(size, &cap)
    if o.data == NULL:
        raise MemoryError()
    o.cap = cap
    o.pooled = True
    holders[name] = o  # owns the block from now on, error paths included
    kc_buf_adopt(b, o.data, cap)


cdef void _adopt_pool_buffers(kc_columns *c, int64_t rows, size_t data_bytes, dict holders) except *:
    """Output columns whose size pass 1 bounds come from the block cache (kc_pool.c), so a
    repeated decode writes into pages that are already mapped. Header columns, rare and
    unbounded, grow with realloc."""
    cdef size_t n = <size_t>rows
    _adopt(&c.key_offsets, (n + 1) * 4, "key_offsets", holders)
    _adopt(&c.value_offsets, (n + 1) * 4, "value_offsets", holders)
    _adopt(&c.header_list_offsets, (n + 1) * 4, "header_list_offsets", holders)
    _adopt(&c.key_data, data_bytes, "key_data", holders)
    _adopt(&c.value_data, data_bytes, "value_data", holders)
    _adopt(&c.offsets, n * 8, "offsets", holders)
    _adopt(&c.timestamps, n * 8, "timestamps", holders)
    _adopt(&c.timestamp_types, n * 4, "timestamp_types", holders)
    _adopt(&c.key_validity, (n + 7) // 8, "key_validity", holders)
    _adopt(&c.value_validity, (n + 7) // 8, "value_validity", holders)
    _adopt(&c.header_list_validity, (n + 7) // 8, "header_list_validity", holders)


cdef object _column_buffer(kc_buf *b, str name, dict holders):
    """The Arrow buffer behind a column. A cached block mostly unused (key data often is:
    its reservation covers all record bytes) is copied into a right-sized one and goes
    back to the cache at once."""
    cdef _OwnedBuffer o, small
    cdef size_t cap = 0
    if not b.external:
        return _arrow_buffer(b)
    o = holders.pop(name)
    if b.len * 2 >= o.cap or o.cap < 65536:
        o.length = <Py_ssize_t>b.len
        return pa.py_buffer(o)
    small = _OwnedBuffer.__new__(_OwnedBuffer)
    small.data = <uint8_t *>kc_pool_alloc(b.len, &cap)
    if small.data == NULL:
        raise MemoryError()
    small.cap = cap
    small.pooled = True
    if b.len:
        memcpy(small.data, b.data, b.len)
    small.length = <Py_ssize_t>b.len
    return pa.py_buffer(small)


cdef object _validity(kc_buf *b, int64_t nulls, str name, dict holders):
    if nulls == 0:
        return None
    return _column_buffer(b, name, holders)


def block_cache_bytes():
    """Bytes held by the block cache (recycled memory of decoded columns and of producers'
    record batches)."""
    return kc_pool_cached_bytes()


def set_block_cache_limit(size_t nbytes):
    """Caps the block cache (default 256 MiB; 0 turns caching off). Returns the old cap."""
    return kc_pool_set_limit(nbytes)


cdef struct _PendingBatch:
    const uint8_t *records
    const uint8_t *end
    kc_batch_header h
    size_t position          # of the batch in the input
    bint exact_positions     # records lie in the input (uncompressed): errors can name the record
    bint check_crc           # CRC still to be checked (in the GIL-free pass)
    const uint8_t *batch
    size_t total


cdef int _crc_matches(const _PendingBatch *b) noexcept nogil:
    return _batch_crc(b.batch, b.total) == b.h.crc


def decode_to_arrow(buf, topic=None, partition=None, check_crcs=True, aborted=None):
    """decode_to_arrow(buf, topic=None, partition=None, check_crcs=True, aborted=None) -> pyarrow.RecordBatch

    Every record of every batch in ``buf`` decoded in one native pass into the columns of
    Spark's Kafka source (key, value, topic, partition, offset, timestamp, timestampType,
    headers). Control batches are skipped; a truncated final batch ends the input.

    ``aborted`` reads committed: the Fetch response's aborted transactions ((producer_id,
    first_offset) pairs or objects with those attributes); batches of aborted transactions
    are dropped after their CRC check, never decompressed. None reads uncommitted.

    Pass 1 frames every batch (and decompresses compressed ones, holding the GIL for the
    codec libraries); pass 2 reserves each column once and decodes all records without the
    GIL. An error stops pass 1 but pass 2 still runs up to it, so the first problem in
    buffer order is the one reported."""
    batch, _rows = _decode_segments([(buf, topic, partition, aborted)], check_crcs)
    return batch


def decode_segments_to_arrow(segments, check_crcs=True):
    """decode_segments_to_arrow([(buf, topic, partition, aborted), ...], check_crcs=True) -> (pyarrow.RecordBatch, [rows])

    Several inputs decoded as ``decode_to_arrow`` decodes each, into ONE record batch: every
    segment's rows in order, with that segment's topic and partition, and ``rows`` the number
    of rows each segment gave. poll_arrow() decodes the fetched data it returns this way, so
    its batch needs no concatenation (a second copy of every key and value). Errors are
    decode_to_arrow's, their positions counted in the failing segment's own buffer."""
    return _decode_segments(list(segments), check_crcs)


cdef tuple _decode_segments(list segments, check_crcs):
    cdef _BufferRef ref
    cdef kc_columns cols
    cdef kc_batch_header h
    cdef kc_buf pending
    cdef _PendingBatch item
    cdef _PendingBatch *items
    cdef size_t pos = 0, total, err_at = 0, n_items = 0, k, data_bytes = 0
    cdef int64_t rows = 0
    cdef const char *err = NULL
    cdef int st = KC_OK
    cdef bint check = bool(check_crcs)
    cdef const uint8_t *p
    cdef uint32_t computed, crc
    cdef list keep_alive = []  # decompressed sections referenced by pending items
    cdef list refs = []  # every segment's input, held until the columns are assembled
    first_error = None  # a pass-1 error, raised unless pass 2 finds an earlier one
    cdef dict pool_buffers = {}
    cdef _AbortedState txn
    cdef int verdict
    cdef Py_ssize_t n_seg = len(segments), s = 0, done_seg = 0, framed = 0
    # seg_end[s]: the pending items of segments 0..s; seg_rows[s]: the rows once they are decoded
    cdef size_t *seg_end = NULL
    cdef int64_t *seg_rows = NULL
    _need_arrow()
    memset(&pending, 0, sizeof(kc_buf))
    kc_columns_init(&cols)
    try:
        seg_end = <size_t *>malloc((n_seg + 1) * sizeof(size_t))
        seg_rows = <int64_t *>malloc((n_seg + 1) * sizeof(int64_t))
        if seg_end == NULL or seg_rows == NULL:
            raise MemoryError()
        for s in range(n_seg):
            buf, _t, _p, aborted = segments[s]
            ref = _BufferRef(buf)
            refs.append(ref)
            txn = _aborted_state(aborted)
            pos = 0
            while True:
                st = kc_batch_frame(ref.data + pos, ref.length - pos, &h, &total, &err)
                if st == KC_TRUNCATED:
                    break
                if st != KC_OK:
                    first_error = _corrupt(err.decode(), <Py_ssize_t>pos)
                    break
                p = ref.data + pos
                if h.records_count < 0:
                    first_error = _corrupt("negative record count", <Py_ssize_t>pos)
                    break
                if check and h.records_count > 0 and h.last_offset_delta < h.records_count - 1:
                    first_error = _corrupt("last offset delta is below the record count", <Py_ssize_t>pos)
                    break
                memset(&item, 0, sizeof(item))
                item.h = h
                item.position = pos
                item.batch = p
                item.total = total
                verdict = KC_TXN_KEEP if txn is None else kc_aborted_batch(&txn.a, &h)
                if h.attributes & KC_ATTR_CONTROL:
                    item.records = item.end = NULL
                    item.h.records_count = 0
                    item.check_crc = check
                    if verdict == KC_TXN_MARKER:
                        # Its key steers the filter: CRC first (as the twin), then the key.
                        if check:
                            computed = _batch_crc(p, total)
                            if computed != h.crc:
                                first_error = _corrupt(_crc_mismatch(h.crc, computed), <Py_ssize_t>pos)
                                break
                            item.check_crc = False
                        try:
                            if _marker_type(ref, pos, total, &h) == KC_CONTROL_ABORT:
                                kc_aborted_end(&txn.a, h.producer_id)
                        except CorruptRecordError as e:
                            first_error = e
                            break
                elif verdict == KC_TXN_ABORTED:
                    # An aborted transaction's batch: like a control batch, CRC checked in pass 2
                    # and nothing decompressed or decoded.
                    item.records = item.end = NULL
                    item.h.records_count = 0
                    item.check_crc = check
                elif h.attributes & 0x07:
                    # Check the CRC before handing the bytes to a decompressor.
                    if check:
                        with nogil:
                            computed = _batch_crc(p, total)
                        if computed != h.crc:
                            first_error = _corrupt(_crc_mismatch(h.crc, computed), <Py_ssize_t>pos)
                            break
                    codec = h.attributes & 0x07
                    if codec not in _CODEC_NAMES:
                        first_error = _corrupt(f"unknown compression codec id {codec}", <Py_ssize_t>pos)
                        break
                    try:
                        data = codecs.decompress(codec, ref.section(pos + KC_RECORD_BATCH_OVERHEAD, pos + total),
                                                 <Py_ssize_t>pos)
                    except CorruptRecordError as e:
                        first_error = e
                        break
                    keep_alive.append(data)
                    item.records = <const uint8_t *>PyBytes_AS_STRING(data)
                    item.end = item.records + PyBytes_GET_SIZE(data)
                else:
                    item.records = p + KC_RECORD_BATCH_OVERHEAD
                    item.end = p + total
                    item.exact_positions = True
                    item.check_crc = check
                if item.records != NULL:
                    rows += h.records_count
                    data_bytes += <size_t>(item.end - item.records)
                if kc_buf_append(&pending, &item, sizeof(item)):
                    raise MemoryError()
                pos += total
            seg_end[s] = pending.len // sizeof(_PendingBatch)
            framed = s + 1
            if first_error is not None:
                break  # pass 2 decodes the segments before it and the batches up to it

        items = <_PendingBatch *>pending.data
        n_items = pending.len // sizeof(_PendingBatch)
        # Hostile counts can't inflate the reservation: a record takes at least 7 bytes.
        if rows > <int64_t>(data_bytes // 7 + n_items):
            rows = <int64_t>(data_bytes // 7 + n_items)
        _adopt_pool_buffers(&cols, rows, data_bytes, pool_buffers)
        if kc_columns_start(&cols) != KC_OK:
            raise MemoryError()
        with nogil:
            st = KC_OK
            k = 0
            done_seg = 0
            while st == KC_OK and k < n_items:
                while done_seg < framed and seg_end[done_seg] <= k:
                    seg_rows[done_seg] = cols.rows
                    done_seg += 1
                if items[k].records == NULL:  # a control batch: only its CRC matters
                    if items[k].check_crc and not _crc_matches(&items[k]):
                        st = -1
                elif items[k].check_crc:
                    # CRC fused into decoding; a mismatch outranks a record error, as in the twin.
                    crc = kc_crc32c(0, items[k].batch + KC_ATTRIBUTES_OFFSET,
                                    KC_RECORD_BATCH_OVERHEAD - KC_ATTRIBUTES_OFFSET)
                    st = kc_columns_add_batch_crc(&cols, items[k].records, items[k].end, &items[k].h, &crc,
                                                  &err_at, &err)
                    if crc != items[k].h.crc and st != KC_NOMEM:
                        st = -1
                else:
                    st = kc_columns_add_batch(&cols, items[k].records, items[k].end, &items[k].h, &err_at, &err)
                if st == KC_OK:
                    k += 1
            if st == KC_OK:
                while done_seg < framed:
                    seg_rows[done_seg] = cols.rows
                    done_seg += 1
        if st == KC_NOMEM:
            raise MemoryError()
        if st == -1:
            raise _corrupt(_crc_mismatch(items[k].h.crc, _batch_crc(items[k].batch, items[k].total)),
                           <Py_ssize_t>items[k].position)
        if st != KC_OK:
            if items[k].exact_positions:
                raise _corrupt(err.decode(), <Py_ssize_t>(items[k].position + KC_RECORD_BATCH_OVERHEAD + err_at))
            raise _corrupt(err.decode(), <Py_ssize_t>items[k].position)
        if first_error is not None:
            raise first_error
        counts = [seg_rows[s] - (seg_rows[s - 1] if s else 0) for s in range(n_seg)]
        return _assemble(&cols, _segment_columns(segments, counts, cols.rows), pool_buffers), counts
    finally:
        kc_columns_free(&cols)
        kc_buf_free(&pending)
        free(seg_end)
        free(seg_rows)


cdef tuple _segment_columns(list segments, list counts, int64_t n):
    """The topic and partition columns of segments' rows: one constant pair when they share
    them (always so for one segment), else each segment's pair, concatenated (4-byte values
    and the topic's name: small beside the records)."""
    first = segments[0] if segments else (None, None, None, None)
    if all(seg[1] == first[1] and seg[2] == first[2] for seg in segments):
        return constant_columns(first[1], first[2], n)
    topics, parts = [], []
    for seg, c in zip(segments, counts):
        t, q = constant_columns(seg[1], seg[2], c)
        topics.append(t)
        parts.append(q)
    return pa.concat_arrays(topics), pa.concat_arrays(parts)


cdef object _assemble(kc_columns *c, tuple topic_partition, dict h):
    cdef int64_t n = c.rows
    key = pa.Array.from_buffers(pa.binary(), n, [_validity(&c.key_validity, c.key_nulls, "key_validity", h),
                                _column_buffer(&c.key_offsets, "key_offsets", h),
                                _column_buffer(&c.key_data, "key_data", h)], c.key_nulls)
    value = pa.Array.from_buffers(pa.binary(), n, [
        _validity(&c.value_validity, c.value_nulls, "value_validity", h),
        _column_buffer(&c.value_offsets, "value_offsets", h),
        _column_buffer(&c.value_data, "value_data", h)], c.value_nulls)
    offset = pa.Array.from_buffers(pa.int64(), n, [None, _column_buffer(&c.offsets, "offsets", h)], 0)
    timestamp = pa.Array.from_buffers(pa.timestamp("ms"), n, [None, _column_buffer(&c.timestamps, "timestamps", h)], 0)
    ts_type = pa.Array.from_buffers(pa.int32(), n, [None, _column_buffer(&c.timestamp_types, "timestamp_types", h)], 0)
    hkey = pa.Array.from_buffers(pa.string(), c.headers, [None, _arrow_buffer(&c.header_key_offsets),
                                 _arrow_buffer(&c.header_key_data)], 0)
    hval = pa.Array.from_buffers(pa.binary(), c.headers,
                                 [None if c.header_value_nulls == 0 else _arrow_buffer(&c.header_value_validity),
                                  _arrow_buffer(&c.header_value_offsets), _arrow_buffer(&c.header_value_data)],
                                 c.header_value_nulls)
    entries = pa.StructArray.from_arrays([hkey, hval], fields=list(HEADER_TYPE))
    headers = pa.Array.from_buffers(HEADERS_TYPE, n, [
        _validity(&c.header_list_validity, c.header_list_nulls, "header_list_validity", h),
        _column_buffer(&c.header_list_offsets, "header_list_offsets", h)], c.header_list_nulls,
        children=[entries])
    topic_col, part_col = topic_partition
    return pa.RecordBatch.from_arrays([key, value, topic_col, part_col, offset, timestamp, ts_type, headers],
                                      schema=SPARK_KAFKA_SCHEMA)


include "accumulator.pxi"
include "consumer_records.pxi"
