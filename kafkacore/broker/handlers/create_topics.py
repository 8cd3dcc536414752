"""CreateTopics (API key 19), versions 0-7.

Each topic is checked in Kafka's (KRaft controller's) order and answered on its own:

- a name given more than once in the request: every copy is refused with INVALID_REQUEST
  "Duplicate topic name." (listed after the other results, as Kafka does);
  ``__cluster_metadata``: INVALID_REQUEST (reserved);
- an illegal name, or one that collides with an existing topic once '.' and '_' are
  unified: INVALID_TOPIC_EXCEPTION; an existing topic: TOPIC_ALREADY_EXISTS;
- configs: a null value is INVALID_CONFIG "Null value not supported for topic configs: ...";
  an unknown name or a bad value is INVALID_CONFIG naming the key and the value;
- a manual assignment (``assignments``) needs num_partitions and replication_factor -1
  (INVALID_REQUEST otherwise); each partition must be assigned to this node alone, once,
  partitions numbered 0..n-1 (INVALID_REPLICA_ASSIGNMENT);
- otherwise replication_factor 0 or below -1 is INVALID_REPLICATION_FACTOR, above 1 (the number
  of brokers) too; num_partitions 0 or below -1 is INVALID_PARTITIONS; -1 means the broker's
  ``default.replication.factor`` / ``num.partitions`` (clients send -1 from v4; accepted in
  every version, as Kafka does).

``validate_only`` (v1+) runs every check and creates nothing. On a single node creation is
synchronous: when the response is sent the topic exists and its partitions are led by this node,
so ``timeout_ms`` has nothing to wait for (a timeout of 0 or less still creates, as Kafka's
"don't wait"). On a cluster the registered brokers are the metadata's live brokers, the
replicas are spread by Kafka's assignment (rack-aware with ``broker.rack``), the topic is
written to ZooKeeper, and the response waits up to ``timeout_ms`` for every partition to have
a leader in this broker's metadata (REQUEST_TIMED_OUT after that; the creation goes on).

Version notes: error_message from v1; throttle_time_ms from v2; v5+ results carry
num_partitions, replication_factor and every topic config (value, read_only false,
config_source DYNAMIC_TOPIC_CONFIG for the request's configs, STATIC_BROKER_CONFIG for defaults
set in the broker's configuration, DEFAULT_CONFIG otherwise; is_sensitive false), for
validate-only requests too; v7 carries the topic id (the zero uuid for validate_only).
"""
import asyncio
import logging

from ...errors import (InvalidConfigurationError, InvalidPartitionsError, InvalidReplicaAssignmentError,
                       InvalidReplicationFactorError, InvalidRequestError, InvalidTopicError, KafkaError,
                       RequestTimedOutError, TopicAlreadyExistsError, TopicAuthorizationFailedError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.create_topics_response import (CreatableTopicConfigs, CreatableTopicResult,
                                                         CreateTopicsResponse)
from ...storage.log_manager import validate_topic_name
from ..authorization import CREATE, DESCRIBE_CONFIGS, TOPIC, authorize, authorize_cluster
from ..quotas import mutation_quota
from ._configs import topic_entries

API_KEY = ApiKey.CREATE_TOPICS
VERSIONS = (0, 7)
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
log = logging.getLogger("kafkacore.broker")


def _collides(broker, name):
    unified = name.replace(".", "_")
    if unified == name and "_" not in name:
        return None
    for other in list(broker.topics):  # a snapshot: on a cluster this runs off the event loop
        if other != name and other.replace(".", "_") == unified:
            return other
    return None


def _check(broker, topic):
    """Kafka's checks, raising the error a topic gets; returns (partitions, replication, configs)."""
    name = topic.name
    if name == CLUSTER_METADATA_TOPIC:
        raise InvalidRequestError(f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")
    validate_topic_name(name)
    if name in broker.topics:
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
    other = _collides(broker, name)
    if other is not None:
        raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        raise InvalidConfigurationError(f"Null value not supported for topic configs: {','.join(nulls)}")
    configs = {c.name: c.value for c in topic.configs}
    broker.log_manager.default_config.with_overrides(configs)  # INVALID_CONFIG
    registered = _registered_brokers(broker)
    if topic.assignments:
        if topic.replication_factor != -1:
            raise InvalidRequestError(
                "A manual partition assignment was specified, but replication factor was not set to -1.")
        if topic.num_partitions != -1:
            raise InvalidRequestError(
                "A manual partition assignment was specified, but numPartitions was not set to -1.")
        seen = set()
        for a in topic.assignments:
            if a.partition_index in seen:
                raise InvalidReplicaAssignmentError(
                    f"Found multiple manual partition assignments for partition {a.partition_index}")
            seen.add(a.partition_index)
            check_manual_replicas(registered, a.broker_ids)
        if seen != set(range(len(seen))):
            raise InvalidReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")
        return len(seen), len(topic.assignments[0].broker_ids), configs
    rf = topic.replication_factor
    if rf < -1 or rf == 0:
        raise InvalidReplicationFactorError(
            "Replication factor must be larger than 0, or -1 to use the default value.")
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise InvalidPartitionsError("Number of partitions was set to an invalid non-positive value.")
    partitions = broker.config["num.partitions"] if topic.num_partitions == -1 else topic.num_partitions
    rf = broker.config["default.replication.factor"] if rf == -1 else rf
    if rf > len(registered):
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be "
            f"reached because only {len(registered)} broker(s) are registered.")
    return partitions, rf, configs


def _registered_brokers(broker):
    return set(broker.metadata_cache.brokers)  # a single node: itself


def check_manual_replicas(registered, replicas):
    """Kafka's validateManualPartitionAssignment."""
    if not replicas:
        raise InvalidReplicaAssignmentError("The manual partition assignment includes an empty replica list.")
    prev = None
    for b in sorted(replicas):
        if b not in registered:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {b}, but no such broker is registered.")
        if b == prev:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes the broker {b} more than once.")
        prev = b


def _result(ctx, topic, v, validate_only, may_create_any, quota=None):
    """(result, replication factor or None when refused). Kafka's checks: CREATE on the cluster
    or on the topic; the configs in the answer need DESCRIBE_CONFIGS on it. ``quota``: the
    client's controller_mutation_rate (KIP-599), charged the topic's partitions once it passed
    the checks."""
    broker = ctx.broker
    result = CreatableTopicResult(name=topic.name, error_message=None)
    if not (may_create_any or authorize(ctx, CREATE, TOPIC, topic.name)):
        result.error_code = TopicAuthorizationFailedError.code
        result.error_message = "Authorization failed."
        return result, None
    try:
        partitions, rf, configs = _check(broker, topic)
        if quota is not None:
            quota.record(len(topic.assignments) if topic.assignments else partitions)
        if topic.assignments:
            assignments = [(a.partition_index, list(a.broker_ids)) for a in topic.assignments]
            info = broker.create_topic(topic.name, configs=configs, validate_only=validate_only,
                                       assignments=assignments)
        else:
            info = broker.create_topic(topic.name, partitions, rf, configs, validate_only=validate_only)
    except KafkaError as e:
        result.error_code = e.code
        result.error_message = e.message
        return result, None
    result.topic_id = info.topic_id
    if v >= 5 and not authorize(ctx, DESCRIBE_CONFIGS, TOPIC, topic.name):
        result.topic_config_error_code = TopicAuthorizationFailedError.code
    elif v >= 5:
        result.num_partitions = info.partitions
        result.replication_factor = rf
        result.configs = [CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                                config_source=e.source, is_sensitive=False)
                          for e in topic_entries(broker, configs)]
    return result, rf


async def handle(ctx, req):
    """The writes go through the broker's topic store (in a worker thread when they are
    ZooKeeper round trips: an outage of up to zookeeper.connection.timeout.ms must not stall
    this broker's other clients); the leaders are then awaited on the event loop."""
    response, created = await ctx.broker.topic_store_call(_respond, ctx, req)
    if created and req.timeout_ms > 0:
        return await _await_leaders(ctx.broker, response, created, req.timeout_ms)
    return response


def _respond(ctx, req):
    """(the response, the results of the topics written, whose leaders are to be awaited)."""
    v = ctx.api_version
    validate_only = req.validate_only if v >= 1 else False
    counts = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    dupes = [name for name, n in counts.items() if n > 1]
    may_create_any = authorize_cluster(ctx, CREATE)
    quota = None if validate_only else mutation_quota(ctx)
    made = [_result(ctx, t, v, validate_only, may_create_any, quota) for t in req.topics if counts[t.name] == 1]
    results = [r for r, _rf in made]
    results += [CreatableTopicResult(name=name, error_code=InvalidRequestError.code,
                                     error_message="Duplicate topic name.") for name in dupes]
    if validate_only:
        log.info("validate-only CreateTopics from %s: %s", ctx.client_id,
                 ", ".join(f"{r.name}: {r.error_code}" for r in results))
    created = [] if validate_only else [r for r, rf in made if rf is not None]
    return CreateTopicsResponse(topics=results), created


async def _await_leaders(broker, response, created, timeout_ms):
    """Kafka's DelayedCreatePartitions: answered once every partition has a leader."""
    waits = [broker.wait_for_topic(r.name, timeout_ms / 1000) for r in created]
    for r, ready in zip(created, await asyncio.gather(*waits)):
        if not ready:
            r.error_code = RequestTimedOutError.code
            r.error_message = f"the topic was created, but not every partition had a leader within {timeout_ms} ms"
    return response


def error_response(req, version, code):
    return CreateTopicsResponse(topics=[CreatableTopicResult(name=t.name, error_code=code, error_message=None)
                                        for t in req.topics])
