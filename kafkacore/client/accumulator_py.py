"""The producer's record accumulator, in pure Python: the twin of the compiled one in
bindings/accumulator.pxi (kafkacore._ext.records), used with KAFKACORE_NO_EXTENSIONS=1.

One open batch per partition; ``send`` partitions a record (explicit partition, a custom
partitioner, murmur2 of the key as Kafka's Java client does, or the sticky partition for null
keys, KIP-480), writes it into the partition's batch and returns a RecordHandle. Handles share
one BatchResult per batch; a record's offset is the batch's base offset plus its index, worked
out when asked for. The sender thread ``drain``s batches that are full or past linger.ms.

``send`` returns NEED_METADATA (the topic's partition count is unknown) or NEED_MEMORY
(buffer.memory is used up) instead of a handle when the caller must wait; the Producer waits
(up to max.block.ms) and calls again.
"""
from __future__ import annotations

import random
import threading
import time
from collections import deque

from ..clock import wall_ms
from ..errors import KafkaError, KafkaTimeoutError, RecordTooLargeError
from ..partitioner import murmur2
from ..record import RecordBatchBuilder
from ..record.layout import RECORD_BATCH_OVERHEAD

NEED_METADATA = "need-metadata"
NEED_MEMORY = "need-memory"
# A record's worst-case framing beyond key and value (length, attributes, deltas, counts).
RECORD_OVERHEAD = 21



class RecordMetadata:
    """Where a record was written: topic, partition, offset, timestamp_ms."""

    __slots__ = ("topic", "partition", "offset", "timestamp_ms")

    def __init__(self, topic, partition, offset, timestamp_ms):
        self.topic, self.partition, self.offset, self.timestamp_ms = topic, partition, offset, timestamp_ms

    def __repr__(self):
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
                f"timestamp_ms={self.timestamp_ms})")

    def __eq__(self, other):
        return isinstance(other, RecordMetadata) and (self.topic, self.partition, self.offset, self.timestamp_ms) == (
            other.topic, other.partition, other.offset, other.timestamp_ms)

    __hash__ = None


class BatchResult:
    """The outcome of one batch, shared by the handles of its records. A batch the broker
    refused as too large is sent again in parts (``split``): each part has its own result, and
    this one completes once they all have; a record's offset and error are then its part's."""

    __slots__ = ("topic", "partition", "base_offset", "log_append_time", "error", "_event", "callbacks", "count",
                 "parts", "_whole", "_parts_left")

    def __init__(self, topic, partition):
        self.topic, self.partition = topic, partition
        self.count = 0  # records in the batch
        self.base_offset = -1
        self.log_append_time = -1
        self.error = None
        self._event = threading.Event()
        self.callbacks = None  # [(index, timestamp, callback)] for records sent with on_delivery
        self.parts = None  # [(index of the part's first record, its BatchResult)] once split
        self._whole = None  # the result this one is a part of

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout=None) -> bool:
        return self._event.wait(timeout)

    def complete(self, base_offset, log_append_time, error):
        """Called once by the sender: records the outcome, wakes waiters, runs callbacks."""
        self.base_offset, self.log_append_time, self.error = base_offset, log_append_time, error
        if self._whole is not None:
            # the whole first: whoever waited for this part (flush) then finds it done too
            self._whole._part_done()
        self._event.set()
        if self.callbacks:
            callbacks, self.callbacks = self.callbacks, None  # each runs once
            for index, ts, cb in callbacks:
                err = self.error_of(index)
                _run_callback(cb, err, None if err is not None else self.metadata(index, ts))

    def split(self, counts):
        """The records go out again as parts of ``counts`` records each, in order: their new
        results (this one completes when they all have)."""
        if sum(counts) != self.count or self.parts is not None:
            raise ValueError(f"cannot split {self.count} records into {list(counts)}")
        parts, first = [], 0
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
        self._parts_left -= 1
        if self._parts_left:
            return
        error = next((r.error for _first, r in self.parts if r.error is not None), None)
        head = self.parts[0][1]
        self.complete(head.base_offset, head.log_append_time, error)

    def _part_of(self, index):
        for first, part in reversed(self.parts):
            if index >= first:
                return first, part
        return self.parts[0]

    def error_of(self, index):
        """The error of the record at ``index`` (None: it was written)."""
        if self.parts is None:
            return self.error
        first, part = self._part_of(index)
        return part.error_of(index - first)

    def metadata(self, index, timestamp_ms):
        if self.parts is not None:
            first, part = self._part_of(index)
            return part.metadata(index - first, timestamp_ms)
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        ts = self.log_append_time if self.log_append_time >= 0 else timestamp_ms
        return RecordMetadata(self.topic, self.partition, offset, ts)


def _run_callback(cb, err, md):
    try:
        cb(err, md)
    except Exception:  # a user callback must not kill the sender
        import logging
        logging.getLogger("kafkacore.producer").exception("on_delivery callback raised")


class RecordHandle:
    """A future for one sent record."""

    __slots__ = ("batch", "index", "timestamp_ms")

    def __init__(self, batch, index, timestamp_ms):
        self.batch, self.index, self.timestamp_ms = batch, index, timestamp_ms

    def done(self) -> bool:
        return self.batch.done()

    def result(self, timeout=None) -> RecordMetadata:
        """The record's RecordMetadata once the broker acknowledged it; raises its error, or
        KafkaTimeoutError when ``timeout`` (seconds) passes first."""
        if not self.batch.wait(timeout):
            raise KafkaTimeoutError(f"record not acknowledged within {timeout} s")
        err = self.batch.error_of(self.index)
        if err is not None:
            raise err
        return self.batch.metadata(self.index, self.timestamp_ms)

    def exception(self, timeout=None):
        if not self.batch.wait(timeout):
            raise KafkaTimeoutError(f"record not acknowledged within {timeout} s")
        return self.batch.error_of(self.index)

    def __repr__(self):
        state = "pending" if not self.done() else ("failed" if self.batch.error_of(self.index) else "done")
        return f"<RecordHandle {self.batch.topic}[{self.batch.partition}] #{self.index} {state}>"


class FailedHandle:
    """The handle of a record refused before it reached a batch (too large, no metadata...)."""

    __slots__ = ("error",)

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


class BulkHandle:
    """The handle of a ``send_many``: the results of the batches its records went into."""

    __slots__ = ("results", "records")

    def __init__(self):
        self.results = {}  # BatchResult -> None, in order (a dict: a batch is listed once)
        self.records = 0

    def add(self, result):
        self.results[result] = None

    def done(self) -> bool:
        return all(r.done() for r in self.results)

    def result(self, timeout=None) -> int:
        """Waits for every batch; the number of records written, or the first error."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for r in self.results:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not r.wait(left):
                raise KafkaTimeoutError(f"records not acknowledged within {timeout} s")
        for r in self.results:
            if r.error is not None:
                raise r.error
        return self.records

    def __repr__(self):
        return f"<BulkHandle {self.records} records in {len(self.results)} batches>"


class ProducerBatch:
    """One batch on its way: the builder while open, then the built bytes, retries, outcome."""

    __slots__ = ("topic", "partition", "builder", "result", "created_ms", "size", "count", "data",
                 "attempts", "base_sequence", "retry_at", "reserved", "limit")

    def __init__(self, topic=None, partition=0, builder=None, created_ms=0, limit=0):
        self.topic, self.partition, self.builder = topic, partition, builder
        self.limit = limit  # sealed at this size
        self.result = BatchResult(topic, partition)
        self.created_ms = created_ms
        self.size = RECORD_BATCH_OVERHEAD
        self.count = 0
        self.data = None
        self.attempts = 0
        self.base_sequence = -1
        self.retry_at = 0
        self.reserved = 0  # bytes of buffer.memory this batch holds

    def __repr__(self):
        return f"<ProducerBatch {self.topic}[{self.partition}] {self.count} records seq {self.base_sequence}>"


class RecordAccumulator:
    def __init__(self, compression="none", batch_size=16384, linger_ms=5, buffer_memory=33554432,
                 max_request_size=1048576, partitioner=None, ignore_keys=False, wakeup=None,
                 sticky_partition_bytes=16384):
        self.compression = compression
        self.batch_size = batch_size
        # null-key records move to another partition after this many bytes (KIP-794), or when
        # their batch fills, whichever comes first
        self.sticky_partition_bytes = sticky_partition_bytes
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.max_request_size = max_request_size
        self.partitioner = partitioner  # None: Kafka's default; else callable(topic, key, n)
        self.ignore_keys = ignore_keys
        self.wakeup = wakeup  # called when a batch becomes ready (the sender may be asleep)
        self.on_release = None  # called when buffer.memory is given back
        self.slow_path = None  # the producer's wait-and-retry for NEED_METADATA / NEED_MEMORY
        self.partition_counts: dict[str, int] = {}
        self.batches: dict[str, list] = {}  # topic -> [open batch or None] per partition
        self.sticky: dict[str, int] = {}
        self.sticky_bytes: dict[str, int] = {}  # topic -> bytes sent to its sticky partition
        # topic -> a batch size below batch.size, learnt from batches the broker refused as too
        # large (split_batch); empty unless that happened
        self.topic_batch_limits: dict[str, int] = {}
        self.ready: deque = deque()
        self.buffered = 0  # bytes in batches not yet completed (buffer.memory)
        self.lock = threading.RLock()
        self.closed = False
        self.released_gil = False  # (the compiled send_many's runs may; this one never does)

    # -- the user side --------------------------------------------------------------------
    def send(self, topic, value, key=None, partition=None, headers=None, timestamp_ms=None, on_delivery=None):
        """The producer's send: the record's RecordHandle. When the record has to wait for
        metadata or memory, ``slow_path`` (the producer's) waits and sends it; a KafkaError
        becomes a FailedHandle (and reaches ``on_delivery``)."""
        try:
            h = self.try_send(topic, value, key, partition, headers, timestamp_ms, on_delivery)
            if h is NEED_METADATA or h is NEED_MEMORY:
                if self.slow_path is None:
                    return h
                return self.slow_path(topic, value, key, partition, headers, timestamp_ms, on_delivery, h)
            return h
        except KafkaError as e:
            if on_delivery is not None:
                on_delivery(e, None)
            return FailedHandle(e)

    def try_send(self, topic, value, key=None, partition=None, headers=None, timestamp_ms=None, on_delivery=None):
        """Appends one record: its RecordHandle, or NEED_METADATA / NEED_MEMORY."""
        n = self.partition_counts.get(topic)
        if n is None:
            return NEED_METADATA
        partition, sticky = self._choose_partition(topic, key, partition, n)
        est = RECORD_OVERHEAD + _length(value) + _length(key) + _headers_size(headers)
        self._check_size(est)
        with self.lock:
            return self._append(topic, n, partition, sticky, value, key, headers, timestamp_ms, on_delivery, est)

    def _choose_partition(self, topic, key, partition, n):
        if partition is not None:
            if isinstance(partition, bool) or not isinstance(partition, int):
                raise TypeError(f"partition must be an int, not {type(partition).__name__}")
            if not 0 <= partition < n:
                raise ValueError(f"partition {partition} is not in [0, {n}) for topic {topic!r}")
            return partition, False
        if self.partitioner is not None:
            partition = self.partitioner(topic, key, n)
            if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < n:
                raise ValueError(f"partitioner returned {partition!r} for topic {topic!r} with {n} partitions")
            return partition, False
        if key is not None and not self.ignore_keys:
            return (murmur2(key) & 0x7FFFFFFF) % n, False
        partition = self.sticky.get(topic)
        if partition is None or partition >= n:
            partition = self.sticky[topic] = random.randrange(n)
        return partition, True

    def _check_size(self, est):
        if est + RECORD_BATCH_OVERHEAD > self.max_request_size or est + RECORD_BATCH_OVERHEAD > self.buffer_memory:
            limit = min(self.max_request_size, self.buffer_memory)
            raise RecordTooLargeError(
                f"the record is {est + RECORD_BATCH_OVERHEAD} bytes when serialised, larger than "
                f"{'max.request.size' if limit == self.max_request_size else 'buffer.memory'} ({limit})")

    def _append(self, topic, n, partition, sticky, value, key, headers, timestamp_ms, on_delivery, est):
        """Appends under the lock; the handle, or NEED_MEMORY."""
        if self.closed:
            from ..errors import ClientClosedError
            raise ClientClosedError("the producer is closed")
        parts = self.batches.get(topic)
        if parts is None or len(parts) < n:
            parts = self.batches[topic] = (parts or []) + [None] * (n - len(parts or []))
        batch = parts[partition]
        if batch is not None and batch.count and batch.size + est > batch.limit:
            self._seal(parts, partition)
            if sticky:
                partition = self._next_sticky(topic, n, partition)
            batch = parts[partition]
        # buffer.memory counts the bytes records take in their batches (as librdkafka does),
        # not batch.size per open batch (as Java's BufferPool does)
        if self.buffered and self.buffered + est > self.buffer_memory:
            return NEED_MEMORY
        if batch is None:
            batch = ProducerBatch(topic, partition, RecordBatchBuilder(self.compression), wall_ms(),
                                  self.topic_batch_limits.get(topic, self.batch_size))
            parts[partition] = batch
            batch.reserved = RECORD_BATCH_OVERHEAD
            self.buffered += RECORD_BATCH_OVERHEAD
            if self.wakeup is not None:  # its linger deadline is news to a sleeping sender
                self.wakeup()
        ts = wall_ms() if timestamp_ms is None else timestamp_ms
        batch.builder.append(value, key, ts, headers)
        index = batch.count
        batch.count += 1
        batch.result.count = batch.count
        batch.size = batch.builder.size_in_bytes
        if batch.size > batch.reserved:
            self.buffered += batch.size - batch.reserved
            batch.reserved = batch.size
        if on_delivery is not None:
            if batch.result.callbacks is None:
                batch.result.callbacks = []
            batch.result.callbacks.append((index, ts, on_delivery))
        result = batch.result
        if batch.size >= batch.limit:
            self._seal(parts, partition)
            if sticky:
                self._next_sticky(topic, n, partition)
        elif sticky and self.sticky_partition_bytes < self.batch_size:  # else the batch filling moves it
            used = self.sticky_bytes.get(topic, 0) + est
            if used >= self.sticky_partition_bytes:
                self._next_sticky(topic, n, partition)
            else:
                self.sticky_bytes[topic] = used
        return RecordHandle(result, index, ts)

    def send_many(self, topic, values, keys=None, partition=None, timestamps_ms=None, start=0, handle=None,
                  stop=-1):
        """Appends records ``start``..``stop`` of the arrays; returns -1 when all are queued, or
        the index to resume from (buffer.memory used up, or ``stop`` reached)."""
        n = self.partition_counts.get(topic)
        if n is None:
            raise ValueError(f"no metadata for topic {topic!r}")
        values = _as_list(values, "values")
        keys = None if keys is None else _as_list(keys, "keys")
        if keys is not None and len(keys) != len(values):
            raise ValueError(f"keys has {len(keys)} items but values has {len(values)}")
        if timestamps_ms is not None:
            timestamps_ms = [int(t) for t in timestamps_ms]
            if len(timestamps_ms) != len(values):
                raise ValueError(f"timestamps_ms has {len(timestamps_ms)} items but values has {len(values)}")
        now = wall_ms()
        end = len(values) if stop < 0 or stop > len(values) else stop
        if partition is not None:
            self._choose_partition(topic, None, partition, n)  # validates it once
        with self.lock:
            for i in range(start, end):
                key = None if keys is None else keys[i]
                p, sticky = self._choose_partition(topic, key, partition, n)
                est = RECORD_OVERHEAD + _length(values[i]) + _length(key)
                self._check_size(est)
                h = self._append(topic, n, p, sticky, values[i], key, None,
                                 now if timestamps_ms is None else timestamps_ms[i], None, est)
                if h is NEED_MEMORY:
                    return i
                handle.add(h.batch)
                handle.records += 1
        return -1 if end == len(values) else end

    def limit_batch_size(self, topic, size):
        """Batches of ``topic`` opened from now on are sealed at ``size`` bytes (when that is
        below batch.size): the broker refused a batch of about twice that."""
        if size < self.batch_size and size < self.topic_batch_limits.get(topic, self.batch_size):
            self.topic_batch_limits[topic] = max(size, RECORD_BATCH_OVERHEAD + RECORD_OVERHEAD)

    def _next_sticky(self, topic, n, current):
        # KIP-480/794: null-key records go on to another partition, chosen at random
        if n > 1:
            p = random.randrange(n - 1)
            current = p if p < current else p + 1
        self.sticky[topic] = current
        self.sticky_bytes[topic] = 0
        return current

    def _seal(self, parts, partition):
        batch = parts[partition]
        parts[partition] = None
        self.ready.append(batch)
        if self.wakeup is not None:
            self.wakeup()

    # -- the sender side ------------------------------------------------------------------
    def drain(self, now: int, force: bool = False, hold=None) -> list:
        """Batches to send now: the sealed ones and those open for linger.ms (all when
        ``force``); open batches of the (topic, partition)s in ``hold`` stay open."""
        with self.lock:
            out = list(self.ready)
            self.ready.clear()
            for topic, parts in self.batches.items():
                for p, batch in enumerate(parts):
                    if batch is not None and (force or now - batch.created_ms >= self.linger_ms):
                        if hold and (topic, p) in hold:
                            continue
                        parts[p] = None
                        out.append(batch)
            return out

    def next_ready_ms(self):
        """When the oldest open batch reaches linger.ms (None when nothing is open)."""
        with self.lock:
            if self.ready:
                return 0
            oldest = None
            for parts in self.batches.values():
                for batch in parts:
                    if batch is not None and (oldest is None or batch.created_ms < oldest):
                        oldest = batch.created_ms
            return None if oldest is None else oldest + self.linger_ms

    def pending_results(self) -> list:
        """The BatchResults of every batch still in the accumulator (for flush)."""
        with self.lock:
            out = [b.result for b in self.ready]
            out += [b.result for parts in self.batches.values() for b in parts if b is not None]
            return out

    def close(self):
        with self.lock:
            self.closed = True

    def has_unsent(self) -> bool:
        with self.lock:
            return bool(self.ready) or any(b is not None for parts in self.batches.values() for b in parts)

    def release(self, batch):
        """The batch is finished (acknowledged or failed): give its memory back."""
        with self.lock:
            self.buffered -= batch.reserved
            batch.reserved = 0
        if self.on_release is not None:
            self.on_release()

    def abort_all(self, error):
        """Fails every batch still in the accumulator (close without flush, fatal errors)."""
        for batch in self.drain(0, force=True):
            self.release(batch)
            batch.result.complete(-1, -1, error)


def _as_list(arr, what) -> list:
    """Values of a list/tuple, numpy array or Arrow array as a list of bytes (or None)."""
    if isinstance(arr, (list, tuple)):
        return list(arr)
    mod = type(arr).__module__
    if mod.startswith("pyarrow"):
        out = arr.to_pylist()
        return [v.encode() if isinstance(v, str) else v for v in out]
    if mod.startswith("numpy"):
        if arr.ndim != 1:
            raise ValueError(f"{what} must be one-dimensional")
        if arr.dtype.kind == "S":
            # Fixed-width bytes: numpy strips trailing NULs on item access; keep the full width.
            width = arr.dtype.itemsize
            raw = arr.tobytes()
            return [raw[i * width:(i + 1) * width] for i in range(len(arr))]
        if arr.dtype.kind == "O":
            return list(arr)
        raise TypeError(f"{what}: numpy arrays of dtype {arr.dtype} are not supported (use bytes or object)")
    return list(arr)


def _length(x) -> int:
    if x is None:
        return 0
    try:
        return len(x) if not isinstance(x, memoryview) else x.nbytes
    except TypeError:
        return 0


def _headers_size(headers) -> int:
    if not headers:
        return 0
    total = 5
    for k, v in headers:
        total += 10 + _length(k.encode() if isinstance(k, str) else k) + _length(v)
    return total
