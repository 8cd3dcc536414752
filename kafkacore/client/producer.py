"""kafkacore.Producer: Kafka's producer with the Java client's config names and defaults.

    p = Producer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5, "compression.type": "lz4"})
    h = p.send("topic", b"value", key=b"k")      # a RecordHandle
    h.result(timeout=10)                          # RecordMetadata(topic, partition, offset, timestamp_ms)
    p.send("topic", b"v", on_delivery=cb)         # cb(err, metadata), run on the sender thread
    p.send_many("topic", values, keys=None)       # lists, numpy or Arrow arrays, in one native loop
    p.flush(timeout=None); p.close()

``send`` runs in the accumulator (native: kafkacore._ext.records); the sender thread
(kafkacore/client/sender.py) does everything that touches the network. Errors that stop a
record before it reaches a batch (too large, no metadata within max.block.ms, a bad
partition) come back through its handle and callback, as the Java producer reports them
through its future, so a send loop never has to catch.
"""
from __future__ import annotations

import threading
import time

from .._loader import load_native
from ..errors import ClientClosedError, KafkaConfigError, KafkaError, KafkaTimeoutError
from . import accumulator_py
from .cluster import Cluster
from .security import client_security
from .config import STICKY_PARTITION_BYTES, producer_config
from .sender import Sender
from .transaction_manager import IN_TRANSACTION, TransactionManager

_native = load_native("records")
if _native is not None:
    RecordAccumulator = _native.RecordAccumulator
    RecordHandle = _native.RecordHandle
    FailedHandle = _native.FailedHandle
    BulkHandle = _native.BulkHandle
    NEED_METADATA, NEED_MEMORY = _native.NEED_METADATA, _native.NEED_MEMORY
else:
    RecordAccumulator = accumulator_py.RecordAccumulator
    RecordHandle = accumulator_py.RecordHandle
    FailedHandle = accumulator_py.FailedHandle
    BulkHandle = accumulator_py.BulkHandle
    NEED_METADATA, NEED_MEMORY = accumulator_py.NEED_METADATA, accumulator_py.NEED_MEMORY
RecordMetadata = accumulator_py.RecordMetadata
# send_many hands the GIL to the sender between chunks of this many records, so batches
# start travelling while the rest are still being written (unless the chunk's runs did).
SEND_MANY_CHUNK = 16384


class Producer:
    def __init__(self, config: dict | None = None, *, _embedded=None):
        self.config = c = producer_config(config, bootstrap_required=_embedded is None)
        partitioner = c["partitioner"] if callable(c["partitioner"]) else None
        self._max_block = c["max.block.ms"] / 1000.0
        self._closed = False
        self._memory = threading.Condition(threading.Lock())
        self._acc = RecordAccumulator(
            compression=c["compression.type"], batch_size=c["batch.size"], linger_ms=c["linger.ms"],
            buffer_memory=c["buffer.memory"], max_request_size=c["max.request.size"],
            partitioner=partitioner, ignore_keys=c["partitioner.ignore.keys"],
            sticky_partition_bytes=min(c["batch.size"], STICKY_PARTITION_BYTES))
        if _embedded is not None:  # kafkacore.Broker: requests go straight to its handlers
            self._cluster = _embedded.cluster_view()
        else:
            self._cluster = Cluster(c["bootstrap.servers"], c["client.id"] or "kafkacore-producer",
                                    c["request.timeout.ms"], c["metadata.max.age.ms"],
                                    c["socket.connection.setup.timeout.ms"], c["send.buffer.bytes"],
                                    c["receive.buffer.bytes"], security=client_security(c))
        self._sender = Sender(c, self._cluster, self._acc)
        self._acc.wakeup = self._sender.wakeup
        self._acc.on_release = self._memory_released
        self._acc.slow_path = self._send_slow
        # The common case runs entirely in the accumulator: bind its send on the instance,
        # saving a Python-level call per record. It comes back here (slow_path) only when it
        # must wait for metadata or memory.
        self.send = self._acc.send
        self._txn = None
        if c["transactional.id"] is not None:
            self._txn = TransactionManager(c, self._cluster)
            self._sender.txn = self._txn
            self.send = self._send_in_transaction
        self._sender.start()

    # -- sending --------------------------------------------------------------------------
    def send(self, topic, value, key=None, partition=None, headers=None, timestamp_ms=None, on_delivery=None):
        """Queues one record; returns its RecordHandle (``result(timeout)`` -> RecordMetadata).

        Errors that stop the record before it reaches a batch (too large, no metadata within
        max.block.ms) come back through the handle and ``on_delivery``; bad arguments (a
        partition out of range, a str value) raise here. (Replaced on each instance by the
        accumulator's own send, which behaves exactly like this.)"""
        return self._acc.send(topic, value, key, partition, headers, timestamp_ms, on_delivery)

    def _send_slow(self, topic, value, key, partition, headers, timestamp_ms, on_delivery, why):
        """The accumulator could not take the record (``why``: NEED_METADATA or NEED_MEMORY):
        wait up to max.block.ms for what it needs and try again."""
        try:
            return self._wait_and_send(topic, value, key, partition, headers, timestamp_ms, on_delivery, why)
        except KafkaError as e:
            return self._failed(e, on_delivery)

    def _wait_and_send(self, topic, value, key, partition, headers, timestamp_ms, on_delivery, why):
        deadline = time.monotonic() + self._max_block
        while True:
            if self._closed:
                raise ClientClosedError("the producer is closed")
            if self._sender.fatal is not None:
                raise self._sender.fatal
            left = deadline - time.monotonic()
            if why is NEED_METADATA:
                self._await_metadata(topic, max(left, 0.0))
            elif why is NEED_MEMORY:
                self._await_memory(deadline)
            why = self._acc.try_send(topic, value, key, partition, headers, timestamp_ms, on_delivery)
            if why is not NEED_METADATA and why is not NEED_MEMORY:
                return why
            if time.monotonic() >= deadline:
                if why is NEED_MEMORY:
                    raise KafkaTimeoutError(
                        f"failed to allocate memory within max.block.ms={self.config['max.block.ms']} "
                        f"(buffer.memory={self.config['buffer.memory']} is in use)")
                raise KafkaTimeoutError(f"topic {topic!r} not present in metadata after "
                                        f"{self.config['max.block.ms']} ms")

    def _await_metadata(self, topic, timeout):
        n = self._cluster.wait_for_topic(topic, timeout, allow_auto_create=True)
        self._acc.partition_counts[topic] = n

    def _await_memory(self, deadline):
        with self._memory:
            self._memory.wait(max(0.0, min(0.05, deadline - time.monotonic())))

    def _memory_released(self):
        with self._memory:
            self._memory.notify_all()

    @staticmethod
    def _failed(error, on_delivery):
        if on_delivery is not None:
            on_delivery(error, None)
        return FailedHandle(error)

    def send_many(self, topic, values, keys=None, partition=None, timestamps_ms=None):
        """Queues many records in one native loop: ``values`` (and ``keys``) as lists of bytes,
        numpy arrays (object or fixed-width bytes) or Arrow binary/string arrays. Returns a
        BulkHandle: ``result(timeout)`` waits for every batch and returns the number of records
        written, or raises the first error."""
        if self._acc.partition_counts.get(topic) is None:
            self._await_metadata(topic, self._max_block)
        # The accumulator reads lists as tuples; convert once here, not once per chunk.
        if isinstance(values, list):
            values = tuple(values)
        if isinstance(keys, list):
            keys = tuple(keys)
        deadline = time.monotonic() + self._max_block
        handle = BulkHandle()
        start = 0
        while True:
            stop = start + SEND_MANY_CHUNK
            nxt = self._acc.send_many(topic, values, keys, partition, timestamps_ms, start, handle, stop)
            if nxt < 0:
                return handle
            if nxt < stop:  # stopped early: buffer.memory is used up
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(
                        f"failed to allocate memory within max.block.ms={self.config['max.block.ms']}")
                self._await_memory(deadline)
            else:
                deadline = time.monotonic() + self._max_block
                if not self._acc.released_gil:
                    # let the sender take the GIL (runs of a column let it go as they append;
                    # sleep(0) can then wait a whole switch interval to get it back)
                    time.sleep(0)
            start = nxt

    # -- transactions (confluent-kafka's names; docs/transactions.md §9.1) -------------------
    def _send_in_transaction(self, topic, value, key=None, partition=None, headers=None, timestamp_ms=None,
                             on_delivery=None):
        txn = self._txn
        if not txn.in_transaction:
            txn._raise_if_failed((IN_TRANSACTION,))
        return self._acc.send(topic, value, key, partition, headers, timestamp_ms, on_delivery)

    def _require_txn(self):
        if self._txn is None:
            raise KafkaConfigError("transactions need transactional.id in the producer's config")
        return self._txn

    def init_transactions(self, timeout: float | None = None) -> None:
        """Registers transactional.id with its coordinator: fences any previous producer with
        the same id (its open transaction is aborted) and gets this one's producer id and epoch."""
        self._require_txn().init(self._timeout(timeout))
        self._sender.wakeup()

    def begin_transaction(self) -> None:
        self._require_txn().begin()

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout: float | None = None) -> None:
        """Commits a consumer group's ``offsets`` ({(topic, partition): next offset} or
        [(topic, partition, offset)]) as part of the transaction; ``group_metadata`` from
        Consumer.consumer_group_metadata()."""
        if not isinstance(offsets, dict):
            offsets = {(t, p): o for t, p, o in offsets}
        self._require_txn().send_offsets(offsets, group_metadata, self._timeout(timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Sends every record of the transaction, then commits it. A record that failed makes
        this raise an error with ``txn_requires_abort`` (call abort_transaction); ``fatal``
        errors (fenced) mean the producer must be closed."""
        txn = self._require_txn()
        txn._raise_if_failed((IN_TRANSACTION,))
        deadline = time.monotonic() + self._timeout(timeout)
        left = self.flush(max(0.0, deadline - time.monotonic()))
        if left:
            raise KafkaTimeoutError(f"{left} record(s) of the transaction still unsent after the timeout; "
                                    f"retry commit_transaction or abort it")
        txn.end(True, max(0.1, deadline - time.monotonic()))

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drops the records not yet sent, waits for those in flight, and aborts the
        transaction: read_committed consumers never see any of it."""
        txn = self._require_txn()
        deadline = time.monotonic() + self._timeout(timeout)
        err = KafkaError("the transaction was aborted before the record was sent")
        err.txn_requires_abort = True
        self._sender.purge_error = err
        self._sender.wakeup()
        left = self.flush(max(0.0, deadline - time.monotonic()))
        if left:
            raise KafkaTimeoutError(f"{left} record(s) still in flight after the timeout; retry abort_transaction")
        txn.end(False, max(0.1, deadline - time.monotonic()))

    def _timeout(self, timeout):
        return self._max_block if timeout is None else float(timeout)

    # -- lifecycle ------------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> int:
        """Sends every queued record and waits for the answers. Returns the number of records
        still unacknowledged when ``timeout`` (seconds) ran out: 0 means all were handled."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._sender.force_flush += 1
        try:
            # One snapshot of the accumulator's batches and the sender's unfinished ones, taken
            # under the lock the sender drains under: every record sent before this call is in
            # one of them, whatever moves meanwhile.
            results = self._sender.pending_results()
            self._sender.wakeup()
            pending = 0
            for r in results:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not r.wait(left):
                    pending += r.count
            return pending
        finally:
            self._sender.force_flush -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flushes (up to ``timeout``), stops the sender and fails what is left."""
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._closed = True
            self._acc.close()
            self._sender.stop()
            self._sender.join(None if timeout is None else max(timeout, 1.0))
            self._cluster.close()

    def partitions_for(self, topic) -> list[int]:
        n = self._acc.partition_counts.get(topic)
        if n is None:
            self._await_metadata(topic, self._max_block)
            n = self._acc.partition_counts[topic]
        return list(range(n))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self._closed:
                self._sender.stop()
        except Exception:
            pass
