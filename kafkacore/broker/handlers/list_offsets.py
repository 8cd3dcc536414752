"""ListOffsets (API key 2), versions 0-10.

Per partition, by ``timestamp``: -2 earliest (the log start offset), -1 latest (the high
watermark; under read_committed, v2+, the last stable offset), -3 the record with the largest
timestamp (v7+), -4 earliest local (v8+; all data is local: the log start), -5 earliest pending
upload (v9+; no tiered storage: none, offset -1), t >= 0 the first record with a timestamp at or
after t. "None" is offset -1 and timestamp -1, as Kafka, also when the record found is at or
past the high watermark (read_committed: the last stable offset), as Kafka's
fetchOffsetForTimestamp filters. v0 answers in the old style (a list with the one offset).
``current_leader_epoch`` (v4+) above this broker's leader epoch is UNKNOWN_LEADER_EPOCH, below it
FENCED_LEADER_EPOCH. The leader epoch returned is the partition's (0 on a single node). On a
cluster only the leader answers (another broker: NOT_LEADER_OR_FOLLOWER), and "latest" is its
high watermark.
"""
from ...errors import FencedLeaderEpochError, KafkaError, TopicAuthorizationFailedError, UnknownLeaderEpochError
from ...protocol.api_table import ApiKey
from ...protocol.messages.list_offsets_response import (ListOffsetsPartitionResponse, ListOffsetsResponse,
                                                        ListOffsetsTopicResponse)
from ..authorization import DESCRIBE, TOPIC, authorized_names

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = (0, 10)
LATEST, MAX_TIMESTAMP, EARLIEST_PENDING_UPLOAD = -1, -3, -5
READ_COMMITTED = 1


def handle(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    topics = []
    describable = authorized_names(ctx, DESCRIBE, TOPIC, [t.name for t in req.topics])
    for t in req.topics:
        parts = []
        for p in t.partitions:
            resp = ListOffsetsPartitionResponse(partition_index=p.partition_index)
            parts.append(resp)
            if t.name not in describable:
                resp.error_code = TopicAuthorizationFailedError.code
                continue
            try:
                lg = broker.leader_log(t.name, p.partition_index)
                epoch = broker.leader_epoch_of(t.name, p.partition_index)
                if v >= 4 and p.current_leader_epoch > epoch:
                    raise UnknownLeaderEpochError(f"leader epoch {p.current_leader_epoch} is ahead of {epoch}")
                if v >= 4 and 0 <= p.current_leader_epoch < epoch:
                    raise FencedLeaderEpochError(f"leader epoch {p.current_leader_epoch} is older than {epoch}")
                committed = v >= 2 and req.isolation_level == READ_COMMITTED
                if p.timestamp == EARLIEST_PENDING_UPLOAD:
                    found = None
                elif p.timestamp == LATEST and committed:
                    found = lg.last_stable_offset, -1
                else:
                    found = lg.offset_for_timestamp(p.timestamp)
                    if found is not None and (p.timestamp >= 0 or p.timestamp == MAX_TIMESTAMP):
                        # Kafka's fetchOffsetForTimestamp: nothing at or past what the reader may see
                        bound = lg.last_stable_offset if committed else lg.high_watermark
                        if found[0] >= bound:
                            found = None
            except KafkaError as e:
                resp.error_code = e.code
                continue
            if found is None:
                resp.offset, resp.timestamp = -1, -1
            else:
                resp.offset, resp.timestamp = found
                resp.leader_epoch = epoch
            if v == 0:
                resp.old_style_offsets = [] if found is None else [resp.offset]
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(topics=topics)


def error_response(req, version, code):
    return ListOffsetsResponse(topics=[
        ListOffsetsTopicResponse(name=t.name, partitions=[
            ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])
