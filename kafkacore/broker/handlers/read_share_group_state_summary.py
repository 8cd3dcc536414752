"""ReadShareGroupStateSummary (API key 87), version 0: KIP-932's inter-broker request for a share
partition's state epoch and start offset without its batches (what DescribeShareGroupOffsets
shows). CLUSTER_ACTION; NOT_COORDINATOR from another broker; UNKNOWN_TOPIC_OR_PARTITION for a
share partition that has no state."""
from ...protocol.api_table import ApiKey
from ...protocol.messages.read_share_group_state_summary_response import (PartitionResult,
                                                                          ReadShareGroupStateSummaryResponse,
                                                                          ReadStateSummaryResult)
from ._share_state_common import answer_each, by_topic

API_KEY = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY
VERSIONS = (0, 0)


async def handle(ctx, req):
    results = await answer_each(ctx, req, lambda sc, g, t, p: sc.read_summary(g, t, p.partition))
    return _response(results)


def _partition(p, code, msg, s):
    if s is None:
        return PartitionResult(partition=p, error_code=code, error_message=msg, state_epoch=0, start_offset=-1)
    return PartitionResult(partition=p, error_code=0, error_message=None, state_epoch=s.state_epoch,
                           start_offset=s.start_offset)


def _response(results):
    return ReadShareGroupStateSummaryResponse(results=[ReadStateSummaryResult(topic_id=t, partitions=[
        _partition(p, code, msg, s) for p, (code, msg, s) in parts]) for t, parts in by_topic(results).items()])


def error_response(req, version, code):
    return _response({(t.topic_id, p.partition): (code, None, None) for t in req.topics for p in t.partitions})
