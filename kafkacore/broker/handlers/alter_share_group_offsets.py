"""AlterShareGroupOffsets (API key 91), version 0 (Kafka 4.1, KIP-932): sets the start offset
(SPSO) of share partitions of an EMPTY share group. Each share partition's state is initialized
anew at its share coordinator (InitializeShareGroupState) with the next state epoch and no
in-flight records, which fences the writes of a share-partition leader still holding the old
state (FENCED_STATE_EPOCH: it reads the state again).

- READ on the group (GROUP_AUTHORIZATION_FAILED), the group coordinator's checks
  (NOT_COORDINATOR; GROUP_ID_NOT_FOUND for a group that is not a share group; NON_EMPTY_GROUP
  while it has members): request-level errors, answered with no topics.
- Per topic: READ on it (TOPIC_AUTHORIZATION_FAILED in each partition); an unknown topic or
  partition is UNKNOWN_TOPIC_OR_PARTITION; a negative start offset is INVALID_REQUEST.
"""
from ...errors import (GroupAuthorizationFailedError, InvalidRequestError, TopicAuthorizationFailedError,
                       UnknownTopicOrPartitionError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.alter_share_group_offsets_response import (AlterShareGroupOffsetsResponse,
                                                                     AlterShareGroupOffsetsResponsePartition,
                                                                     AlterShareGroupOffsetsResponseTopic)
from ...protocol.wire import ZERO_UUID
from ..authorization import GROUP, READ, TOPIC, authorize, authorized_names
from ._share_offsets_common import NONE, each, group_error

API_KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
VERSIONS = (0, 0)


async def handle(ctx, req):
    if not authorize(ctx, READ, GROUP, req.group_id):
        return error_response(req, 0, GroupAuthorizationFailedError.code)
    code = group_error(ctx, req.group_id, need_empty=True)
    if code != NONE:
        return error_response(req, 0, code)
    broker = ctx.broker
    persister = broker.share_persister
    allowed = authorized_names(ctx, READ, TOPIC, [t.topic_name for t in req.topics])
    fixed, calls = {}, {}
    for t in req.topics:
        info = broker.topic(t.topic_name)
        for p in t.partitions:
            key = (t.topic_name, p.partition_index)
            if t.topic_name not in allowed:
                fixed[key] = (TopicAuthorizationFailedError.code, "not authorized to read the topic")
            elif info is None or not 0 <= p.partition_index < info.partitions:
                fixed[key] = (UnknownTopicOrPartitionError.code, f"{t.topic_name}-{p.partition_index} does not exist")
            elif p.start_offset < 0:
                fixed[key] = (InvalidRequestError.code, f"start offset {p.start_offset} is negative")
            else:
                calls[key] = _reset(persister, req.group_id, info.topic_id, p.partition_index, p.start_offset)
    results = await each(calls)
    topics = []
    for t in req.topics:
        info = broker.topic(t.topic_name)
        rows = []
        for p in t.partitions:
            key = (t.topic_name, p.partition_index)
            code, msg = fixed[key] if key in fixed else results[key][:2]
            rows.append(AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index, error_code=code,
                                                                error_message=msg))
        topics.append(AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=info.topic_id if info is not None else ZERO_UUID, partitions=rows))
    return AlterShareGroupOffsetsResponse(error_code=NONE, responses=topics)


async def _reset(persister, group_id, topic_id, partition, start_offset):
    """The next state epoch at ``start_offset``, no in-flight records."""
    current = await persister.read_summary(group_id, topic_id, partition)
    epoch = 0 if current is None else current.state_epoch + 1
    await persister.initialize_state(group_id, topic_id, partition, epoch, start_offset)


def error_response(req, version, code):
    return AlterShareGroupOffsetsResponse(error_code=code, error_message=None, responses=[])
