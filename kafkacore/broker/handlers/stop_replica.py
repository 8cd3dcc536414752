"""StopReplica (API key 5), versions 0-4: the controller tells this broker to stop a replica
(stop following it), and with delete to remove its log - a deleted topic, or a replica moved away
(inter-broker; served only on a broker of a ZooKeeper cluster). Stale controller or broker
epochs are refused whole."""
from ...errors import KafkaError
from ...protocol.api_table import ApiKey
from ...protocol.messages.stop_replica_response import StopReplicaPartitionError, StopReplicaResponse
from ..authorization import CLUSTER_ACTION, require_cluster

API_KEY = ApiKey.STOP_REPLICA
VERSIONS = (0, 4)
CLUSTER_ONLY = True


def _partitions(req, v):
    if v == 0:
        return [(p.topic_name, p.partition_index, req.delete_partitions) for p in req.ungrouped_partitions]
    if v <= 2:
        return [(t.name, p, req.delete_partitions) for t in req.topics for p in t.partition_indexes]
    return [(t.topic_name, ps.partition_index, ps.delete_partition) for t in req.topic_states
            for ps in t.partition_states]


def handle(ctx, req):
    require_cluster(ctx, CLUSTER_ACTION)
    v = ctx.api_version
    rm = ctx.broker.replica_manager
    try:
        rm.check_controller(req.controller_epoch, req.broker_epoch if v >= 1 else -1)
    except KafkaError as e:
        return StopReplicaResponse(error_code=e.code, partition_errors=[])
    errors = rm.stop_replicas(_partitions(req, v))
    return StopReplicaResponse(error_code=0, partition_errors=[
        StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=code) for (t, p), code in errors.items()])


def error_response(req, version, code):
    return StopReplicaResponse(error_code=code, partition_errors=[])
