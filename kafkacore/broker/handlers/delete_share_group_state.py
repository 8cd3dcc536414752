"""DeleteShareGroupState (API key 86), version 0: KIP-932's inter-broker request that deletes a
share partition's state (tombstones for its ShareSnapshot and ShareUpdate keys, which compaction
then removes). CLUSTER_ACTION; NOT_COORDINATOR from another broker; a share partition without
state is answered with no error."""
from ...protocol.api_table import ApiKey
from ...protocol.messages.delete_share_group_state_response import (DeleteShareGroupStateResponse,
                                                                    DeleteStateResult, PartitionResult)
from ._share_state_common import answer_each, by_topic

API_KEY = ApiKey.DELETE_SHARE_GROUP_STATE
VERSIONS = (0, 0)


async def handle(ctx, req):
    results = await answer_each(ctx, req, lambda sc, g, t, p: sc.delete_state(g, t, p.partition))
    return _response(results)


def _response(results):
    return DeleteShareGroupStateResponse(results=[DeleteStateResult(topic_id=t, partitions=[
        PartitionResult(partition=p, error_code=code, error_message=msg) for p, (code, msg, _v) in parts])
        for t, parts in by_topic(results).items()])


def error_response(req, version, code):
    return _response({(t.topic_id, p.partition): (code, None, None) for t in req.topics for p in t.partitions})
