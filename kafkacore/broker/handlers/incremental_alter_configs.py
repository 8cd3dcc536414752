"""IncrementalAlterConfigs (API key 44), versions 0-1.

Per TOPIC (2) resource, each config names an operation on the topic's overrides:

- SET (0): the key takes the value;
- DELETE (1): the override is removed (the key goes back to its default; deleting a key that
  has no override, or a name this broker does not know, changes nothing, as in Kafka);
- APPEND (2) / SUBTRACT (3): for list configs (``cleanup.policy``) the comma-separated values
  are added (when missing) to / removed from the current list; on any other key they are
  INVALID_CONFIG "Can't APPEND to key K because its type is not LIST.".

The resulting overrides are validated as a whole (an unknown name or a bad value: INVALID_CONFIG
naming the key and the value), then the topic must exist (UNKNOWN_TOPIC_OR_PARTITION; illegal
name: INVALID_TOPIC_EXCEPTION). Changes reach the topic's live logs at once and are persisted
in the data directory (they survive restarts). ``validate_only`` checks without changing.

On a broker of a ZooKeeper cluster the operations apply to the overrides in ZooKeeper and the
result is written back there with a change notification (as AlterConfigs, see there); two
concurrent changes of one topic: the last write wins, as in Kafka.

As Kafka's broker does first: a resource named twice is INVALID_REQUEST "Each resource must
appear at most once." (both copies), a key named twice INVALID_REQUEST "Error due to duplicate
config keys", a null value on anything but DELETE INVALID_REQUEST "Null value not supported for
: <keys>", an unknown operation INVALID_REQUEST.

BROKER (4) resources (this node's id, or empty for the cluster-wide default; another id is
INVALID_REQUEST): the same operations on the entity's dynamic configs (broker/dynamic_config.py
says which configs are dynamic; a static one is INVALID_REQUEST "Cannot update these configs
dynamically: ..."). GROUP (32) resources: the same operations (APPEND / SUBTRACT: no group config is a list) on the
group's configs in the metadata store (/config/groups/<group>, with a change notification every
broker applies), validated as Kafka's GroupConfig.validate (coordinator/group_config.py: unknown
names, values outside the broker's group.share.* / group.consumer.* bounds, a session timeout
not above its heartbeat interval: INVALID_CONFIG); ALTER_CONFIGS on the group. BROKER_LOGGER (8)
and other types: INVALID_REQUEST (Kafka changes log4j levels for BROKER_LOGGER; not supported).

Deviation: APPEND/SUBTRACT on a key without an override start from its effective value (the
broker's ``log.cleanup.policy`` when set); Kafka starts from the built-in default.

Version notes: v1 is the flexible encoding; the fields are the same in both versions.
"""
import logging

from ...errors import InvalidConfigurationError, InvalidRequestError, KafkaError
from ...protocol.api_table import ApiKey
from ...protocol.messages.incremental_alter_configs_response import (AlterConfigsResourceResponse,
                                                                     IncrementalAlterConfigsResponse)
from ...storage.config import BROKER_DEFAULTS
from ...storage.log_manager import validate_topic_name
from ..authorization import ALTER_CONFIGS
from ._configs import (LIST_CONFIGS, OP_APPEND, OP_DELETE, OP_NAMES, OP_SET, OP_SUBTRACT, RESOURCE_BROKER,
                       RESOURCE_BROKER_LOGGER, RESOURCE_GROUP, RESOURCE_TOPIC, alter_broker_configs,
                       alter_group_configs, apply_topic_overrides, authorize_resource, broker_entity,
                       check_topic_for_alter, duplicate_resources, topic_overrides)
from .alter_configs import check_common

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = (0, 1)
log = logging.getLogger("kafkacore.broker")


def _split(value):
    return [s.strip() for s in value.split(",") if s.strip()]


def _apply_operations(current, configs, is_list, list_base):
    """``current`` after the operations. APPEND / SUBTRACT work on a list config's value so far,
    or ``list_base(name)`` (its effective value) when it has none; ``is_list(name)`` says which
    keys are lists."""
    new = dict(current)
    for c in configs:
        op = c.config_operation
        if op == OP_SET:
            new[c.name] = c.value
        elif op == OP_DELETE:
            new.pop(c.name, None)
        else:  # APPEND / SUBTRACT
            if not is_list(c.name):
                raise InvalidConfigurationError(f"Can't {OP_NAMES[op]} to key {c.name} because its type is not LIST.")
            items = _split(new[c.name] if c.name in new else list_base(c.name))
            for item in _split(c.value):
                if op == OP_APPEND and item not in items:
                    items.append(item)
                elif op == OP_SUBTRACT and item in items:
                    items.remove(item)
            new[c.name] = ",".join(items)
    return new


def _new_overrides(broker, current, configs):
    """A topic's overrides after the operations."""
    def effective(name):
        return broker.log_manager.default_config.with_overrides(current).describe()[name]
    return _apply_operations(current, configs, LIST_CONFIGS.__contains__, effective)


def _new_broker_configs(broker, current, configs):
    """A broker entity's dynamic configs after the operations; a list config without a dynamic
    value starts from the static one, then from the log default it stands for."""
    def effective(name):
        static = broker.config.props.get(name)
        return static if static is not None else broker.log_manager.default_config.describe()[BROKER_DEFAULTS[name]]
    return _apply_operations(current, configs, lambda name: BROKER_DEFAULTS.get(name) in LIST_CONFIGS, effective)


def _alter(broker, resource, validate_only):
    check_common(resource, allow_null=lambda c: c.config_operation == OP_DELETE)
    for c in resource.configs:
        if c.config_operation not in OP_NAMES:
            raise InvalidRequestError(f"Unknown operations type {c.config_operation}")
    rtype, name = resource.resource_type, resource.resource_name
    if rtype == RESOURCE_TOPIC:
        validate_topic_name(name)
        current = topic_overrides(broker, name)
        new = _new_overrides(broker, current, resource.configs)
        check_topic_for_alter(broker, name, new)
        if not validate_only and new != current:
            apply_topic_overrides(broker, name, new)
            log.info("topic %s configs set to %s", name, new)
    elif rtype == RESOURCE_BROKER:
        entity = broker_entity(broker, name)
        new = _new_broker_configs(broker, broker.dynamic_config.configs(entity), resource.configs)
        alter_broker_configs(broker, entity, new, [c.name for c in resource.configs if c.config_operation == OP_SET],
                             validate_only)
    elif rtype == RESOURCE_GROUP:
        current = broker.cluster.config_manager.group_configs(name)
        new = _apply_operations(current, resource.configs, lambda _name: False, lambda _name: "")
        alter_group_configs(broker, name, new, validate_only)
    elif rtype == RESOURCE_BROKER_LOGGER:
        raise InvalidRequestError("BROKER_LOGGER resources (log levels) cannot be changed on this broker")
    else:
        raise InvalidRequestError(f"Unknown resource type {rtype}")


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
    return IncrementalAlterConfigsResponse(responses=out)


def error_response(req, version, code):
    return IncrementalAlterConfigsResponse(responses=[
        AlterConfigsResourceResponse(error_code=code, error_message=None, resource_type=r.resource_type,
                                     resource_name=r.resource_name) for r in req.resources])
