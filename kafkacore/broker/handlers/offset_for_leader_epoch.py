"""OffsetForLeaderEpoch (API key 23), versions 0-4.

Consumers use it (KIP-320) to detect log truncation after a leader change. This node has led
every partition since it was created, with one leader epoch, 0, starting at offset 0; so per
partition, as Kafka's leader-epoch cache answers:

- ``leader_epoch`` 0: end offset = the log end offset, leader epoch 0;
- any other epoch (a later one it never had, or -1): leader epoch -1 and end offset -1
  (UNDEFINED, no error), as Kafka answers for an epoch it cannot place;
- ``current_leader_epoch`` (v2+): -1 skips the check; above 0 is UNKNOWN_LEADER_EPOCH, below
  -1 FENCED_LEADER_EPOCH (older than the current 0);
- an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.

Errors answer leader epoch -1 and end offset -1. ``replica_id`` (v3+) is not checked: there
are no followers.

Version notes: the response carries leader_epoch from v1 (v0: end offset only);
current_leader_epoch from v2; replica_id from v3; v4 is the flexible encoding.
"""
from ...errors import FencedLeaderEpochError, UnknownLeaderEpochError, UnknownTopicOrPartitionError
from ...protocol.messages.offset_for_leader_epoch_response import (EpochEndOffset, OffsetForLeaderEpochResponse,
                                                                   OffsetForLeaderTopicResult)

API_KEY = 23
VERSIONS = (0, 4)
LEADER_EPOCH = 0
NO_EPOCH = -1


def _end_offset(broker, topic, p, v):
    out = EpochEndOffset(partition=p.partition, leader_epoch=-1, end_offset=-1)
    lg = broker.get_log(topic, p.partition)
    if lg is None:
        out.error_code = UnknownTopicOrPartitionError.code
        return out
    if v >= 2 and p.current_leader_epoch != NO_EPOCH:
        if p.current_leader_epoch > LEADER_EPOCH:
            out.error_code = UnknownLeaderEpochError.code
            return out
        if p.current_leader_epoch < LEADER_EPOCH:
            out.error_code = FencedLeaderEpochError.code
            return out
    if p.leader_epoch == LEADER_EPOCH:
        out.leader_epoch = LEADER_EPOCH
        out.end_offset = lg.log_end_offset
    return out


def handle(ctx, req):
    v = ctx.api_version
    return OffsetForLeaderEpochResponse(topics=[
        OffsetForLeaderTopicResult(topic=t.topic, partitions=[_end_offset(ctx.broker, t.topic, p, v)
                                                              for p in t.partitions])
        for t in req.topics])


def error_response(req, version, code):
    return OffsetForLeaderEpochResponse(topics=[
        OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)
            for p in t.partitions])
        for t in req.topics])
