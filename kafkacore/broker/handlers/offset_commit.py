"""OffsetCommit (API key 8), versions 0-9.

- Commits are written to __consumer_offsets (one batch per request, before the response) and
  served by OffsetFetch; v0 (ZooKeeper storage in old Kafka) is stored the same way.
- Group checks (Kafka's): with a generation >= 0, a member id or an instance id the commit
  must come from the current generation of a known member (ILLEGAL_GENERATION,
  UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); a group completing a rebalance answers
  REBALANCE_IN_PROGRESS; commits during PreparingRebalance are accepted. Generation -1 without
  a member id ("free" consumers, admin tools) may commit to a group without members: the group
  is created to hold the offsets. A generation >= 0 for an unknown group is
  ILLEGAL_GENERATION (v9+: GROUP_ID_NOT_FOUND).
- Per partition: UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist,
  OFFSET_METADATA_TOO_LARGE above offset.metadata.max.bytes; the others are stored.
- v1: a per-partition commit timestamp (-1: now). v2-4: a retention time (-1: the broker's
  offsets.retention.minutes), kept as an expire timestamp (written as OffsetCommitValue v1).
  v6+: the committed leader epoch. v7+: group.instance.id.
- A KIP-848 consumer group (Kafka's ConsumerGroup.validateOffsetCommit): the generation field
  is the member epoch; a member must commit with v9+ (UNSUPPORTED_VERSION) at its current
  epoch (STALE_MEMBER_EPOCH), an unknown member is UNKNOWN_MEMBER_ID; a commit without a
  member epoch is taken only while the group has no members.
"""
import asyncio

from ...clock import wall_ms
from ...coordinator.offset_store import make_offset
from ...protocol.api_table import ApiKey
from ...protocol.messages.offset_commit_response import (OffsetCommitResponse, OffsetCommitResponsePartition,
                                                          OffsetCommitResponseTopic)
from ...errors import TopicAuthorizationFailedError, GroupAuthorizationFailedError
from ..authorization import GROUP, READ, TOPIC, authorized_names, require
from ._group_common import coordinator

API_KEY = ApiKey.OFFSET_COMMIT
VERSIONS = (0, 9)


def handle(ctx, req):
    v = ctx.api_version
    require(ctx, READ, GROUP, req.group_id, GroupAuthorizationFailedError)
    readable = authorized_names(ctx, READ, TOPIC, [t.name for t in req.topics])
    now = wall_ms()
    expire = None
    if 2 <= v <= 4 and req.retention_time_ms != -1:
        expire = now + req.retention_time_ms
    offsets = {}
    denied = {}
    for t in req.topics:
        for p in t.partitions:
            if t.name not in readable:
                denied[(t.name, p.partition_index)] = TopicAuthorizationFailedError.code
                continue
            ts = p.commit_timestamp if v == 1 and p.commit_timestamp != -1 else now
            offsets[(t.name, p.partition_index)] = make_offset(
                p.committed_offset, p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata, ts, expire)
    generation = req.generation_id_or_member_epoch if v >= 1 else -1
    member_id = req.member_id if v >= 1 else ""
    instance_id = req.group_instance_id if v >= 7 else None
    errors = coordinator(ctx).commit_offsets(req.group_id, member_id, instance_id, generation, offsets, v) \
        if offsets or not denied else {}
    if asyncio.isfuture(errors):  # a cluster: answered once the commit reached the ISR
        return _when_replicated(errors, req, denied)
    return _response({**errors, **denied}, req)


async def _when_replicated(errors, req, denied):
    return _response({**(await errors), **denied}, req)


def _response(errors, req):
    return OffsetCommitResponse(topics=[
        OffsetCommitResponseTopic(name=t.name, partitions=[
            OffsetCommitResponsePartition(partition_index=p.partition_index,
                                          error_code=errors.get((t.name, p.partition_index), 0))
            for p in t.partitions])
        for t in req.topics])


def error_response(req, version, code):
    return OffsetCommitResponse(topics=[
        OffsetCommitResponseTopic(name=t.name, partitions=[
            OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])
