# The producer's record accumulator (included by records.pyx, so that it reaches the
# builder's C-level append directly). Its pure-Python twin, and the description of the
# design, is kafkacore/client/accumulator_py.py; the two keep the same API and behaviour.
#
# Thread safety: every method that reads or changes the open batches holds the accumulator's
# ownership (as Java's RecordAccumulator synchronizes on the partition's deque). The GIL alone
# is not enough: an append allocates, an allocation can start a garbage collection, and the
# collection can run Python code (finalizers, gc.callbacks) that hands the GIL to the sender
# thread. Without it the sender could drain and build a batch between an append's reading of
# the open batch and its writing of the record: the record was lost while its handle reported
# the next batch's first offset (seen in CI, 2026-11-26). Ownership is a thread ident checked
# and set under the GIL (no atomics, ~2 ns); a thread that finds it taken lets the GIL go and
# looks again, which happens only while the owner runs such Python code.

import threading as _threading
from cpython.pythread cimport PyThread_get_thread_ident
from posix.unistd cimport usleep
from collections import deque as _deque

from kafkacore.errors import (ClientClosedError as _ClientClosedError, KafkaError as _KafkaError,
                              KafkaTimeoutError as _KafkaTimeoutError,
                              RecordTooLargeError as _RecordTooLargeError)

NEED_METADATA = "need-metadata"
NEED_MEMORY = "need-memory"
cdef object _NEED_METADATA = NEED_METADATA
cdef object _NEED_MEMORY = NEED_MEMORY
cdef enum:
    ACC_BATCH_OVERHEAD = 61
    ACC_RECORD_OVERHEAD = 21   # a record's worst-case framing beyond key, value and headers
    # records in a send_many run worth letting the GIL go for (a release and re-take cost ~1 us)
    ACC_NOGIL_RUN = 32
    # a send_many run follows the sticky partitioner across the open batches of a topic's first
    # this many partitions (kc_append_sticky_runs); a switch to any other ends the run
    ACC_RUN_PARTITIONS = 64

cdef object _RecordMetadata = None
# the sticky partitioner's generator (kc_xorshift32); never 0
cdef uint32_t _rand_state = 0x2545F491 ^ <uint32_t>(_now_ms() & 0x7FFFFFFF) | 1


cdef object _record_metadata(topic, int partition, long long offset, long long ts):
    global _RecordMetadata
    if _RecordMetadata is None:
        from kafkacore.client.accumulator_py import RecordMetadata
        _RecordMetadata = RecordMetadata
    return _RecordMetadata(topic, partition, offset, ts)


cdef int _random_below(int n) noexcept:
    return <int>(kc_xorshift32(&_rand_state) % <uint32_t>n)


def seed_sticky_random(unsigned int seed):
    """Restarts the sticky partitioner's generator from ``seed``, so that two runs choose the
    same partitions (tests compare batches built by different paths)."""
    global _rand_state
    _rand_state = seed if seed else 1  # xorshift stays at 0 forever


cdef class BatchResult:
    """The outcome of one batch, shared by the handles of its records. A batch the broker
    refused as too large is sent again in parts (``split``): each part has its own result, and
    this one completes once they all have; a record's offset and error are then its part's."""
    cdef readonly object topic
    cdef readonly int partition
    cdef public long long base_offset, log_append_time
    cdef public object error
    cdef public list callbacks
    cdef public int count
    cdef readonly list parts  # [(index of the part's first record, its BatchResult)], or None
    cdef BatchResult _whole  # the result this one is a part of
    cdef int _parts_left
    cdef object _event

    def __cinit__(self, topic, int partition):
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time = -1
        self._event = _threading.Event()

    def done(self):
        return self._event.is_set()

    def wait(self, timeout=None):
        return self._event.wait(timeout)

    def complete(self, long long base_offset, long long log_append_time, error):
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        if self._whole is not None:
            # the whole first: whoever waited for this part (flush) then finds it done too
            self._whole._part_done()
        self._event.set()
        if self.callbacks:
            callbacks, self.callbacks = self.callbacks, None  # each runs once; no cycle outlives delivery
            for index, ts, cb in callbacks:
                err = self.error_of(index)
                _run_delivery_callback(cb, err, None if err is not None else self.metadata(index, ts))

    def split(self, counts):
        """The records go out again as parts of ``counts`` records each, in order: their new
        results (this one completes when they all have)."""
        cdef int first = 0, c
        cdef BatchResult r
        if sum(counts) != self.count or self.parts is not None:
            raise ValueError(f"cannot split {self.count} records into {list(counts)}")
        parts = []
        for c in counts:
            r = BatchResult(self.topic, self.partition)
            r.count = c
            r._whole = self
            parts.append((first, r))
            first += c
        self.parts = parts
        self._parts_left = len(parts)
        return [r for _first, r in parts]

    def _part_done(self):
        cdef BatchResult r
        self._parts_left -= 1
        if self._parts_left:
            return
        error = None
        for _first, r in self.parts:
            if error is None:
                error = r.error
        r = self.parts[0][1]
        self.complete(r.base_offset, r.log_append_time, error)

    cdef inline tuple _part_of(self, int index):
        cdef int i
        for i in range(len(self.parts) - 1, -1, -1):
            if index >= <int>self.parts[i][0]:
                return self.parts[i]
        return self.parts[0]

    def error_of(self, int index):
        """The error of the record at ``index`` (None: it was written)."""
        if self.parts is None:
            return self.error
        first, part = self._part_of(index)
        return (<BatchResult>part).error_of(index - <int>first)

    def metadata(self, int index, long long timestamp_ms):
        if self.parts is not None:
            first, part = self._part_of(index)
            return (<BatchResult>part).metadata(index - <int>first, timestamp_ms)
        return _record_metadata(self.topic, self.partition,
                                self.base_offset + index if self.base_offset >= 0 else -1,
                                self.log_append_time if self.log_append_time >= 0 else timestamp_ms)


cdef _run_delivery_callback(cb, err, md):
    try:
        cb(err, md)
    except Exception:  # a user callback must not kill the sender
        import logging
        logging.getLogger("kafkacore.producer").exception("on_delivery callback raised")


# Not tracked by the cyclic GC (one per send(): tracking would make a send loop trigger
# collections of the whole application heap). Its only reference is its batch's result, whose
# callbacks, the one way back to a handle, are dropped once they have run.
@cython.no_gc
@cython.freelist(4096)
cdef class RecordHandle:
    """A future for one sent record: ``result(timeout)`` -> RecordMetadata."""
    cdef readonly BatchResult batch
    cdef readonly int index
    cdef readonly long long timestamp_ms

    def done(self):
        return self.batch._event.is_set()

    def result(self, timeout=None):
        """The record's RecordMetadata once the broker acknowledged it; raises its error, or
        KafkaTimeoutError when ``timeout`` (seconds) passes first."""
        if not self.batch._event.wait(timeout):
            raise _KafkaTimeoutError(f"record not acknowledged within {timeout} s")
        err = self.batch.error if self.batch.parts is None else self.batch.error_of(self.index)
        if err is not None:
            raise err
        return self.batch.metadata(self.index, self.timestamp_ms)

    def exception(self, timeout=None):
        if not self.batch._event.wait(timeout):
            raise _KafkaTimeoutError(f"record not acknowledged within {timeout} s")
        return self.batch.error_of(self.index)

    def __repr__(self):
        state = "pending" if not self.done() else ("failed" if self.batch.error_of(self.index) is not None else "done")
        return f"<RecordHandle {self.batch.topic}[{self.batch.partition}] #{self.index} {state}>"


cdef class FailedHandle:
    """The handle of a record refused before it reached a batch (too large, no metadata...)."""
    cdef readonly object error

    def __init__(self, error):
        self.error = error

    def done(self):
        return True

    def result(self, timeout=None):
        raise self.error

    def exception(self, timeout=None):
        return self.error

    def __repr__(self):
        return f"<RecordHandle failed: {self.error}>"


cdef class BulkHandle:
    """The handle of a ``send_many``: the results of the batches its records went into."""
    cdef readonly dict results
    cdef public Py_ssize_t records
    cdef BatchResult _last

    def __cinit__(self):
        self.results = {}

    cdef inline void _add(self, BatchResult r):
        if r is not self._last:
            self.results[r] = None
            self._last = r

    def add(self, BatchResult r):
        self._add(r)

    def done(self):
        return all(r.done() for r in self.results)

    def result(self, timeout=None):
        """Waits for every batch; the number of records written, or the first error."""
        import time
        deadline = None if timeout is None else time.monotonic() + timeout
        for r in self.results:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not (<BatchResult>r)._event.wait(left):
                raise _KafkaTimeoutError(f"records not acknowledged within {timeout} s")
        for r in self.results:
            if (<BatchResult>r).error is not None:
                raise (<BatchResult>r).error
        return self.records

    def __repr__(self):
        return f"<BulkHandle {self.records} records in {len(self.results)} batches>"


cdef class ProducerBatch:
    """One batch on its way: the builder while open, then the built bytes, retries, outcome."""
    cdef public object topic
    cdef public int partition
    cdef public object builder
    cdef public BatchResult result
    cdef public long long created_ms, retry_at
    cdef public Py_ssize_t size, reserved, limit
    cdef public int count, attempts, base_sequence
    cdef public object data
    # a send_many run is appending to it without the GIL: drain leaves it alone
    cdef bint filling

    def __init__(self, topic=None, int partition=0, builder=None, long long created_ms=0, Py_ssize_t limit=0):
        # (the accumulator's hot path makes batches with __new__ and sets these itself)
        self.topic = topic
        self.partition = partition
        self.builder = builder
        self.result = BatchResult(topic, partition)
        self.created_ms = created_ms
        self.base_sequence = -1
        self.size = ACC_BATCH_OVERHEAD
        self.limit = limit

    def __repr__(self):
        return f"<ProducerBatch {self.topic}[{self.partition}] {self.count} records seq {self.base_sequence}>"


cdef class _Column:
    """Values (or keys) of send_many: a tuple of objects, fixed-width numpy bytes, or an Arrow
    binary/string array read straight from its buffers."""
    cdef int kind  # 0 tuple, 1 fixed width, 2 arrow int32 offsets, 3 arrow int64 offsets
    cdef tuple items
    cdef list keep  # buffer owners
    cdef const uint8_t *data
    cdef const int32_t *off32
    cdef const int64_t *off64
    cdef const uint8_t *validity
    cdef Py_ssize_t offset, width, length

    cdef int load(self, obj, str what) except -1:
        cdef _BufferRef ref
        self.keep = []
        if isinstance(obj, (list, tuple)):
            self.kind = 0
            self.items = tuple(obj)
            self.length = len(self.items)
            return 0
        mod = type(obj).__module__ or ""
        if mod.startswith("pyarrow"):
            if type(obj).__name__ == "ChunkedArray":
                obj = obj.combine_chunks()
            tname = str(obj.type)
            if tname not in ("binary", "string", "large_binary", "large_string"):
                raise TypeError(f"{what}: Arrow arrays of type {tname} are not supported (binary or string)")
            bufs = obj.buffers()
            self.kind = 3 if tname.startswith("large") else 2
            self.offset = obj.offset
            self.length = len(obj)
            self.validity = NULL
            if bufs[0] is not None and obj.null_count:
                ref = _BufferRef(bufs[0])
                self.keep.append(ref)
                self.validity = <const uint8_t *>ref.data
            ref = _BufferRef(bufs[1])
            self.keep.append(ref)
            if self.kind == 2:
                self.off32 = <const int32_t *>ref.data
            else:
                self.off64 = <const int64_t *>ref.data
            self.data = NULL
            if bufs[2] is not None:
                ref = _BufferRef(bufs[2])
                self.keep.append(ref)
                self.data = <const uint8_t *>ref.data
            return 0
        if _is_ndarray(obj):
            if obj.ndim != 1:
                raise ValueError(f"{what} must be one-dimensional")
            if obj.dtype.kind == "S":
                arr = _np.ascontiguousarray(obj)
                ref = _BufferRef(arr.view(_np.uint8) if arr.size else _np.zeros(1, _np.uint8))
                self.keep.append(arr)
                self.keep.append(ref)
                self.kind = 1
                self.data = <const uint8_t *>ref.data
                self.width = arr.dtype.itemsize
                self.length = len(arr)
                if self.width > INT32_MAX_:
                    raise ValueError(f"{what} items are larger than 2 GiB")
                return 0
            if obj.dtype.kind == "O":
                self.kind = 0
                self.items = tuple(obj)
                self.length = len(self.items)
                return 0
            raise TypeError(f"{what}: numpy arrays of dtype {obj.dtype} are not supported (bytes or object)")
        self.kind = 0
        self.items = tuple(obj)
        self.length = len(self.items)
        return 0

    cdef int get(self, Py_ssize_t i, _Arg *out, str what) except -1:
        """Item i as a borrowed view (release with _arg_release)."""
        cdef Py_ssize_t j
        cdef int64_t a, b
        out.has_view = False
        if self.kind == 0:
            return _arg_get(out, <object>PyTuple_GET_ITEM(self.items, i), what)
        if self.kind == 1:
            out.ptr = self.data + i * self.width
            out.length = <int32_t>self.width
            return 0
        j = self.offset + i
        if self.validity != NULL and not (self.validity[j >> 3] >> (j & 7)) & 1:
            out.ptr = NULL
            out.length = -1
            return 0
        if self.kind == 2:
            a = self.off32[j]
            b = self.off32[j + 1]
        else:
            a = self.off64[j]
            b = self.off64[j + 1]
        if b < a or b - a > INT32_MAX_ or (self.data == NULL and b > a):
            raise ValueError(f"{what}: malformed Arrow offsets at {i}")
        out.ptr = self.data + a if self.data != NULL else <const uint8_t *>""
        out.length = <int32_t>(b - a)
        return 0


@cython.final
cdef class _Sticky:
    """A topic's sticky partition for null-key records and the bytes sent to it since it was
    chosen (KIP-480/794): one object per topic, so a record updates two C fields."""
    cdef int partition
    cdef Py_ssize_t used

    def __repr__(self):
        return f"<sticky partition {self.partition}, {self.used} bytes>"


cdef class RecordAccumulator:
    cdef public str compression
    cdef public Py_ssize_t batch_size, buffer_memory, max_request_size, buffered, sticky_partition_bytes
    cdef public long long linger_ms
    cdef public object partitioner, wakeup, on_release, ready, lock, slow_path
    cdef public bint ignore_keys, closed
    # whether the last send_many let the GIL go in its runs (the producer then has no need to
    # hand the sender the GIL between chunks)
    cdef readonly bint released_gil
    cdef public dict partition_counts, batches, sticky, topic_batch_limits
    cdef bint _wake_pending
    cdef long _owner  # thread ident of the owner, 0 when free; read and written under the GIL
    cdef int _depth  # the owner's nesting (a finalizer or callback may send on the same thread)
    # The owner is filling batches without the GIL (send_many's runs; those batches are marked
    # ProducerBatch.filling). Meanwhile the sender's methods (_enter_sender) may run: they leave
    # those batches alone.
    cdef bint _filling
    cdef int _sharers  # sender methods running beside a filling owner (see _enter_sender)

    cdef inline void _enter(self):
        cdef long me = PyThread_get_thread_ident()
        if self._owner == me:
            self._depth += 1
            return
        while self._owner != 0:
            with nogil:  # the owner needs the GIL to finish
                usleep(20)
        self._owner = me
        self._depth = 1

    cdef inline void _leave(self):
        self._depth -= 1
        if self._depth == 0:
            self._owner = 0

    cdef inline bint _enter_sender(self):
        """_enter for the sender's methods (drain, release...), which may also run beside an
        owner that is filling a batch without the GIL: True when it took the ownership, False
        when it runs beside such an owner; either way _leave_sender ends it. What they do
        may allocate, and a collection may run Python code and hand the GIL back to the owner."""
        cdef long me = PyThread_get_thread_ident()
        if self._owner == me:
            self._depth += 1
            return True
        while self._owner != 0 and not self._filling:
            with nogil:
                usleep(20)
        if self._owner != 0:
            # The owner waits for _sharers to drop before it touches the accumulator again, so
            # a collection that hands it the GIL from inside this method cannot let it in.
            self._sharers += 1
            return False
        self._owner = me
        self._depth = 1
        return True

    cdef inline void _leave_sender(self, bint owner):
        if owner:
            self._leave()
        else:
            self._sharers -= 1

    def __init__(self, compression="none", Py_ssize_t batch_size=16384, long long linger_ms=5,
                 Py_ssize_t buffer_memory=33554432, Py_ssize_t max_request_size=1048576, partitioner=None,
                 ignore_keys=False, wakeup=None, Py_ssize_t sticky_partition_bytes=16384):
        codecs.codec_id(compression)  # refuses unknown codecs now, not at the first batch
        self.compression = compression
        self.batch_size = batch_size
        # null-key records move to another partition after this many bytes (KIP-794), or when
        # their batch fills, whichever comes first
        self.sticky_partition_bytes = sticky_partition_bytes
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.max_request_size = max_request_size
        self.partitioner = partitioner
        self.ignore_keys = bool(ignore_keys)
        self.wakeup = wakeup
        self.partition_counts = {}
        self.batches = {}
        self.sticky = {}  # topic -> _Sticky
        # topic -> a batch size below batch.size, learnt from batches the broker refused as too
        # large (split_batch); empty unless that happened
        self.topic_batch_limits = {}
        self.ready = _deque()
        self.buffered = 0
        self.lock = _threading.RLock()  # API parity with the twin; this class uses _enter/_leave

    # -- partition choice -------------------------------------------------------------------
    cdef int _explicit(self, partition, int n, topic) except -1:
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise TypeError(f"partition must be an int, not {type(partition).__name__}")
        if not 0 <= partition < n:
            raise ValueError(f"partition {partition} is not in [0, {n}) for topic {topic!r}")
        return partition

    cdef int _custom(self, topic, key, int n) except -1:
        p = self.partitioner(topic, key, n)
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < n:
            raise ValueError(f"partitioner returned {p!r} for topic {topic!r} with {n} partitions")
        return p

    cdef _Sticky _sticky_of(self, topic, int n):
        cdef object found = self.sticky.get(topic)
        cdef _Sticky st
        if found is None:
            st = _Sticky.__new__(_Sticky)
            st.partition = _random_below(n)
            self.sticky[topic] = st
            return st
        st = <_Sticky>found
        if st.partition >= n:
            st.partition = _random_below(n)
            st.used = 0
        return st

    cdef int _next_sticky(self, _Sticky st, int n) noexcept:
        # KIP-480/794: null-key records go on to another partition, chosen at random
        st.partition = kc_sticky_next(&_rand_state, st.partition, n)
        st.used = 0
        return st.partition

    cdef Py_ssize_t _limit_of(self, topic):
        cdef object lim = self.topic_batch_limits.get(topic)
        return self.batch_size if lim is None else <Py_ssize_t>lim

    def limit_batch_size(self, topic, Py_ssize_t size):
        """Batches of ``topic`` opened from now on are sealed at ``size`` bytes (when that is
        below batch.size): the broker refused a batch of about twice that."""
        self._enter()
        try:
            if size < self.batch_size and size < self._limit_of(topic):
                self.topic_batch_limits[topic] = max(size, ACC_BATCH_OVERHEAD + ACC_RECORD_OVERHEAD)
        finally:
            self._leave()

    cdef int _check_size(self, Py_ssize_t est) except -1:
        cdef Py_ssize_t limit
        if est + ACC_BATCH_OVERHEAD > self.max_request_size or est + ACC_BATCH_OVERHEAD > self.buffer_memory:
            limit = min(self.max_request_size, self.buffer_memory)
            raise _RecordTooLargeError(
                f"the record is {est + ACC_BATCH_OVERHEAD} bytes when serialised, larger than "
                f"{'max.request.size' if limit == self.max_request_size else 'buffer.memory'} ({limit})")
        return 0

    # -- the user side --------------------------------------------------------------------
    def send(self, topic, value, key=None, partition=None, headers=None, timestamp_ms=None, on_delivery=None):
        """The producer's send: the record's RecordHandle. When the record has to wait for
        metadata or memory, ``slow_path`` (the producer's) waits and sends it; a KafkaError
        becomes a FailedHandle (and reaches ``on_delivery``)."""
        try:
            h = self._try_send(topic, value, key, partition, headers, timestamp_ms, on_delivery)
            if h is _NEED_METADATA or h is _NEED_MEMORY:
                if self.slow_path is None:
                    return h
                return self.slow_path(topic, value, key, partition, headers, timestamp_ms, on_delivery, h)
            return h
        except _KafkaError as e:
            if on_delivery is not None:
                on_delivery(e, None)
            return FailedHandle(e)

    def try_send(self, topic, value, key=None, partition=None, headers=None, timestamp_ms=None, on_delivery=None):
        """Appends one record: its RecordHandle, or NEED_METADATA / NEED_MEMORY."""
        return self._try_send(topic, value, key, partition, headers, timestamp_ms, on_delivery)

    cdef object _try_send(self, topic, value, key, partition, headers, timestamp_ms, on_delivery):
        cdef object n_obj = self.partition_counts.get(topic)
        if n_obj is None:
            return _NEED_METADATA
        cdef int n = n_obj
        cdef int p, index = 0
        cdef _Sticky sticky = None
        cdef Py_ssize_t est
        cdef int64_t ts
        cdef _Arg v, k
        cdef BatchResult result
        cdef RecordHandle h
        self._enter()
        try:
            _arg_get(&v, value, "value")
            try:
                _arg_get(&k, key, "key")
                try:
                    if partition is not None:
                        p = self._explicit(partition, n, topic)
                    elif self.partitioner is not None:
                        p = self._custom(topic, key, n)
                    elif k.length >= 0 and not self.ignore_keys:
                        p = kc_partition_for_hash(kc_murmur2(k.ptr, <size_t>k.length), n)
                    else:
                        sticky = self._sticky_of(topic, n)
                        p = sticky.partition
                    est = ACC_RECORD_OVERHEAD + (v.length if v.length > 0 else 0) + (k.length if k.length > 0 else 0)
                    if headers:
                        est += _headers_estimate(headers)
                    self._check_size(est)
                    ts = _now_ms() if timestamp_ms is None else _timestamp_arg(timestamp_ms)
                    result = self._append(topic, n, p, sticky, &v, &k, headers, ts, on_delivery, est, &index)
                finally:
                    _arg_release(&k)
            finally:
                _arg_release(&v)
        finally:
            self._leave()
        if result is None:
            return _NEED_MEMORY
        h = RecordHandle.__new__(RecordHandle)
        h.batch = result
        h.index = index
        h.timestamp_ms = ts
        if self._wake_pending:
            self._wake()
        return h

    cdef void _wake(self):
        self._wake_pending = False
        if self.wakeup is not None:
            try:
                self.wakeup()
            except Exception:
                pass

    cdef list _parts_of(self, topic, int n):
        """The topic's open batches, one slot per partition (the list object stays the same
        for the accumulator's life, so a loop may keep it)."""
        cdef list parts = self.batches.get(topic)
        cdef Py_ssize_t i
        if parts is None:
            parts = [None] * n
            self.batches[topic] = parts
        elif len(parts) < n:
            for i in range(n - len(parts)):
                parts.append(None)
        return parts

    cdef BatchResult _append(self, topic, int n, int p, _Sticky sticky, _Arg *v, _Arg *k, object headers,
                             int64_t ts, object on_delivery, Py_ssize_t est, int *index_out, list parts=None):
        """Appends one record; its batch's result (index in *index_out), or None when
        buffer.memory is used up. ``parts``: the topic's _parts_of, when the caller has it.
        Calls no Python code except through headers."""
        cdef ProducerBatch batch
        cdef RecordBatchBuilder builder
        cdef BatchResult result
        if self.closed:
            raise _ClientClosedError("the producer is closed")
        if parts is None:
            parts = self._parts_of(topic, n)
        batch = <ProducerBatch>parts[p]
        if batch is not None and batch.count and batch.size + est > batch.limit:
            self._seal(parts, p)
            if sticky is not None:
                p = self._next_sticky(sticky, n)
            batch = <ProducerBatch>parts[p]
        # buffer.memory counts the bytes records take in their batches (as librdkafka does),
        # not batch.size per open batch (as Java's BufferPool does): large batches then cost
        # no memory they do not use, whatever the number of partitions
        if self.buffered and self.buffered + est > self.buffer_memory:
            return None
        if batch is None:
            batch = ProducerBatch.__new__(ProducerBatch)
            batch.topic = topic
            batch.partition = p
            batch.builder = RecordBatchBuilder(self.compression)
            batch.result = BatchResult(topic, p)
            batch.created_ms = _now_ms()
            batch.base_sequence = -1
            batch.size = ACC_BATCH_OVERHEAD
            batch.reserved = ACC_BATCH_OVERHEAD
            batch.limit = self.batch_size if not self.topic_batch_limits else self._limit_of(topic)
            (<RecordBatchBuilder>batch.builder).size_hint = batch.limit
            self.buffered += ACC_BATCH_OVERHEAD
            parts[p] = batch
            # A new batch has a linger deadline the sleeping sender does not know of yet
            # (Java's accumulator wakes the sender on newBatchCreated too).
            self._wake_pending = True
        builder = <RecordBatchBuilder>batch.builder
        if headers:
            builder._add_with_headers(v, k, ts, headers)
        else:
            builder._add(v.ptr, v.length, k.ptr, k.length, ts, NULL, 0)
        index_out[0] = batch.count
        batch.count += 1
        result = batch.result
        result.count = batch.count
        batch.size = <Py_ssize_t>builder.buf.len
        if batch.size > batch.reserved:
            self.buffered += batch.size - batch.reserved
            batch.reserved = batch.size
        if on_delivery is not None:
            if result.callbacks is None:
                result.callbacks = []
            result.callbacks.append((index_out[0], ts, on_delivery))
        if batch.size >= batch.limit:
            self._seal(parts, p)
            if sticky is not None:
                self._next_sticky(sticky, n)
        elif sticky is not None and self.sticky_partition_bytes < self.batch_size:  # else the batch filling moves it
            sticky.used += est
            if sticky.used >= self.sticky_partition_bytes:
                self._next_sticky(sticky, n)
        return result

    cdef inline void _seal(self, list parts, int p):
        self.ready.append(parts[p])
        parts[p] = None
        self._wake_pending = True

    def send_many(self, topic, values, keys=None, partition=None, timestamps_ms=None,
                  Py_ssize_t start=0, BulkHandle handle=None, Py_ssize_t stop=-1):
        """Appends records ``start``..``stop`` of the arrays in one loop; returns -1 when all
        are queued, or the index to resume from (buffer.memory used up, or ``stop`` reached)."""
        cdef object n_obj = self.partition_counts.get(topic)
        if n_obj is None:
            raise ValueError(f"no metadata for topic {topic!r}")
        if handle is None:
            raise TypeError("send_many needs a BulkHandle")
        cdef int n = n_obj, p = 0, index = 0
        cdef _Column vals = _Column(), ks = None
        cdef Py_ssize_t i, end, count
        cdef _Arg v, k
        cdef int64_t ts, now = _now_ms()
        cdef _Sticky sticky, topic_sticky = None
        cdef list parts
        cdef Py_ssize_t est
        cdef BatchResult result
        cdef _BufferRef ts_ref = None
        cdef const int64_t *ts_ptr = NULL
        cdef tuple ts_items = None
        cdef bint fast
        cdef object batch
        cdef Py_ssize_t got
        cdef int run_stop = KC_APPEND_CALLER
        vals.load(values, "values")
        count = vals.length
        if keys is not None:
            ks = _Column()
            ks.load(keys, "keys")
            if ks.length != count:
                raise ValueError(f"keys has {ks.length} items but values has {count}")
        if partition is not None:
            p = self._explicit(partition, n, topic)
        if timestamps_ms is not None:
            if len(timestamps_ms) != count:
                raise ValueError(f"timestamps_ms has {len(timestamps_ms)} items but values has {count}")
            if _is_ndarray(timestamps_ms):
                if timestamps_ms.dtype.kind not in "iu":
                    raise TypeError("timestamps_ms must hold integers")
                ts_arr = _np.array(timestamps_ms, dtype=_np.int64, copy=True)  # aligned and owned
                ts_ref = _BufferRef(ts_arr)
                ts_ptr = <const int64_t *>ts_ref.data
            else:
                ts_items = tuple(timestamps_ms)
        # Runs of values straight from a column's memory, appended natively without the GIL
        # (_append_run); any record a run stops at goes through the loop below.
        fast = ks is None and self.partitioner is None and ts_items is None and vals.kind != 0
        self.released_gil = False
        self._enter()
        try:
            end = count if stop < 0 or stop > count else stop
            i = start
            parts = self._parts_of(topic, n)  # looked up once: the loop holds the accumulator
            while i < end:
                if fast:
                    if partition is None:
                        if topic_sticky is None:
                            topic_sticky = self._sticky_of(topic, n)
                        p = topic_sticky.partition
                    if parts[p] is not None:
                        got = self._append_run(parts, p, n, vals, i, end, ts_ptr, now,
                                               topic_sticky if partition is None else None, handle, &run_stop)
                        i += got
                        if partition is None:
                            p = topic_sticky.partition  # (the run may have moved it)
                        if run_stop == KC_APPEND_SEAL:
                            if parts[p] is not None:  # (drain leaves a filling batch alone: always)
                                self._seal(parts, p)
                            if partition is None:
                                self._next_sticky(topic_sticky, n)
                            continue
                        if run_stop == KC_APPEND_STICKY:
                            self._next_sticky(topic_sticky, n)
                            continue
                        if run_stop == KC_APPEND_SWITCHED:
                            continue
                        if i >= end:
                            break
                vals.get(i, &v, "value")
                try:
                    k.has_view = False
                    k.ptr = NULL
                    k.length = -1
                    if ks is not None:
                        ks.get(i, &k, "key")
                    sticky = None
                    if partition is None:
                        if self.partitioner is not None:
                            p = self._custom(topic, None if k.length < 0 else PyBytes_FromStringAndSize(
                                <const char *>k.ptr, k.length), n)
                        elif k.length >= 0 and not self.ignore_keys:
                            p = kc_partition_for_hash(kc_murmur2(k.ptr, <size_t>k.length), n)
                        else:
                            if topic_sticky is None:
                                topic_sticky = self._sticky_of(topic, n)
                            sticky = topic_sticky
                            p = sticky.partition
                    est = ACC_RECORD_OVERHEAD + (v.length if v.length > 0 else 0) + (k.length if k.length > 0 else 0)
                    self._check_size(est)
                    if ts_ptr != NULL:
                        ts = ts_ptr[i]
                    elif ts_items is not None:
                        ts = _timestamp_arg(ts_items[i])
                    else:
                        ts = now
                    result = self._append(topic, n, p, sticky, &v, &k, None, ts, None, est, &index, parts)
                finally:
                    _arg_release(&k)
                    _arg_release(&v)
                if result is None:
                    return i
                handle._add(result)
                handle.records += 1
                i += 1
        finally:
            self._leave()
            if self._wake_pending:
                self._wake()
        return -1 if end == count else end

    cdef bint _can_run(self, object found) noexcept:
        # an open batch holding a record, which a run may fill (kc_append.h)
        cdef ProducerBatch batch
        cdef RecordBatchBuilder b
        if found is None:
            return False
        batch = <ProducerBatch>found
        b = <RecordBatchBuilder>batch.builder
        return b is not None and not b._exports and not b._sealed and b.count >= 1

    cdef void _run_state(self, ProducerBatch batch, kc_append_state *st, bint budget) noexcept:
        # the run's view of the batch (kc_append.h); ``budget``: the sticky byte budget applies
        cdef RecordBatchBuilder b = <RecordBatchBuilder>batch.builder
        st.buf = b.buf.data
        st.len = b.buf.len
        st.cap = b.buf.cap
        st.count = b.count
        st.base_ts = b.base_ts
        st.max_ts = b.max_ts
        st.limit = <size_t>batch.limit if batch.limit > 0 else 0
        st.reserved = <size_t>batch.reserved
        st.buffered = self.buffered
        st.buffer_memory = self.buffer_memory
        st.max_estimate = min(self.max_request_size, self.buffer_memory) - ACC_BATCH_OVERHEAD
        st.record_overhead = ACC_RECORD_OVERHEAD
        st.sticky_used = 0
        st.sticky_bytes = self.sticky_partition_bytes if budget else 0
        st.grow = 1  # (the builder's buffer is its own: not exported, not sealed)
        st.pooled = b._pooled
        st.size_hint = <size_t>b.size_hint if b.size_hint > 0 else 0

    cdef void _run_done(self, ProducerBatch batch, const kc_append_state *st) noexcept:
        # the batch after a run appended to it: its builder and accounting as appends leave them
        cdef RecordBatchBuilder b = <RecordBatchBuilder>batch.builder
        b.buf.data = st.buf  # (the run may have grown it: kc_batch_grow)
        b.buf.cap = st.cap
        b._pooled = st.pooled
        b.buf.len = st.len
        b.count = st.count
        b.max_ts = st.max_ts
        batch.count = st.count
        batch.size = <Py_ssize_t>st.len
        batch.reserved = <Py_ssize_t>st.reserved
        batch.result.count = batch.count

    cdef Py_ssize_t _append_run(self, list parts, int p, int n, _Column vals, Py_ssize_t i, Py_ssize_t end,
                                const int64_t *ts_ptr, int64_t now, _Sticky sticky, BulkHandle handle,
                                int *stop) except -1:
        """Appends values i.. of ``vals`` to the open batch of partition ``p`` as one-record
        appends would, until a record needs the caller (kc_append.h): the number appended,
        *stop why it stopped. Null-key records (``sticky``) follow the sticky partitioner from
        batch to batch of the topic's open ones (sticky.partition is left where they went). A long
        run lets the GIL go, so that the sender (and an embedded broker) work meanwhile; its
        batches stay the accumulator's and drain leaves them alone."""
        global _rand_state
        cdef kc_append_state states[ACC_RUN_PARTITIONS]
        cdef ProducerBatch batch
        cdef int32_t order[ACC_RUN_PARTITIONS]
        cdef int32_t n_order = 0
        cdef int32_t n_states = 1
        cdef int32_t part = p
        cdef int32_t q
        cdef kc_value_column col
        cdef int64_t k
        cdef int64_t buffered_before = self.buffered
        cdef int64_t buffered = buffered_before
        cdef int64_t sticky_used = 0
        cdef uint32_t rand_state = _rand_state
        # the sticky budget applies below batch.size (above it, a full batch moves the partition)
        cdef bint budget = sticky is not None and self.sticky_partition_bytes < self.batch_size
        cdef bint follow = budget and p < ACC_RUN_PARTITIONS
        cdef bint nogil_run = end - i >= ACC_NOGIL_RUN
        stop[0] = KC_APPEND_CALLER
        if self.closed or vals.kind == 0 or not self._can_run(parts[p]):
            return 0
        if self._wake_pending:  # the sender may drain sealed batches during the run
            self._wake()
        col.data = vals.data
        col.off32 = vals.off32 if vals.kind == 2 else NULL
        col.off64 = vals.off64 if vals.kind == 3 else NULL
        col.validity = vals.validity if vals.kind != 1 else NULL
        col.offset = vals.offset if vals.kind != 1 else 0
        col.width = <int32_t>vals.width if vals.kind == 1 else 0
        if follow:
            n_states = min(n, ACC_RUN_PARTITIONS)
            sticky_used = sticky.used
        else:
            part = 0  # states[0] is partition p's batch
        for q in range(n_states):
            found = parts[q if follow else p]
            if self._can_run(found):
                self._run_state(<ProducerBatch>found, &states[q], budget)
                if nogil_run:
                    (<ProducerBatch>found).filling = True
            else:
                states[q].buf = NULL
        if not follow and budget:
            states[0].sticky_used = sticky.used
        if nogil_run:
            self.released_gil = True
            self._filling = True
            with nogil:
                if follow:
                    k = kc_append_sticky_runs(states, n_states, n, &part, &buffered, &sticky_used, &rand_state,
                                              &col, i, end, ts_ptr, now, order, &n_order, stop)
                else:
                    k = kc_append_run(&states[0], &col, i, end, ts_ptr, now, stop)
            while self._sharers:  # a sender method interrupted by a collection: let it end
                with nogil:
                    usleep(20)
            self._filling = False
            for q in range(n_states):
                if states[q].buf != NULL:
                    (<ProducerBatch>parts[q if follow else p]).filling = False
        elif follow:
            k = kc_append_sticky_runs(states, n_states, n, &part, &buffered, &sticky_used, &rand_state,
                                      &col, i, end, ts_ptr, now, order, &n_order, stop)
        else:
            k = kc_append_run(&states[0], &col, i, end, ts_ptr, now, stop)
        if not follow:
            if k:
                order[0] = 0
                n_order = 1
            buffered = states[0].buffered
            if budget:
                sticky.used = states[0].sticky_used
        else:
            _rand_state = rand_state  # (the draws the one-record path would have made)
            sticky.partition = part
            sticky.used = sticky_used
        for q in range(n_order):
            batch = <ProducerBatch>parts[order[q] if follow else p]
            self._run_done(batch, &states[order[q]])
            handle._add(batch.result)
        self.buffered += buffered - buffered_before  # release() may have run meanwhile
        handle.records += k
        return k

    # -- the sender side ------------------------------------------------------------------
    def drain(self, long long now, force=False, hold=None):
        """Batches to send now: the sealed ones and those open for linger.ms (all when
        ``force``). Open batches of the (topic, partition)s in ``hold`` stay open: the sender
        still has a batch of theirs waiting, so they keep filling (as Java's accumulator does
        while a node cannot take another request)."""
        cdef list out
        cdef list parts
        cdef ProducerBatch b
        cdef Py_ssize_t i
        cdef bint f = bool(force)
        cdef bint owner = self._enter_sender()
        try:
            out = list(self.ready)
            self.ready.clear()
            for parts in self.batches.values():
                for i in range(len(parts)):
                    b = <ProducerBatch>parts[i]
                    if b is not None and (f or now - b.created_ms >= self.linger_ms):
                        if b.filling or (hold and (b.topic, b.partition) in hold):
                            continue
                        parts[i] = None
                        out.append(b)
            return out
        finally:
            self._leave_sender(owner)

    def next_ready_ms(self):
        """When the oldest open batch reaches linger.ms (None when nothing is open)."""
        cdef list parts
        cdef ProducerBatch b
        cdef long long oldest = -1
        cdef bint owner = self._enter_sender()
        try:
            if self.ready:
                return 0
            for parts in self.batches.values():
                for b in parts:
                    if b is not None and (oldest < 0 or b.created_ms < oldest):
                        oldest = b.created_ms
            return None if oldest < 0 else oldest + self.linger_ms
        finally:
            self._leave_sender(owner)

    def pending_results(self):
        """The BatchResults of every batch still in the accumulator (for flush)."""
        cdef bint owner = self._enter_sender()
        try:
            out = [(<ProducerBatch>b).result for b in self.ready]
            for parts in self.batches.values():
                for b in parts:
                    if b is not None:
                        out.append((<ProducerBatch>b).result)
            return out
        finally:
            self._leave_sender(owner)

    def has_unsent(self):
        cdef bint owner = self._enter_sender()
        try:
            if self.ready:
                return True
            for parts in self.batches.values():
                for b in parts:
                    if b is not None:
                        return True
            return False
        finally:
            self._leave_sender(owner)

    def close(self):
        self._enter()
        self.closed = True
        self._leave()

    def release(self, ProducerBatch batch):
        """The batch is finished (acknowledged or failed): give its memory back."""
        cdef bint owner = self._enter_sender()
        self.buffered -= batch.reserved
        batch.reserved = 0
        self._leave_sender(owner)
        if self.on_release is not None:  # outside the mutex: it takes the producer's lock
            self.on_release()

    def abort_all(self, error):
        """Fails every batch still in the accumulator (close without flush, fatal errors),
        the one a send_many is filling too: it waits for the ownership, as drain does not."""
        self._enter()
        try:
            batches = self.drain(0, True)
        finally:
            self._leave()
        for b in batches:
            self.release(b)
            (<ProducerBatch>b).result.complete(-1, -1, error)


cdef Py_ssize_t _headers_estimate(headers) except -1:
    cdef Py_ssize_t total = 5
    for item in headers:
        try:
            hk, hv = item
        except (TypeError, ValueError):
            raise TypeError("headers must be a list of (key, value) pairs") from None
        total += 10 + (len(hk.encode()) if isinstance(hk, str) else (len(hk) if hk is not None else 0))
        if hv is not None:
            total += len(hv) if not isinstance(hv, memoryview) else hv.nbytes
    return total
