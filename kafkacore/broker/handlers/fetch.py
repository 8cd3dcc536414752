"""Fetch (API key 1), versions 4-17.

- Partitions are named by topic (v4-12) or by topic id (v13+; unknown id: UNKNOWN_TOPIC_ID).
- Each partition is read from its fetch offset up to ``partition_max_bytes`` and the response
  up to ``max_bytes``, in whole batches, never past the high watermark (the last stable offset
  is the same: no transactions here, so read_committed and read_uncommitted read alike). As in
  Kafka (KIP-74) the first batch of the first partition that has data is returned whole even
  when it is larger than the limits, so a consumer always makes progress.
- Records are FileSlices of the segment files: the network layer sends them with sendfile.
- Every partition carries the high watermark, last stable offset and log start offset; an
  offset outside [log start, log end] is OFFSET_OUT_OF_RANGE.
- Long poll: with less than ``min_bytes`` available, the response waits up to ``max_wait_ms``
  and is built again as soon as an append lands in one of the fetched partitions (the log's
  append listener wakes it; there is no polling).
- Fetch sessions (KIP-227, v7+): this broker declines to create sessions. A full fetch asking
  for one (epoch 0) gets session id 0, which tells the client to keep sending full fetches;
  a request naming a session id gets FETCH_SESSION_ID_NOT_FOUND, after which clients start over.
- ``current_leader_epoch`` (v9+) above this broker's leader epoch (0) is UNKNOWN_LEADER_EPOCH.
"""
import time

from ...errors import KafkaError, OffsetOutOfRangeError, UnknownLeaderEpochError, UnknownTopicIdError, \
    UnknownTopicOrPartitionError
from ...protocol.messages.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData

API_KEY = 1
VERSIONS = (4, 17)
FETCH_SESSION_ID_NOT_FOUND = 70
LEADER_EPOCH = 0
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


def _read(broker, resolved, max_bytes, v):
    """(response topics, bytes gathered, logs read)."""
    total = 0
    first_data = True
    logs = []
    topics = []
    for name, t in resolved:
        parts = []
        for p in t.partitions:
            pd = PartitionData(partition_index=p.partition, high_watermark=-1, last_stable_offset=-1,
                               log_start_offset=-1, aborted_transactions=None, records=_EMPTY)
            parts.append(pd)
            if name is None:
                pd.error_code = UnknownTopicIdError.code
                continue
            lg = broker.get_log(name, p.partition)
            if lg is None:
                pd.error_code = UnknownTopicOrPartitionError.code
                continue
            logs.append(lg)
            hw = lg.high_watermark
            pd.high_watermark = hw
            pd.last_stable_offset = hw
            pd.log_start_offset = lg.log_start_offset
            if v >= 9 and p.current_leader_epoch > LEADER_EPOCH:
                pd.error_code = UnknownLeaderEpochError.code
                continue
            limit = min(p.partition_max_bytes, max_bytes - total)
            if limit <= 0 and not first_data:
                continue
            try:
                sl = lg.read(p.fetch_offset, max(limit, 0), max_offset=hw, min_one_batch=first_data)
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
        topics.append(FetchableTopicResponse(topic=name or "", topic_id=t.topic_id, partitions=parts))
    return topics, total, logs


def _response(topics, v, session_id=0):
    return FetchResponse(session_id=session_id, responses=topics)


def handle(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    if v >= 7 and req.session_id != 0:
        return FetchResponse(error_code=FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    resolved = _resolve(broker, req, v)
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0
    topics, total, logs = _read(broker, resolved, max_bytes, v)
    if total >= req.min_bytes or req.max_wait_ms <= 0 or not logs or _has_error(topics):
        return _response(topics, v)
    return _long_poll(broker, resolved, max_bytes, v, req.min_bytes, req.max_wait_ms, logs)


def _has_error(topics):
    return any(p.error_code for t in topics for p in t.partitions)


async def _long_poll(broker, resolved, max_bytes, v, min_bytes, max_wait_ms, logs):
    deadline = time.monotonic() + max_wait_ms / 1000.0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await broker.wait_for_data(logs, remaining)
        topics, total, logs = _read(broker, resolved, max_bytes, v)
        if total >= min_bytes or _has_error(topics):
            return _response(topics, v)
    topics, _total, _logs = _read(broker, resolved, max_bytes, v)
    return _response(topics, v)


def error_response(req, version, code):
    return FetchResponse(error_code=code, responses=[])
