"""DeleteShareGroupOffsets (API key 92), version 0 (Kafka 4.1, KIP-932): deletes the share state
of an EMPTY share group on whole topics (DeleteShareGroupState at each partition's share
coordinator: tombstones in ``__share_group_state``); the group's next consumption of the topic
starts at ``share.auto.offset.reset``.

- DELETE on the group (GROUP_AUTHORIZATION_FAILED), the group coordinator's checks
  (NOT_COORDINATOR; GROUP_ID_NOT_FOUND for a group that is not a share group; NON_EMPTY_GROUP
  while it has members): request-level errors, answered with no topics.
- Per topic: READ on it (TOPIC_AUTHORIZATION_FAILED), UNKNOWN_TOPIC_OR_PARTITION for an unknown
  topic; the first partition's error, if any, is the topic's.
"""
from ...errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from ...protocol.api_table import ApiKey
from ...protocol.messages.delete_share_group_offsets_response import (DeleteShareGroupOffsetsResponse,
                                                                      DeleteShareGroupOffsetsResponseTopic)
from ...protocol.wire import ZERO_UUID
from ..authorization import DELETE, GROUP, READ, TOPIC, authorize, authorized_names
from ._share_offsets_common import NONE, each, group_error

API_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
VERSIONS = (0, 0)


async def handle(ctx, req):
    if not authorize(ctx, DELETE, GROUP, req.group_id):
        return error_response(req, 0, GroupAuthorizationFailedError.code)
    code = group_error(ctx, req.group_id, need_empty=True)
    if code != NONE:
        return error_response(req, 0, code)
    broker = ctx.broker
    allowed = authorized_names(ctx, READ, TOPIC, [t.topic_name for t in req.topics])
    calls = {}
    for t in req.topics:
        info = broker.topic(t.topic_name)
        if t.topic_name in allowed and info is not None:
            for p in range(info.partitions):
                calls[(t.topic_name, p)] = broker.share_persister.delete_state(req.group_id, info.topic_id, p)
    results = await each(calls)
    topics = []
    for t in req.topics:
        info = broker.topic(t.topic_name)
        if t.topic_name not in allowed:
            code, msg = TopicAuthorizationFailedError.code, "not authorized to read the topic"
        elif info is None:
            code, msg = UnknownTopicOrPartitionError.code, f"topic {t.topic_name} does not exist"
        else:
            failed = [r for (name, _p), r in sorted(results.items()) if name == t.topic_name and r[0] != NONE]
            code, msg = failed[0][:2] if failed else (NONE, None)
        topics.append(DeleteShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=info.topic_id if info is not None else ZERO_UUID, error_code=code,
            error_message=msg))
    return DeleteShareGroupOffsetsResponse(error_code=NONE, responses=topics)


def error_response(req, version, code):
    return DeleteShareGroupOffsetsResponse(error_code=code, error_message=None, responses=[])
