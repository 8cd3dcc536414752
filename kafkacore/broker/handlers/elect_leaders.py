"""ElectLeaders (API key 43), versions 0-2 (KIP-460): elect the preferred replica (type 0, the
first of the assignment, when it is live and in the ISR) or, for partitions without a live
leader, any live replica (type 1, unclean: what only the old ISR had is lost). Served by the
controller of a ZooKeeper cluster (clients send it there); another broker answers
NOT_CONTROLLER, a single node (which has nothing to elect) is not served.

Per partition, Kafka's answers: ELECTION_NOT_NEEDED (the preferred replica leads already; or,
unclean, a live leader exists), PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION. A null topic list (v0-2) means every partition; v0 is preferred
only. ``timeout_ms`` bounds nothing here: the elections are written before the answer.
"""
from ...errors import NotControllerError
from ...protocol.api_table import ApiKey
from ...protocol.messages.elect_leaders_response import ElectLeadersResponse, PartitionResult, ReplicaElectionResult
from ..authorization import ALTER, require_cluster

API_KEY = ApiKey.ELECT_LEADERS
VERSIONS = (0, 2)
CLUSTER_ONLY = True


def handle(ctx, req):
    require_cluster(ctx, ALTER)
    v = ctx.api_version
    controller = ctx.broker.cluster.controller
    if not controller.active:
        return error_response(req, v, NotControllerError.code)
    election_type = req.election_type if v >= 1 else 0
    partitions = None if req.topic_partitions is None else [
        (t.topic, p) for t in req.topic_partitions for p in t.partitions]
    return _answer(controller, election_type, partitions, req, v)


async def _answer(controller, election_type, partitions, req, v):
    try:
        results = await controller.elect_leaders(election_type, partitions)
    except Exception:  # noqa: BLE001 - the controller moved meanwhile; the client retries
        return error_response(req, v, NotControllerError.code)
    by_topic = {}
    for (topic, p), (code, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append(PartitionResult(partition_id=p, error_code=code, error_message=message))
    return ElectLeadersResponse(error_code=0, replica_election_results=[
        ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])


def error_response(req, version, code):
    if version >= 1:
        return ElectLeadersResponse(error_code=code, replica_election_results=[])
    return ElectLeadersResponse(replica_election_results=[
        ReplicaElectionResult(topic=t.topic, partition_result=[
            PartitionResult(partition_id=p, error_code=code, error_message=None) for p in t.partitions])
        for t in (req.topic_partitions or [])])
