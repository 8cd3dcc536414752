"""DescribeShareGroupOffsets (API key 90), version 0 (Kafka 4.1, KIP-932): each share
partition's start offset (SPSO) and the leader epoch of its state, read from its share
coordinator (ReadShareGroupStateSummary through the broker's persister).

- Per group: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), the group coordinator's checks
  (NOT_COORDINATOR; GROUP_ID_NOT_FOUND for a group that is not a share group).
- Per topic: DESCRIBE on it (TOPIC_AUTHORIZATION_FAILED in each of its partitions), an unknown
  topic or partition is UNKNOWN_TOPIC_OR_PARTITION.
- A share partition without state answers start offset -1 (nothing consumed yet).
- Topics null: every topic the principal may describe whose partitions have share state for
  the group (only those partitions are listed).
"""
from ...errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_share_group_offsets_response import (DescribeShareGroupOffsetsResponse,
                                                                        DescribeShareGroupOffsetsResponseGroup,
                                                                        DescribeShareGroupOffsetsResponsePartition,
                                                                        DescribeShareGroupOffsetsResponseTopic)
from ...protocol.wire import ZERO_UUID
from ..authorization import DESCRIBE, GROUP, TOPIC, authorize, authorized_names
from ._share_offsets_common import NONE, each, group_error

API_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
VERSIONS = (0, 0)


async def handle(ctx, req):
    return DescribeShareGroupOffsetsResponse(groups=[await _group(ctx, g) for g in req.groups])


async def _group(ctx, g):
    if not authorize(ctx, DESCRIBE, GROUP, g.group_id):
        return _group_failed(g.group_id, GroupAuthorizationFailedError.code, "not authorized to describe the group")
    code = group_error(ctx, g.group_id, need_empty=False)
    if code != NONE:
        return _group_failed(g.group_id, code, None)
    broker = ctx.broker
    every = g.topics is None
    if every:
        names = sorted(n for n, t in broker.topics.items() if not t.internal)
        asked = [(n, list(range(broker.topics[n].partitions))) for n in authorized_names(ctx, DESCRIBE, TOPIC, names)]
        asked.sort()
    else:
        asked = [(t.topic_name, list(t.partitions)) for t in g.topics]
    allowed = authorized_names(ctx, DESCRIBE, TOPIC, [n for n, _ps in asked])
    calls = {}
    for name, partitions in asked:
        info = broker.topic(name)
        if name in allowed and info is not None:
            for p in partitions:
                if 0 <= p < info.partitions:
                    calls[(name, p)] = broker.share_persister.read_summary(g.group_id, info.topic_id, p)
    results = await each(calls)
    topics = []
    for name, partitions in asked:
        info = broker.topic(name)
        rows = []
        for p in partitions:
            if name not in allowed:
                rows.append(_row(p, TopicAuthorizationFailedError.code, "not authorized to describe the topic"))
            elif (name, p) not in results:
                rows.append(_row(p, UnknownTopicOrPartitionError.code, f"{name}-{p} does not exist"))
            else:
                code, msg, state = results[(name, p)]
                if every and (code != NONE or state is None):
                    continue
                rows.append(_row(p, code, msg) if code != NONE else
                            _row(p, NONE, None, -1 if state is None else state.start_offset,
                                 -1 if state is None else state.leader_epoch))
        if rows or not every:
            topics.append(DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=info.topic_id if info is not None else ZERO_UUID, partitions=rows))
    return DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=topics, error_code=NONE)


def _row(p, code, msg, start=-1, leader_epoch=-1):
    return DescribeShareGroupOffsetsResponsePartition(partition_index=p, start_offset=start, leader_epoch=leader_epoch,
                                                      error_code=code, error_message=msg)


def _group_failed(group_id, code, msg):
    return DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=[], error_code=code, error_message=msg)


def error_response(req, version, code):
    return DescribeShareGroupOffsetsResponse(groups=[_group_failed(g.group_id, code, None) for g in req.groups])
