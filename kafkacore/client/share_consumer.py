"""kafkacore.ShareConsumer: a KIP-932 share group member, with the config names and calls of
Kafka's KafkaShareConsumer and confluent-kafka's ShareConsumer.

    c = ShareConsumer({"bootstrap.servers": "...", "group.id": "g"})
    c.subscribe(["topic"])
    for r in c.poll(1.0): ...                 # ShareConsumerRecord: a ConsumerRecord + delivery_count
    c.acknowledge(r, AcknowledgeType.RELEASE) # share.acknowledgement.mode=explicit
    c.commit_sync(); c.commit_async(); c.close()
    c.poll_arrow(1.0) -> pyarrow.RecordBatch  # Consumer.poll_arrow's columns + delivery_count

Members of a share group read the same partitions together: each ShareFetch acquires records
under a time-limited lock (the group's share.record.lock.duration.ms), and the member says what
became of each: ACCEPT (done), RELEASE (give it to someone again, its delivery count raised) or
REJECT (never again). Implicit mode (the default) accepts the records of a poll at the next
poll, commit or close; explicit mode needs every record of a poll acknowledged before the next
poll (else IllegalStateError, the Java client's IllegalStateException).

Membership is share_membership.py's. Fetching is synchronous, on the application's thread
inside poll(): one share session per partition leader (ShareFetch epoch 0 opens it, each request
carries the next epoch, -1 closes it), the pending acknowledgements piggy-backed on the next
ShareFetch, or sent alone by ShareAcknowledge (commit_sync / commit_async / close). Batches are
decoded as the Consumer decodes them (native decode_records / decode_to_arrow, or their twins)
and only the offsets in the answer's AcquiredRecords are delivered; an acquired offset with no
record (a control record, a compacted one) is acknowledged as a GAP.

Errors as Kafka's client handles them: NOT_LEADER_OR_FOLLOWER and the other stale-metadata
errors refresh the metadata; SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH reopen the
session (acknowledgements it carried are lost: the broker released those records, which come
back); UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH make the membership rejoin.
"""
from __future__ import annotations

import enum
import logging
import struct
import time
from collections import deque

from .._loader import load_native
from ..errors import (STALE_METADATA_ERRORS, CorruptRecordBatchError, FencedMemberEpochError,
                      InvalidShareSessionEpochError, KafkaError, KafkaTimeoutError, ShareSessionNotFoundError,
                      UnknownMemberIdError, error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, next_epoch
from ..protocol.frames import request_class
from ..record import CorruptRecordError
from ..record.layout import BASE_OFFSET_OFFSET, LAST_OFFSET_DELTA_OFFSET, LENGTH_OFFSET, LOG_OVERHEAD
from . import records_py
from .cluster import Cluster
from .config import share_consumer_config
from .connection import ConnectionClosed
from .security import client_security
from .share_membership import ShareMembership

log = logging.getLogger("kafkacore.share_consumer")

_native = load_native("records")
decode_records = _native.decode_records if _native is not None else records_py.decode_records

_ShareFetchRequest = request_class(ApiKey.SHARE_FETCH)
_ShareAcknowledgeRequest = request_class(ApiKey.SHARE_ACKNOWLEDGE)
_sf = __import__("kafkacore.protocol.messages.share_fetch_request", fromlist=["x"])
_sa = __import__("kafkacore.protocol.messages.share_acknowledge_request", fromlist=["x"])

_SESSION_ERRORS = {ShareSessionNotFoundError.code, InvalidShareSessionEpochError.code}
_MEMBER_ERRORS = {UnknownMemberIdError.code, FencedMemberEpochError.code}


class AcknowledgeType(enum.IntEnum):
    """Kafka's AcknowledgeType, with its wire numbers."""
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


GAP = 0  # the wire's type for an acquired offset with no record (never the application's)


class IllegalStateError(RuntimeError):
    """A call the consumer's state does not allow (the Java client's IllegalStateException)."""


class ShareConsumerRecord:
    """A record of a share fetch: the ConsumerRecord the Consumer would return (``record``),
    its attributes, and ``delivery_count`` (1 at the first delivery)."""

    __slots__ = ("record", "delivery_count")

    def __init__(self, record, delivery_count):
        self.record, self.delivery_count = record, delivery_count

    topic = property(lambda self: self.record.topic)
    partition = property(lambda self: self.record.partition)
    offset = property(lambda self: self.record.offset)
    timestamp_ms = property(lambda self: self.record.timestamp_ms)
    timestamp_type = property(lambda self: self.record.timestamp_type)
    key = property(lambda self: self.record.key)
    value = property(lambda self: self.record.value)
    headers = property(lambda self: self.record.headers)

    def __repr__(self):
        return f"ShareConsumerRecord({self.record!r}, delivery_count={self.delivery_count})"


_int64 = struct.Struct(">q")
_int32 = struct.Struct(">i")


def _acquired_part(records, first, last):
    """The batches of ``records`` that hold offsets ``first``..``last``: a ShareFetch answer may
    carry more of the log than this member acquired, and decoding it all would cost every poll."""
    view = memoryview(records)
    pos, start, end = 0, None, len(view)
    while pos + LOG_OVERHEAD <= len(view):
        base = _int64.unpack_from(view, pos + BASE_OFFSET_OFFSET)[0]
        size = LOG_OVERHEAD + _int32.unpack_from(view, pos + LENGTH_OFFSET)[0]
        if base > last:
            end = pos
            break
        if start is None and pos + LAST_OFFSET_DELTA_OFFSET + 4 <= len(view) and \
                base + _int32.unpack_from(view, pos + LAST_OFFSET_DELTA_OFFSET)[0] >= first:
            start = pos
        pos += size
    return view[start or 0:end] if start is not None else view[:end]


class _Fetched:
    """One partition's acquired records from a ShareFetch answer, not yet all handed out."""

    __slots__ = ("tp", "node", "records", "ranges", "decoded", "used")

    def __init__(self, tp, node, records, ranges):
        self.tp, self.node, self.records, self.ranges = tp, node, records, ranges  # ranges: [(first, last, count)]
        self.decoded = None  # [ShareConsumerRecord] or a pyarrow.RecordBatch
        self.used = 0


class _ShareSession:
    """The share session with one broker: its connection, epoch and partitions."""

    __slots__ = ("node", "conn", "epoch", "partitions")

    def __init__(self, node, conn):
        self.node, self.conn, self.epoch, self.partitions = node, conn, INITIAL_EPOCH, set()


class ShareConsumer:
    def __init__(self, config: dict | None = None):
        self.config = c = share_consumer_config(config)
        self._explicit = c["share.acknowledgement.mode"] == "explicit"
        self._max_poll_records = c["max.poll.records"]
        self._check_crcs = c["check.crcs"]
        self._request_timeout = c["request.timeout.ms"] / 1000.0
        self._cluster = Cluster(c["bootstrap.servers"], c["client.id"] or "kafkacore-share-consumer",
                                c["request.timeout.ms"], c["metadata.max.age.ms"],
                                c["socket.connection.setup.timeout.ms"], c["send.buffer.bytes"],
                                c["receive.buffer.bytes"], security=client_security(c))
        self._membership = ShareMembership(c, self._cluster)
        self._sessions: dict[int, _ShareSession] = {}
        self._buffer: deque[_Fetched] = deque()
        self._delivered: dict[tuple, dict[int, int]] = {}  # handed out, not acknowledged: tp -> {offset: count}
        self._acks: dict[tuple, dict[int, int]] = {}  # acknowledged, not yet sent: tp -> {offset: type}
        self._async_results = None  # commit_async's (callback, results) awaiting its answers
        self._need_metadata = False
        self._subscription: list[str] = []
        self._closed = False

    # -- subscription ---------------------------------------------------------------------
    def subscribe(self, topics):
        topics = [topics] if isinstance(topics, str) else list(topics)
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise ValueError(f"subscribe() needs topic names, got {topics!r}")
        self._check_open()
        self._subscription = sorted(set(topics))
        self._membership.subscribe(self._subscription)

    def unsubscribe(self):
        self._check_open()
        self._settle_implicit()
        self._membership.leave()
        self._subscription = []

    def subscription(self) -> list:
        return list(self._subscription)

    def assignment(self) -> set:
        return set(self._membership.assignment)

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    # -- acknowledgements -----------------------------------------------------------------
    def acknowledge(self, record, type: AcknowledgeType = AcknowledgeType.ACCEPT):
        """Acknowledges a record of the last poll (explicit mode)."""
        self.acknowledge_offset(record.topic, record.partition, record.offset, type)

    def acknowledge_offset(self, topic, partition, offset, type: AcknowledgeType = AcknowledgeType.ACCEPT):
        self._check_open()
        if not self._explicit:
            raise IllegalStateError("acknowledge() needs share.acknowledgement.mode=explicit")
        kind = AcknowledgeType(type)
        held = self._delivered.get((topic, partition))
        if held is None or offset not in held:
            raise IllegalStateError(f"{topic}-{partition} offset {offset} is not a record of the last poll "
                                    "awaiting acknowledgement")
        del held[offset]
        if not held:
            del self._delivered[(topic, partition)]
        self._acks.setdefault((topic, partition), {})[offset] = int(kind)

    def _settle_implicit(self):
        """Implicit mode: every record handed out is accepted."""
        if self._explicit:
            return
        for tp, held in self._delivered.items():
            acks = self._acks.setdefault(tp, {})
            for off in held:
                acks[off] = int(AcknowledgeType.ACCEPT)
        self._delivered.clear()

    # -- polling --------------------------------------------------------------------------
    def poll(self, timeout: float = 1.0) -> list:
        """Up to max.poll.records acquired records (ShareConsumerRecord), waiting up to
        ``timeout`` seconds for the first; [] when none came."""
        return self._poll(timeout, self._max_poll_records, arrow=False)

    def poll_arrow(self, timeout: float = 1.0, max_records: int = 100_000):
        """Like poll, as one pyarrow.RecordBatch: the Consumer's poll_arrow columns (Spark's Kafka
        schema) and ``delivery_count`` (int16). Acknowledge rows with acknowledge_offset."""
        return self._poll(timeout, max_records, arrow=True)

    def _poll(self, timeout, max_records, arrow):
        self._check_open()
        if self._explicit and self._delivered:
            n = sum(len(v) for v in self._delivered.values())
            raise IllegalStateError(f"{n} record(s) of the last poll are not acknowledged "
                                    "(share.acknowledgement.mode=explicit): acknowledge each before polling")
        self._settle_implicit()
        deadline = time.monotonic() + (timeout or 0)
        while True:
            if self._membership.fatal is not None:
                err, self._membership.fatal = self._membership.fatal, None
                raise err
            if self._buffer:
                return self._take(max_records, arrow)
            left = deadline - time.monotonic()
            if not self._membership.assignment and not self._acks:
                if left <= 0:
                    break
                with self._membership.changed:
                    if not self._membership.assignment and self._membership.fatal is None:
                        self._membership.changed.wait(min(left, 0.1))
                continue
            self._fetch(max(0.0, left), max_records)
            if not self._buffer and deadline - time.monotonic() <= 0:
                break
        return self._empty_arrow() if arrow else []

    def _take(self, max_records, arrow):
        out, total = [], 0
        while self._buffer and total < max_records:
            f = self._buffer[0]
            try:
                self._decode(f, arrow)
            except CorruptRecordError as e:
                self._buffer.popleft()
                self._release_all(f)
                raise CorruptRecordBatchError(str(getattr(e, "reason", e))) from e
            size = f.decoded.num_rows if arrow else len(f.decoded)
            take = min(size - f.used, max_records - total)
            chunk = f.decoded.slice(f.used, take) if arrow else f.decoded[f.used:f.used + take]
            f.used += take
            total += take
            out.append(chunk)
            held = self._delivered.setdefault(f.tp, {})
            if arrow:
                for off, dc in zip(chunk.column(4).to_pylist(), chunk.column(8).to_pylist()):
                    held[off] = dc
            else:
                for r in chunk:
                    held[r.offset] = r.delivery_count
            if f.used >= size:
                self._buffer.popleft()
        if not arrow:
            return [r for chunk in out for r in chunk]
        out = [b for b in out if b.num_rows] or out[:1]
        if len(out) == 1:
            return out[0]
        import pyarrow as pa
        return pa.Table.from_batches(out).combine_chunks().to_batches()[0]

    def _decode(self, f, arrow):
        """Decodes a partition's batches once, keeping only the acquired offsets; acquired
        offsets without a record are acknowledged as GAP (Kafka's client does the same)."""
        if f.decoded is not None and (arrow == (not isinstance(f.decoded, list))):
            return
        if f.decoded is not None:  # switched between poll and poll_arrow: redecode what is left
            done = f.decoded[:f.used] if isinstance(f.decoded, list) else f.decoded.column(4).to_pylist()[:f.used]
            skip = {r.offset for r in done} if isinstance(f.decoded, list) else set(done)
        else:
            skip = set()
        topic, partition = f.tp
        first = f.ranges[0][0]
        if arrow:
            import numpy as np
            import pyarrow as pa
            from ..record import decode_to_arrow
            batch = decode_to_arrow(f.records, topic, partition, self._check_crcs, None)
            col = batch.column(4)  # int64, never null: read in place (to_numpy may import pandas)
            offsets = np.frombuffer(col.buffers()[1], dtype=np.int64, count=len(col), offset=col.offset * 8)
            counts = np.zeros(len(offsets), dtype=np.int16)
            keep = np.zeros(len(offsets), dtype=bool)
            for lo, hi, dc in f.ranges:
                m = (offsets >= lo) & (offsets <= hi)
                keep |= m
                counts[m] = dc
            if skip:
                keep &= ~np.isin(offsets, np.fromiter(skip, dtype=np.int64))
            idx = np.nonzero(keep)[0]
            batch = batch.take(pa.array(idx))
            batch = pa.RecordBatch.from_arrays(list(batch.columns) + [pa.array(counts[idx], type=pa.int16())],
                                               names=list(batch.schema.names) + ["delivery_count"])
            present = set(offsets.tolist())
            f.decoded = batch
        else:
            recs, _end, err = decode_records(f.records, topic, partition, first, self._check_crcs, None)
            if err is not None:
                raise err
            out, present = [], set()
            ri, ranges = 0, f.ranges
            end = ranges[-1][1]
            for r in recs:
                off = r.offset
                if off > end:  # a whole batch came; only part of it is ours
                    break
                while ranges[ri][1] < off:
                    ri += 1
                if ranges[ri][0] <= off:
                    present.add(off)
                    if off not in skip:
                        out.append(ShareConsumerRecord(r, ranges[ri][2]))
            f.decoded = out
        f.used = 0
        if not skip:  # the first decoding: offsets acquired without a record are GAPs
            gaps = [off for lo, hi, _dc in f.ranges for off in range(lo, hi + 1) if off not in present]
            if gaps:
                acks = self._acks.setdefault(f.tp, {})
                for off in gaps:
                    acks[off] = GAP

    def _release_all(self, f):
        acks = self._acks.setdefault(f.tp, {})
        for lo, hi, _dc in f.ranges:
            for off in range(lo, hi + 1):
                acks[off] = int(AcknowledgeType.RELEASE)

    @staticmethod
    def _empty_arrow():
        import pyarrow as pa
        from ..record.arrow_schema import empty_batch
        b = empty_batch()
        return pa.RecordBatch.from_arrays(list(b.columns) + [pa.array([], type=pa.int16())],
                                          names=list(b.schema.names) + ["delivery_count"])

    # -- ShareFetch -----------------------------------------------------------------------
    def _leaders(self, tps) -> dict:
        """{node: [tp]} for the partitions with a known leader and topic id (metadata refreshed
        once when some are missing or a response said it is stale)."""
        if self._need_metadata or any(self._cluster.leader(*tp) is None or tp[0] not in self._cluster.topic_ids
                                      for tp in tps):
            self._need_metadata = False
            try:
                self._cluster.refresh(sorted({tp[0] for tp in tps}) or None)
            except (ConnectionClosed, KafkaTimeoutError, OSError) as e:
                log.debug("metadata refresh failed: %s", e)
        out: dict[int, list] = {}
        for tp in tps:
            node = self._cluster.leader(*tp)
            if node is not None and tp[0] in self._cluster.topic_ids:
                out.setdefault(node, []).append(tp)
        return out

    def _session(self, node) -> _ShareSession:
        s = self._sessions.get(node)
        if s is None or s.conn.closed:
            s = self._sessions[node] = _ShareSession(node, self._cluster.connect(node))
        return s

    def _ack_batches(self, acks: dict, cls):
        """{offset: type} -> acknowledgement batches over runs of consecutive offsets (one type
        for a run of one type, else one type per offset)."""
        out = []
        run = []
        for off in sorted(acks):
            if run and off != run[-1] + 1:
                out.append(self._one_batch(run, acks, cls))
                run = []
            run.append(off)
        if run:
            out.append(self._one_batch(run, acks, cls))
        return out

    @staticmethod
    def _one_batch(run, acks, cls):
        types = [acks[o] for o in run]
        if all(t == types[0] for t in types):
            types = types[:1]
        return cls(first_offset=run[0], last_offset=run[-1], acknowledge_types=types)

    def _fetch(self, wait, max_records):
        self._drain_async()
        assigned = set(self._membership.assignment)
        by_node = self._leaders(assigned | set(self._acks))
        if not by_node:
            time.sleep(min(wait, self.config["retry.backoff.ms"] / 1000.0))
            return
        max_wait_ms = int(min(wait * 1000, self.config["fetch.max.wait.ms"]))
        sent = []
        for node, tps in by_node.items():
            try:
                s = self._session(node)
            except (ConnectionClosed, KafkaError, OSError) as e:
                log.debug("no connection to broker %s: %s", node, e)
                self._need_metadata = True
                continue
            topics: dict[str, list] = {}
            carried = {}
            for tp in tps:
                acks = self._acks.get(tp) if s.epoch != INITIAL_EPOCH else None
                if tp not in assigned and not acks:
                    continue
                batches = []
                if acks:
                    carried[tp] = self._acks.pop(tp)
                    batches = self._ack_batches(carried[tp], _sf.AcknowledgementBatch)
                topics.setdefault(tp[0], []).append(_sf.FetchPartition(partition_index=tp[1],
                                                                        acknowledgement_batches=batches))
            wanted = {(t, p.partition_index) for t, ps in topics.items() for p in ps}
            forgotten: dict[str, list] = {}
            for tp in s.partitions - wanted:
                forgotten.setdefault(tp[0], []).append(tp[1])
            ids = self._cluster.topic_ids
            body = _ShareFetchRequest(
                group_id=self._membership.group_id, member_id=self._membership.member_id,
                share_session_epoch=s.epoch, max_wait_ms=max_wait_ms, min_bytes=self.config["fetch.min.bytes"],
                max_bytes=self.config["fetch.max.bytes"], max_records=max_records, batch_size=max_records,
                topics=[_sf.FetchTopic(topic_id=ids[t], partitions=ps) for t, ps in topics.items()],
                forgotten_topics_data=[_sf.ForgottenTopic(topic_id=ids[t], partitions=ps)
                                       for t, ps in forgotten.items() if t in ids])
            try:
                s.conn.send(ApiKey.SHARE_FETCH, body, context=("fetch", wanted, carried))
            except ConnectionClosed as e:
                self._lost_session(s, e)
                continue
            s.epoch = next_epoch(s.epoch)
            s.partitions = wanted
            sent.append(s)
        self._await(sent, wait + self._request_timeout)

    def _await(self, sessions, timeout):
        """Reads every answer in flight on ``sessions``; returns {tp: error or None} for the
        acknowledgements they carried."""
        results: dict = {}
        deadline = time.monotonic() + timeout
        for s in sessions:
            while s.conn.in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._lost_session(s, KafkaTimeoutError(f"no answer from broker {s.node} in {timeout:.1f} s"))
                    break
                try:
                    got = s.conn.read_responses(left)
                except ConnectionClosed as e:
                    self._lost_session(s, e)
                    break
                for context, _api, _v, resp in got:
                    self._answer(s, context, resp, results)
        return results

    def _lost_session(self, s, why):
        log.info("share session with broker %s lost (%s): its records go back to the group", s.node, why)
        s.conn.close()
        self._sessions.pop(s.node, None)
        self._need_metadata = True
        self._drop_buffered(s.node)

    def _drop_buffered(self, node):
        """Records acquired in a session that ended are not this member's any more (the broker
        released them; another member may have them): they are not handed out."""
        kept = [f for f in self._buffer if f.node != node]
        if len(kept) != len(self._buffer):
            self._buffer = deque(kept)

    def _answer(self, s, context, resp, results):
        kind, _wanted, carried = context
        names = self._cluster.topic_names
        if resp.error_code:
            err = error_for_code(resp.error_code, resp.error_message or f"Share{kind.title()} to broker {s.node}")
            for tp in carried:
                results[tp] = err
            if resp.error_code in _SESSION_ERRORS:
                log.info("share session with broker %s: %s, reopening it", s.node, err.name)
                s.epoch, s.partitions = INITIAL_EPOCH, set()
                self._drop_buffered(s.node)
                return
            if err.retriable or resp.error_code in _MEMBER_ERRORS:  # the membership rejoins meanwhile
                s.epoch, s.partitions = INITIAL_EPOCH, set()
                self._drop_buffered(s.node)
                return
            raise err
        for t in resp.responses:
            topic = names.get(t.topic_id)
            if topic is None:
                continue
            for p in t.partitions:
                tp = (topic, p.partition_index)
                if tp in carried:
                    code, message = ((p.acknowledge_error_code, p.acknowledge_error_message) if kind == "fetch"
                                     else (p.error_code, p.error_message))
                    results[tp] = error_for_code(code, message or f"{topic}-{tp[1]}") if code else None
                    if code in STALE_METADATA_ERRORS:
                        self._need_metadata = True
                    if results[tp] is not None:
                        log.warning("acknowledgements of %s-%d failed: %s", topic, tp[1], results[tp])
                if p.error_code and kind == "fetch":
                    if p.error_code in STALE_METADATA_ERRORS:
                        self._need_metadata = True
                        continue
                    err = error_for_code(p.error_code, p.error_message or f"{topic}-{tp[1]}")
                    if not err.retriable:
                        raise err
                    continue
                if kind == "fetch" and p.acquired_records:
                    ranges = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
                    self._buffer.append(_Fetched(tp, s.node, _acquired_part(p.records, ranges[0][0], ranges[-1][1]),
                                                 ranges))

    # -- commits --------------------------------------------------------------------------
    def _send_acks(self, epoch_for=None):
        """Sends the pending acknowledgements by ShareAcknowledge, one per broker with a session
        (``epoch_for(session)``: the epoch to send, default the session's next); returns the
        sessions written to."""
        self._settle_implicit()
        by_node = self._leaders(set(self._acks)) if self._acks else {}
        sent = []
        for s in list(self._sessions.values()):
            tps = by_node.get(s.node, [])
            if s.epoch == INITIAL_EPOCH:
                continue  # no session: nothing of ours is held there
            carried = {tp: self._acks.pop(tp) for tp in tps if tp in self._acks}
            if not carried and epoch_for is None:
                continue
            topics: dict[str, list] = {}
            for tp, acks in carried.items():
                topics.setdefault(tp[0], []).append(_sa.AcknowledgePartition(
                    partition_index=tp[1], acknowledgement_batches=self._ack_batches(acks, _sa.AcknowledgementBatch)))
            epoch = s.epoch if epoch_for is None else epoch_for(s)
            body = _ShareAcknowledgeRequest(group_id=self._membership.group_id, member_id=self._membership.member_id,
                                            share_session_epoch=epoch,
                                            topics=[_sa.AcknowledgeTopic(topic_id=self._cluster.topic_ids[t],
                                                                         partitions=ps) for t, ps in topics.items()])
            try:
                s.conn.send(ApiKey.SHARE_ACKNOWLEDGE, body, context=("acknowledge", None, carried))
            except ConnectionClosed as e:
                self._lost_session(s, e)
                continue
            s.epoch = next_epoch(epoch)
            sent.append(s)
        return sent

    def commit_sync(self, timeout: float | None = None) -> dict:
        """Sends the pending acknowledgements (ShareAcknowledge) and waits for the answers:
        {(topic, partition): None or the KafkaError of that partition's acknowledgements}."""
        self._check_open()
        self._drain_async()
        sent = self._send_acks()
        return self._await(sent, self._request_timeout if timeout is None else timeout)

    def commit_async(self, callback=None):
        """Sends the pending acknowledgements without waiting; the answers are read at the next
        poll or commit, then ``callback({(topic, partition): error or None})`` runs."""
        self._check_open()
        self._drain_async()
        sent = self._send_acks()
        self._async_results = (callback, sent)

    def _drain_async(self):
        if self._async_results is None:
            return
        callback, sent = self._async_results
        self._async_results = None
        results = self._await(sent, self._request_timeout)
        if callback is not None:
            callback(results)

    # -- lifecycle ------------------------------------------------------------------------
    def _check_open(self):
        if self._closed:
            raise IllegalStateError("the share consumer is closed")

    def close(self):
        """Acknowledges what is pending (implicit mode: the last poll's records are accepted),
        closes the share sessions (ShareAcknowledge epoch -1: the broker releases whatever this
        member still holds) and leaves the group (ShareGroupHeartbeat epoch -1)."""
        if self._closed:
            return
        try:
            self._drain_async()
            sent = self._send_acks(epoch_for=lambda s: FINAL_EPOCH)
            self._await(sent, self._request_timeout)
        except (KafkaError, ConnectionClosed, OSError) as e:
            log.warning("share consumer close: acknowledging failed: %s", e)
        finally:
            self._closed = True
            self._membership.close()
            for s in self._sessions.values():
                s.conn.close()
            self._sessions.clear()
            self._cluster.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
