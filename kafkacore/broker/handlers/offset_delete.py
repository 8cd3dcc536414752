"""OffsetDelete (API key 47), version 0.

Deletes a group's committed offsets of the partitions given (tombstones in
__consumer_offsets). An Empty group may lose any of its offsets; a consumer group with members
only those of topics none of its members subscribes to (the others: GROUP_SUBSCRIBED_TO_TOPIC
per partition); any other group with members answers NON_EMPTY_GROUP. An unknown group is
GROUP_ID_NOT_FOUND, an empty group id INVALID_GROUP_ID, a partition that does not exist
UNKNOWN_TOPIC_OR_PARTITION. A group-level error answers with no topics. An Empty group left
without offsets is removed, as Kafka does.
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.offset_delete_response import (OffsetDeleteResponse, OffsetDeleteResponsePartition,
                                                          OffsetDeleteResponseTopic)
from ...errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from ..authorization import DELETE, GROUP, READ, TOPIC, authorized_names, require
from ._group_common import coordinator

API_KEY = ApiKey.OFFSET_DELETE
VERSIONS = (0, 0)


def handle(ctx, req):
    require(ctx, DELETE, GROUP, req.group_id, GroupAuthorizationFailedError)
    readable = authorized_names(ctx, READ, TOPIC, [t.name for t in req.topics])
    partitions = [(t.name, p.partition_index) for t in req.topics for p in t.partitions if t.name in readable]
    error, results = coordinator(ctx).delete_offsets(req.group_id, partitions)
    results = {**results, **{(t.name, p.partition_index): TopicAuthorizationFailedError.code
                             for t in req.topics if t.name not in readable for p in t.partitions}}
    if error:
        return OffsetDeleteResponse(error_code=error, topics=[])
    return OffsetDeleteResponse(topics=[
        OffsetDeleteResponseTopic(name=t.name, partitions=[
            OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                          error_code=results.get((t.name, p.partition_index), 0))
            for p in t.partitions])
        for t in req.topics])


def error_response(req, version, code):
    return OffsetDeleteResponse(error_code=code, topics=[])
