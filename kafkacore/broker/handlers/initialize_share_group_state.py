"""InitializeShareGroupState (API key 83), version 0: KIP-932's inter-broker request that sets a
share partition's state epoch and start offset, with no in-flight batches (a ShareSnapshot in
``__share_group_state``). Sent by a share-partition leader or a group coordinator (the
persister) to the share coordinator; CLUSTER_ACTION; NOT_COORDINATOR from another broker,
FENCED_STATE_EPOCH when the stored state epoch is newer."""
from ...protocol.api_table import ApiKey
from ...protocol.messages.initialize_share_group_state_response import (InitializeShareGroupStateResponse,
                                                                        InitializeStateResult, PartitionResult)
from ._share_state_common import answer_each, by_topic

API_KEY = ApiKey.INITIALIZE_SHARE_GROUP_STATE
VERSIONS = (0, 0)


async def handle(ctx, req):
    results = await answer_each(ctx, req, lambda sc, g, t, p: sc.initialize_state(g, t, p.partition, p.state_epoch,
                                                                                   p.start_offset))
    return _response(results)


def _response(results):
    return InitializeShareGroupStateResponse(results=[InitializeStateResult(topic_id=t, partitions=[
        PartitionResult(partition=p, error_code=code, error_message=msg) for p, (code, msg, _v) in parts])
        for t, parts in by_topic(results).items()])


def error_response(req, version, code):
    return _response({(t.topic_id, p.partition): (code, None, None) for t in req.topics for p in t.partitions})
