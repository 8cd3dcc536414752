"""WriteShareGroupState (API key 85), version 0: KIP-932's inter-broker request with which a
share-partition leader stores its share partition's start offset and in-flight batches at the
share coordinator (a ShareUpdate, or a ShareSnapshot every
``share.coordinator.snapshot.update.records.per.snapshot`` updates). CLUSTER_ACTION;
NOT_COORDINATOR from another broker; FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for a writer older
than the state; answered once the record is replicated."""
from ...protocol.api_table import ApiKey
from ...protocol.messages.write_share_group_state_response import (PartitionResult, WriteShareGroupStateResponse,
                                                                   WriteStateResult)
from ._share_state_common import answer_each, by_topic

API_KEY = ApiKey.WRITE_SHARE_GROUP_STATE
VERSIONS = (0, 0)


async def handle(ctx, req):
    results = await answer_each(ctx, req, lambda sc, g, t, p: sc.write_state(
        g, t, p.partition, p.state_epoch, p.leader_epoch, p.start_offset, p.state_batches))
    return _response(results)


def _response(results):
    return WriteShareGroupStateResponse(results=[WriteStateResult(topic_id=t, partitions=[
        PartitionResult(partition=p, error_code=code, error_message=msg) for p, (code, msg, _v) in parts])
        for t, parts in by_topic(results).items()])


def error_response(req, version, code):
    return _response({(t.topic_id, p.partition): (code, None, None) for t in req.topics for p in t.partitions})
