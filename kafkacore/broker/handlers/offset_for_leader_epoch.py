"""OffsetForLeaderEpoch (API key 23), versions 0-4.

Followers use it to find where their log diverges from the leader's; consumers (KIP-320) to
detect log truncation after a leader change. The answer comes from the partition's leader epoch
cache (Log.leader_epoch_cache, Kafka's LeaderEpochFileCache.endOffsetFor):

- the latest epoch: that epoch and the log end offset;
- an older epoch: the largest cached epoch at or below it, and the start offset of the next
  cached epoch (where the requested one ended);
- -1, or an epoch above the latest: leader epoch -1 and end offset -1 (UNDEFINED, no error);
- ``current_leader_epoch`` (v2+): -1 skips the check; above the partition's current leader
  epoch is UNKNOWN_LEADER_EPOCH, below it FENCED_LEADER_EPOCH;
- an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (on a cluster, a partition this
  broker does not lead: NOT_LEADER_OR_FOLLOWER, as Kafka answers).

A leader assigns its epoch at the log end when it becomes leader (a single node when it creates
or loads the partition, with epoch 0 for a new log), so a log not written to since answers that
epoch with the log end offset, as Kafka's leader does. Errors answer leader epoch -1 and end
offset -1. ``replica_id`` (v3+) is not checked.

Version notes: the response carries leader_epoch from v1 (v0: end offset only);
current_leader_epoch from v2; replica_id from v3; v4 is the flexible encoding.
"""
from ...errors import (FencedLeaderEpochError, KafkaError,
                       TopicAuthorizationFailedError, UnknownLeaderEpochError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.offset_for_leader_epoch_response import (EpochEndOffset, OffsetForLeaderEpochResponse,
                                                                   OffsetForLeaderTopicResult)
from ..authorization import CLUSTER_ACTION, DESCRIBE, TOPIC, authorize_cluster, authorized_names

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
VERSIONS = (0, 4)
NO_EPOCH = -1
NO_OFFSET = -1


def _end_offset(broker, topic, p, v):
    out = EpochEndOffset(partition=p.partition, leader_epoch=NO_EPOCH, end_offset=NO_OFFSET)
    try:
        lg = broker.leader_log(topic, p.partition)
        current = broker.leader_epoch_of(topic, p.partition)
    except KafkaError as e:
        out.error_code = e.code
        return out
    if v >= 2 and p.current_leader_epoch != NO_EPOCH:
        if p.current_leader_epoch > current:
            out.error_code = UnknownLeaderEpochError.code
            return out
        if p.current_leader_epoch < current:
            out.error_code = FencedLeaderEpochError.code
            return out
    out.leader_epoch, out.end_offset = lg.leader_epoch_cache.end_offset_for(p.leader_epoch, lg.log_end_offset)
    return out


def handle(ctx, req):
    v = ctx.api_version
    # Kafka's checks: CLUSTER_ACTION (a follower) reads every partition, anyone else needs DESCRIBE
    # on each topic
    names = [t.topic for t in req.topics]
    describable = set(names) if authorize_cluster(ctx, CLUSTER_ACTION) else authorized_names(ctx, DESCRIBE, TOPIC,
                                                                                             names)
    return OffsetForLeaderEpochResponse(topics=[
        OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            _end_offset(ctx.broker, t.topic, p, v) if t.topic in describable else
            EpochEndOffset(error_code=TopicAuthorizationFailedError.code, partition=p.partition, leader_epoch=NO_EPOCH,
                           end_offset=NO_OFFSET)
            for p in t.partitions])
        for t in req.topics])


def error_response(req, version, code):
    return OffsetForLeaderEpochResponse(topics=[
        OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)
            for p in t.partitions])
        for t in req.topics])
