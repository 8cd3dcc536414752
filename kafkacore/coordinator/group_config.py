"""Per-group configs (Kafka 4.1's ``GroupConfig``; the GROUP config resource, type 32, of
DescribeConfigs / IncrementalAlterConfigs / AlterConfigs).

Each group config overrides a broker config for one group; a group without an override uses the
broker's value (its default). Validation is Kafka's: an unknown name is INVALID_CONFIG "Unknown
group config name: X"; a value outside the broker's bounds is INVALID_CONFIG naming the bound
(``share.record.lock.duration.ms`` within ``group.share.min/max.record.lock.duration.ms``, the
session timeouts and heartbeat intervals within their ``group.consumer.*`` / ``group.share.*``
min and max), and a session timeout must stay above its heartbeat interval.

``GroupConfigs`` holds the overrides this broker knows, by group: the config manager fills it
from the metadata store's ``/config/groups/<group>`` at start-up and at every change
notification (kafkacore/cluster/config_manager.py).
"""
from __future__ import annotations

from typing import NamedTuple

from ..errors import InvalidConfigurationError
from .share_partition import READ_COMMITTED, READ_UNCOMMITTED, check_auto_offset_reset


class GroupConfigDef(NamedTuple):
    kind: str  # Kafka's ConfigDef type: INT or STRING
    broker_default: str | None  # the broker config whose value is the default, or None
    default: object  # the default when broker_default is None
    bounds: tuple[str, str] | None  # the broker configs bounding the value (min, max)
    doc: str


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": GroupConfigDef(
        "INT", "group.consumer.session.timeout.ms", None,
        ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
        "The timeout to detect client failures when using the consumer group protocol."),
    "consumer.heartbeat.interval.ms": GroupConfigDef(
        "INT", "group.consumer.heartbeat.interval.ms", None,
        ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
        "The heartbeat interval given to the members of a consumer group."),
    "share.session.timeout.ms": GroupConfigDef(
        "INT", "group.share.session.timeout.ms", None,
        ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
        "The timeout to detect client failures when using the share group protocol."),
    "share.heartbeat.interval.ms": GroupConfigDef(
        "INT", "group.share.heartbeat.interval.ms", None,
        ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
        "The heartbeat interval given to the members of a share group."),
    "share.record.lock.duration.ms": GroupConfigDef(
        "INT", "group.share.record.lock.duration.ms", None,
        ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
        "The record acquisition lock duration in milliseconds for share groups."),
    "share.auto.offset.reset": GroupConfigDef(
        "STRING", None, "latest", None,
        "The strategy to initialize the share-partition start offset: latest, earliest or "
        "by_duration:<ISO-8601 duration>."),
    "share.isolation.level": GroupConfigDef(
        "STRING", None, READ_UNCOMMITTED, None,
        "How to read records written transactionally: read_committed (only committed records, up to "
        "the last stable offset) or read_uncommitted (every record)."),
}

_PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
          ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


def default_value(broker_config, name):
    d = GROUP_CONFIGS[name]
    return broker_config[d.broker_default] if d.broker_default is not None else d.default


def _parse(name, text):
    d = GROUP_CONFIGS[name]
    if d.kind == "INT":
        try:
            value = int(str(text).strip())
        except ValueError:
            raise InvalidConfigurationError(f"Invalid value {text} for configuration {name}: Not a number of type INT")
        if value < (1000 if name == "share.record.lock.duration.ms" else 1):
            raise InvalidConfigurationError(f"Invalid value {value} for configuration {name}: Value must be at "
                                            f"least {1000 if name == 'share.record.lock.duration.ms' else 1}")
        return value
    if name == "share.auto.offset.reset":
        try:
            return check_auto_offset_reset(text)
        except ValueError as e:
            raise InvalidConfigurationError(f"Invalid value {text} for configuration {name}: {e}") from None
    if name == "share.isolation.level" and text not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise InvalidConfigurationError(f"Invalid value {text} for configuration {name}: String must be one of: "
                                        f"{READ_COMMITTED}, {READ_UNCOMMITTED}")
    return text


def validate(broker_config, overrides: dict) -> dict:
    """The overrides ({name: text}) parsed, checked as Kafka's GroupConfig.validate checks them
    (with the broker's values for the names not overridden); INVALID_CONFIG otherwise."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise InvalidConfigurationError(f"Unknown group config name: {name}")
    parsed = {name: _parse(name, text) for name, text in overrides.items()}
    for name, value in parsed.items():
        bounds = GROUP_CONFIGS[name].bounds
        if bounds is None:
            continue
        lo, hi = bounds
        if value < broker_config[lo]:
            raise InvalidConfigurationError(f"{name} must be greater than or equal to {lo}")
        if value > broker_config[hi]:
            raise InvalidConfigurationError(f"{name} must be less than or equal to {hi}")
    for session, heartbeat in _PAIRS:
        if session in parsed or heartbeat in parsed:
            s = parsed.get(session, default_value(broker_config, session))
            h = parsed.get(heartbeat, default_value(broker_config, heartbeat))
            if s <= h:
                raise InvalidConfigurationError(f"{session} must be greater than {heartbeat}")
    return parsed


class GroupConfigs:
    """The group config overrides this broker knows ({group: {name: parsed value}})."""

    def __init__(self, broker_config):
        self.broker_config = broker_config
        self.overrides: dict[str, dict] = {}

    def update(self, group_id, raw: dict):
        """The stored overrides of a group (from the metadata store), replacing what was known.
        Values another tool wrote that do not validate are dropped with the error raised."""
        if raw:
            self.overrides[group_id] = validate(self.broker_config, raw)
        else:
            self.overrides.pop(group_id, None)

    def get(self, group_id, name):
        """The group's value of ``name``: its override, else the broker's default."""
        group = self.overrides.get(group_id)
        if group is not None and name in group:
            return group[name]
        return default_value(self.broker_config, name)
