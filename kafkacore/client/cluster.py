"""What a client knows of the cluster: brokers, topics, partition leaders (Kafka's Metadata).

``Cluster.refresh`` asks any reachable broker (the bootstrap servers first, then the brokers
learnt since) for metadata and replaces the view. It is thread-safe; connections for other work
are made with ``connect`` and owned by whoever asked for them.
"""
from __future__ import annotations

import random
import threading
import time

from ..errors import (KafkaError, KafkaTimeoutError, LeaderNotAvailableError, UnknownTopicOrPartitionError,
                      error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from .connection import BrokerConnection, ConnectionClosed

_MetadataRequest = request_class(ApiKey.METADATA)
_MetadataTopic = __import__("kafkacore.protocol.messages.metadata_request",
                            fromlist=["MetadataRequestTopic"]).MetadataRequestTopic


class Cluster:
    def __init__(self, bootstrap: list[tuple[str, int]], client_id: str = "kafkacore",
                 request_timeout_ms: int = 30000, metadata_max_age_ms: int = 300000,
                 connection_setup_timeout_ms: int = 10000, send_buffer_bytes: int = -1,
                 receive_buffer_bytes: int = -1, security=None):
        self.bootstrap = list(bootstrap)
        # what every connection is made with: buffer sizes and security (TLS, SASL)
        self.buffer_sizes = {"send_buffer_bytes": send_buffer_bytes, "receive_buffer_bytes": receive_buffer_bytes,
                             "security": security}
        self.client_id = client_id
        self.timeout = request_timeout_ms / 1000.0
        # socket.connection.setup.timeout.ms: a broker that is down costs this, not the request
        # timeout; never more than the request timeout, since connecting blocks the caller's
        # thread (the sender's too), which would hold back the expiry of timed-out batches
        self.connect_timeout = min(connection_setup_timeout_ms, request_timeout_ms) / 1000.0
        self.max_age = metadata_max_age_ms / 1000.0
        self.brokers: dict[int, tuple[str, int]] = {}
        self.partition_counts: dict[str, int] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.leader_epochs: dict[tuple[str, int], int] = {}
        self.topic_errors: dict[str, KafkaError] = {}
        # topic ids (Metadata v10+): the consumer protocol's assignments name topics by id
        self.topic_ids: dict[str, bytes] = {}
        self.topic_names: dict[bytes, str] = {}
        self.internal_topics: set[str] = set()
        self.cluster_id = None
        self.updated_at = 0.0
        self.version = 0  # bumped by every refresh, so waiters can tell a new view
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._conn: BrokerConnection | None = None

    # -- connections ----------------------------------------------------------------------
    def connect(self, node_id: int) -> BrokerConnection:
        """A new connection to broker ``node_id`` (refreshing once if it is unknown)."""
        addr = self.brokers.get(node_id)
        if addr is None:
            self.refresh()
            addr = self.brokers.get(node_id)
            if addr is None:
                raise LeaderNotAvailableError(f"broker {node_id} is not in the cluster metadata")
        return BrokerConnection(addr[0], addr[1], self.client_id, node_id=node_id, timeout=self.timeout,
                                connect_timeout=self.connect_timeout, **self.buffer_sizes)

    def connect_to(self, host: str, port: int, node_id: int) -> BrokerConnection:
        """A new connection to a broker named by address (e.g. a group coordinator)."""
        return BrokerConnection(host, port, self.client_id, node_id=node_id, timeout=self.timeout,
                                connect_timeout=self.connect_timeout, **self.buffer_sizes)

    def _any_connection(self) -> BrokerConnection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        # Known brokers in random order (spreads load), then the bootstrap list.
        known = [(nid, addr) for nid, addr in self.brokers.items()]
        random.shuffle(known)
        candidates = known + [(-1, addr) for addr in self.bootstrap]
        errors = []
        for nid, (host, port) in candidates:
            try:
                self._conn = BrokerConnection(host, port, self.client_id, node_id=nid, timeout=self.timeout,
                                              connect_timeout=self.connect_timeout, **self.buffer_sizes)
                return self._conn
            except (ConnectionClosed, OSError, KafkaError) as e:
                errors.append(f"{host}:{port}: {e}")
        raise ConnectionClosed("no broker reachable: " + "; ".join(errors))

    def call_any(self, api_key: int, body, version: int | None = None):
        """A request to any broker (for metadata-like questions); one retry on a new connection."""
        with self._lock:
            for attempt in (0, 1):
                conn = self._any_connection()
                try:
                    return conn.call(api_key, body, version=version, timeout=self.timeout)
                except (ConnectionClosed, KafkaTimeoutError):
                    conn.close()
                    self._conn = None
                    if attempt:
                        raise

    # -- metadata -------------------------------------------------------------------------
    def refresh(self, topics=None, allow_auto_create: bool = False):
        """Fetches metadata for ``topics`` (None: every topic) and merges it into the view."""
        topic_list = None if topics is None else [_MetadataTopic(name=t) for t in topics]
        body = _MetadataRequest(topics=topic_list, allow_auto_topic_creation=allow_auto_create)
        resp = self.call_any(ApiKey.METADATA, body)
        with self._lock:
            brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
            if brokers:
                self.brokers = brokers
            self.cluster_id = resp.cluster_id
            for t in resp.topics:
                name = t.name
                if t.error_code:
                    self.topic_errors[name] = error_for_code(t.error_code, f"topic {name!r}")
                    if t.error_code == UnknownTopicOrPartitionError.code:
                        self._forget(name)
                    continue
                self.topic_errors.pop(name, None)
                if t.is_internal:
                    self.internal_topics.add(name)
                self.partition_counts[name] = len(t.partitions)
                if any(t.topic_id):
                    old_id = self.topic_ids.get(name)
                    if old_id is not None and old_id != t.topic_id:
                        self.topic_names.pop(old_id, None)  # deleted and created again
                    self.topic_ids[name] = t.topic_id
                    self.topic_names[t.topic_id] = name
                for p in t.partitions:
                    key = (name, p.partition_index)
                    if p.error_code or p.leader_id < 0:
                        self.leaders.pop(key, None)
                    else:
                        self.leaders[key] = p.leader_id
                        self.leader_epochs[key] = p.leader_epoch
            if topics is None:
                for name in set(self.partition_counts) - {t.name for t in resp.topics}:
                    self._forget(name)
            self.updated_at = time.monotonic()
            self.version += 1
            self._changed.notify_all()
        return resp

    def _forget(self, name):
        n = self.partition_counts.pop(name, 0)
        self.topic_names.pop(self.topic_ids.pop(name, None), None)
        for p in range(n):
            self.leaders.pop((name, p), None)

    def wait_for_topic(self, topic: str, timeout: float, allow_auto_create: bool = True) -> int:
        """The partition count of ``topic``, refreshing until it is known or ``timeout`` passes.
        Raises the topic's error (e.g. UNKNOWN_TOPIC_OR_PARTITION) or KafkaTimeoutError."""
        deadline = time.monotonic() + timeout
        backoff = 0.05
        unreachable = None  # no broker answered: retried like a missing topic, named at the end
        while True:
            n = self.partition_counts.get(topic)
            if n:
                return n
            try:
                self.refresh([topic], allow_auto_create=allow_auto_create)
                unreachable = None
            except (ConnectionClosed, KafkaTimeoutError) as e:
                unreachable = e
            n = self.partition_counts.get(topic)
            if n:
                return n
            left = deadline - time.monotonic()
            if left <= 0:
                err = self.topic_errors.get(topic)
                why = f" ({err.name})" if err else f" ({unreachable})" if unreachable else ""
                raise KafkaTimeoutError(f"topic {topic!r} not present in metadata after {timeout * 1000:.0f} ms"
                                        + why)
            time.sleep(min(backoff, left))
            backoff = min(backoff * 2, 1.0)

    def leader(self, topic: str, partition: int) -> int | None:
        return self.leaders.get((topic, partition))

    def stale(self) -> bool:
        return time.monotonic() - self.updated_at > self.max_age

    def close(self):
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
