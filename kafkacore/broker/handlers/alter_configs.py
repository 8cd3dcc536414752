"""AlterConfigs (API key 33), versions 0-2: the legacy, non-incremental config change.

For a TOPIC (2) resource the request's configs *replace* the topic's overrides: a key left out
goes back to its default. The new set is validated as a whole first (an unknown name or a bad
value: INVALID_CONFIG naming the key and the value), then the topic must exist
(UNKNOWN_TOPIC_OR_PARTITION; an illegal name: INVALID_TOPIC_EXCEPTION). The change reaches
the topic's live logs at once (retention, segment rolling, compaction, max.message.bytes...)
and is persisted in the data directory, so it survives restarts. ``validate_only`` checks
without changing anything.

On a broker of a ZooKeeper cluster (any broker; clients send topic resources to any) the new
overrides are written to /config/topics/T with a /config/changes notification, as Kafka's
AdminZkClient.changeTopicConfig; every broker applies them to its replicas when the
notification reaches it (kafkacore/cluster/config_manager.py). Topic existence is ZooKeeper's.

As Kafka's broker does before anything else: a resource named twice in the request is
INVALID_REQUEST "Each resource must appear at most once." (both copies), a key named twice is
INVALID_REQUEST "Error due to duplicate config keys", a null value is INVALID_REQUEST "Null value
not supported for : <keys>".

GROUP (32) resources: the request's configs replace the group's (validated as in
IncrementalAlterConfigs; coordinator/group_config.py).

BROKER (4) resources (name: this node's id, or empty for the cluster default; otherwise
INVALID_REQUEST with Kafka's message): this broker has no dynamic broker configs, so any config
is refused with INVALID_REQUEST "Cannot update these configs dynamically: ..." (Kafka's answer
for a key that is not dynamic); an empty set changes nothing and succeeds. Other resource
types (BROKER_LOGGER cannot be altered by this API in Kafka either): INVALID_REQUEST
"Unknown resource type N".

Version notes: v2 is the flexible encoding; the fields are the same in every version.
"""
import logging

from ...errors import InvalidRequestError, KafkaError
from ...protocol.api_table import ApiKey
from ...protocol.messages.alter_configs_response import AlterConfigsResourceResponse, AlterConfigsResponse
from ..authorization import ALTER_CONFIGS
from ._configs import (RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC, alter_broker_configs, alter_group_configs,
                       apply_topic_overrides, authorize_resource, broker_entity, check_topic_for_alter,
                       duplicate_resources)

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = (0, 2)
log = logging.getLogger("kafkacore.broker")


def check_common(resource, allow_null=lambda c: False):
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    nulls = [c.name for c in resource.configs if c.value is None and not allow_null(c)]
    if nulls:
        raise InvalidRequestError(f"Null value not supported for : {', '.join(nulls)}")


def _alter(broker, resource, validate_only):
    check_common(resource)
    if resource.resource_type == RESOURCE_TOPIC:
        new = {c.name: c.value for c in resource.configs}
        check_topic_for_alter(broker, resource.resource_name, new)
        if not validate_only:
            apply_topic_overrides(broker, resource.resource_name, new)
            log.info("topic %s configs set to %s", resource.resource_name, new)
    elif resource.resource_type == RESOURCE_BROKER:
        # the legacy API replaces the entity's whole set, as Kafka's
        configs = {c.name: c.value for c in resource.configs}
        alter_broker_configs(broker, broker_entity(broker, resource.resource_name), configs, configs, validate_only)
    elif resource.resource_type == RESOURCE_GROUP:
        alter_group_configs(broker, resource.resource_name, {c.name: c.value for c in resource.configs},
                            validate_only)
    else:
        raise InvalidRequestError(f"Unknown resource type {resource.resource_type}")


def handle(ctx, req):
    # through the topic store (from a worker thread when its writes are ZooKeeper round trips)
    return ctx.broker.topic_store_call(_respond, ctx, req)


def _respond(ctx, req):
    broker = ctx.broker
    dupes = duplicate_resources(req.resources)
    out = []
    for i, r in enumerate(req.resources):
        resp = AlterConfigsResourceResponse(resource_type=r.resource_type, resource_name=r.resource_name,
                                            error_message=None)
        try:
            if i in dupes:
                raise InvalidRequestError("Each resource must appear at most once.")
            authorize_resource(ctx, ALTER_CONFIGS, r.resource_type, r.resource_name)
            _alter(broker, r, req.validate_only)
        except KafkaError as e:
            resp.error_code = e.code
            resp.error_message = e.message
        out.append(resp)
    return AlterConfigsResponse(responses=out)


def error_response(req, version, code):
    return AlterConfigsResponse(responses=[
        AlterConfigsResourceResponse(error_code=code, error_message=None, resource_type=r.resource_type,
                                     resource_name=r.resource_name) for r in req.resources])
