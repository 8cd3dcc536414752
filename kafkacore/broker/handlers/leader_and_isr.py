"""LeaderAndIsr (API key 4), versions 0-7: the controller tells this broker which replicas it
leads and which it follows (inter-broker; served only on a broker of a ZooKeeper cluster).

- A request from a controller epoch older than the newest seen, or for an older broker epoch
  (a request meant for this broker before it restarted), is refused whole:
  STALE_CONTROLLER_EPOCH / STALE_BROKER_EPOCH.
- Per partition (replication/replica_manager.py): a leader epoch below the one held is ignored with
  STALE_CONTROLLER_EPOCH, as Kafka answers; a partition this broker is not a replica of gets
  UNKNOWN_TOPIC_OR_PARTITION; otherwise the replica becomes leader or follower, its log created
  with the topic's configs from ZooKeeper when new.
- A FULL request (``type`` 1, v5+: sent when this broker joins or a new controller takes over)
  names every partition the broker hosts; local logs of other partitions are strays (moved
  away or deleted while the broker was down) and are deleted (ReplicaManager.delete_stray_logs).
- v0-1 carry ungrouped partition states, v2+ group them by topic, v5+ add topic ids (the
  response then groups errors by topic id).
"""
from ...errors import KafkaError
from ...protocol.api_table import ApiKey
from ...protocol.messages.leader_and_isr_response import (LeaderAndIsrPartitionError, LeaderAndIsrResponse,
                                                          LeaderAndIsrTopicError)
from ...protocol.wire import ZERO_UUID
from ...replication.replica_manager import LeaderAndIsrState
from ..authorization import CLUSTER_ACTION, require_cluster

API_KEY = ApiKey.LEADER_AND_ISR
VERSIONS = (0, 7)
CLUSTER_ONLY = True
FULL = 1  # LeaderAndIsr type (KIP-516): every partition the broker hosts


def _partition_states(req, v):
    if v < 2:
        for ps in req.ungrouped_partition_states:
            yield ps.topic_name, None, ps
        return
    for t in req.topic_states:
        for ps in t.partition_states:
            yield t.topic_name, (t.topic_id if v >= 5 and t.topic_id != ZERO_UUID else None), ps


def handle(ctx, req):
    require_cluster(ctx, CLUSTER_ACTION)
    v = ctx.api_version
    cluster = ctx.broker.cluster
    rm = ctx.broker.replica_manager
    try:
        rm.check_controller(req.controller_epoch, req.broker_epoch if v >= 2 else -1)
    except KafkaError as e:
        return error_response(req, v, e.code)
    states, topic_ids = {}, {}
    for topic, topic_id, ps in _partition_states(req, v):
        states[(topic, ps.partition_index)] = LeaderAndIsrState(
            ps.leader, ps.leader_epoch, ps.isr, ps.replicas, ps.partition_epoch, ps.controller_epoch,
            ps.is_new if v >= 1 else False)
        if topic_id is not None:
            topic_ids[topic] = topic_id
    live = {ll.broker_id: (ll.host_name, ll.port) for ll in req.live_leaders}
    errors = rm.become_leader_or_follower(req.controller_id, states, live, topic_ids, cluster.topic_configs)
    if v >= 5 and req.type == FULL:
        rm.delete_stray_logs(set(states))
    return _response(req, v, errors, topic_ids)


def _response(req, v, errors, topic_ids):
    if v < 5:
        return LeaderAndIsrResponse(partition_errors=[
            LeaderAndIsrPartitionError(topic_name=t, partition_index=p, error_code=code)
            for (t, p), code in errors.items()])
    by_topic = {}
    for (t, p), code in errors.items():
        by_topic.setdefault(t, []).append(LeaderAndIsrPartitionError(partition_index=p, error_code=code))
    return LeaderAndIsrResponse(topics=[LeaderAndIsrTopicError(topic_id=topic_ids.get(t, ZERO_UUID), partition_errors=ps)
                                        for t, ps in by_topic.items()])


def error_response(req, version, code):
    return LeaderAndIsrResponse(error_code=code, partition_errors=[], topics=[])
