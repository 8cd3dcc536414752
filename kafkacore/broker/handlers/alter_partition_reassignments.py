"""AlterPartitionReassignments (API key 45), version 0 (KIP-455): move partitions to other
brokers, or cancel a move (null replicas). Served by the controller of a ZooKeeper cluster
(admin clients send it there); another broker answers NOT_CONTROLLER, a single node (one
replica of everything) does not serve it.

The answer comes once each move is started (written to the topic znode, the new replicas told
to fetch), not when it is done; ListPartitionReassignments shows what still runs. Per
partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, a broker named twice,
a broker that is not live), NO_REASSIGNMENT_IN_PROGRESS for a cancel with nothing to cancel.
"""
from ...errors import NotControllerError
from ...protocol.api_table import ApiKey
from ...protocol.messages.alter_partition_reassignments_response import (AlterPartitionReassignmentsResponse,
                                                                         ReassignablePartitionResponse,
                                                                         ReassignableTopicResponse)
from ..authorization import ALTER, require_cluster

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
VERSIONS = (0, 0)
CLUSTER_ONLY = True


def handle(ctx, req):
    require_cluster(ctx, ALTER)
    controller = ctx.broker.cluster.controller
    if not controller.active:
        return error_response(req, ctx.api_version, NotControllerError.code)
    requests = {}
    for t in req.topics:
        for p in t.partitions:
            requests[(t.name, p.partition_index)] = None if p.replicas is None else list(p.replicas)
    return _answer(controller, requests, req)


async def _answer(controller, requests, req):
    try:
        results = await controller.alter_reassignments(requests)
    except Exception:  # noqa: BLE001 - the controller moved meanwhile; the client retries
        return error_response(req, 0, NotControllerError.code)
    by_topic = {}
    for (topic, p), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(ReassignablePartitionResponse(partition_index=p, error_code=code,
                                                                            error_message=message))
    return AlterPartitionReassignmentsResponse(error_code=0, error_message=None, responses=[
        ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])


def error_response(req, version, code):
    return AlterPartitionReassignmentsResponse(error_code=code, error_message=None, responses=[
        ReassignableTopicResponse(name=t.name, partitions=[
            ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code, error_message=None)
            for p in t.partitions]) for t in req.topics])
