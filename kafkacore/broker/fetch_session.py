"""KIP-227 incremental fetch sessions: the sessions and the broker's session cache.

A client opens a session with a full fetch at epoch 0 (INITIAL_EPOCH); the broker remembers the
partitions and their fetch parameters and answers with a session id. Later fetches name the
session and the next epoch and carry only partitions that changed (and ``forgotten_topics_data``
to drop some); the broker reads the whole remembered set but answers only with partitions that
have something new. The rules are Kafka's (FetchSession.scala, FetchManager.newContext): the
handler (handlers/fetch.py) applies them, this module holds the state.

The cache (``max.incremental.fetch.session.cache.slots``, default 1000) evicts as Kafka does to
make room for a new session: first the least recently used session if it is stale (unused for
EVICTION_MS), else the least valuable session that may be displaced, if the newcomer is worth
more: follower (privileged) sessions before consumers, then more partitions, and a session is
only displaced once older than EVICTION_MS (a consumer's session by a follower's at any age).
Kafka shards its cache to spread lock contention; one event loop needs no shards.
"""
from __future__ import annotations

import random
import weakref

from ..protocol.fetch_metadata import INITIAL_EPOCH, next_epoch

EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (a constant there too)
_INT32_MAX = (1 << 31) - 1  # the largest session id


class CachedPartition:
    """One partition of a session: the fetch parameters last sent for it (named as in the
    request's FetchPartition, so the handler's reader takes either) and what the client was
    last told of it."""

    __slots__ = ("topic", "topic_id", "partition", "fetch_offset", "partition_max_bytes", "current_leader_epoch",
                 "log_start_offset", "last_fetched_epoch", "high_watermark", "local_log_start_offset")

    def __init__(self, topic, topic_id, fp):
        self.topic = topic  # the name (sessions by name), or None (sessions by topic id)
        self.topic_id = topic_id
        self.partition = fp.partition
        self.high_watermark = -1
        self.local_log_start_offset = -1
        self.update_request(fp)

    def update_request(self, fp):
        self.fetch_offset = fp.fetch_offset
        self.partition_max_bytes = fp.partition_max_bytes
        self.current_leader_epoch = fp.current_leader_epoch
        self.log_start_offset = fp.log_start_offset
        self.last_fetched_epoch = fp.last_fetched_epoch

    def changed(self, pd) -> bool:
        """Whether the response must carry this partition (records, a new high watermark or log
        start offset, an error, or a preferred read replica) -- and remember what it tells the
        client. The last stable offset is the high watermark on this broker, so it needs no
        check of its own."""
        must = pd.records is not None and len(pd.records) > 0
        if self.high_watermark != pd.high_watermark:
            self.high_watermark = pd.high_watermark
            must = True
        if self.local_log_start_offset != pd.log_start_offset:
            self.local_log_start_offset = pd.log_start_offset
            must = True
        if pd.error_code:
            self.high_watermark = -1  # so that the partition is sent again once the error clears
            must = True
        if pd.preferred_read_replica >= 0:  # KIP-392: the replica to read from, said every time
            must = True
        return must


def new_partitions(resolved, topics, uses_topic_ids) -> list[CachedPartition]:
    """The partitions of a session created by a full fetch: from the request's
    [(name or None, FetchTopic)] and the response topics built from them, in order."""
    out = []
    for (name, t), rt in zip(resolved, topics):
        for fp, pd in zip(t.partitions, rt.partitions):
            cp = CachedPartition(None if uses_topic_ids else name, t.topic_id, fp)
            cp.changed(pd)  # what this response tells the client
            out.append(cp)
    return out


class PartitionGroup:
    """Consecutive session partitions of one topic, shaped like a request's FetchTopic."""

    __slots__ = ("topic", "topic_id", "partitions")

    def __init__(self, topic, topic_id, partitions):
        self.topic, self.topic_id, self.partitions = topic, topic_id, partitions


class FetchSession:
    __slots__ = ("id", "privileged", "uses_topic_ids", "created_ms", "last_used_ms", "epoch", "partitions",
                 "cached_size", "evictable_by_all", "evictable_by_privileged")

    def __init__(self, session_id, privileged, uses_topic_ids, now_ms, partitions):
        self.id = session_id
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.created_ms = self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)  # what the first incremental fetch must carry
        # (topic id or name, partition) -> CachedPartition, in fetch order: a partition that
        # returned records moves to the back, so others get the first bytes of a tight max_bytes
        self.partitions = {self.key(cp.topic, cp.topic_id, cp.partition): cp for cp in partitions}
        self.cached_size = len(self.partitions)
        self.evictable_by_all = self.evictable_by_privileged = False

    def key(self, topic, topic_id, partition):
        return (topic_id if self.uses_topic_ids else topic, partition)

    def update(self, topics, forgotten):
        """Apply an incremental request: its partitions are added or replace their fetch
        parameters, ``forgotten`` (ForgottenTopic list) ones leave. ``topics`` are
        [(name or None, FetchTopic)]."""
        parts = self.partitions
        for name, t in topics:
            for fp in t.partitions:
                k = self.key(name, t.topic_id, fp.partition)
                cp = parts.get(k)
                if cp is None:
                    parts[k] = CachedPartition(None if self.uses_topic_ids else name, t.topic_id, fp)
                else:
                    cp.update_request(fp)
        for t in forgotten:
            for p in t.partitions:
                parts.pop(self.key(t.topic, t.topic_id, p), None)

    def groups(self) -> list[PartitionGroup]:
        out = []
        last = None
        for (topic_key, _p), cp in self.partitions.items():
            if topic_key != last:
                out.append(PartitionGroup(cp.topic, cp.topic_id, []))
                last = topic_key
            out[-1].partitions.append(cp)
        return out

    def select(self, groups, topics):
        """The response topics (built from ``groups``, in order) cut down to partitions that
        changed since the last response of this session; remembers what was sent."""
        out = []
        to_back = []
        for g, t in zip(groups, topics):
            keep = []
            for cp, pd in zip(g.partitions, t.partitions):
                if cp.changed(pd):
                    keep.append(pd)
                    if pd.records is not None and len(pd.records):
                        to_back.append(cp)
            if keep:
                t.partitions = keep
                out.append(t)
        parts = self.partitions
        for cp in to_back:
            k = self.key(cp.topic, cp.topic_id, cp.partition)
            parts[k] = parts.pop(k)
        return out


class FetchSessionCache:
    """The broker's sessions by id, bounded by ``max_slots``. Times are milliseconds from a
    monotonic clock (the caller's)."""

    def __init__(self, max_slots=1000, eviction_ms=EVICTION_MS):
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    @classmethod
    def of_broker(cls, broker) -> FetchSessionCache | None:
        """A broker's cache if one was made (for its metrics)."""
        return _caches.get(broker)

    @classmethod
    def for_broker(cls, broker) -> FetchSessionCache:
        """The cache of a broker, made on first use (a broker whose clients never ask for
        sessions never has one)."""
        cache = _caches.get(broker)
        if cache is None:
            cache = _caches[broker] = cls(broker.config["max.incremental.fetch.session.cache.slots"])
        return cache

    def get(self, session_id) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session, now_ms):
        """Mark a session used, and re-rank it for eviction (as Kafka, from its size and age now)."""
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.created_ms > self.eviction_ms
        session.evictable_by_all = old
        session.evictable_by_privileged = old or not session.privileged

    def maybe_create(self, now_ms, privileged, uses_topic_ids, size, make_partitions) -> FetchSession | None:
        """A new session for ``size`` partitions (``make_partitions()`` gives them, called only
        if there is room), or None when the cache is full and nothing may be evicted."""
        if len(self.sessions) >= self.max_slots and not self._try_evict(privileged, size, now_ms):
            return None
        while True:
            # random, as Kafka's: a closed session's id is unlikely to come back soon for someone else
            session_id = random.randint(1, _INT32_MAX)
            if session_id not in self.sessions:
                break
        session = FetchSession(session_id, privileged, uses_topic_ids, now_ms, make_partitions())
        self.sessions[session_id] = session
        self.touch(session, now_ms)
        return session

    def _try_evict(self, privileged, size, now_ms) -> bool:
        # Linear scans: they run only when the cache is full and a new session is asked for.
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            victim = lru
        else:
            if privileged:
                candidates = [s for s in self.sessions.values() if s.evictable_by_privileged]
            else:
                candidates = [s for s in self.sessions.values() if s.evictable_by_all]
            if not candidates:
                return False
            victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
            # the newcomer ranks as id 0: on a tie in privilege and size the incumbent stays
            if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.id):
                return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True


_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
