"""The consumer's fetcher: a background thread that keeps a Fetch in flight to every leader of
an assigned partition, so the next records are on their way while the application handles
the current ones (prefetch).

Per partition the fetcher keeps at most ``PREFETCH_DEPTH`` fetched responses buffered; the
consumer's poll takes them in order. Every partition has a version, bumped by a seek, a
reset or an assignment change: a response fetched under an older version is dropped, so a
seek never sees records from before it.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque

from ..errors import STALE_METADATA_ERRORS, CorruptRecordBatchError, KafkaError, OffsetOutOfRangeError
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from .backoff import FailureBackoff
from .connection import ConnectionClosed
from .wake_pipe import WakePipe

log = logging.getLogger("kafkacore.consumer")

_FetchRequest = request_class(ApiKey.FETCH)
_fm = __import__("kafkacore.protocol.messages.fetch_request", fromlist=["x"])
_FetchTopic, _FetchPartition = _fm.FetchTopic, _fm.FetchPartition

PREFETCH_DEPTH = 2


class FetchedData:
    """One partition's share of a fetch response, not yet handed to the application."""

    __slots__ = ("records", "fetch_offset", "next_offset", "aborted", "decoded", "arrow", "arrow_base", "arrow_at",
                 "used", "error")

    def __init__(self, records, fetch_offset, next_offset, aborted=None):
        self.records = records  # memoryview of the response frame
        self.fetch_offset = fetch_offset
        self.next_offset = next_offset  # after the last whole batch
        # read_committed: the partition's aborted_transactions from the response, handed to the
        # decoders (which drop those transactions' batches); None: read_uncommitted
        self.aborted = aborted
        self.decoded = None  # list of records once poll() decoded it
        self.arrow = None  # pyarrow.RecordBatch once poll_arrow() decoded it
        # decoded with other fetched data into one batch: that batch, and where ``arrow`` starts
        # in it (poll_arrow returns consecutive rows of it as one slice, not a concatenation)
        self.arrow_base = None
        self.arrow_at = 0
        self.used = 0  # records of ``decoded``/``arrow`` already returned
        self.error = None  # a corrupt batch after the decoded records: raised once they are used


class TopicPartitionState:
    """The consumer's state of one assigned partition: positions, pause, buffered and in-flight
    fetches (Kafka's SubscriptionState.TopicPartitionState)."""

    __slots__ = ("position", "fetch_position", "paused", "buffered", "in_flight", "version", "high_watermark",
                 "last_stable_offset", "log_start_offset", "reset_to", "error", "read_replica", "read_replica_until")

    def __init__(self):
        self.position = None  # next offset to return to the application (None: to be found)
        self.fetch_position = None  # next offset to fetch (ahead of position when prefetching)
        self.paused = False
        self.buffered: deque = deque()
        self.in_flight = False
        self.version = 0
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.reset_to = None  # "earliest"/"latest" when the fetcher found the position out of range
        self.error = None  # an error to raise from the next poll (corrupt data, no reset policy)
        # KIP-392: the replica the leader said to read from (client.rack), until the time.monotonic()
        # read_replica_until (metadata.max.age.ms, as the Java consumer) or the first error there
        self.read_replica = None
        self.read_replica_until = 0.0

    def fetchable(self) -> bool:
        return (not self.paused and self.fetch_position is not None and not self.in_flight
                and self.reset_to is None and self.error is None and len(self.buffered) < PREFETCH_DEPTH)


class Fetcher(threading.Thread):
    def __init__(self, config, cluster, states: dict, lock, data_ready, name="kafkacore-consumer-fetcher"):
        super().__init__(name=name, daemon=True)
        self.cluster = cluster
        self.states = states  # (topic, partition) -> TopicPartitionState, owned by the consumer
        self.lock = lock
        self.data_ready = data_ready  # Condition on lock: notified when data or errors arrive
        self.max_wait_ms = config["fetch.max.wait.ms"]
        self.min_bytes = config["fetch.min.bytes"]
        self.max_bytes = config["fetch.max.bytes"]
        self.partition_max_bytes = config["max.partition.fetch.bytes"]
        self.isolation = 1 if config["isolation.level"] == "read_committed" else 0
        self.retry_backoff = config["retry.backoff.ms"] / 1000.0
        self.metadata_backoff = FailureBackoff(config["retry.backoff.ms"], config["retry.backoff.max.ms"], log,
                                               "metadata refresh")
        self.client_rack = config["client.rack"]
        self.read_replica_ttl = config["metadata.max.age.ms"] / 1000.0
        self.connections = {}
        self.running = True
        self.need_metadata = False
        self._wake = WakePipe()

    def wakeup(self):
        self._wake.wake()

    def stop(self):
        self.running = False
        self._wake.wake_always()

    def run(self):
        try:
            while self.running:
                self._run_once()
        except BaseException:
            log.exception("consumer fetcher stopped by an unexpected error")
        finally:
            for conn in self.connections.values():
                conn.close()
            self._wake.close()

    def _run_once(self):
        self._wake.going_to_sleep()  # before looking at the partitions' states (WakePipe)
        refreshed = False
        if self.need_metadata:
            try:
                self.cluster.refresh(sorted({tp[0] for tp in list(self.states)}) or [])
                self.need_metadata = False
                refreshed = True
            except (ConnectionClosed, KafkaError, OSError) as e:
                self._wait(self.metadata_backoff.failed(e))
                return
            self.metadata_backoff.succeeded()
        by_node: dict[int, list] = {}
        waiting_for_app: set = set()
        now = time.monotonic()
        with self.lock:
            for tp, st in self.states.items():
                if not st.fetchable():
                    if len(st.buffered) >= PREFETCH_DEPTH and not st.paused:
                        waiting_for_app.add(st.read_replica if st.read_replica is not None else self.cluster.leader(*tp))
                    continue
                node = self._read_from(tp, st, now)
                if node is None:
                    self.need_metadata = True
                    continue
                by_node.setdefault(node, []).append((tp, st))
            # A node with a partition whose prefetch buffer is full waits for the application
            # to take from it (poll wakes us) instead of long-polling for its other partitions:
            # that Fetch could hold the connection for fetch.max.wait.ms while the busy
            # partition's next records sit at the broker.
            for node in waiting_for_app:
                by_node.pop(node, None)
            busy = {n for n, c in self.connections.items() if c.in_flight}
            requests = []
            for node, items in by_node.items():
                if node in busy:
                    continue
                for tp, st in items:
                    st.in_flight = True
                requests.append((node, [(tp, st.fetch_position, st.version) for tp, st in items]))
        for node, items in requests:
            self._send_fetch(node, items)
        if self.need_metadata:
            # A partition whose leader is not known yet (a fresh assignment): refresh at once
            # rather than after an idle wait, so a new consumer's first poll does not stall;
            # if metadata just came and still names no leader, back off as after a failure.
            self._wait(self.retry_backoff if refreshed else 0)
        else:
            self._wait(0.5)

    def _read_from(self, tp, st, now):
        """The node to fetch ``tp`` from: the replica the leader named (KIP-392) while that holds,
        else the leader (None: not known yet)."""
        if st.read_replica is not None:
            if now < st.read_replica_until and st.read_replica in self.cluster.brokers:
                return st.read_replica
            st.read_replica = None
        return self.cluster.leader(*tp)

    def _connection(self, node):
        conn = self.connections.get(node)
        if conn is not None and not conn.closed:
            return conn
        conn = self.cluster.connect(node)
        self.connections[node] = conn
        return conn

    def _send_fetch(self, node, items):
        topics: dict[str, list] = {}
        for (topic, p), offset, _v in items:
            topics.setdefault(topic, []).append(_FetchPartition(
                partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=self.partition_max_bytes))
        body = _FetchRequest(replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
                             max_bytes=self.max_bytes, isolation_level=self.isolation, session_id=0,
                             session_epoch=-1, topics=[_FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                             forgotten_topics_data=[], rack_id=self.client_rack)
        try:
            conn = self._connection(node)
            conn.send(ApiKey.FETCH, body, context=items)
        except (ConnectionClosed, KafkaError, OSError) as e:
            log.warning("fetch from broker %s failed: %s", node, e)
            self._release(items, forget_read_replica=True)
            self.connections.pop(node, None)
            self.need_metadata = True

    def _release(self, items, forget_read_replica=False):
        with self.lock:
            for tp, _offset, version in items:
                st = self.states.get(tp)
                if st is not None and st.version == version:
                    st.in_flight = False
                    if forget_read_replica:
                        st.read_replica = None

    def _wait(self, timeout):
        conns = [c for c in self.connections.values() if c.in_flight and not c.closed]
        readable = self._wake.select(conns, timeout)
        for conn in conns:
            if conn not in readable:
                continue
            try:
                responses = conn.read_responses(0)
            except ConnectionClosed as e:
                log.warning("connection to broker %s lost: %s", conn.node_id, e)
                for _api_key, _version, items in list(conn.in_flight.values()):
                    self._release(items, forget_read_replica=True)
                conn.in_flight.clear()
                self.connections.pop(conn.node_id, None)
                self.need_metadata = True
                continue
            for items, _api, _v, resp in responses:
                self._handle(items, resp)

    def _handle(self, items, resp):
        sent = {tp: (offset, version) for tp, offset, version in items}
        got_data = False
        with self.lock:
            for t in resp.responses:
                for p in t.partitions:
                    tp = (t.topic, p.partition_index)
                    offset, version = sent.pop(tp, (None, None))
                    st = self.states.get(tp)
                    if st is None or st.version != version:
                        continue  # unassigned or sought since the fetch was sent
                    st.in_flight = False
                    code = p.error_code
                    if code and st.read_replica is not None:
                        # the replica the leader named cannot serve (out of range there, no longer
                        # a replica, ...): back to the leader, which decides, as the Java consumer
                        st.read_replica = None
                        continue
                    if code:
                        if code == OffsetOutOfRangeError.code:
                            st.reset_to = "out-of-range"
                            got_data = True
                        elif code in STALE_METADATA_ERRORS:
                            self.need_metadata = True
                        else:
                            log.warning("fetch %s-%s: error %s", tp[0], tp[1], code)
                        continue
                    if p.preferred_read_replica >= 0:  # KIP-392: no records; read there from now on
                        st.read_replica = p.preferred_read_replica
                        st.read_replica_until = time.monotonic() + self.read_replica_ttl
                        got_data = True  # wakes the fetch loop at once
                        continue
                    st.high_watermark = p.high_watermark
                    st.last_stable_offset = p.last_stable_offset
                    st.log_start_offset = p.log_start_offset
                    records = p.records
                    if records is None or len(records) == 0:
                        continue
                    next_offset, problem = _next_offset(records)
                    if next_offset < 0:
                        if problem is not None:
                            st.error = CorruptRecordBatchError(
                                f"{tp[0]}-{tp[1]}: malformed record batch at offset {offset}: {problem}")
                            got_data = True
                        continue  # else only a partial batch (the broker sends the first whole, KIP-74)
                    # As the Java client: the list is only used under read_committed (a broker sends
                    # null otherwise); a null list there means nothing aborted in this range.
                    aborted = (p.aborted_transactions or ()) if self.isolation else None
                    st.buffered.append(FetchedData(records, offset, next_offset, aborted))
                    st.fetch_position = next_offset
                    got_data = True
            for tp, (_offset, version) in sent.items():  # partitions the broker left out
                st = self.states.get(tp)
                if st is not None and st.version == version:
                    st.in_flight = False
            if got_data:
                self.data_ready.notify_all()


def _next_offset(records):
    """(offset after the last whole batch or -1, the framing problem that stopped the scan)."""
    from ..record import iter_batches
    nxt = -1
    try:
        for b in iter_batches(records):
            nxt = b.next_offset
    except ValueError as e:
        # A malformed batch: stop before it; if it is not the first, poll() reaches it later.
        return nxt, e
    return nxt, None
