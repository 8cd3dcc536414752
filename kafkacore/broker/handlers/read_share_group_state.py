"""ReadShareGroupState (API key 84), version 0: KIP-932's inter-broker request with which a
share-partition leader loads its share partition's state from the share coordinator: the state
epoch, the start offset and the in-flight batches. The request's leader epoch is recorded (a
newer one fences the writes of older leaders). CLUSTER_ACTION; NOT_COORDINATOR from another
broker; FENCED_LEADER_EPOCH for an older leader epoch; UNKNOWN_TOPIC_OR_PARTITION for a share
partition that has no state (never initialized or written, or deleted)."""
from ...protocol.api_table import ApiKey
from ...protocol.messages.read_share_group_state_response import (PartitionResult, ReadShareGroupStateResponse,
                                                                  ReadStateResult, StateBatch)
from ._share_state_common import answer_each, by_topic

API_KEY = ApiKey.READ_SHARE_GROUP_STATE
VERSIONS = (0, 0)


async def handle(ctx, req):
    results = await answer_each(ctx, req, lambda sc, g, t, p: sc.read_state(g, t, p.partition, p.leader_epoch))
    return _response(results)


def _partition(p, code, msg, s):
    if s is None:
        return PartitionResult(partition=p, error_code=code, error_message=msg, state_epoch=0, start_offset=-1,
                               state_batches=[])
    return PartitionResult(partition=p, error_code=0, error_message=None, state_epoch=s.state_epoch,
                           start_offset=s.start_offset, state_batches=[StateBatch(
                               first_offset=b.first_offset, last_offset=b.last_offset,
                               delivery_state=b.delivery_state, delivery_count=b.delivery_count) for b in s.batches])


def _response(results):
    return ReadShareGroupStateResponse(results=[ReadStateResult(topic_id=t, partitions=[
        _partition(p, code, msg, s) for p, (code, msg, s) in parts]) for t, parts in by_topic(results).items()])


def error_response(req, version, code):
    return _response({(t.topic_id, p.partition): (code, None, None) for t in req.topics for p in t.partitions})
