"""The producer's sender: a background thread that turns ready batches into Produce requests.

Each loop: refresh metadata when something needs it; drain batches that are full or past
linger.ms; give each its producer id and sequence (idempotence) and build it (compression and
CRC run here, off the caller's thread; compressors release the GIL); group the head batch of
every partition by leader into Produce requests of at most max.request.size, with at most
max.in.flight.requests.per.connection requests per broker; then wait on the sockets (and a
wake-up pipe) until a response, a linger deadline or a retry is due.

Retries keep a partition's batches in sequence order, so that with idempotence a retry is
never written twice nor out of order: when a batch fails with a retriable error, the batches of
the same partition sent after it come back as OUT_OF_ORDER_SEQUENCE_NUMBER and are queued again
behind it. A lost connection (a broker restart) queues everything that was in flight on it.
"""
from __future__ import annotations

import logging
import struct
import threading
import time
from collections import deque

from ..clock import wall_ms
from ..checksum import crc32c
from ..errors import (STALE_METADATA_ERRORS, ClientClosedError, CoordinatorLoadInProgressError,
                      CoordinatorNotAvailableError, CorruptMessageError, DuplicateSequenceNumberError,
                      InvalidProducerEpochError, KafkaError, KafkaStorageError, KafkaTimeoutError,
                      NetworkExceptionError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                      OutOfOrderSequenceNumberError, ProducerFencedError, RequestTimedOutError, UnknownProducerIdError,
                      error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from ..record.layout import (ATTRIBUTES_OFFSET, BASE_SEQUENCE_OFFSET, CRC_OFFSET, PRODUCER_EPOCH_OFFSET,
                             PRODUCER_ID_OFFSET)
from .backoff import FailureBackoff
from .batch_split import SPLIT_ERRORS, split_batch
from .connection import ConnectionClosed
from .wake_pipe import WakePipe

log = logging.getLogger("kafkacore.producer")

_ProduceRequest = request_class(ApiKey.PRODUCE)
_InitProducerIdRequest = request_class(ApiKey.INIT_PRODUCER_ID)
_pm = __import__("kafkacore.protocol.messages.produce_request", fromlist=["x"])
_TopicProduceData, _PartitionProduceData = _pm.TopicProduceData, _pm.PartitionProduceData

# Errors after which a batch is sent again (Kafka's RetriableException family): a stale view of
# the cluster (metadata refreshed first), and corrupt batches, timeouts, coordinators moving,
# too few replicas and storage errors
_RETRIABLE = STALE_METADATA_ERRORS | {
    CorruptMessageError.code, RequestTimedOutError.code, NetworkExceptionError.code,
    CoordinatorLoadInProgressError.code, CoordinatorNotAvailableError.code, NotEnoughReplicasError.code,
    NotEnoughReplicasAfterAppendError.code, KafkaStorageError.code}
# Errors that say the producer's id or epoch is no longer good: sequences do not matter then.
_FENCING = {InvalidProducerEpochError.code, UnknownProducerIdError.code, ProducerFencedError.code}


def _with_sequence(data, sequence: int, producer_id=None, producer_epoch=None) -> bytes:
    """A built batch with another base sequence, and producer id and epoch when given (and the
    CRC that goes with them)."""
    buf = bytearray(data)
    struct.pack_into(">i", buf, BASE_SEQUENCE_OFFSET, sequence)
    if producer_id is not None:
        struct.pack_into(">q", buf, PRODUCER_ID_OFFSET, producer_id)
        struct.pack_into(">h", buf, PRODUCER_EPOCH_OFFSET, producer_epoch)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))  # CRC: attributes onward
    return bytes(buf)



class Sender(threading.Thread):
    def __init__(self, config: dict, cluster, accumulator, name="kafkacore-producer-sender"):
        super().__init__(name=name, daemon=True)
        self.cluster = cluster
        self.acc = accumulator
        self.acks = config["acks"]
        self.idempotent = config["enable.idempotence"]
        self.retries = config["retries"]
        self.retry_backoff_ms = config["retry.backoff.ms"]
        self.retry_backoff_max_ms = config["retry.backoff.max.ms"]
        self.metadata_backoff = FailureBackoff(self.retry_backoff_ms, self.retry_backoff_max_ms, log, "metadata refresh")
        self.delivery_timeout_ms = config["delivery.timeout.ms"]
        self.request_timeout_ms = config["request.timeout.ms"]
        self.max_in_flight = config["max.in.flight.requests.per.connection"]
        self.max_request_size = config["max.request.size"]
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: dict[tuple, int] = {}  # (topic, partition) -> next sequence
        self.queues: dict[tuple, deque] = {}  # (topic, partition) -> built batches awaiting send
        self.connections: dict[int, object] = {}
        self.sent_at: dict[tuple, float] = {}  # (node, cid) -> monotonic send time
        self.in_flight_batches: set = set()  # batches sent and not answered
        # The BatchResult of every batch taken from the accumulator and not completed yet, from
        # the drain (under self.lock) to its completion, whatever it goes through meanwhile
        # (queued, in flight, back for a retry, split): what flush() waits for, as Java's
        # IncompleteBatches. The queues and in_flight_batches alone leave gaps between them.
        self.unfinished: set = set()
        self.resequenced: set = set()  # batches in flight whose sequence moved down (_close_gap)
        # an idempotent batch failed without an answer: whether the broker has it is unknown, so
        # the epoch is bumped once nothing is in flight (_bump_epoch, KIP-360)
        self.epoch_bump_needed = False
        # Idempotence, one batch in flight at a time for a partition (a) until the broker has
        # acknowledged one of its batches under this producer id and epoch, since a broker takes
        # any first sequence from a producer it does not know (Kafka's rule), so a second batch
        # could land before a first that failed; and (b) while parts of a split batch are out.
        self.acked: set = set()  # (topic, partition)s acknowledged under this id and epoch
        self.parts_out: set = set()  # parts of split batches not yet finished
        self.need_metadata = False
        self.wanted_topics: set = set()
        self.running = True
        self.force_flush = 0  # > 0: drain open batches regardless of linger.ms
        self.fatal: KafkaError | None = None
        self.lock = threading.Lock()  # guards the sets flush() reads
        self._wake = WakePipe()
        self.held: set = set()  # partitions whose open batch waits behind a queued one
        self.idle = threading.Condition(threading.Lock())
        self.txn = None  # the TransactionManager of a transactional producer
        self.purge_error = None  # abort_transaction: fail every batch not yet sent with this

    # -- called from other threads --------------------------------------------------------
    def wakeup(self):
        self._wake.wake()

    def pending_results(self) -> list:
        """The BatchResults of every batch not yet completed: those still in the accumulator
        and those the sender took from it, in one snapshot (a batch being drained is in one
        of the two). What flush() waits for."""
        with self.lock:
            out = self.acc.pending_results()
            out += [r for r in self.unfinished if not r.done()]
            return out

    def stop(self):
        self.running = False
        self._wake.wake_always()

    # -- the loop -------------------------------------------------------------------------
    def run(self):
        try:
            while self.running:
                self._run_once()
        except BaseException as e:  # never die silently: fail what is pending
            log.exception("producer sender stopped by an unexpected error")
            self.fatal = e if isinstance(e, KafkaError) else KafkaError(f"sender failed: {e!r}")
        finally:
            err = self.fatal or ClientClosedError("the producer was closed before the record was sent")
            self._fail_everything(err)
            for conn in self.connections.values():
                conn.close()
            self._wake.close()

    def _run_once(self):
        now = wall_ms()
        if self.purge_error is not None:
            self._purge(self.purge_error)
        if self.txn is not None:
            if self.producer_id != self.txn.producer_id or self.producer_epoch != self.txn.producer_epoch:
                # init_transactions gave a new id or epoch: sequences start over (Kafka's rule)
                self.producer_id, self.producer_epoch = self.txn.producer_id, self.txn.producer_epoch
                self.sequences.clear()
                self.acked.clear()
            if self.producer_id < 0:
                self._sleep(self.retry_backoff_ms / 1000.0)
                return
        elif self.idempotent and self.producer_id < 0:
            if not self._init_producer_id():
                self._sleep(self.retry_backoff_ms / 1000.0)
                return
        elif self.epoch_bump_needed and not self.in_flight_batches:
            if not self._bump_epoch():
                self._sleep(self.retry_backoff_ms / 1000.0)
                return
        if self.need_metadata or self.wanted_topics or self.cluster.stale():
            self._refresh_metadata()
        force = self.force_flush > 0
        self._wake.going_to_sleep()  # before looking at the accumulator (WakePipe)
        # A partition with a batch still waiting here keeps its open batch in the accumulator,
        # where it goes on filling: under load, linger.ms 0 then makes bigger batches instead
        # of a queue of one-record ones.
        self.held = {tp for tp, q in self.queues.items() if q}
        with self.lock:  # flush() snapshots the accumulator and self.unfinished under it too
            drained = self.acc.drain(now, force, self.held)
            self.unfinished.update(b.result for b in drained)
        for batch in drained:
            try:
                self._enqueue_new(batch)
            except Exception as e:  # e.g. a compressor failing: that batch fails, not the producer
                log.exception("cannot build a batch for %s-%s", batch.topic, batch.partition)
                self._complete(batch, -1, -1, KafkaError(f"cannot build the batch: {e!r}"))
        self._expire(now)
        self._send_requests(now)
        self._wait_and_read(self._next_timeout(now))

    def _init_producer_id(self) -> bool:
        try:
            resp = self.cluster.call_any(ApiKey.INIT_PRODUCER_ID, _InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=2147483647))
        except (ConnectionClosed, KafkaError, OSError) as e:
            log.warning("InitProducerId failed: %s", e)
            return False
        if resp.error_code:
            err = error_for_code(resp.error_code, "InitProducerId")
            if not err.retriable:
                self.fatal = err
                self.running = False
            return False
        self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
        return True

    def _outcome_unknown(self, batch):
        """``batch`` failed without an answer (timed out, its connection lost): the broker may
        or may not have written it, so no later sequence of its partition can be trusted."""
        if self.idempotent and self.txn is None and batch.base_sequence >= 0:
            self.epoch_bump_needed = True

    def _bump_epoch(self) -> bool:
        """KIP-360, as Java's idempotent producer does after a batch of unknown outcome: the
        epoch goes up by one locally (a broker takes a new epoch that starts at sequence 0),
        every partition's sequences start over and the batches waiting for a retry are numbered
        again under it; at the last epoch a new producer id is asked for instead."""
        if self.producer_epoch >= 32766:
            if not self._init_producer_id():
                return False
        else:
            self.producer_epoch += 1
        self.epoch_bump_needed = False
        self.sequences.clear()
        self.acked.clear()
        self.resequenced.clear()
        with self.lock:
            for tp, q in self.queues.items():
                for b in q:
                    if b.base_sequence < 0:
                        continue
                    seq = self.sequences.get(tp, 0)
                    b.base_sequence = seq
                    self.sequences[tp] = (seq + b.count) & 0x7FFFFFFF
                    b.data = _with_sequence(b.data, seq, self.producer_id, self.producer_epoch)
        log.info("producer id %d: epoch bumped to %d after a batch of unknown outcome; sequences start over",
                 self.producer_id, self.producer_epoch)
        return True

    def _refresh_metadata(self):
        topics = set(self.acc.partition_counts) | self.wanted_topics
        try:
            self.cluster.refresh(sorted(topics) if topics else [], allow_auto_create=False)
        except (ConnectionClosed, KafkaError, OSError) as e:
            self._sleep(self.metadata_backoff.failed(e))
            return
        self.metadata_backoff.succeeded()
        for t in topics:
            n = self.cluster.partition_counts.get(t)
            if n:
                self.acc.partition_counts[t] = n
        self.need_metadata = False
        self.wanted_topics.clear()

    def _enqueue_new(self, batch):
        tp = (batch.topic, batch.partition)
        if self.idempotent:
            seq = self.sequences.get(tp, 0)
            batch.base_sequence = seq
            self.sequences[tp] = (seq + batch.count) & 0x7FFFFFFF
            batch.builder.set_producer_state(self.producer_id, self.producer_epoch, seq,
                                             transactional=self.txn is not None)
        # In place (no copy of the batch while holding the GIL); the view keeps the builder's
        # memory until the batch is finished.
        batch.data = batch.builder.build_view()
        batch.builder = None
        with self.lock:
            q = self.queues.get(tp)
            if q is None:
                q = self.queues[tp] = deque()
            q.append(batch)

    def _requeue(self, batch, now, refresh: bool):
        """Puts a batch back in its partition's queue, in sequence order, for a retry."""
        batch.attempts += 1
        if batch.attempts > self.retries or now - batch.created_ms >= self.delivery_timeout_ms:
            return False
        backoff = min(self.retry_backoff_ms * (2 ** min(batch.attempts - 1, 10)), self.retry_backoff_max_ms)
        batch.retry_at = now + backoff
        tp = (batch.topic, batch.partition)
        with self.lock:
            q = self.queues.setdefault(tp, deque())
            if not q or q[-1].base_sequence < 0 or batch.base_sequence < 0:
                q.appendleft(batch)
            else:
                i = 0
                while i < len(q) and q[i].base_sequence < batch.base_sequence:
                    i += 1
                q.insert(i, batch)
        if refresh:
            self.need_metadata = True
        return True

    def _expire(self, now):
        """Fails batches that waited longer than delivery.timeout.ms in their queue (a retry
        among them was sent before: its outcome is unknown)."""
        for tp, q in list(self.queues.items()):
            while q and now - q[0].created_ms >= self.delivery_timeout_ms:
                with self.lock:
                    batch = q.popleft()
                if batch.attempts:
                    self._outcome_unknown(batch)
                self._complete(batch, -1, -1, KafkaTimeoutError(
                    f"expiring {batch.count} record(s) for {tp[0]}-{tp[1]}: {now - batch.created_ms} ms "
                    f"has passed since batch creation (delivery.timeout.ms={self.delivery_timeout_ms})"))

    def _connection(self, node):
        conn = self.connections.get(node)
        if conn is not None and not conn.closed:
            return conn
        try:
            conn = self.cluster.connect(node)
        except (ConnectionClosed, KafkaError, OSError) as e:
            log.warning("cannot connect to broker %s: %s", node, e)
            self.need_metadata = True
            return None
        self.connections[node] = conn
        return conn

    def _add_to_transaction(self, now):
        """A transactional producer's partitions join the transaction before their first batch
        is sent (AddPartitionsToTxn, one request for all the new ones). A refusal fails their
        queued batches: the transaction must then be aborted."""
        new = [tp for tp, q in self.queues.items() if q and tp not in self.txn.partitions]
        if not new:
            return
        try:
            self.txn.add_partitions(new, self.request_timeout_ms / 1000.0)
        except KafkaError as e:
            for tp in new:
                with self.lock:
                    q = self.queues.pop(tp, deque())
                for b in q:
                    self._complete(b, -1, -1, e)

    def _purge(self, err):
        """abort_transaction: every batch not yet sent (open in the accumulator or queued here)
        fails with ``err``; batches in flight finish as the broker answers them."""
        self.purge_error = None
        for batch in self.acc.drain(wall_ms(), True, set()):
            batch.builder = None
            self._complete(batch, -1, -1, err)
        with self.lock:
            queued = [b for q in self.queues.values() for b in q]
            self.queues.clear()
        for b in queued:
            self._complete(b, -1, -1, err)

    def _send_requests(self, now):
        if self.txn is not None:
            self._add_to_transaction(now)
        by_node: dict[int, list] = {}
        for tp, q in self.queues.items():
            if not q or q[0].retry_at > now:
                continue
            leader = self.cluster.leader(*tp)
            if leader is None:
                self.need_metadata = True
                if tp[0] not in self.cluster.partition_counts:
                    self.wanted_topics.add(tp[0])
                continue
            by_node.setdefault(leader, []).append(tp)
        one_at_a_time = flying = None
        if self.idempotent:
            one_at_a_time = {(b.topic, b.partition) for b in self.parts_out}
            one_at_a_time.update(tp for tps in by_node.values() for tp in tps if tp not in self.acked)
            if one_at_a_time:
                flying = {(b.topic, b.partition) for b in self.in_flight_batches}
        for node, tps in by_node.items():
            conn = self._connection(node)
            if conn is None:
                continue
            while tps and len(conn.in_flight) < self.max_in_flight:
                batches, size, rest = [], 0, []
                for tp in tps:
                    q = self.queues[tp]
                    if not q or q[0].retry_at > now:
                        continue
                    if one_at_a_time and tp in one_at_a_time and tp in flying:
                        continue
                    b = q[0]
                    if batches and size + len(b.data) > self.max_request_size:
                        rest.append(tp)
                        continue
                    if flying is not None:
                        flying.add(tp)
                    with self.lock:
                        q.popleft()
                    batches.append(b)
                    size += len(b.data)
                    if q:
                        rest.append(tp)
                if not batches:
                    break
                if not self._send_produce(conn, node, batches, now):
                    break
                tps = rest

    def _send_produce(self, conn, node, batches, now) -> bool:
        topics: dict[str, list] = {}
        for b in batches:
            topics.setdefault(b.topic, []).append(_PartitionProduceData(index=b.partition, records=b.data))
        body = _ProduceRequest(transactional_id=self.txn.transactional_id if self.txn is not None else None,
                               acks=self.acks, timeout_ms=self.request_timeout_ms,
                               topic_data=[_TopicProduceData(name=t, partition_data=p) for t, p in topics.items()])
        with self.lock:
            self.in_flight_batches.update(batches)
        try:
            cid = conn.send(ApiKey.PRODUCE, body, expect_response=self.acks != 0, context=batches)
        except (ConnectionClosed, KafkaError) as e:
            log.warning("produce to broker %s failed: %s", node, e)
            self._connection_lost(node, conn, now, extra=batches)
            return False
        if self.acks == 0:
            for b in batches:
                self._complete(b, -1, -1, None)
        else:
            self.sent_at[(node, cid)] = time.monotonic()
        return True

    def _next_timeout(self, now) -> float:
        t = 0.1  # upper bound: also how often stale metadata and request timeouts are checked
        due = self.acc.next_ready_ms()
        # What the accumulator still holds is held behind queued batches (drain() took the
        # rest): a response (or a retry time, or a wakeup for a new batch) ends the wait, not
        # the linger deadline - nor a flush(), which would otherwise spin here with a zero
        # timeout while the in-flight requests are out, taking the GIL from the embedded
        # broker that is answering them.
        blocked = bool(self.held) and all(self.queues.get(tp) for tp in self.held)
        if due is not None and due <= now and blocked:
            due = None
        # (a flush still goes round at once for metadata a queued batch's leader needs)
        if self.force_flush > 0 and (not blocked or self.need_metadata) and self.acc.has_unsent():
            due = now
        if due is not None:
            t = min(t, max(0.0, (due - now) / 1000.0))
        for q in self.queues.values():
            # a batch still queued after _send_requests waits for a retry time (counted here)
            # or for a free in-flight slot (a response wakes the select), never for nothing
            if q and q[0].retry_at > now:
                t = min(t, (q[0].retry_at - now) / 1000.0)
        return t

    def _sleep(self, seconds):
        self._wait_and_read(seconds)

    def _wait_and_read(self, timeout):
        conns = [c for c in self.connections.values() if c.in_flight and not c.closed]
        readable = self._wake.select(conns, max(timeout, 0))
        now = wall_ms()
        for conn in conns:
            if conn in readable:
                try:
                    responses = conn.read_responses(0)
                except ConnectionClosed as e:
                    log.warning("connection to broker %s lost: %s", conn.node_id, e)
                    self._connection_lost(conn.node_id, conn, now)
                    continue
                for batches, _api, _v, resp in responses:
                    self._handle_response(conn.node_id, batches, resp, now)
        # Request timeouts: the broker never answered; the outcome is unknown, so retry.
        mono = time.monotonic()
        for (node, cid), sent in list(self.sent_at.items()):
            conn = self.connections.get(node)
            if conn is None or cid not in conn.in_flight:
                self.sent_at.pop((node, cid), None)
            elif mono - sent > self.request_timeout_ms / 1000.0:
                log.warning("produce request to broker %s timed out after %d ms", node, self.request_timeout_ms)
                self._connection_lost(node, conn, now)

    def _connection_lost(self, node, conn, now, extra=()):
        pending = [context for (_api_key, _version, context) in conn.in_flight.values()]
        conn.close()
        self.connections.pop(node, None)
        for key in [k for k in self.sent_at if k[0] == node]:
            del self.sent_at[key]
        # one batch is retried once, however many ways it came back (by identity: a batch that
        # was both in flight and handed back by a failed send must not be queued twice)
        batches = list({id(b): b for group in (*pending, extra) if group for b in group}.values())
        batches.sort(key=lambda b: b.base_sequence)
        for b in batches:
            with self.lock:
                self.in_flight_batches.discard(b)
            if not self._requeue(b, now, refresh=True):
                self._outcome_unknown(b)
                self._complete(b, -1, -1, KafkaTimeoutError(
                    f"{b.topic}-{b.partition}: connection to broker {node} lost and retries/delivery.timeout.ms "
                    f"exhausted"))
        self.need_metadata = True

    def _handle_response(self, node, batches, resp, now):
        by_tp = {(b.topic, b.partition): b for b in batches}
        retry, out_of_order = [], []
        for t in resp.responses:
            for p in t.partition_responses:
                b = by_tp.pop((t.name, p.index), None)
                if b is None:
                    continue
                with self.lock:
                    self.in_flight_batches.discard(b)
                code = p.error_code
                if code == 0 or code == DuplicateSequenceNumberError.code:
                    self._complete(b, p.base_offset, p.log_append_time_ms, None)
                elif code in _RETRIABLE:
                    retry.append((b, code))
                elif code in SPLIT_ERRORS and b.count > 1 and not b.result.done():
                    try:
                        self._split(b)
                    except Exception as e:  # (cannot happen to a batch this producer built)
                        log.exception("splitting a refused batch failed")
                        self._complete(b, -1, -1, error_for_code(code, f"{b.topic}-{b.partition}: {e}"))
                elif code == OutOfOrderSequenceNumberError.code and b in self.resequenced:
                    self.resequenced.discard(b)
                    retry.append((b, code))  # sent before its sequence moved down: again, renumbered
                elif code == OutOfOrderSequenceNumberError.code:
                    out_of_order.append(b)
                else:
                    msg = p.error_message or ""
                    self._complete(b, -1, -1, error_for_code(code, f"{b.topic}-{b.partition}: {msg}".rstrip(": ")))
                    if b.base_sequence >= 0 and self.txn is None and code not in _FENCING:
                        self._close_gap(b)
        for b in by_tp.values():  # the broker did not answer for a partition it was sent
            with self.lock:
                self.in_flight_batches.discard(b)
            retry.append((b, 2))
        for b in out_of_order:
            overtaken = any(r.topic == b.topic and r.partition == b.partition and r.base_sequence < b.base_sequence
                            for r, _c in retry)
            if overtaken or self._earlier_pending(b):
                retry.append((b, OutOfOrderSequenceNumberError.code))
            else:
                self._complete(b, -1, -1, OutOfOrderSequenceNumberError(
                    f"{b.topic}-{b.partition}: the broker expected another sequence than {b.base_sequence}"))
        retry.sort(key=lambda x: x[0].base_sequence)
        for b, code in retry:
            if not self._requeue(b, now, refresh=code in STALE_METADATA_ERRORS):
                self._outcome_unknown(b)  # its earlier attempts' outcomes are not all known
                self._complete(b, -1, -1, error_for_code(code, f"{b.topic}-{b.partition}: retries exhausted"))

    def _close_gap(self, failed):
        """An idempotent batch the broker refused for good was never written: the partition's
        later batches move down by its record count, so that the broker sees no gap in the
        sequence (Java's producer adjusts them the same way). Those already in flight come
        back OUT_OF_ORDER_SEQUENCE_NUMBER and go again with their new numbers."""
        tp, n, first = (failed.topic, failed.partition), failed.count, failed.base_sequence
        with self.lock:
            later = [b for b in self.queues.get(tp, ()) if b.base_sequence > first]
            flying = [b for b in self.in_flight_batches
                      if (b.topic, b.partition) == tp and b.base_sequence > first]
        for b in later + flying:
            b.base_sequence -= n
            b.data = _with_sequence(b.data, b.base_sequence)
        self.resequenced.update(flying)
        if tp in self.sequences:
            self.sequences[tp] = (self.sequences[tp] - n) & 0x7FFFFFFF

    def _split(self, batch):
        """The broker refused the batch as too large: its records go again in two batches of
        half the size, first in the partition's queue (batch_split)."""
        parts = split_batch(batch, self.acc.compression)
        self.acc.limit_batch_size(batch.topic, len(batch.data) // 2)
        log.info("%s-%d: a batch of %d records (%d bytes) is too large for the broker; sending it as %d and %d",
                 batch.topic, batch.partition, batch.count, len(batch.data), parts[0].count, parts[1].count)
        seq = batch.base_sequence
        for part in parts:
            if seq >= 0:  # the parts keep the refused batch's sequence numbers
                part.base_sequence = seq
                part.builder.set_producer_state(self.producer_id, self.producer_epoch, seq,
                                                transactional=self.txn is not None)
                seq = (seq + part.count) & 0x7FFFFFFF
            part.data = part.builder.build_view()
            part.builder = None
        batch.data = None
        self.parts_out.discard(batch)
        self.parts_out.update(parts)
        tp = (batch.topic, batch.partition)
        with self.lock:
            self.unfinished.discard(batch.result)  # it completes with its parts
            self.unfinished.update(part.result for part in parts)
            q = self.queues.setdefault(tp, deque())
            if seq < 0:
                q.extendleft(reversed(parts))
            else:
                i = 0
                while i < len(q) and 0 <= q[i].base_sequence < parts[0].base_sequence:
                    i += 1
                for part in reversed(parts):
                    q.insert(i, part)

    def _earlier_pending(self, batch) -> bool:
        """An earlier batch of the partition is still on its way (in flight or queued for a
        retry): OUT_OF_ORDER_SEQUENCE_NUMBER then only means this one overtook it."""
        if batch.base_sequence < 0:
            return False
        tp = (batch.topic, batch.partition)
        with self.lock:
            for b in self.in_flight_batches:
                if (b.topic, b.partition) == tp and b.base_sequence < batch.base_sequence:
                    return True
            q = self.queues.get(tp)
            return bool(q) and q[0].base_sequence < batch.base_sequence

    def _complete(self, batch, base_offset, log_append_time, error):
        if error is None:
            self.acked.add((batch.topic, batch.partition))
        if self.parts_out:
            self.parts_out.discard(batch)
        if self.resequenced:
            self.resequenced.discard(batch)
        self.acc.release(batch)
        batch.data = None
        with self.lock:  # flush()'s pending_results() iterates the set under it, in another thread
            self.unfinished.discard(batch.result)
        if error is not None and self.txn is not None and not getattr(error, "txn_requires_abort", False):
            self.txn.fail(error)  # a record of the transaction failed: it can only be aborted now
        batch.result.complete(base_offset, log_append_time, error)

    def _fail_everything(self, err):
        with self.lock:
            batches = [b for q in self.queues.values() for b in q] + list(self.in_flight_batches)
            self.queues.clear()
            self.in_flight_batches.clear()
        for b in batches:
            if not b.result.done():
                self._complete(b, -1, -1, err)
        self.acc.abort_all(err)
