"""Topic (log) configuration with Kafka's names, defaults and validation (Kafka's LogConfig).

``LogConfig({"segment.bytes": "1048576", "cleanup.policy": "compact"})`` takes Kafka's topic
config names with string or typed values; an unknown name or a bad value raises
InvalidConfigurationError naming the key and the value. ``BROKER_DEFAULTS`` maps the broker-level
names (``log.segment.bytes``...) that set the defaults for every topic."""
import re

from ..errors import InvalidConfigurationError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_COMPRESSION_TYPES = ("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd")
_POLICIES = ("delete", "compact")


def _int(lo, hi=LONG_MAX):
    def parse(key, value):
        if isinstance(value, bool):
            raise InvalidConfigurationError(f"{key}={value!r}: expected an integer")
        try:
            v = int(value)
        except (TypeError, ValueError):
            raise InvalidConfigurationError(f"{key}={value!r}: expected an integer") from None
        if not lo <= v <= hi:
            raise InvalidConfigurationError(f"{key}={value!r}: must be between {lo} and {hi}")
        return v
    return parse


def _choice(options):
    def parse(key, value):
        v = str(value)
        if v not in options:
            raise InvalidConfigurationError(f"{key}={value!r}: must be one of {', '.join(options)}")
        return v
    return parse


def _policy(key, value):
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    items = [s.strip() for s in items if s.strip()]
    bad = [s for s in items if s not in _POLICIES]
    if bad or not items:
        raise InvalidConfigurationError(f"{key}={value!r}: must be a list of delete, compact")
    return frozenset(items)


def _bool(key, value):
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise InvalidConfigurationError(f"{key}={value!r}: expected true or false")


_MESSAGE_FORMAT_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?(-IV\d+)?$")  # 0.10.2, 2.8, 3.0-IV1


def _message_format_version(key, value):
    if not _MESSAGE_FORMAT_VERSION.match(str(value).strip()):
        raise InvalidConfigurationError(f"{key}={value!r}: expected a Kafka version such as 3.0-IV1")
    return str(value).strip()


# name -> (attribute, parser, default). Defaults are Kafka's (4.x documentation). Two choices of
# our own: segment.bytes accepts values down to 14 bytes (Kafka's historical topic minimum; 4.x
# asks 1 MiB) so tests can roll small segments, and max.message.bytes defaults to Kafka's
# 1048588 (1 MiB plus the 12-byte log overhead).
TOPIC_CONFIGS = {
    "segment.bytes": ("segment_bytes", _int(14, INT_MAX), 1073741824),
    "segment.ms": ("segment_ms", _int(1), 604800000),
    "segment.jitter.ms": ("segment_jitter_ms", _int(0), 0),
    "segment.index.bytes": ("segment_index_bytes", _int(12, INT_MAX), 10485760),
    "index.interval.bytes": ("index_interval_bytes", _int(0, INT_MAX), 4096),
    "retention.ms": ("retention_ms", _int(-1), 604800000),
    "retention.bytes": ("retention_bytes", _int(-1), -1),
    "cleanup.policy": ("cleanup_policy", _policy, frozenset({"delete"})),
    "delete.retention.ms": ("delete_retention_ms", _int(0), 86400000),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _int(0), 0),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _int(1), LONG_MAX),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", None, 0.5),
    "max.message.bytes": ("max_message_bytes", _int(0, INT_MAX), 1048588),
    "message.timestamp.type": ("message_timestamp_type", _choice(_TIMESTAMP_TYPES), "CreateTime"),
    "compression.type": ("compression_type", _choice(_COMPRESSION_TYPES), "producer"),
    "flush.messages": ("flush_messages", _int(1), LONG_MAX),
    "flush.ms": ("flush_ms", _int(0), LONG_MAX),
    "file.delete.delay.ms": ("file_delete_delay_ms", _int(0), 60000),
    "preallocate": ("preallocate", _bool, False),
    # replication (read by the Partition layer, not by the log itself)
    "min.insync.replicas": ("min_insync_replicas", _int(1, INT_MAX), 1),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool, False),
    # Deprecated by Kafka 3.x and removed in 4.0, still written by 3.x tools and configs: accepted,
    # validated and shown as Kafka 3.7 shows them, and ignored (the log format is always v2 and a
    # fetch is never down-converted). Defaults are Kafka 3.7's.
    "message.format.version": ("message_format_version", _message_format_version, "3.0-IV1"),
    "message.downconversion.enable": ("message_downconversion_enable", _bool, True),
}

# Broker-level names that set a topic default (Kafka's KafkaConfig "log.*" properties).
BROKER_DEFAULTS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "compression.type": "compression.type",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.preallocate": "preallocate",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


def _ratio(key, value):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidConfigurationError(f"{key}={value!r}: expected a number") from None
    if not 0.0 <= v <= 1.0:
        raise InvalidConfigurationError(f"{key}={value!r}: must be between 0 and 1")
    return v


class LogConfig:
    """Typed topic configuration. Attributes are the Kafka names in snake case
    (``segment_bytes`` for ``segment.bytes``); ``overrides`` keeps what was set explicitly."""

    def __init__(self, overrides=None, defaults=None):
        base = defaults.values if defaults is not None else {
            attr: default for attr, _p, default in TOPIC_CONFIGS.values()}
        self.values = dict(base)
        self.overrides = dict(defaults.overrides) if defaults is not None else {}
        for key, value in (overrides or {}).items():
            if key not in TOPIC_CONFIGS:
                raise InvalidConfigurationError(f"{key}={value!r}: unknown topic config")
            attr, parse, _default = TOPIC_CONFIGS[key]
            parsed = _ratio(key, value) if parse is None else parse(key, value)
            self.values[attr] = parsed
            self.overrides[key] = value
        self.__dict__.update(self.values)
        if self.segment_index_bytes < 12:
            raise InvalidConfigurationError(f"segment.index.bytes={self.segment_index_bytes}: too small")

    @classmethod
    def from_broker(cls, props):
        """Topic defaults from broker properties (``log.segment.bytes``...); other keys ignored."""
        topic = {BROKER_DEFAULTS[k]: v for k, v in props.items() if k in BROKER_DEFAULTS}
        if "log.retention.ms" not in props:  # Kafka's fallbacks: minutes, then hours
            if "log.retention.minutes" in props:
                topic["retention.ms"] = int(_int(-1)("log.retention.minutes", props["log.retention.minutes"])) * 60000
            elif "log.retention.hours" in props:
                topic["retention.ms"] = int(_int(-1)("log.retention.hours", props["log.retention.hours"])) * 3600000
        return cls(topic)

    def with_overrides(self, overrides):
        """A copy with more topic-level settings applied on top of this one."""
        return LogConfig(overrides, defaults=self)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def describe(self):
        """{kafka name: value as a string} for every topic config, as DescribeConfigs shows."""
        out = {}
        for key, (attr, _p, _d) in TOPIC_CONFIGS.items():
            v = self.values[attr]
            if isinstance(v, frozenset):
                v = ",".join(sorted(v))
            elif isinstance(v, bool):
                v = "true" if v else "false"
            out[key] = str(v)
        return out

    def __repr__(self):
        return f"LogConfig({self.overrides!r})"
