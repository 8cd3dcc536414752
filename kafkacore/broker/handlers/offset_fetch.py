"""OffsetFetch (API key 9), versions 0-9.

- The committed offset, leader epoch (v5+) and metadata of each partition asked for; a
  partition without a committed offset (or an unknown group) answers offset -1, leader epoch
  -1, metadata "" and no error, as Kafka. v0 (ZooKeeper storage in old Kafka) reads the same
  store as the other versions.
- v2+: a null topic list asks for every committed offset of the group; a top-level error code
  (v2-7). v7+: ``require_stable`` (KIP-447): a partition for which an open transaction holds
  offsets of the group (TxnOffsetCommit not yet committed or aborted) answers
  UNSTABLE_OFFSET_COMMIT with offset -1, and the client retries. v8+: several groups per request, each with its own topics (null: all) and error.
  v9: a member id and epoch, checked against a KIP-848 consumer group (UNKNOWN_MEMBER_ID,
  STALE_MEMBER_EPOCH; none given: an admin's fetch, answered).
- With an authorizer: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), DESCRIBE on each
  topic asked for (else the partition's TOPIC_AUTHORIZATION_FAILED); asked for every partition,
  the topics the principal may not describe are left out.
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.offset_fetch_response import (OffsetFetchResponse, OffsetFetchResponseGroup,
                                                         OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
                                                         OffsetFetchResponseTopic, OffsetFetchResponseTopics)
from ...errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError, UnstableOffsetCommitError
from ..authorization import DESCRIBE, GROUP, TOPIC, authorize, authorized_names, require
from ._group_common import coordinator

API_KEY = ApiKey.OFFSET_FETCH
VERSIONS = (0, 9)


def _fetch(ctx, gc, group_id, topics, member_id=None, member_epoch=-1):
    """(error, [(topic, [(partition, offset, epoch, metadata)])], the partitions the principal may
    not describe) in request order. Asked for every partition, the topics it may not describe
    are left out instead (Kafka's rule)."""
    if not authorize(ctx, DESCRIBE, GROUP, group_id):
        return GroupAuthorizationFailedError.code, [], set()
    partitions = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    error, rows = gc.fetch_offsets(group_id, partitions, member_id, member_epoch)
    describable = authorized_names(ctx, DESCRIBE, TOPIC, {topic for topic, _p, _om in rows})
    denied = set()
    out = []
    index = {}
    for topic, partition, om in rows:
        if topic not in describable:
            if partitions is None:
                continue
            denied.add((topic, partition))
        if topic not in index:
            index[topic] = len(out)
            out.append((topic, []))
        entry = (partition, -1, -1, "") if om is None or topic not in describable else \
            (partition, om.offset, om.leader_epoch, om.metadata)
        out[index[topic]][1].append(entry)
    return error, out, denied


def _partition_error(name, p, denied, unstable, default):
    if (name, p) in denied:
        return TopicAuthorizationFailedError.code
    if (name, p) in unstable:
        return UnstableOffsetCommitError.code
    return default


def handle(ctx, req):
    v = ctx.api_version
    gc = coordinator(ctx)
    stable = v >= 7 and req.require_stable
    if v >= 8:
        groups = []
        for grp in req.groups:
            error, topics, denied = _fetch(ctx, gc, grp.group_id, grp.topics,
                                           *((grp.member_id, grp.member_epoch) if v >= 9 else ()))
            unstable = _unstable(gc, grp.group_id, topics) if stable else set()
            groups.append(OffsetFetchResponseGroup(group_id=grp.group_id, error_code=error, topics=[
                OffsetFetchResponseTopics(name=name, partitions=[
                    OffsetFetchResponsePartitions(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                                                  metadata=md, error_code=0)
                    if (name, p) not in unstable and (name, p) not in denied else
                    OffsetFetchResponsePartitions(
                        partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                        error_code=_partition_error(name, p, denied, unstable, 0))
                    for p, o, e, md in parts])
                for name, parts in topics]))
        return OffsetFetchResponse(groups=groups)
    require(ctx, DESCRIBE, GROUP, req.group_id, GroupAuthorizationFailedError)
    error, topics, denied = _fetch(ctx, gc, req.group_id, req.topics)
    part_error = error if v < 2 else 0
    unstable = _unstable(gc, req.group_id, topics) if stable else set()
    return OffsetFetchResponse(error_code=error, topics=[
        OffsetFetchResponseTopic(name=name, partitions=[
            OffsetFetchResponsePartition(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=md,
                                         error_code=part_error) if (name, p) not in unstable and (name, p) not in denied
            else OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                              metadata="", error_code=_partition_error(name, p, denied, unstable, 0))
            for p, o, e, md in parts])
        for name, parts in topics])


def _unstable(gc, group_id, topics):
    return {(name, p) for name, parts in topics for p, *_rest in parts
            if gc.has_pending_txn_offsets(group_id, [(name, p)])}


def error_response(req, version, code):
    if version >= 8:
        return OffsetFetchResponse(groups=[OffsetFetchResponseGroup(group_id=grp.group_id, error_code=code, topics=[])
                                           for grp in req.groups])
    topics = [OffsetFetchResponseTopic(name=t.name, partitions=[
        OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, metadata="", error_code=code)
        for p in t.partition_indexes]) for t in (req.topics or [])]
    return OffsetFetchResponse(error_code=code, topics=topics)
