"""Config descriptions and changes shared by CreateTopics, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs (not a handler: the handler table lists modules by name).

A topic config's value is its effective value (the topic's override, else the broker's
``log.*`` default, else Kafka's default); its source and synonyms follow Kafka's rules: the
topic override (DYNAMIC_TOPIC_CONFIG), then the broker names set in the broker's configuration
(STATIC_BROKER_CONFIG), then the broker name's built-in default (DEFAULT_CONFIG). Broker configs
are static here (no dynamic broker configs), so they are all read-only.

On a broker of a ZooKeeper cluster a topic's overrides live in ZooKeeper (/config/topics/T): they
are read and written there (the cluster's ZkConfigManager), so these calls block on a round trip
and the handlers run them off the event loop; every broker applies a change to its own replicas
when the change notification reaches it.
"""
from __future__ import annotations

import logging

from ...errors import (ClusterAuthorizationFailedError, GroupAuthorizationFailedError, InvalidRequestError,
                       TopicAuthorizationFailedError, UnknownTopicOrPartitionError)
from ...storage.config import BROKER_DEFAULTS, TOPIC_CONFIGS, LogConfig
from ...coordinator.group_config import GROUP_CONFIGS, default_value
from ...coordinator.group_config import validate as validate_group_configs
from ...storage.log_manager import validate_topic_name
from ..authorization import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, authorize
from ..config import BROKER_CONFIGS, is_password
from ..dynamic_config import DEFAULT_ENTITY as BROKER_DEFAULT_ENTITY
from ..dynamic_config import SOURCE_DYNAMIC_DEFAULT_BROKER, is_dynamic

log = logging.getLogger("kafkacore.broker")

# ConfigResource.Type
RESOURCE_UNKNOWN, RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_GROUP = 0, 2, 4, 8, 32
RESOURCE_NAMES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS",
                  32: "GROUP"}

# DescribeConfigsResponse.ConfigSource
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 1, 4, 5, 8

# DescribeConfigsResponse.ConfigType
T_BOOLEAN, T_STRING, T_INT, T_LONG, T_DOUBLE, T_LIST, T_PASSWORD = 1, 2, 3, 5, 6, 7, 9

# IncrementalAlterConfigs operations (AlterConfigOp.OpType)
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

# DescribeConfigs' type codes for Kafka's ConfigDef types
_TYPE_CODES = {"BOOLEAN": T_BOOLEAN, "STRING": T_STRING, "INT": T_INT, "LONG": T_LONG, "DOUBLE": T_DOUBLE,
               "LIST": T_LIST}
# the topic configs' types and descriptions, from their one declaration (storage/config.py)
TOPIC_TYPES = {name: _TYPE_CODES[d.kind] for name, d in TOPIC_CONFIGS.items()}
LIST_CONFIGS = frozenset(k for k, t in TOPIC_TYPES.items() if t == T_LIST)
TOPIC_DOCS = {name: d.doc for name, d in TOPIC_CONFIGS.items()}

# topic config -> broker names that set its default, in Kafka's synonym order
_BROKER_SYNONYMS: dict[str, list[str]] = {}
for _broker_name, _topic_name in BROKER_DEFAULTS.items():
    _BROKER_SYNONYMS.setdefault(_topic_name, []).append(_broker_name)
_BROKER_SYNONYMS["retention.ms"] = ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
_BUILTIN = LogConfig()  # Kafka's defaults, before any broker setting


def _text(value):
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (frozenset, set)):
        return ",".join(sorted(value))
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict):  # listener.security.protocol.map
        return ",".join(f"{k}:{v}" for k, v in value.items())
    return str(value)


def _builtin_broker_default(broker_name, topic_name):
    """(name, value) of the DEFAULT_CONFIG synonym of a topic config, as Kafka lists it."""
    if topic_name == "retention.ms":  # log.retention.ms and .minutes have no default; .hours is 168
        return "log.retention.hours", str(BROKER_CONFIGS["log.retention.hours"][1])
    return broker_name, _BUILTIN.describe()[topic_name]


class DescribedConfig:
    """One config as DescribeConfigs and CreateTopics report it."""

    __slots__ = ("name", "value", "source", "synonyms", "read_only", "config_type", "documentation", "sensitive")

    def __init__(self, name, value, source, synonyms, read_only, config_type, documentation, sensitive=False):
        self.sensitive = sensitive  # a password: its value is never sent (Kafka's PASSWORD type)
        self.name = name
        self.value = value
        self.source = source
        self.synonyms = synonyms  # [(name, value, source)]
        self.read_only = read_only
        self.config_type = config_type
        self.documentation = documentation


def topic_entries(broker, overrides) -> list[DescribedConfig]:
    """Every topic config for a topic with these overrides ({kafka name: value}), sorted by name."""
    props = broker.config.props
    config = broker.log_manager.default_config.with_overrides(overrides)
    values = config.describe()
    out = []
    for name in sorted(TOPIC_CONFIGS):
        synonyms = []
        if name in overrides:
            synonyms.append((name, values[name], SOURCE_TOPIC))
        names = _BROKER_SYNONYMS.get(name, [])
        for broker_name in names:
            if broker_name in props:
                synonyms.append((broker_name, _text(props[broker_name]), SOURCE_STATIC_BROKER))
        if names:
            synonyms.append((*_builtin_broker_default(names[0], name), SOURCE_DEFAULT))
        out.append(DescribedConfig(name, values[name], synonyms[0][2] if synonyms else SOURCE_DEFAULT, synonyms,
                               False, TOPIC_TYPES.get(name, 0), TOPIC_DOCS.get(name)))
    return out


def _broker_type(key, value):
    if isinstance(value, bool):
        return T_BOOLEAN
    if isinstance(value, int):
        return T_LONG if key.endswith(".ms") or value > (1 << 31) - 1 else T_INT
    if isinstance(value, float):
        return T_DOUBLE
    return T_STRING


def broker_entries(broker) -> list[DescribedConfig]:
    """This broker's configuration (per-broker resource), sorted by name: each config's value,
    its source (this broker's dynamic config, the cluster default, the static config, the
    built-in default: Kafka's precedence) and synonyms; read-only unless it can change at run
    time (broker/dynamic_config.py)."""
    cfg = broker.config
    dynamic = broker.dynamic_config
    static = dynamic.static_props
    rows = {}  # name -> (static value text, explicitly set, config type, doc)
    for key, (_parse, default) in BROKER_CONFIGS.items():
        rows[key] = (_text(static[key]) if key in static else _text(default), key in static,
                     _broker_type(key, default if cfg.values[key] is None else cfg.values[key]), None)
    listeners = ",".join(ep.connection_string for ep in cfg.listeners)
    rows["listeners"] = (listeners, "listeners" in static or listeners != BROKER_CONFIGS["listeners"][1], T_STRING, None)
    rows["advertised.listeners"] = (",".join(ep.connection_string for ep in cfg.advertised_listeners),
                                    "advertised.listeners" in static, T_STRING, None)
    if "broker.id" not in static:
        rows["broker.id"] = (str(cfg.node_id), False, T_INT, None)
    builtin = _BUILTIN.describe()
    for broker_name, topic_name in BROKER_DEFAULTS.items():
        value = _text(static[broker_name]) if broker_name in static else builtin[topic_name]
        doc = f"The default of the topic config {topic_name}: {TOPIC_DOCS[topic_name]}"
        rows[broker_name] = (value, broker_name in static, TOPIC_TYPES[topic_name], doc)
    rows["log.retention.ms"] = (_text(static.get("log.retention.ms")), "log.retention.ms" in static, T_LONG,
                                f"The default of the topic config retention.ms: {TOPIC_DOCS['retention.ms']}")
    for key in cfg.ignored_keys:
        rows[key] = (_text(static[key]), True, T_STRING, "Accepted for compatibility; not used by this broker.")
    for key in set(dynamic.per_broker) | set(dynamic.cluster_default):
        rows.setdefault(key, (_text(static.get(key)), key in static, T_STRING, None))
    out = []
    for name in sorted(rows):
        value, explicit, ctype, doc = rows[name]
        source = SOURCE_STATIC_BROKER if explicit else SOURCE_DEFAULT
        synonyms = [(name, v, src) for v, src in dynamic.source(name)] + [(name, value, source)]
        value, source = synonyms[0][1], synonyms[0][2]
        read_only = not is_dynamic(name)
        if is_password(name):
            out.append(DescribedConfig(name, None, source, [(n, None, src) for n, _v, src in synonyms], read_only,
                                       T_PASSWORD, doc, True))
        else:
            out.append(DescribedConfig(name, value, source, synonyms, read_only, ctype, doc))
    return out


def broker_default_entries(broker) -> list[DescribedConfig]:
    """The cluster-wide dynamic defaults (the BROKER resource named ""), as Kafka lists them."""
    return [DescribedConfig(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER,
                            [(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER)], False, T_STRING, None)
            for name, value in sorted(broker.dynamic_config.cluster_default.items())]


def group_entries(broker, group) -> list[DescribedConfig]:
    """Every group config of a group (Kafka's GroupConfig), its override's value (GROUP_CONFIG)
    or the broker's default (DEFAULT_CONFIG), from the metadata store."""
    check_group_resource_name(group)
    overrides = broker.cluster.config_manager.group_configs(group)
    out = []
    for name in sorted(GROUP_CONFIGS):
        d = GROUP_CONFIGS[name]
        synonyms = []
        if name in overrides:
            synonyms.append((name, overrides[name], SOURCE_GROUP))
        if d.broker_default is not None and d.broker_default in broker.config.props:
            synonyms.append((d.broker_default, _text(broker.config[d.broker_default]), SOURCE_STATIC_BROKER))
        synonyms.append((name, _text(default_value(broker.config, name)), SOURCE_DEFAULT))
        out.append(DescribedConfig(name, synonyms[0][1], synonyms[0][2], synonyms, False,
                                   T_INT if d.kind == "INT" else T_STRING, d.doc))
    return out


def check_group_resource_name(group):
    if not group:
        raise InvalidRequestError("Group name must not be empty")


def alter_group_configs(broker, group, new, validate_only):
    """A group's new configs ({name: text}): checked as Kafka's GroupConfig.validate (INVALID_CONFIG),
    then stored with a change notification for every broker and applied here."""
    check_group_resource_name(group)
    validate_group_configs(broker.config, new)
    if not validate_only:
        broker.cluster.config_manager.set_group_configs(group, {k: str(v) for k, v in new.items()})
        log.info("group %s configs set to %s", group, new)


# -- changes ------------------------------------------------------------------------------------
def broker_entity(broker, name) -> str:
    """The config entity of a BROKER resource named ``name``: <default> for "" (the cluster-wide
    default), else this node's id (Kafka's rule: INVALID_REQUEST for another)."""
    check_broker_resource_name(broker, name)
    return BROKER_DEFAULT_ENTITY if name == "" else str(broker.node_id)


def alter_broker_configs(broker, entity, configs, reload_keys, validate_only):
    """Dynamic broker configs (broker/dynamic_config.py): checked, stored with a change
    notification for every broker, applied here."""
    broker.dynamic_config.alter(entity, configs, broker.cluster.config_manager.set_broker_configs,
                                reload_keys=reload_keys, validate_only=validate_only)
    if not validate_only:
        log.info("broker configs of %s set to keys %s", entity, sorted(configs))


def check_broker_resource_name(broker, name):
    """Kafka's rule for BROKER resources: '' (the cluster default) or this node's id."""
    if name == "":
        return
    try:
        node = int(name)
    except ValueError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {name}") from None
    if node != broker.node_id:
        raise InvalidRequestError(f"Unexpected broker id, expected {broker.node_id}, but received {name}")


def duplicate_resources(resources) -> set:
    """Indexes of resources named more than once (each is answered INVALID_REQUEST)."""
    seen = {}
    dupes = set()
    for i, r in enumerate(resources):
        key = (r.resource_type, r.resource_name)
        if key in seen:
            dupes.update((seen[key], i))
        else:
            seen[key] = i
    return dupes


def topic_overrides(broker, name) -> dict:
    """The topic's overrides {kafka name: value}, from the topic store (ZooKeeper's on a
    cluster, so every broker answers the same at once; the data directory's on a single node)."""
    return broker.topic_store.topic_overrides(name)


def check_topic_for_alter(broker, name, new_overrides):
    """Kafka's order: the name, the new configs, then whether the topic exists (in the topic
    store: ZooKeeper on a cluster, as Kafka's AdminZkClient checks, since this broker's metadata
    may lag a new topic)."""
    validate_topic_name(name)
    broker.log_manager.default_config.with_overrides(new_overrides)  # INVALID_CONFIG
    if not broker.topic_store.topic_exists(name):
        raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")


def apply_topic_overrides(broker, name, new_overrides):
    """Stores the topic's new overrides and hands the new config to its live logs: on a single
    node in the data directory; on a cluster in ZooKeeper with a change notification, which
    every broker (this one too) applies to its replicas."""
    broker.topic_store.set_topic_overrides(name, {k: str(v) for k, v in new_overrides.items()})


def authorize_resource(ctx, operation, resource_type: int, name: str) -> None:
    """Kafka's checks of a config resource: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic
    (TOPIC_AUTHORIZATION_FAILED), the group (GROUP_AUTHORIZATION_FAILED) or, for brokers and their
    loggers, the cluster (CLUSTER_AUTHORIZATION_FAILED)."""
    if resource_type == RESOURCE_TOPIC:
        acl_resource, acl_name, error = TOPIC, name, TopicAuthorizationFailedError
    elif resource_type == RESOURCE_GROUP:
        acl_resource, acl_name, error = GROUP, name, GroupAuthorizationFailedError
    elif resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
        acl_resource, acl_name, error = CLUSTER, CLUSTER_NAME, ClusterAuthorizationFailedError
    else:
        return  # answered by the handler's own check of the type
    if not authorize(ctx, operation, acl_resource, acl_name):
        raise error(f"not authorized to {operation.name} {RESOURCE_NAMES.get(resource_type)} {name!r}")
