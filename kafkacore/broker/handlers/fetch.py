"""Fetch (API key 1), versions 4-17.

- Partitions are named by topic (v4-12) or by topic id (v13+; unknown id: UNKNOWN_TOPIC_ID).
- Each partition is read from its fetch offset up to ``partition_max_bytes`` and the response
  up to ``max_bytes``, in whole batches, never past the high watermark; under read_committed
  (``isolation_level`` 1) never past the last stable offset, with the range's aborted
  transactions in ``aborted_transactions`` (docs/transactions.md §4.4; an empty list when none,
  null for read_uncommitted and followers). As in
  Kafka (KIP-74) the first batch of the first partition that has data is returned whole even
  when it is larger than the limits, so a consumer always makes progress.
- Records are FileSlices of the segment files: the network layer sends them with sendfile.
- Every partition carries the high watermark, last stable offset and log start offset; an
  offset outside [log start, log end] is OFFSET_OUT_OF_RANGE.
- Long poll: with less than ``min_bytes`` available, the response waits up to ``max_wait_ms``
  and is built again as soon as an append lands in one of the fetched partitions (the log's
  append listener wakes it; there is no polling). As Kafka's DelayedFetch (its "case F"), a
  fetch that read records from a segment older than the one holding the offset it may read to
  (high watermark, last stable offset, or log end for a follower) is answered at once whatever
  ``min_bytes``: the reader is behind by whole segments. That matters after compaction: a
  batch cleaned down to records below the fetch offset is all a read there returns, and
  kafka-go moves past the batch's last offset only when the answer came before its deadline.
- Fetch sessions (KIP-227, v7+), as Kafka's FetchManager.newContext (state in
  broker/fetch_session.py):
  - epoch -1 (FINAL_EPOCH): a full fetch without a session (session id 0 in the response); a
    session the request names is closed first (session ids 0 and -1 name none). librdkafka,
    aiokafka and kafkacore's client send session 0 / epoch -1, kafka-go -1 / -1: the plain path;
  - epoch 0 (INITIAL_EPOCH): a full fetch; a named session is closed, and a new one holding every
    requested partition is created if the cache has (or can evict for) room: its id is in the
    response, else 0 and the client keeps sending full fetches;
  - any other epoch: an incremental fetch of session X. Unknown X (0 included):
    FETCH_SESSION_ID_NOT_FOUND; epoch not the session's next: INVALID_FETCH_SESSION_EPOCH; v13+
    on a session made by names or v12- on one made by topic ids: FETCH_SESSION_TOPIC_ID_ERROR.
    These errors answer with session id 0 and no partitions. Else the request's partitions are
    added or updated, ``forgotten_topics_data`` leaves, the epoch advances and every partition of
    the session is read (and waited on, and counted for min_bytes), but the response carries only
    the ones with records, a new high watermark or log start offset, or an error. A session left
    without partitions is closed and the request answered without one.
- ``current_leader_epoch`` (v9+) above the partition's leader epoch is UNKNOWN_LEADER_EPOCH.
- Fetch from the closest replica (KIP-392, v11+): a consumer's fetch may be served by a
  follower of the partition, up to the follower's own high watermark (read_committed: its last
  stable offset), as Kafka serves any v11+ consumer. With replica.selector.class set to Kafka's
  RackAwareReplicaSelector, the leader answers a consumer whose ``rack_id`` (client.rack) is not
  its own rack with ``preferred_read_replica``: the in-sync replica in that rack that holds the
  fetch offset, the one furthest ahead, and no records; the consumer then fetches there. A
  consumer in the leader's rack, or in a rack without such a replica, reads from the leader.
- A follower's fetch (a replica id >= 0, on a cluster) reads up to the log end, and its fetch
  offsets are its log end offsets for the leader's bookkeeping (HW, ISR). In a session (as
  kafkacore's followers fetch) that is every partition of the session at its remembered offset,
  not only the ones the incremental request names: an idle partition stays caught up, as in
  Kafka.
- With an authorizer: a follower's fetch needs CLUSTER_ACTION on the cluster (else every
  partition is TOPIC_AUTHORIZATION_FAILED), a consumer's READ on each topic (else its partitions
  are TOPIC_AUTHORIZATION_FAILED, checked at every fetch of a session too), as Kafka's KafkaApis.
"""
import time

from ...clock import monotonic_ms
from ...errors import (FencedLeaderEpochError, FetchSessionIdNotFoundError, FetchSessionTopicIdError,
                       InvalidFetchSessionEpochError, KafkaError, OffsetOutOfRangeError, TopicAuthorizationFailedError,
                       UnknownLeaderEpochError, UnknownTopicIdError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.fetch_response import AbortedTransaction, FetchableTopicResponse, FetchResponse, PartitionData
from ...protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from ..authorization import CLUSTER_ACTION, READ, TOPIC, authorize_cluster, authorized_names
from ..fetch_session import FetchSessionCache, PartitionGroup, new_partitions

API_KEY = ApiKey.FETCH
VERSIONS = (4, 17)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # isolation_level
_EMPTY = b""


def _resolve(broker, req, v):
    """[(topic name or None, FetchTopic)]"""
    out = []
    for t in req.topics:
        if v >= 13:
            info = broker.topics_by_id.get(t.topic_id)
            out.append((info.name if info else None, t))
        else:
            out.append((t.topic, t))
    return out


class _Denied(str):
    """A topic name the consumer may not READ: its partitions answer TOPIC_AUTHORIZATION_FAILED."""


def _authorized(ctx, resolved, replica_id=-1):
    """``resolved`` with the names the consumer may not read marked _Denied (a copy: a session
    keeps the plain names, and is checked again at its next fetch). A follower's fetch was
    checked for CLUSTER_ACTION instead."""
    if ctx.broker.authorizer is None or ctx.trusted or replica_id >= 0:
        return resolved
    readable = authorized_names(ctx, READ, TOPIC, [name for name, _t in resolved if name is not None])
    return [(name if name is None or name in readable else _Denied(name), t) for name, t in resolved]


def _read(broker, resolved, max_bytes, v, replica_id=-1, isolation=READ_UNCOMMITTED, first_data=True,
          client_rack=None):
    """(response topics, bytes gathered, logs read, whether to answer now: records came from an
    older segment than the end's, see _older_segment). A consumer reads up to the high watermark
    (read_committed: the last stable offset, with the aborted transactions of the range), from
    the leader or (v11+) a follower; a follower (replica_id >= 0) reads from the leader up to the
    log end. ``client_rack``: a consumer's rack when the leader picks the replica it reads from
    (KIP-392)."""
    rm = broker.replica_manager
    led = rm.partitions.get
    total = 0
    logs = []
    topics = []
    now = False
    for name, t in resolved:
        parts = []
        for p in t.partitions:
            pd = PartitionData(partition_index=p.partition, high_watermark=-1, last_stable_offset=-1,
                               log_start_offset=-1, aborted_transactions=None, records=_EMPTY)
            parts.append(pd)
            if name is None:
                pd.error_code = UnknownTopicIdError.code
                continue
            if type(name) is _Denied:
                pd.error_code = TopicAuthorizationFailedError.code
                continue
            partition = led((name, p.partition))
            if partition is None or not (partition.is_leader or (v >= 11 and replica_id < 0 and partition.leader_id >= 0)):
                try:
                    partition = rm.leader_partition(name, p.partition)  # the error: not here, or unknown
                except KafkaError as e:
                    pd.error_code = e.code
                    continue
            lg, epoch = partition.log, partition.leader_epoch
            logs.append(lg)
            hw = lg.high_watermark
            pd.high_watermark = hw
            pd.last_stable_offset = lg.last_stable_offset
            pd.log_start_offset = lg.log_start_offset
            if v >= 9 and p.current_leader_epoch >= 0 and p.current_leader_epoch != epoch:
                pd.error_code = (UnknownLeaderEpochError.code if p.current_leader_epoch > epoch
                                 else FencedLeaderEpochError.code)
                continue
            if client_rack is not None and partition.is_leader:
                preferred = _preferred_read_replica(broker, partition, p.fetch_offset, client_rack)
                if preferred >= 0:
                    pd.preferred_read_replica = preferred
                    continue
            limit = min(p.partition_max_bytes, max_bytes - total)
            if limit <= 0 and not first_data:
                continue
            try:
                if isolation == READ_COMMITTED and replica_id < 0:
                    end = lg.last_stable_offset
                    sl, aborted = lg.read_committed(p.fetch_offset, max(limit, 0), min_one_batch=first_data)
                    pd.aborted_transactions = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                                               for a in aborted]
                else:
                    end = lg.log_end_offset if replica_id >= 0 else hw
                    sl = lg.read(p.fetch_offset, max(limit, 0), max_offset=None if replica_id >= 0 else hw,
                                 min_one_batch=first_data)
            except OffsetOutOfRangeError:
                pd.error_code = OffsetOutOfRangeError.code
                continue
            except KafkaError as e:
                pd.error_code = e.code
                continue
            n = len(sl)
            if n:
                pd.records = sl
                total += n
                first_data = False
                now = now or _older_segment(lg, sl, end)
        topics.append(FetchableTopicResponse(topic=name or "", topic_id=t.topic_id, partitions=parts))
    return topics, total, logs, now


def _older_segment(lg, sl, end_offset):
    """Whether the records read (one segment's, from its batch at sl.first_offset) lie in a
    segment older than the one holding end_offset: Kafka's DelayedFetch completes such a fetch
    at once ("the fetch operation is falling behind the current segment")."""
    return sl.first_offset < lg.local.segment_holding(end_offset).base_offset


def _preferred_read_replica(broker, partition, fetch_offset, client_rack):
    """Kafka's RackAwareReplicaSelector, from the leader: -1 (read here) when the client is in
    the leader's rack or no replica in its rack can serve the fetch offset; else that rack's
    in-sync replica holding the offset, the one with the highest log end offset (then the most
    recently caught up)."""
    brokers = broker.metadata_cache.brokers
    me = brokers.get(partition.local_id)
    if me is not None and me.rack == client_rack:
        return -1
    best = None
    for replica_id, st in partition.remote.items():
        endpoint = brokers.get(replica_id)
        if (endpoint is None or endpoint.rack != client_rack or replica_id not in partition.isr
                or st.log_end_offset < fetch_offset or not 0 <= st.log_start_offset <= fetch_offset):
            continue
        rank = (st.log_end_offset, st.last_caught_up_ms)
        if best is None or rank > best[0]:
            best = (rank, replica_id)
    return -1 if best is None else best[1]


def _rack_reader(isolation, client_rack):
    def read(broker, resolved, max_bytes, v):
        return _read(broker, resolved, max_bytes, v, isolation=isolation, client_rack=client_rack)
    return read


def _consumer_reader(broker, req, v):
    """The read function of a consumer's fetch: its isolation, and the leader's choice of
    replica when a selector is configured and the consumer says its rack."""
    isolation = READ_COMMITTED if req.isolation_level == READ_COMMITTED else READ_UNCOMMITTED
    if v >= 11 and req.rack_id and broker.config["replica.selector.class"]:
        return _rack_reader(isolation, req.rack_id)
    return _read_committed if isolation == READ_COMMITTED else _read_any


def _follower_fetched(broker, resolved, replica_id):
    """A follower's fetch offsets are its log end offsets (the leader's HW and ISR) and its log
    start offsets (DeleteRecords)."""
    _report_follower_offsets(broker, ((name, p.partition, p.fetch_offset, p.log_start_offset)
                                      for name, t in resolved for p in t.partitions), replica_id)


def _report_follower_offsets(broker, offsets, replica_id):
    """(topic, partition, fetch offset, log start offset) of one follower's fetch, to the
    leader's bookkeeping of the partitions this broker leads; one clock reading for the whole
    request."""
    rm = broker.replica_manager
    get = rm.partitions.get
    now = monotonic_ms()
    for topic, index, fetch_offset, log_start_offset in offsets:
        partition = get((topic, index))
        if partition is not None and partition.is_leader:
            rm.follower_fetched(partition, replica_id, fetch_offset, now, log_start_offset)


def _replica_id(req, v):
    if v >= 15:
        return req.replica_state.replica_id if req.replica_state is not None else -1
    return req.replica_id


def _sessionless(topics):
    return FetchResponse(session_id=INVALID_SESSION_ID, responses=topics)


def handle(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    replica_id = _replica_id(req, v)
    if replica_id >= 0:
        if not authorize_cluster(ctx, CLUSTER_ACTION):
            return _all_failed(broker, req, v, TopicAuthorizationFailedError.code)
        if req.session_id or req.session_epoch != FINAL_EPOCH:
            return _session_fetch(ctx, req, v, replica_id)
        return _replica_fetch(broker, req, v, replica_id)
    if req.session_id or req.session_epoch != FINAL_EPOCH:
        return _session_fetch(ctx, req, v)  # v7+ only: older versions decode as 0 / -1
    # without a session (librdkafka, aiokafka, ...): _serve's body inline, this is the hot path
    resolved = _authorized(ctx, _resolve(broker, req, v))
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0
    read = _consumer_reader(broker, req, v)
    topics, total, logs, now = read(broker, resolved, max_bytes, v)
    if now or total >= req.min_bytes or req.max_wait_ms <= 0 or not logs or _answer_now(topics):
        return FetchResponse(session_id=INVALID_SESSION_ID, responses=topics)
    return _long_poll(broker, resolved, max_bytes, v, req.min_bytes, req.max_wait_ms, logs, _sessionless, read)


def _all_failed(broker, req, v, code):
    """Every partition the request names answered ``code``, without a session."""
    return FetchResponse(session_id=INVALID_SESSION_ID, responses=[
        FetchableTopicResponse(topic=name or "", topic_id=t.topic_id, partitions=[
            PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1, last_stable_offset=-1,
                          log_start_offset=-1, aborted_transactions=None, records=_EMPTY) for p in t.partitions])
        for name, t in _resolve(broker, req, v)])


def _replica_fetch(broker, req, v, replica_id):
    """A follower's sessionless fetch: bookkeeping first, then read up to the log end,
    long-polling like any fetch."""
    resolved = _resolve(broker, req, v)
    _follower_fetched(broker, resolved, replica_id)
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0
    read = _replica_reader(replica_id)
    topics, total, logs, now = read(broker, resolved, max_bytes, v)
    if now or total >= req.min_bytes or req.max_wait_ms <= 0 or not logs or _answer_now(topics):
        return FetchResponse(session_id=INVALID_SESSION_ID, responses=topics)
    return _long_poll(broker, resolved, max_bytes, v, req.min_bytes, req.max_wait_ms, logs, _sessionless, read)


def _replica_reader(replica_id):
    def read(broker, resolved, max_bytes, v):
        return _read(broker, resolved, max_bytes, v, replica_id)
    return read


def _serve(broker, resolved, req, v, finish, replica_id=-1):
    """Read now, or long-poll; ``finish(topics)`` makes the response. A follower's fetch
    (``replica_id`` >= 0) first reports its log end offsets to the leader's bookkeeping, for
    every partition it names (in a session: every partition of the session, so that an idle
    partition left out of an incremental request still counts as caught up, as in Kafka)."""
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0
    if replica_id >= 0:
        _follower_fetched(broker, resolved, replica_id)
        read = _replica_reader(replica_id)
    else:
        read = _consumer_reader(broker, req, v)
    topics, total, logs, now = read(broker, resolved, max_bytes, v)
    if now or total >= req.min_bytes or req.max_wait_ms <= 0 or not logs or _answer_now(topics):
        return finish(topics)
    return _long_poll(broker, resolved, max_bytes, v, req.min_bytes, req.max_wait_ms, logs, finish, read)


def _read_any(broker, resolved, max_bytes, v):
    return _read(broker, resolved, max_bytes, v)


def _read_committed(broker, resolved, max_bytes, v):
    return _read(broker, resolved, max_bytes, v, isolation=READ_COMMITTED)


def _answer_now(topics):
    """Whether a partition's answer cannot wait for data: an error, or (KIP-392) the replica the
    consumer should read from instead, as Kafka answers at once then."""
    return any(p.error_code or p.preferred_read_replica >= 0 for t in topics for p in t.partitions)


def _long_poll(broker, resolved, max_bytes, v, min_bytes, max_wait_ms, logs, finish, read=None):
    """The awaitable that answers once min_bytes are there or max_wait_ms passed. Its first
    waiter is registered here, before the server gets to await it: a produce handled in between
    (on a cluster, the very append a follower's fetch waits for) must wake it."""
    return _long_poll_wait(broker, resolved, max_bytes, v, min_bytes, max_wait_ms, logs, finish, read or _read_any,
                           broker.data_waiter(logs), time.monotonic() + max_wait_ms / 1000.0)


async def _long_poll_wait(broker, resolved, max_bytes, v, min_bytes, max_wait_ms, logs, finish, read, waiter,
                          deadline):
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            broker.drop_waiter(waiter)
            break
        await broker.wait_for_data(logs, remaining, waiter)
        topics, total, logs, now = read(broker, resolved, max_bytes, v)
        if now or total >= min_bytes or _answer_now(topics):
            return finish(topics)
        waiter = broker.data_waiter(logs)
    topics = read(broker, resolved, max_bytes, v)[0]
    return finish(topics)


# -- fetch sessions (KIP-227) -------------------------------------------------------------------
def _session_error(code):
    return FetchResponse(error_code=code, session_id=INVALID_SESSION_ID, responses=[])


def _session_fetch(ctx, req, v, replica_id=-1):
    broker = ctx.broker
    cache = FetchSessionCache.for_broker(broker)
    session_id, epoch = req.session_id, req.session_epoch
    if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)  # a full fetch closes the session it names
        resolved = _resolve(broker, req, v)
        if epoch == FINAL_EPOCH:
            return _serve(broker, _authorized(ctx, resolved, replica_id), req, v, _sessionless, replica_id)
        # a follower's (replica id >= 0) session is privileged in the cache, as in Kafka
        replica = _replica_id(req, v)
        uses_ids = v >= 13

        def create(topics):
            session = cache.maybe_create(monotonic_ms(), replica >= 0, uses_ids, sum(len(t.partitions) for t in topics),
                                         lambda: new_partitions(resolved, topics, uses_ids))
            return FetchResponse(session_id=session.id if session else INVALID_SESSION_ID, responses=topics)
        return _serve(broker, _authorized(ctx, resolved, replica_id), req, v, create, replica_id)

    session = cache.get(session_id)
    if session is None:
        return _session_error(FetchSessionIdNotFoundError.code)
    if session.epoch != epoch:
        return _session_error(InvalidFetchSessionEpochError.code)
    if session.uses_topic_ids != (v >= 13):
        return _session_error(FetchSessionTopicIdError.code)
    requested = _resolve(broker, req, v)
    session.update(requested, req.forgotten_topics_data)
    if not session.partitions:
        cache.remove(session_id)  # as Kafka: nothing left to remember, answer without a session
        return _serve(broker, _authorized(ctx, requested, replica_id), req, v, _sessionless, replica_id)
    cache.touch(session, monotonic_ms())
    session.epoch = expected = next_epoch(session.epoch)
    if replica_id >= 0 and not session.uses_topic_ids:
        return _follower_session_serve(broker, session, expected, req, v, replica_id)
    groups = session.groups()
    if session.uses_topic_ids:  # names looked up at each fetch: a topic id may become known later
        by_id = broker.topics_by_id
        resolved = [((by_id[g.topic_id].name if g.topic_id in by_id else None), g) for g in groups]
    else:
        resolved = [(g.topic, g) for g in groups]

    def incremental(topics):
        if session.epoch != expected:
            # another request of this session (a duplicate, or a pipelined next epoch) got in
            # while this one waited: Kafka answers so, naming the session
            return FetchResponse(error_code=InvalidFetchSessionEpochError.code, session_id=session.id, responses=[])
        return FetchResponse(session_id=session.id, responses=session.select(groups, topics))
    return _serve(broker, _authorized(ctx, resolved, replica_id), req, v, incremental, replica_id)


class _SessionPartition:
    """One partition a follower's incremental fetch read: shaped like a response topic (for
    _answer_now), with the session's record of it (for the answer)."""

    __slots__ = ("cached", "partitions")

    def __init__(self, cached, pd):
        self.cached = cached
        self.partitions = [pd]


def _follower_session_serve(broker, session, expected, req, v, replica_id):
    """An incremental fetch of a follower's session (the fetches kafkacore's followers send), by
    the rules of any session, with a shortcut: a partition this broker leads at the follower's
    epoch, fetched from its log end, whose high watermark and log start offset the follower
    already has, has nothing to say and is not read at all (its log is still waited on). Every
    partition of the session reports its offset to the leader's bookkeeping once per request."""
    rm = broker.replica_manager
    max_bytes = max(0, req.max_bytes)
    _report_follower_offsets(broker, ((cp.topic, cp.partition, cp.fetch_offset, cp.log_start_offset)
                                      for cp in session.partitions.values()), replica_id)

    def read(_broker=None, _resolved=None, _max_bytes=None, _v=None):
        news, total, logs, now = [], 0, [], False
        first_data = True
        get = rm.partitions.get
        for cp in session.partitions.values():
            partition = get((cp.topic, cp.partition))
            if partition is not None and partition.is_leader:
                lg = partition.log
                if (cp.fetch_offset == lg.log_end_offset and cp.high_watermark == lg.high_watermark
                        and cp.local_log_start_offset == lg.log_start_offset
                        and cp.current_leader_epoch in (-1, partition.leader_epoch)):
                    logs.append(lg)
                    continue
            topics, n, got, older = _read(broker, [(cp.topic, PartitionGroup(cp.topic, cp.topic_id, [cp]))],
                                          max_bytes - total, v, replica_id, first_data=first_data)
            news.append(_SessionPartition(cp, topics[0].partitions[0]))
            logs += got
            now = now or older
            if n:
                total += n
                first_data = False
        return news, total, logs, now

    def finish(news):
        if session.epoch != expected:
            return FetchResponse(error_code=InvalidFetchSessionEpochError.code, session_id=session.id, responses=[])
        out = []
        to_back = []
        for item in news:
            cp, pd = item.cached, item.partitions[0]
            if not cp.changed(pd):
                continue
            if out and out[-1].topic == cp.topic:
                out[-1].partitions.append(pd)
            else:
                out.append(FetchableTopicResponse(topic=cp.topic, topic_id=cp.topic_id, partitions=[pd]))
            if pd.records is not None and len(pd.records):
                to_back.append(cp)
        parts = session.partitions
        for cp in to_back:  # as select(): the others get the first bytes of the next fetch
            k = session.key(cp.topic, cp.topic_id, cp.partition)
            parts[k] = parts.pop(k)
        return FetchResponse(session_id=session.id, responses=out)

    news, total, logs, now = read()
    if now or total >= req.min_bytes or req.max_wait_ms <= 0 or not logs or _answer_now(news):
        return finish(news)
    return _long_poll(broker, None, max_bytes, v, req.min_bytes, req.max_wait_ms, logs, finish, read)


def error_response(req, version, code):
    return FetchResponse(error_code=code, responses=[])
