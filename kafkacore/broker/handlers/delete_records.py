"""DeleteRecords (API key 21), versions 0-2.

Per partition, moves the log start offset up to ``offset`` (-1: the high watermark) and deletes
the segments wholly below it; the response's ``low_watermark`` is the new log start offset
(an offset at or below the current start changes nothing and returns the current start).
Errors, as Kafka: UNKNOWN_TOPIC_OR_PARTITION; INVALID_TOPIC_EXCEPTION for internal topics;
POLICY_VIOLATION when the topic's cleanup.policy has no ``delete`` (a compact-only topic);
OFFSET_OUT_OF_RANGE for an offset above the high watermark or below -1. Failed partitions
answer low_watermark -1.

On a cluster only the partition's leader answers (another broker: NOT_LEADER_OR_FOLLOWER) and
the offset may not pass its high watermark. Followers move their log start offset to the
leader's on their next fetch and report theirs in the fetch after. As Kafka's
DelayedDeleteRecords, the answer waits until the low watermark -- the smallest log start offset
of the replicas on live brokers -- reached the offset, and carries it; a partition still short
of it after ``timeout_ms`` answers REQUEST_TIMED_OUT (with the low watermark of the moment of
the deletion), one whose leadership moved meanwhile NOT_LEADER_OR_FOLLOWER. A single node has
nothing to wait for.

Version notes: v2 is the flexible encoding; the fields are the same in every version.
"""
import asyncio

from ...errors import (InvalidTopicError, KafkaError, OffsetOutOfRangeError, PolicyViolationError, RequestTimedOutError,
                       TopicAuthorizationFailedError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.delete_records_response import (DeleteRecordsPartitionResult, DeleteRecordsResponse,
                                                          DeleteRecordsTopicResult)
from ..authorization import DELETE, TOPIC, authorized_names
from ..topic_store import INTERNAL_TOPICS

API_KEY = ApiKey.DELETE_RECORDS
VERSIONS = (0, 2)
HIGH_WATERMARK = -1


def _delete(broker, topic, partition, offset):
    """Deletes locally. Returns (low watermark, the Partition to wait on or None, the offset it
    must reach)."""
    replica = broker.replica_manager.leader_partition(topic, partition)
    lg = replica.log
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"Cannot delete records of internal topic {topic}")
    if not lg.config.delete:
        raise PolicyViolationError(
            f"Records of partition {topic}-{partition} can not be deleted due to the configured policy")
    if offset == HIGH_WATERMARK:
        offset = lg.high_watermark
    if offset < 0:
        raise OffsetOutOfRangeError(f"The offset {offset} for partition {topic}-{partition} is not valid")
    lg.delete_records(offset)
    low = replica.low_watermark()  # a partition led alone: its own log start
    return low, (replica if low < offset else None), offset


def handle(ctx, req):
    broker = ctx.broker
    topics = []
    waits = []  # (result, Partition, required offset)
    deletable = authorized_names(ctx, DELETE, TOPIC, [t.name for t in req.topics])
    for t in req.topics:
        parts = []
        for p in t.partitions:
            result = DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1)
            try:
                if t.name not in deletable:
                    raise TopicAuthorizationFailedError(f"not authorized to delete records of {t.name}")
                result.low_watermark, replica, required = _delete(broker, t.name, p.partition_index, p.offset)
                if replica is not None:
                    waits.append((result, replica, required))
            except KafkaError as e:
                result.error_code = e.code
            parts.append(result)
        topics.append(DeleteRecordsTopicResult(name=t.name, partitions=parts))
    response = DeleteRecordsResponse(topics=topics)
    if waits:
        return _delayed(response, waits, req.timeout_ms)
    return response


async def _delayed(response, waits, timeout_ms):
    """Kafka's DelayedDeleteRecords: every partition's low watermark reached its offset, its
    leadership moved, or the request's timeout passed."""
    pending = [(result, replica.wait_for_low_watermark(required)) for result, replica, required in waits]
    try:
        await asyncio.wait([fut for _r, fut in pending], timeout=max(timeout_ms, 0) / 1000)
    except asyncio.CancelledError:  # the connection went away: the waiters are dropped, not failed unread
        for _r, fut in pending:
            fut.cancel()
        raise
    for result, fut in pending:
        if fut.done():
            error = fut.exception()
            if error is None:
                result.low_watermark = fut.result()
            else:
                result.error_code = error.code if isinstance(error, KafkaError) else KafkaError.code  # unknown
                result.low_watermark = -1
            continue
        fut.cancel()
        result.error_code = RequestTimedOutError.code
    return response


def error_response(req, version, code):
    return DeleteRecordsResponse(topics=[
        DeleteRecordsTopicResult(name=t.name, partitions=[
            DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=code)
            for p in t.partitions])
        for t in req.topics])
