"""Metadata (API key 3), versions 0-12.

Brokers, the controller and each partition's leader, leader epoch, replicas and ISR come from
the broker's MetadataCache (a single node's names itself for everything). Topics are asked by name, or by id from v10 (unknown id: UNKNOWN_TOPIC_ID). A null
topic list (v1+), or an empty one in v0, means every topic, internal ones included (clients
filter them). An unknown name is created with ``num.partitions`` when
``auto.create.topics.enable`` is on and the request allows it (v4+; always before v4). As in
Kafka, the response that creates a topic answers it LEADER_NOT_AVAILABLE with no partitions
(Kafka's creation goes through the controller; clients retry the metadata request). On a
single node the topic exists when that response leaves, so the retry finds it. On a cluster
the topic is written to ZooKeeper from a worker thread, and until its metadata arrives every
request for it is answered LEADER_NOT_AVAILABLE again (not TOPIC_ALREADY_EXISTS, as Kafka).
Internal topics are never auto-created this way. Bad names: INVALID_TOPIC_EXCEPTION.
"""
from ...errors import (KafkaError, LeaderNotAvailableError, TopicAlreadyExistsError, UnknownTopicIdError,
                       UnknownTopicOrPartitionError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.metadata_response import (MetadataResponse, MetadataResponseBroker,
                                                    MetadataResponsePartition, MetadataResponseTopic)
from ...protocol.wire import ZERO_UUID
from ...storage.log_manager import validate_topic_name
from ..topic_store import INTERNAL_TOPICS

API_KEY = ApiKey.METADATA
VERSIONS = (0, 12)
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (no ACLs here)
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (4, 5, 7, 8, 9, 10, 11, 12))
UNSET_OPERATIONS = -2147483648


def topic_metadata(broker, info, version, include_ops):
    """A topic's partitions as the MetadataCache knows them: a leader that is not a live broker
    is LEADER_NOT_AVAILABLE with leader -1; replicas not live are offline."""
    cache = broker.metadata_cache
    partitions = []
    for p in range(info.partitions):
        st = cache.partition(info.name, p)
        if st is None:
            partitions.append(MetadataResponsePartition(error_code=LeaderNotAvailableError.code, partition_index=p,
                                                        leader_id=-1, leader_epoch=-1, replica_nodes=[],
                                                        isr_nodes=[], offline_replicas=[]))
            continue
        leader = st.leader if cache.alive(st.leader) else -1
        offline = [r for r in st.replicas if not cache.alive(r)]
        partitions.append(MetadataResponsePartition(
            error_code=0 if leader >= 0 else LeaderNotAvailableError.code, partition_index=p, leader_id=leader,
            leader_epoch=st.leader_epoch, replica_nodes=list(st.replicas), isr_nodes=list(st.isr),
            offline_replicas=offline))
    return MetadataResponseTopic(name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                                 partitions=partitions,
                                 topic_authorized_operations=TOPIC_OPERATIONS if include_ops else UNSET_OPERATIONS)


def _brokers(ctx):
    """The live brokers' addresses on the listener the request came in on (Kafka's rule: a
    broker without that listener is left out)."""
    cache = ctx.broker.metadata_cache
    brokers = [MetadataResponseBroker(node_id=node_id, host=host, port=port, rack=rack)
               for node_id, host, port, rack in cache.live_brokers_on(ctx.answering_listener)]
    return brokers, cache.controller_id


def handle(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    cfg = broker.config
    include_ops = v >= 8 and req.include_topic_authorized_operations
    topics = []
    if req.topics is None or (v == 0 and not req.topics):
        for name in sorted(broker.topics):
            topics.append(topic_metadata(broker, broker.topics[name], v, include_ops))
    else:
        allow_create = (req.allow_auto_topic_creation if v >= 4 else True) and cfg["auto.create.topics.enable"]
        for t in req.topics:
            if v >= 10 and t.name is None:
                info = broker.topics_by_id.get(t.topic_id)
                if info is None or t.topic_id == ZERO_UUID:
                    topics.append(MetadataResponseTopic(error_code=UnknownTopicIdError.code, name=None,
                                                        topic_id=t.topic_id))
                    continue
                topics.append(topic_metadata(broker, info, v, include_ops))
                continue
            name = t.name
            info = broker.topics.get(name)
            if info is None:
                try:
                    validate_topic_name(name)
                    if not allow_create or name in INTERNAL_TOPICS:
                        raise UnknownTopicOrPartitionError(name)
                    broker.auto_create_topic(name)
                    code = LeaderNotAvailableError.code
                except TopicAlreadyExistsError:  # being created (by this request's elder or another broker)
                    code = LeaderNotAvailableError.code
                except KafkaError as e:
                    code = e.code
                topics.append(MetadataResponseTopic(error_code=code, name=name, is_internal=False))
                continue
            topics.append(topic_metadata(broker, info, v, include_ops))
    brokers, controller_id = _brokers(ctx)
    return MetadataResponse(
        brokers=brokers, cluster_id=broker.cluster_id, controller_id=controller_id, topics=topics,
        cluster_authorized_operations=CLUSTER_OPERATIONS if v >= 8 and req.include_cluster_authorized_operations
        else UNSET_OPERATIONS)


def error_response(req, version, code):
    return MetadataResponse(topics=[MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id)
                                    for t in (req.topics or [])])
