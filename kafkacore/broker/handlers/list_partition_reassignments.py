"""ListPartitionReassignments (API key 46), version 0 (KIP-455): the reassignments running,
each with its full replica set (target first, then the replicas being removed) and the
replicas being added and removed. Null topics: every reassignment. Served by the controller
of a ZooKeeper cluster; another broker answers NOT_CONTROLLER."""
from ...errors import NotControllerError
from ...protocol.api_table import ApiKey
from ...protocol.messages.list_partition_reassignments_response import (ListPartitionReassignmentsResponse,
                                                                        OngoingPartitionReassignment,
                                                                        OngoingTopicReassignment)
from ..authorization import DESCRIBE, require_cluster

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
VERSIONS = (0, 0)
CLUSTER_ONLY = True


def handle(ctx, req):
    require_cluster(ctx, DESCRIBE)
    controller = ctx.broker.cluster.controller
    if not controller.active:
        return error_response(req, ctx.api_version, NotControllerError.code)
    keys = None if req.topics is None else {(t.name, p) for t in req.topics for p in t.partition_indexes}
    by_topic = {}
    for (topic, p), (replicas, adding, removing) in controller.list_reassignments(keys).items():
        by_topic.setdefault(topic, []).append(OngoingPartitionReassignment(
            partition_index=p, replicas=list(replicas), adding_replicas=list(adding),
            removing_replicas=list(removing)))
    return ListPartitionReassignmentsResponse(error_code=0, error_message=None, topics=[
        OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])


def error_response(req, version, code):
    return ListPartitionReassignmentsResponse(error_code=code, error_message=None, topics=[])
