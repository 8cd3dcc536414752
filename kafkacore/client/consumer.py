"""kafkacore.Consumer: Kafka's consumer with the Java client's config names and defaults.

    c = Consumer({"bootstrap.servers": "...", "group.id": "g", "auto.offset.reset": "earliest"})
    c.subscribe(["topic"], on_assign=..., on_revoke=...)   # or a compiled regex / "^pattern"
    c.assign([("topic", 0)])                                # a free consumer: no group membership
    c.poll(timeout=1.0, max_records=500) -> [ConsumerRecord]
    c.poll_arrow(timeout=1.0, max_records=100_000) -> pyarrow.RecordBatch (Spark's Kafka schema)
    c.commit(); c.committed(...); c.position(...); c.seek(...); c.lag(); c.close()

A background fetcher (kafkacore/client/fetcher.py) keeps fetches in flight and buffers the
next responses (prefetch); poll() decodes them natively (decode_records / decode_to_arrow),
checking every batch's CRC when check.crcs is on (the default). Group membership, heartbeats
and commits are in kafkacore/client/group.py.

Partitions are (topic, partition) tuples throughout; offsets are the next offset to read, as
Kafka commits them.
"""
from __future__ import annotations

import re
import threading
import time

from .._loader import load_native
from ..errors import (CorruptRecordBatchError, KafkaConfigError, KafkaError, KafkaTimeoutError,
                      NoOffsetForPartitionError, OffsetOutOfRangeError, error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from ..record import CorruptRecordError, UnsupportedCodecError, decode_segments_to_arrow
from . import records_py
from .cluster import Cluster
from .security import client_security
from .config import consumer_config
from .connection import ConnectionClosed
from .fetcher import Fetcher, TopicPartitionState

_native = load_native("records")
if _native is not None:
    decode_records = _native.decode_records
    ConsumerRecord = _native.ConsumerRecord
else:
    decode_records = records_py.decode_records
    ConsumerRecord = records_py.ConsumerRecord

_ListOffsetsRequest = request_class(ApiKey.LIST_OFFSETS)
_lo = __import__("kafkacore.protocol.messages.list_offsets_request", fromlist=["x"])
_LOTopic, _LOPartition = _lo.ListOffsetsTopic, _lo.ListOffsetsPartition
EARLIEST, LATEST = -2, -1


def _tp_list(partitions) -> list:
    out = []
    for item in partitions:
        if len(item) not in (2, 3):
            raise TypeError(f"partitions are (topic, partition) or (topic, partition, offset), got {item!r}")
        out.append(tuple(item))
    return out


class Consumer:
    def __init__(self, config: dict | None = None, *, _embedded=None):
        self.config = c = consumer_config(config, bootstrap_required=_embedded is None)
        self._check_crcs = c["check.crcs"]
        self._max_poll_records = c["max.poll.records"]
        self._reset = c["auto.offset.reset"]
        self._isolation = 1 if c["isolation.level"] == "read_committed" else 0
        self._lock = threading.Lock()
        self._data_ready = threading.Condition(self._lock)
        self._states: dict[tuple, TopicPartitionState] = {}
        self._round_robin = 0
        self._closed = False
        self._subscribed = None  # set of topics, or a compiled pattern
        self._on_assign = self._on_revoke = self._on_lost = None
        self._auto_commit = c["enable.auto.commit"] and c["group.id"] is not None
        self._auto_commit_interval = c["auto.commit.interval.ms"] / 1000.0
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        self._last_metadata_check = 0.0
        if _embedded is not None:
            self._cluster = _embedded.cluster_view()
        else:
            self._cluster = Cluster(c["bootstrap.servers"], c["client.id"] or "kafkacore-consumer",
                                    c["request.timeout.ms"], c["metadata.max.age.ms"],
                                    c["socket.connection.setup.timeout.ms"], c["send.buffer.bytes"],
                                    c["receive.buffer.bytes"], security=client_security(c))
        self._fetcher = Fetcher(c, self._cluster, self._states, self._lock, self._data_ready)
        self._fetcher.start()
        self._group = None
        self._broker_regex = None  # group.protocol=consumer: a "^" subscription the coordinator resolves
        if c["group.id"] is not None:
            if c["group.protocol"] == "consumer":
                from .consumer_membership import ConsumerMembershipManager as membership
            else:
                from .group import ConsumerCoordinator as membership
            self._group = membership(c, self._cluster, self)

    # -- subscription and assignment ------------------------------------------------------
    def subscribe(self, topics, on_assign=None, on_revoke=None, on_lost=None):
        """Joins the group for ``topics`` (a list of names, or a regex: a compiled pattern or a
        string starting with ``^``). Callbacks get (consumer, [(topic, partition)]).

        With group.protocol=consumer a ``^`` string is sent to the coordinator as is
        (SubscribedTopicRegex: RE2 syntax, whole names, as librdkafka sends its ``^`` patterns);
        a compiled pattern is matched here against the cluster's topics and their names are
        sent, as Java's subscribe(Pattern) does."""
        if self._group is None:
            raise KafkaConfigError("subscribe() needs a group.id (use assign() without one)")
        self._broker_regex = None
        if isinstance(topics, str) and topics.startswith("^") or isinstance(topics, re.Pattern):
            if isinstance(topics, str) and self.config["group.protocol"] == "consumer":
                self._broker_regex = topics
            self._subscribed = re.compile(topics) if isinstance(topics, str) else topics
            # a compiled pattern matches whole names, as Java's Pattern.matcher(topic).matches();
            # a "^" string is searched, as librdkafka's regexec() does ("^foo" takes "foobar")
            self._pattern_matches = topics.fullmatch if isinstance(topics, re.Pattern) else self._subscribed.search
        else:
            topics = [topics] if isinstance(topics, str) else list(topics)
            if not topics or not all(isinstance(t, str) and t for t in topics):
                raise ValueError(f"subscribe() needs topic names, got {topics!r}")
            self._subscribed = set(topics)
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
        if self._broker_regex is not None:
            self._group.set_subscription(set(), regex=self._broker_regex)
        else:
            self._group.set_subscription(self._subscription_topics())

    def _subscription_topics(self) -> set:
        if isinstance(self._subscribed, re.Pattern) and self._broker_regex is None:
            self._cluster.refresh(None)
            return {t for t in self._cluster.partition_counts
                    if self._pattern_matches(t) and t not in self._cluster.internal_topics}
        return set(self._subscribed or ())

    def unsubscribe(self):
        if self._group is not None:
            # revoked (positions committed, on_revoke called) while still a member, then leaving
            if self._group.owned:
                self._revoke(set(self._group.owned), lost=False)
                self._group.owned = set()
            self._group.leave("the consumer unsubscribed")
            self._group.subscription = set()
        self._subscribed = self._broker_regex = None
        self._set_assignment(set())

    def assign(self, partitions):
        """Reads exactly these partitions (no group membership); (topic, partition) or
        (topic, partition, offset) items."""
        if self._subscribed is not None:
            raise KafkaConfigError("assign() after subscribe(): call unsubscribe() first")
        items = _tp_list(partitions)
        self._set_assignment({(i[0], i[1]) for i in items})
        for i in items:
            if len(i) == 3:
                self.seek(i[0], i[1], i[2])

    def assignment(self) -> set:
        return set(self._states)

    def consumer_group_metadata(self):
        """What a transactional producer's send_offsets_to_transaction needs: the group id,
        generation and member id (KIP-447: the coordinator refuses offsets from a consumer that
        is no longer a member of the current generation)."""
        from .transaction_manager import ConsumerGroupMetadata

        if self.config["group.id"] is None:
            raise KafkaConfigError("consumer_group_metadata() needs a group.id")
        g = self._group
        return ConsumerGroupMetadata(self.config["group.id"], g.generation if g is not None else -1,
                                     g.member_id if g is not None else "", self.config["group.instance.id"])

    def _set_assignment(self, tps: set):
        with self._lock:
            for tp in list(self._states):
                if tp not in tps:
                    del self._states[tp]
            for tp in tps:
                if tp not in self._states:
                    self._states[tp] = TopicPartitionState()
        self._fetcher.wakeup()

    # called by the group coordinator, on this thread, inside poll()
    def _assign_group(self, owned: set, added: set):
        self._set_assignment(set(owned))
        if self._on_assign is not None:
            self._on_assign(self, sorted(added))

    def _wakeup(self):
        """A poll() waiting for records looks at the group again (an assignment arrived)."""
        with self._lock:
            self._data_ready.notify_all()

    def _revoke(self, revoked: set, lost: bool):
        if not lost and self._auto_commit:
            try:
                self._commit_positions({tp for tp in revoked if tp in self._states})
            except KafkaError as e:
                import logging
                logging.getLogger("kafkacore.consumer").warning("commit on revoke failed: %s", e)
        cb = self._on_lost if lost and self._on_lost is not None else self._on_revoke
        if cb is not None:
            cb(self, sorted(revoked))
        self._set_assignment(set(self._states) - set(revoked))

    # -- positions ------------------------------------------------------------------------
    def seek(self, topic, partition, offset):
        with self._lock:
            st = self._states.get((topic, partition))
            if st is None:
                raise ValueError(f"{topic}-{partition} is not assigned to this consumer")
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise TypeError("offset must be an int")
            self._reposition(st, offset if offset >= 0 else None, reset=None if offset >= 0 else
                             ("earliest" if offset == EARLIEST else "latest"))
        self._fetcher.wakeup()

    @staticmethod
    def _reposition(st, offset, reset=None):
        st.version += 1
        st.buffered.clear()
        st.in_flight = False
        st.position = st.fetch_position = offset
        st.reset_to = reset
        st.error = None

    def seek_to_beginning(self, partitions=None):
        self._seek_all(partitions, "earliest")

    def seek_to_end(self, partitions=None):
        self._seek_all(partitions, "latest")

    def _seek_all(self, partitions, where):
        with self._lock:
            tps = list(self._states) if partitions is None else [tuple(p) for p in partitions]
            for tp in tps:
                st = self._states.get(tp)
                if st is None:
                    raise ValueError(f"{tp[0]}-{tp[1]} is not assigned to this consumer")
                self._reposition(st, None, reset=where)

    def position(self, topic, partition, timeout=None) -> int:
        """The offset of the next record poll() returns for the partition."""
        self._update_positions(timeout)
        st = self._states.get((topic, partition))
        if st is None:
            raise ValueError(f"{topic}-{partition} is not assigned to this consumer")
        if st.position is None:
            raise KafkaTimeoutError(f"no position for {topic}-{partition} yet")
        return st.position

    def _update_positions(self, timeout=None):
        """Finds a position for every partition without one: the committed offset, else
        auto.offset.reset (or the reset a seek_to_* or an out-of-range fetch asked for)."""
        with self._lock:
            need = {tp: st.reset_to for tp, st in self._states.items() if st.position is None or st.reset_to}
        if not need:
            return
        committed = {}
        fresh = [tp for tp, r in need.items() if r is None]
        if fresh and self._group is not None:
            committed = self._group.committed(fresh)
        resets = {}
        for tp, r in need.items():
            if r is None and committed.get(tp) is not None:
                continue
            policy = r if r in ("earliest", "latest") else self._reset
            if policy == "none":
                why = "is out of range" if r == "out-of-range" else "has no committed offset"
                err = (OffsetOutOfRangeError if r == "out-of-range" else NoOffsetForPartitionError)(
                    f"{tp[0]}-{tp[1]} {why} and auto.offset.reset=none")
                with self._lock:
                    st = self._states.get(tp)
                    if st is not None:
                        st.error = err
                        st.reset_to = None
                continue
            resets[tp] = EARLIEST if policy == "earliest" else LATEST
        found = self._list_offsets(resets, timeout) if resets else {}
        with self._lock:
            for tp, off in list(committed.items()) + [(tp, o[0]) for tp, o in found.items()]:
                st = self._states.get(tp)
                if off is None or st is None or (tp in committed and need.get(tp) is not None):
                    continue
                if st.position is None or st.reset_to:
                    self._reposition(st, off)
        self._fetcher.wakeup()

    def _list_offsets(self, targets: dict, timeout: float | None = None) -> dict:
        """{(topic, partition): (offset, timestamp)} from the partitions' leaders. Partitions
        whose leader moved, is unreachable or is not known yet (metadata from before a failover)
        are asked again after a metadata refresh, with backoff, for ``timeout`` seconds
        (default.api.timeout.ms when None; one retry at least, so a stale view never fails
        alone), as Java's consumer does; a partition the cluster does not have fails at once."""
        if timeout is None:
            timeout = self.config["default.api.timeout.ms"] / 1000.0
        deadline = time.monotonic() + timeout
        retried = False
        backoff = self.config["retry.backoff.ms"] / 1000.0
        max_backoff = max(backoff, self.config["retry.backoff.max.ms"] / 1000.0)
        pending = dict(targets)
        out = {}
        refresh = any(self._cluster.leader(*tp) is None for tp in pending)
        while True:
            last = refresh_failed = None  # the retriable error that left something pending
            if refresh:
                try:
                    self._cluster.refresh(sorted({t for t, _p in pending}))
                except (ConnectionClosed, KafkaError) as e:
                    if not getattr(e, "retriable", True):
                        raise
                    last = refresh_failed = e
            by_leader: dict = {}
            for tp, ts in pending.items():
                leader = self._cluster.leader(*tp)
                if leader is None:
                    err = error_for_code(5, f"no leader for {tp[0]}-{tp[1]}")
                    if refresh_failed is None and tp[1] >= self._cluster.partition_counts.get(tp[0], 0):
                        raise err  # no such partition: waiting would not make it appear
                    last = last or err  # offline for now (no live ISR member), or metadata not reached
                    continue
                by_leader.setdefault(leader, {})[tp] = ts
            for leader, tps in by_leader.items():
                topics: dict = {}
                for (t, p), ts in tps.items():
                    topics.setdefault(t, []).append(_LOPartition(partition_index=p, current_leader_epoch=-1,
                                                                 timestamp=ts, max_num_offsets=1))
                body = _ListOffsetsRequest(replica_id=-1, isolation_level=self._isolation, timeout_ms=30000,
                                           topics=[_LOTopic(name=t, partitions=ps) for t, ps in topics.items()])
                try:
                    conn = self._cluster.connect(leader)
                    try:
                        resp = conn.call(ApiKey.LIST_OFFSETS, body)
                    finally:
                        conn.close()
                except (ConnectionClosed, KafkaError) as e:
                    if isinstance(e, KafkaError) and not e.retriable:
                        raise
                    last = e  # a leader that died (or is dying): metadata names its successor soon
                    continue
                for t in resp.topics:
                    for p in t.partitions:
                        tp = (t.name, p.partition_index)
                        if p.error_code:
                            err = error_for_code(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
                            if not err.retriable:
                                raise err
                            last = err  # NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...: stale metadata
                            continue
                        out[tp] = (p.offset, p.timestamp)
                        pending.pop(tp, None)
            if not pending:
                return out
            if last is None:  # the leaders left partitions out of their answers
                last = error_for_code(5, "ListOffsets answered without " + ", ".join(f"{t}-{p}" for t, p in pending))
            if retried and time.monotonic() + backoff > deadline:
                raise last
            retried = True
            time.sleep(backoff)
            backoff = min(backoff * 2, max_backoff)
            refresh = True

    def offsets_for_times(self, timestamps: dict) -> dict:
        """{(topic, partition): timestamp_ms} -> {(topic, partition): (offset, timestamp) or
        None}: the earliest offset whose timestamp is at or after the given one."""
        found = self._list_offsets({tuple(tp): int(ts) for tp, ts in timestamps.items()})
        return {tp: (None if off < 0 else (off, ts)) for tp, (off, ts) in found.items()}

    def beginning_offsets(self, partitions) -> dict:
        return {tp: o for tp, (o, _t) in self._list_offsets({tuple(tp): EARLIEST for tp in partitions}).items()}

    def end_offsets(self, partitions) -> dict:
        return {tp: o for tp, (o, _t) in self._list_offsets({tuple(tp): LATEST for tp in partitions}).items()}

    def lag(self) -> dict:
        """{(topic, partition): high watermark - position} from the latest fetch responses
        (None until a fetch answered)."""
        with self._lock:
            return {tp: (st.high_watermark - st.position if st.high_watermark >= 0 and st.position is not None
                         else None) for tp, st in self._states.items()}

    def list_topics(self) -> dict:
        """{topic: partition count} of every topic the cluster has, internal ones left out
        (fresh metadata)."""
        self._cluster.refresh()
        with self._cluster._lock:
            return {t: n for t, n in self._cluster.partition_counts.items()
                    if t not in self._cluster.internal_topics}

    # -- pause / resume -------------------------------------------------------------------
    def pause(self, partitions):
        with self._lock:
            for tp in partitions:
                st = self._states.get(tuple(tp))
                if st is None:
                    raise ValueError(f"{tp} is not assigned to this consumer")
                st.paused = True

    def resume(self, partitions):
        with self._lock:
            for tp in partitions:
                st = self._states.get(tuple(tp))
                if st is None:
                    raise ValueError(f"{tp} is not assigned to this consumer")
                st.paused = False
        self._fetcher.wakeup()

    def paused(self) -> set:
        return {tp for tp, st in self._states.items() if st.paused}

    # -- polling --------------------------------------------------------------------------
    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list:
        """Up to ``max_records`` (max.poll.records) records, waiting up to ``timeout`` seconds
        for the first; [] when none came."""
        return self._poll(timeout, max_records or self._max_poll_records, arrow=False)

    def poll_arrow(self, timeout: float = 1.0, max_records: int = 100_000):
        """Like poll, as one pyarrow.RecordBatch in the schema of Spark's Kafka source (key,
        value, topic, partition, offset, timestamp, timestampType, headers), decoded natively."""
        return self._poll(timeout, max_records, arrow=True)

    def _poll(self, timeout, max_records, arrow):
        if self._closed:
            raise KafkaError("the consumer is closed")
        deadline = time.monotonic() + (timeout or 0)
        while True:
            self._maintain(deadline)
            out = self._take(max_records, arrow)
            if out is not None:
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return self._empty_arrow() if arrow else []
            with self._lock:
                if not any(st.buffered or st.error for st in self._states.values()):
                    self._data_ready.wait(min(left, 0.1))

    def _maintain(self, deadline):
        if self._group is not None:
            if isinstance(self._subscribed, re.Pattern) and self._broker_regex is None and \
                    time.monotonic() - self._last_metadata_check > max(
                    1.0, self.config["metadata.max.age.ms"] / 1000.0):
                self._last_metadata_check = time.monotonic()
                self._group.set_subscription(self._subscription_topics())
            if self._subscribed is not None:  # assign() with a group.id: offsets only, no membership
                self._group.poll(deadline - time.monotonic())
            if self._auto_commit and time.monotonic() >= self._next_auto_commit:
                self._next_auto_commit = time.monotonic() + self._auto_commit_interval
                try:
                    self._commit_positions(None)
                except KafkaError as e:
                    import logging
                    logging.getLogger("kafkacore.consumer").warning("auto-commit failed: %s", e)
        self._update_positions(max(0.0, deadline - time.monotonic()))  # a reset waits no longer than the poll

    def _take(self, max_records, arrow):
        with self._lock:
            items = list(self._states.items())
        if not items:
            return None
        n = len(items)
        start = self._round_robin % n
        self._round_robin += 1
        # decoded ahead (the pieces it saw): fetched data that arrives meanwhile waits for the
        # next poll, rather than be decoded alone and copied into this one's batch
        seen = self._decode_ahead([items[(start + k) % n] for k in range(n)], max_records) if arrow else None
        out, parts, total = [], [], 0
        for k in range(n):
            tp, st = items[(start + k) % n]
            if st.error is not None:
                err, st.error = st.error, None
                raise err
            while st.buffered and total < max_records:
                data = st.buffered[0]
                if st.position is None or (seen is not None and data not in seen):
                    break
                got = self._decode(tp, st, data, max_records - total, arrow)
                if got is None:  # the buffered data was stale (position moved): drop it
                    with self._lock:
                        if st.buffered and st.buffered[0] is data:
                            st.buffered.popleft()
                    continue
                count, chunk, next_pos, exhausted = got
                if count:
                    if arrow:  # with where it lies in the batch it was decoded in, for _join
                        parts.append((chunk, data.arrow_base, data.arrow_at + data.used - count))
                    else:
                        out.extend(chunk)
                    total += count
                with self._lock:
                    if st.buffered and st.buffered[0] is data:
                        if next_pos is not None:
                            st.position = next_pos
                        if exhausted:
                            st.buffered.popleft()
                if exhausted:
                    self._fetcher.wakeup()
            if total >= max_records:
                break
        if total == 0:
            return None
        if arrow:
            return _join(parts, total)
        return out

    def _decode_ahead(self, order, limit):
        """Decodes, in one native call, the fetched data this poll_arrow() is about to take (in
        ``order``, as _take visits it, up to about ``limit`` rows by offsets), so that the rows
        it returns are consecutive in one batch: a slice, where decoding each fetched piece
        alone leaves pieces that only a concatenation (a copy of every key and value) joins.
        Returns the pieces buffered when it looked (None: it decoded nothing ahead)."""
        segs, ahead, seen, span = [], [], set(), 0
        for tp, st in order:
            if st.error is not None or span >= limit:
                break  # _take raises that error at this partition: nothing after it is taken
            pos = st.position
            if pos is None:
                continue
            with self._lock:
                buffered = list(st.buffered)
            seen.update(buffered)
            for data in buffered:
                if data.arrow is not None or data.decoded is not None:
                    break  # a piece decoded before: taken as it is, and the rest after it
                if not data.fetch_offset <= pos < data.next_offset:
                    break  # stale (a seek since): _take drops it
                segs.append((data.records, tp[0], tp[1], data.aborted))
                ahead.append((data, pos))
                span += data.next_offset - pos
                pos = data.next_offset
                if span >= limit:
                    break
        if len(segs) < 2:
            return None  # one piece: decoded as always, nothing to join
        try:
            batch, counts = decode_segments_to_arrow(segs, self._check_crcs)
        except (CorruptRecordError, UnsupportedCodecError):
            return None  # each piece is decoded alone instead, and the bad one reports as it always has
        at = 0
        for (data, pos), rows in zip(ahead, counts):
            data.arrow = batch.slice(at, rows)
            data.arrow_base, data.arrow_at = batch, at
            data.used = _first_at(data.arrow, pos)
            at += rows
        return seen

    def _decode(self, tp, st, data, limit, arrow):
        """(count, records or arrow batch, new position, whether the data is used up)."""
        pos = st.position
        if pos < data.fetch_offset or pos >= data.next_offset:
            return None
        try:
            if arrow:
                if data.arrow is None:
                    data.arrow = _decode_arrow(data.records, tp, self._check_crcs, data.aborted)
                    data.arrow_base, data.arrow_at = None, 0
                    data.used = _first_at(data.arrow, pos)
                batch = data.arrow
                avail = batch.num_rows - data.used
                take = min(avail, limit)
                chunk = batch.slice(data.used, take)
                data.used += take
                exhausted = data.used >= batch.num_rows
                if take:
                    last = chunk.column(4)[take - 1].as_py()
                    new_pos = last + 1
                else:
                    new_pos = data.next_offset
                return take, chunk, data.next_offset if exhausted else new_pos, exhausted
            if data.decoded is None:
                data.decoded, good_end, data.error = decode_records(data.records, tp[0], tp[1], pos,
                                                                    self._check_crcs, data.aborted)
                if data.error is not None:
                    data.next_offset = good_end  # the records before the bad batch come first
                data.used = 0
            recs = data.decoded
            take = min(len(recs) - data.used, limit)
            chunk = recs[data.used:data.used + take] if (data.used or take < len(recs)) else recs
            data.used += take
            exhausted = data.used >= len(recs)
            new_pos = data.next_offset if exhausted else chunk[-1].offset + 1
            if exhausted and data.error is not None:
                st.error = CorruptRecordBatchError(str(data.error.reason))
            return take, chunk, new_pos, exhausted
        except CorruptRecordError as e:
            with self._lock:
                st.buffered.clear()
            raise CorruptRecordBatchError(str(e.reason if hasattr(e, "reason") else e)) from e

    @staticmethod
    def _empty_arrow():
        from ..record.arrow_schema import empty_batch
        return empty_batch()

    # -- commits --------------------------------------------------------------------------
    def _commit_positions(self, tps):
        with self._lock:
            offsets = {tp: st.position for tp, st in self._states.items()
                       if st.position is not None and (tps is None or tp in tps)}
        if offsets:
            self._group.commit(offsets)

    def commit(self, offsets=None, asynchronous: bool = False, callback=None):
        """Commits ``offsets`` ({(topic, partition): next offset} or [(topic, partition,
        offset)]), or the current positions of every assigned partition."""
        if self._group is None:
            raise KafkaConfigError("commit() needs a group.id")
        if offsets is None:
            with self._lock:
                offsets = {tp: st.position for tp, st in self._states.items() if st.position is not None}
        elif not isinstance(offsets, dict):
            offsets = {(t, p): o for t, p, o in offsets}
        if asynchronous:
            self._group.commit_async(dict(offsets), callback)
            return None
        self._group.commit(dict(offsets))
        return dict(offsets)

    def committed(self, partitions, timeout=None) -> dict:
        if self._group is None:
            raise KafkaConfigError("committed() needs a group.id")
        return self._group.committed([tuple(tp) for tp in partitions])

    # -- lifecycle ------------------------------------------------------------------------
    def close(self, autocommit: bool = True):
        if self._closed:
            return
        try:
            if self._group is not None:
                if autocommit and self._auto_commit:
                    try:
                        self._commit_positions(None)
                    except (KafkaError, ConnectionClosed, OSError):
                        pass
                self._group.leave()
                self._group.close()
        finally:
            self._closed = True
            self._fetcher.stop()
            self._fetcher.join(5)
            self._cluster.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _decode_arrow(records, tp, check_crcs, aborted=None):
    from ..record import decode_to_arrow
    try:
        return decode_to_arrow(records, tp[0], tp[1], check_crcs, aborted)
    except CorruptRecordError as e:
        raise CorruptRecordError(f"{tp[0]}-{tp[1]}: {e.reason}", e.position) from None


def _first_at(batch, position) -> int:
    """Index of the first row at ``position`` or later (offsets ascend)."""
    if batch.num_rows == 0:
        return 0
    import numpy as np
    col = batch.column(4)  # int64, never null: its values buffer read in place; to_numpy()
    # would make pyarrow import pandas when it is installed (seconds at a process's first poll)
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int64, count=len(col), offset=col.offset * 8)
    return int(np.searchsorted(offsets, position, side="left"))


def _join(parts, total):
    """One record batch of poll_arrow()'s pieces ((batch, base, start in base)): a slice of
    their base when they lie in it one after another, else their concatenation."""
    first, base, at = parts[0]
    if len(parts) == 1:
        return first
    if base is not None:
        end = at
        for chunk, b, start in parts:
            if b is not base or start != end:
                break
            end += chunk.num_rows
        else:
            return base.slice(at, total)
    return _concat([p[0] for p in parts])


def _concat(parts):
    import pyarrow as pa
    if hasattr(pa, "concat_batches"):
        return pa.concat_batches(parts)
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
