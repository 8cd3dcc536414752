"""DeleteRecords (API key 21), versions 0-2.

Per partition, moves the log start offset up to ``offset`` (-1: the high watermark) and deletes
the segments wholly below it; the response's ``low_watermark`` is the new log start offset
(an offset at or below the current start changes nothing and returns the current start).
Errors, as Kafka: UNKNOWN_TOPIC_OR_PARTITION; INVALID_TOPIC_EXCEPTION for internal topics;
POLICY_VIOLATION when the topic's cleanup.policy has no ``delete`` (a compact-only topic);
OFFSET_OUT_OF_RANGE for an offset above the high watermark or below -1. Failed partitions
answer low_watermark -1. The change is local and done when the response is sent (one replica),
so ``timeout_ms`` has nothing to wait for.

On a cluster only the partition's leader answers (another broker: NOT_LEADER_OR_FOLLOWER) and
the offset may not pass its high watermark; followers move their log start offset to the
leader's on their next fetch. Deviation: Kafka's leader waits (up to ``timeout_ms``) until every
live replica's log start offset reached the offset and answers the smallest; this one answers
its own at once.

Version notes: v2 is the flexible encoding; the fields are the same in every version.
"""
from ...errors import InvalidTopicError, KafkaError, OffsetOutOfRangeError, PolicyViolationError
from ...protocol.messages.delete_records_response import (DeleteRecordsPartitionResult, DeleteRecordsResponse,
                                                          DeleteRecordsTopicResult)
from ..broker import INTERNAL_TOPICS

API_KEY = 21
VERSIONS = (0, 2)
HIGH_WATERMARK = -1


def _delete(broker, topic, partition, offset):
    lg = broker.leader_log(topic, partition)
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"Cannot delete records of internal topic {topic}")
    if not lg.config.delete:
        raise PolicyViolationError(
            f"Records of partition {topic}-{partition} can not be deleted due to the configured policy")
    if offset == HIGH_WATERMARK:
        offset = lg.high_watermark
    if offset < 0:
        raise OffsetOutOfRangeError(f"The offset {offset} for partition {topic}-{partition} is not valid")
    return lg.delete_records(offset)


def handle(ctx, req):
    broker = ctx.broker
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            result = DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1)
            try:
                result.low_watermark = _delete(broker, t.name, p.partition_index, p.offset)
            except KafkaError as e:
                result.error_code = e.code
            parts.append(result)
        topics.append(DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(topics=topics)


def error_response(req, version, code):
    return DeleteRecordsResponse(topics=[
        DeleteRecordsTopicResult(name=t.name, partitions=[
            DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=code)
            for p in t.partitions])
        for t in req.topics])
