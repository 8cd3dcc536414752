"""ShareFetch (API key 78), versions 0-1 (KIP-932; v1 is Kafka 4.1's stable version, which
librdkafka 2.16 sends: MaxRecords, BatchSize, AcquisitionLockTimeoutMs).

A share consumer fetches records it then holds under an acquisition lock, and acknowledges
records it fetched before (piggy-backed acknowledgements, applied before anything is acquired).
The share-partition state machine is coordinator/share_partition.py; sessions are
coordinator/share_session.py. As Kafka's KafkaApis / SharePartitionManager.newContext:

- Top level: an empty group id or member id is INVALID_REQUEST; READ on the group is needed
  (GROUP_AUTHORIZATION_FAILED).
- ShareSessionEpoch 0 opens a share session for (group, member) with the request's partitions
  (replacing one of the same key); acknowledgements in it are INVALID_REQUEST; a full cache is
  SHARE_SESSION_LIMIT_REACHED; the group's share partitions held here are first checked against
  their share coordinator (``SharePartitionManager.revalidate_group``). -1 applies the
  acknowledgements, then closes the session and releases every record the member still holds
  (SHARE_SESSION_NOT_FOUND without a session, INVALID_REQUEST with forgotten topics); nothing is
  fetched. Another epoch must be the session's next (SHARE_SESSION_NOT_FOUND,
  INVALID_SHARE_SESSION_EPOCH): the request's partitions join the session,
  ``forgotten_topics_data`` leave it, and every partition of the session is fetched.
- Per partition: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED (READ on the topic),
  UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (with ``current_leader`` and the leader in
  ``node_endpoints``) as ``error_code``; an acknowledgement that fails (a record not acquired by
  the member: INVALID_RECORD_STATE; a bad batch, or one past the last record handed out:
  INVALID_REQUEST) as ``acknowledge_error_code``.
- Fetching: each share partition hands out AVAILABLE in-flight records and new records below the
  high watermark (read_committed: the last stable offset) up to ``max_records`` in all (v1; v0
  has no limit; v1 with 0 fetches nothing: acknowledgements only), split into AcquiredRecords
  ranges of at most ``batch_size`` records (v1, when > 0). The records' batches are read from
  the log up to ``max_bytes`` in all (v0: and ``partition_max_bytes``, 0 meaning no fetch), at
  least one batch. With nothing acquired the answer waits up to ``max_wait_ms`` for an append,
  a released record or an expired lock (Kafka's DelayedShareFetch), and ``min_bytes`` likewise.
- The response of a session's first request names every partition asked for; later ones name the
  partitions with records, an error, or acknowledgements in the request.
  ``acquisition_lock_timeout_ms`` (v1) is the group's lock duration.

Served (and advertised) while ``group.coordinator.rebalance.protocols`` names ``share`` and
``group.share.enable`` is on, as the share groups' other APIs.
"""
from __future__ import annotations

import time

from ...errors import (InvalidRequestError, InvalidShareSessionEpochError, KafkaError, NotLeaderOrFollowerError,
                       OffsetOutOfRangeError, ShareSessionLimitReachedError, ShareSessionNotFoundError)
from ...protocol.api_table import ApiKey
from ...protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH
from ...protocol.messages.share_fetch_response import (AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
                                                       ShareFetchableTopicResponse, ShareFetchResponse)
from ...record import iter_batches
from ...storage.file_slice import FileSlice
from ._share_common import (ack_batches, acknowledge, check_request, current_leader, error_of, leader_of,
                            node_endpoints, readable_topics, write_states)

API_KEY = ApiKey.SHARE_FETCH
VERSIONS = (0, 1)
GROUP_PROTOCOL = "share"  # served while the share protocol is switched on (config.served_group_protocols)
_INT32_MAX = (1 << 31) - 1
_EMPTY = b""
_FIRST_READ = 1 << 18  # bytes of a share partition's read taken at first; doubled for a longer batch


def handle(ctx, req):
    try:
        check_request(ctx, req)
    except KafkaError as e:
        return _error(e.code, e.message)
    return _share_fetch(ctx, req)


def _error(code, message=None):
    return ShareFetchResponse(error_code=code, error_message=message, responses=[])


async def _share_fetch(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    mgr = broker.share_partition_manager
    group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
    requested = [(bytes(t.topic_id), p) for t in req.topics for p in t.partitions]
    acks = {(tid, p.partition_index): ack_batches(p) for tid, p in requested if p.acknowledgement_batches}
    wants = {(tid, p.partition_index) for tid, p in requested if v >= 1 or p.partition_max_bytes > 0}
    forgotten = [(bytes(t.topic_id), p) for t in req.forgotten_topics_data for p in t.partitions]
    sessions = mgr.sessions
    try:
        if epoch == FINAL_EPOCH:
            if forgotten:  # nothing is left to forget (librdkafka's mock broker answers so, as Kafka 4.1)
                raise InvalidRequestError("forgotten topics in the request that closes the share session")
            session = sessions.get(group, member)
            if session is None:
                raise ShareSessionNotFoundError(f"no share session for member {member} of group {group}")
            fetch_keys = []
        elif epoch == INITIAL_EPOCH:
            if acks:
                raise InvalidRequestError("acknowledgements in the request that opens a share session")
            sessions.remove(group, member)
            session = sessions.maybe_create(group, member, [(tid, p.partition_index) for tid, p in requested],
                                            ctx.connection_id)
            if session is None:
                raise ShareSessionLimitReachedError(
                    f"the broker holds group.share.max.share.sessions={sessions.max_sessions} share sessions")
            fetch_keys = list(session.partitions)
        else:
            session = sessions.get(group, member)
            if session is None:
                raise ShareSessionNotFoundError(f"no share session for member {member} of group {group}")
            if session.epoch != epoch:
                raise InvalidShareSessionEpochError(
                    f"share session epoch {epoch}, expected {session.epoch}")
            session.update([(tid, p.partition_index) for tid, p in requested], forgotten)
            session.advance()
            fetch_keys = list(session.partitions)
    except KafkaError as e:
        return _error(e.code, e.message)
    if epoch == INITIAL_EPOCH:
        # what this broker holds of the group must still be the coordinator's state (the group
        # may have been deleted, and created anew, through another broker)
        await mgr.revalidate_group(group)

    keys = list(dict.fromkeys([*fetch_keys, *acks]))
    names = {broker.topics_by_id[tid].name for tid, _p in keys if tid in broker.topics_by_id}
    readable = readable_topics(ctx, names)
    answers: dict[tuple[bytes, int], PartitionData] = {}
    leaders = {}
    for key in keys:
        # records never null: librdkafka refuses a null record set
        pd = PartitionData(partition_index=key[1], records=_EMPTY, current_leader=LeaderIdAndEpoch(leader_id=-1,
                                                                                                 leader_epoch=-1))
        answers[key] = pd
        try:
            leaders[key] = leader_of(ctx, key[0], key[1], readable)
        except KafkaError as e:
            code, message = error_of(e)
            if key in acks:
                pd.acknowledge_error_code, pd.acknowledge_error_message = code, message
            pd.error_code, pd.error_message = code, message
            if isinstance(e, NotLeaderOrFollowerError):
                leader_id, leader_epoch = current_leader(ctx, *key)
                pd.current_leader = LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
    written = {}
    for key, batches in acks.items():
        leader = leaders.get(key)
        if leader is None:
            continue
        try:
            written[key] = await acknowledge(ctx, group, member, leader, batches)
        except Exception as e:  # noqa: BLE001 - one partition's failure is its answer, the others go on
            pd = answers[key]
            pd.acknowledge_error_code, pd.acknowledge_error_message = error_of(e)
    for key, e in (await write_states(written)).items():
        answers[key].acknowledge_error_code, answers[key].acknowledge_error_message = error_of(e)
    if epoch == FINAL_EPOCH:
        sessions.remove(group, member)
        mgr.release_session(session)
        return _respond(ctx, answers, acks, full=True, v=v, group=group)

    fetching = [leaders[k] for k in fetch_keys if k in leaders and (epoch != INITIAL_EPOCH or k in wants)]
    max_records = (req.max_records if v >= 1 else _INT32_MAX)
    if max_records > 0 and fetching:
        await _fetch(ctx, req, group, member, fetching, answers, max_records, v)
    return _respond(ctx, answers, acks, full=epoch == INITIAL_EPOCH, v=v, group=group)


async def _fetch(ctx, req, group, member, leaders, answers, max_records, v):
    """Acquires records into ``answers``; waits (long poll) while nothing was acquired."""
    broker = ctx.broker
    deadline = time.monotonic() + max(0, req.max_wait_ms) / 1000.0
    min_bytes = max(1, req.min_bytes)
    while True:
        waiter = broker.data_waiter([leader.log for leader in leaders]) if req.max_wait_ms > 0 else None
        total = await _acquire_all(ctx, req, group, member, leaders, answers, max_records, v)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or remaining <= 0 or waiter is None or any(
                answers[(ld.topic_id, ld.partition)].error_code for ld in leaders):
            if waiter is not None:
                broker.drop_waiter(waiter)
            return
        await broker.wait_for_data(waiter.logs, remaining, waiter)


async def _acquire_all(ctx, req, group, member, leaders, answers, max_records, v):
    """One pass over the partitions: (bytes of records put in the answers)."""
    mgr = ctx.broker.share_partition_manager
    max_bytes = req.max_bytes if req.max_bytes > 0 else _INT32_MAX
    total = 0
    records_left = max_records
    batch_size = req.batch_size if v >= 1 and req.batch_size > 0 else 0
    partition_limits = ({(bytes(t.topic_id), p.partition_index): p.partition_max_bytes
                         for t in req.topics for p in t.partitions} if v == 0 else {})
    for leader in leaders:
        if records_left <= 0:
            break
        key = (leader.topic_id, leader.partition)
        pd = answers[key]
        if pd.acquired_records:
            continue  # acquired in an earlier pass of this request
        try:
            sp = await mgr.share_partition(group, leader.topic, leader.topic_id, leader.partition, leader.log,
                                           leader.leader_epoch)
            lg = leader.log
            sp.log_start_moved(lg.log_start_offset)
            committed = sp.read_committed
            upper = lg.last_stable_offset if committed else lg.high_watermark
            offset = sp.fetch_offset()
            if offset is None or offset >= upper:
                continue
            if partition_limits.get(key, 1) <= 0:
                continue  # v0: a PartitionMaxBytes of 0 (or less) fetches nothing from the partition
            limit = min(partition_limits.get(key, max_bytes), max_bytes - total)
            try:
                if committed:
                    sl, aborted = lg.read_committed(offset, max(limit, 0), min_one_batch=total == 0)
                    aborted = [(a.producer_id, a.first_offset) for a in aborted]
                else:
                    sl, aborted = lg.read(offset, max(limit, 0), max_offset=upper, min_one_batch=total == 0), None
            except OffsetOutOfRangeError:
                sp.log_start_moved(lg.log_start_offset)
                continue
            if not len(sl):
                continue
            batches = _LazyBatches(sl, aborted)
            got, used = sp.acquire(member, batches, upper, records_left)
            if not got:
                continue
            pd.records = batches.head(used)
            total += len(pd.records)
            records_left -= sum(r.last_offset - r.first_offset + 1 for r in got)
            pd.acquired_records = [AcquiredRecords(first_offset=f, last_offset=last, delivery_count=c)
                                   for f, last, c in _split(got, batch_size)]
        except KafkaError as e:
            pd.error_code, pd.error_message = e.code, e.message
    return total


class _LazyBatches:
    """The batches of a log read (a FileSlice of up to the request's max_bytes), read from the
    file a chunk at a time while ``SharePartition.acquire`` takes them: a share fetch hands out
    max_records records and the in-flight window's room, often a small head of the read.
    ``head(n)``: the first n batches as a FileSlice of the segment, sent with sendfile as Fetch
    sends its records. Under read_committed the read is taken whole (its aborted-transaction
    filter follows the batches in order from the read's start)."""

    def __init__(self, sl, aborted):
        self.sl = sl
        self.aborted = aborted
        self.ends: list[int] = []  # each batch's end within the read

    def __iter__(self):
        sl, ends = self.sl, self.ends
        if self.aborted is not None:
            for b in iter_batches(sl.read(), self.aborted):
                ends.append(b.position + b.size_in_bytes)
                yield b
            return
        pos, size = 0, _FIRST_READ
        while pos < len(sl):
            n = min(size, len(sl) - pos)
            end = pos
            for b in iter_batches(FileSlice(sl.file, sl.position + pos, n).read()):
                end = pos + b.position + b.size_in_bytes
                ends.append(end)
                yield b
            if end == pos:  # the next batch is longer than the chunk
                if n == len(sl) - pos:
                    return  # (a read holds whole batches: nothing more)
                size *= 2
            pos = end

    def head(self, n) -> FileSlice:
        return FileSlice(self.sl.file, self.sl.position, self.ends[n - 1] if n else 0, self.sl.first_offset)


def _split(ranges, batch_size):
    """Acquired ranges cut into pieces of at most batch_size records (0: not cut)."""
    if not batch_size:
        return ranges
    out = []
    for first, last, count in ranges:
        while first <= last:
            end = min(last, first + batch_size - 1)
            out.append((first, end, count))
            first = end + 1
    return out


def _respond(ctx, answers, acks, full, v, group):
    broker = ctx.broker
    topics: dict[bytes, list] = {}
    leaders = set()
    for (tid, _p), pd in answers.items():
        if not (full or pd.acquired_records or pd.error_code or pd.acknowledge_error_code or (tid, _p) in acks):
            continue
        topics.setdefault(tid, []).append(pd)
        if pd.error_code == NotLeaderOrFollowerError.code and pd.current_leader.leader_id >= 0:
            leaders.add(pd.current_leader.leader_id)
    lock_ms = broker.share_partition_manager.group_config(group, "share.record.lock.duration.ms")
    return ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms,
                              responses=[ShareFetchableTopicResponse(topic_id=tid, partitions=parts)
                                         for tid, parts in topics.items()],
                              node_endpoints=node_endpoints(ctx, leaders, NodeEndpoint))


def error_response(req, version, code):
    return _error(code)
