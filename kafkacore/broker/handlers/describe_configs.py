"""DescribeConfigs (API key 32), versions 0-4.

Resources:

- TOPIC (2): every topic config this broker has (kafkacore/storage/config.py's TOPIC_CONFIGS)
  with its effective value. config_source: DYNAMIC_TOPIC_CONFIG (1) for the topic's overrides,
  STATIC_BROKER_CONFIG (4) when the default comes from the broker's configuration
  (``log.retention.ms``...), DEFAULT_CONFIG (5) otherwise. read_only and is_sensitive false.
  Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; illegal name: INVALID_TOPIC_EXCEPTION. On a broker
  of a ZooKeeper cluster the topic must be in the metadata and its overrides are read from
  ZooKeeper (/config/topics/T), as Kafka's ZK-mode brokers do: every broker answers the same as
  soon as an AlterConfigs through any of them has returned.
- BROKER (4): named by this node's id: the broker's configuration (every key it knows, the
  topic defaults under their broker names, and the accepted-but-unused Kafka keys set in its
  configuration), STATIC_BROKER_CONFIG for keys set there, DEFAULT_CONFIG for the others; all
  read-only (no dynamic broker configs). The empty name (the cluster-wide dynamic defaults)
  has no configs. Another id or a non-integer name: INVALID_REQUEST with Kafka's message (a
  client sends a broker's resource to that broker).
- GROUP (32): every group config (Kafka 4.1's GroupConfig: consumer.session.timeout.ms,
  consumer.heartbeat.interval.ms, share.session.timeout.ms, share.heartbeat.interval.ms,
  share.record.lock.duration.ms, share.auto.offset.reset, share.isolation.level), GROUP_CONFIG (8)
  for the group's overrides (/config/groups/<group> in the metadata store), DEFAULT_CONFIG with the
  broker's value otherwise; needs DESCRIBE_CONFIGS on the group. The group need not exist (as in
  Kafka); an empty name is INVALID_REQUEST.
- BROKER_LOGGER (8) and other types: INVALID_REQUEST (log levels are not exposed).

``configuration_keys`` null or empty means every config; names not found are left out, as
Kafka does. Synonyms (v1+, with include_synonyms) list, as Kafka: the topic override, the
broker names set in the broker's configuration, then the built-in default of the broker name
(for ``retention.ms``: ``log.retention.hours`` = 168). include_documentation (v3+) adds a short
description of each topic config (and of the broker's topic defaults; other broker keys: null).

Version notes: v0 has ``is_default`` instead of config_source (true when the value is not
set on the resource: topic configs without an override, broker keys not in the broker's
configuration); config_source and synonyms from v1; config_type and documentation from v3
(Kafka's types: INT, LONG, DOUBLE, LIST, STRING, BOOLEAN); v4 is the flexible encoding.

Deviations: Kafka topic configs this broker does not have (message.downconversion.enable,
remote storage, throttled replicas, ...) are not listed; broker config types are inferred from
the values.
"""

from ...errors import InvalidRequestError, KafkaError, UnknownTopicOrPartitionError
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_configs_response import (DescribeConfigsResourceResult, DescribeConfigsResponse,
                                                            DescribeConfigsResult, DescribeConfigsSynonym)
from ...storage.log_manager import validate_topic_name
from ..authorization import DESCRIBE_CONFIGS
from ._configs import (RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_NAMES, RESOURCE_TOPIC, SOURCE_DEFAULT,
                       SOURCE_TOPIC, authorize_resource, broker_default_entries, broker_entries, group_entries,
                       topic_entries, topic_overrides)

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = (0, 4)


def _entries(broker, rtype, name):
    if rtype == RESOURCE_TOPIC:
        validate_topic_name(name)
        if name not in broker.topics:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        return topic_entries(broker, topic_overrides(broker, name))
    if rtype == RESOURCE_BROKER:
        if name == "":
            return broker_default_entries(broker)  # the cluster-wide dynamic defaults
        try:
            node = int(name)
        except ValueError:
            raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}") from None
        if node != broker.node_id:
            raise InvalidRequestError(
                f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}")
        return broker_entries(broker)
    if rtype == RESOURCE_GROUP:
        return group_entries(broker, name)
    kind = RESOURCE_NAMES.get(rtype)
    if kind is None:
        raise InvalidRequestError(f"Unsupported resource type: {rtype}")
    raise InvalidRequestError(f"Unsupported resource type: {kind}")


def _authorized_describe(ctx, resource, synonyms, documentation):
    try:
        authorize_resource(ctx, DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
    except KafkaError as e:
        return DescribeConfigsResult(resource_type=resource.resource_type, resource_name=resource.resource_name,
                                     error_code=e.code, error_message=e.message, configs=[])
    return _describe(ctx.broker, resource, synonyms, documentation)


def _describe(broker, resource, synonyms, documentation):
    result = DescribeConfigsResult(resource_type=resource.resource_type, resource_name=resource.resource_name,
                                   error_message=None)
    try:
        entries = _entries(broker, resource.resource_type, resource.resource_name)
    except KafkaError as e:
        result.error_code = e.code
        result.error_message = e.message
        return result
    keys = resource.configuration_keys
    if keys:
        wanted = set(keys)
        entries = [e for e in entries if e.name in wanted]
    out = []
    for e in entries:
        default = e.source == SOURCE_DEFAULT or (resource.resource_type == RESOURCE_TOPIC and e.source != SOURCE_TOPIC)
        out.append(DescribeConfigsResourceResult(
            name=e.name, value=e.value, read_only=e.read_only, is_default=default, config_source=e.source,
            is_sensitive=e.sensitive, config_type=e.config_type,
            documentation=e.documentation if documentation else None,
            synonyms=[DescribeConfigsSynonym(name=n, value=val, source=src) for n, val, src in e.synonyms]
            if synonyms else []))
    result.configs = out
    return result


def handle(ctx, req):
    v = ctx.api_version
    synonyms = v >= 1 and req.include_synonyms
    documentation = v >= 3 and req.include_documentation

    def respond():
        return DescribeConfigsResponse(results=[_authorized_describe(ctx, r, synonyms, documentation)
                                                for r in req.resources])
    if any(r.resource_type in (RESOURCE_TOPIC, RESOURCE_GROUP) for r in req.resources):
        # a topic's or group's overrides come from the metadata store (a ZooKeeper read on a cluster)
        return ctx.broker.topic_store_call(respond)
    return respond()


def error_response(req, version, code):
    return DescribeConfigsResponse(results=[
        DescribeConfigsResult(error_code=code, error_message=None, resource_type=r.resource_type,
                              resource_name=r.resource_name) for r in req.resources])
