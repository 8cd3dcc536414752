"""UpdateMetadata (API key 6), versions 0-8: the controller's view of the cluster - live
brokers with their endpoints, and leader, ISR and replicas of partitions - into this broker's
MetadataCache (inter-broker; served only on a broker of a ZooKeeper cluster).

- Stale controller or broker epochs are refused (STALE_CONTROLLER_EPOCH / STALE_BROKER_EPOCH).
- A partition whose leader is -2 (Kafka's LeaderDuringDelete) belongs to a topic being deleted:
  the topic leaves the cache.
- Every endpoint of every broker is kept (Metadata answers on the listener it is asked on); the
  inter-broker listener's is the one brokers dial.
- v0-4 carry ungrouped partition states; v5+ group them by topic; v7+ add topic ids.
"""
from ...replication.metadata_cache import BrokerEndpoint, CachedPartitionState
from ...cluster.zk_data import SECURITY_PROTOCOLS
from ...errors import KafkaError
from ...protocol.api_table import ApiKey
from ...protocol.messages.update_metadata_response import UpdateMetadataResponse
from ...protocol.wire import ZERO_UUID

API_KEY = ApiKey.UPDATE_METADATA
VERSIONS = (0, 8)
CLUSTER_ONLY = True
LEADER_DURING_DELETE = -2


def handle(ctx, req):
    v = ctx.api_version
    cluster = ctx.broker.cluster
    try:
        ctx.broker.replica_manager.check_controller(req.controller_epoch, req.broker_epoch if v >= 5 else -1)
    except KafkaError as e:
        return UpdateMetadataResponse(error_code=e.code)
    inter_broker = ctx.broker.config.inter_broker_listener_name or ctx.broker.config.primary_listener_name
    brokers = []
    for b in req.live_brokers:
        if v == 0:
            listeners = (("PLAINTEXT", b.v0_host, b.v0_port),)
        else:
            # v1-2 carry no listener name: the endpoint is named after its protocol (Kafka's rule)
            listeners = tuple((ep.listener if v >= 3 else _protocol_name(ep.security_protocol), ep.host, ep.port)
                              for ep in b.endpoints)
        host, port = next(((h, p) for name, h, p in listeners if name == inter_broker),
                          listeners[0][1:] if listeners else ("", -1))
        brokers.append(BrokerEndpoint(b.id, host, port, (b.rack or None) if v >= 2 else None, listeners))
    states, deleted = {}, set()
    groups = ([(ps.topic_name, None, [ps]) for ps in req.ungrouped_partition_states] if v < 5 else
              [(t.topic_name, t.topic_id if v >= 7 and t.topic_id != ZERO_UUID else None, t.partition_states)
               for t in req.topic_states])
    for topic, topic_id, pss in groups:
        for ps in pss:
            if ps.leader == LEADER_DURING_DELETE:
                deleted.add(topic)
                continue
            states[(topic, ps.partition_index)] = (CachedPartitionState(
                ps.leader, ps.leader_epoch, tuple(ps.isr), tuple(ps.replicas),
                tuple(ps.offline_replicas) if v >= 4 else (), ps.controller_epoch, ps.zk_version), topic_id)
    cluster.apply_metadata(req.controller_id, brokers, states, deleted)
    return UpdateMetadataResponse(error_code=0)


def _protocol_name(protocol_id):
    return SECURITY_PROTOCOLS[protocol_id] if 0 <= protocol_id < len(SECURITY_PROTOCOLS) else "PLAINTEXT"


def error_response(req, version, code):
    return UpdateMetadataResponse(error_code=code)
