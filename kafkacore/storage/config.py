"""Topic (log) configuration with Kafka's names, defaults and validation (Kafka's LogConfig).

``LogConfig({"segment.bytes": "1048576", "cleanup.policy": "compact"})`` takes Kafka's topic
config names with string or typed values; an unknown name or a bad value raises
InvalidConfigurationError naming the key and the value. ``BROKER_DEFAULTS`` maps the broker-level
names (``log.segment.bytes``...) that set the defaults for every topic."""
import re
from typing import NamedTuple

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


class TopicConfigDef(NamedTuple):
    attr: str
    parse: object  # (key, value) -> the typed value; None: a ratio between 0 and 1
    default: object
    kind: str  # Kafka's ConfigDef.Type: BOOLEAN, STRING, INT, LONG, DOUBLE or LIST
    doc: str


# name -> TopicConfigDef: each topic config declared once - its attribute on LogConfig, its parser,
# its default, Kafka's type for it (ConfigDef.Type, as DescribeConfigs reports it) and a short
# description (what this broker does with it). Defaults are Kafka's (4.x documentation). Two choices of
# our own: segment.bytes accepts values down to 14 bytes (Kafka's historical topic minimum; 4.x
# asks 1 MiB) so tests can roll small segments, and max.message.bytes defaults to Kafka's
# 1048588 (1 MiB plus the 12-byte log overhead).
TOPIC_CONFIGS = {
    "segment.bytes": TopicConfigDef("segment_bytes", _int(14, INT_MAX), 1073741824, "INT",
        "Size in bytes at which the active segment of a partition is rolled."),
    "segment.ms": TopicConfigDef("segment_ms", _int(1), 604800000, "LONG",
        "Time after which the active segment is rolled even if it is not full, so that retention and compaction "
        "can act on it."),
    "segment.jitter.ms": TopicConfigDef("segment_jitter_ms", _int(0), 0, "LONG",
        "Largest random amount subtracted from segment.ms, spreading segment rolls over time."),
    "segment.index.bytes": TopicConfigDef("segment_index_bytes", _int(12, INT_MAX), 10485760, "INT",
        "Size in bytes of the offset and time index files preallocated for each segment."),
    "index.interval.bytes": TopicConfigDef("index_interval_bytes", _int(0, INT_MAX), 4096, "INT",
        "Bytes of batches between two entries of the offset index."),
    "retention.ms": TopicConfigDef("retention_ms", _int(-1), 604800000, "LONG",
        "Time a closed segment is kept under the delete policy; -1 keeps data forever."),
    "retention.bytes": TopicConfigDef("retention_bytes", _int(-1), -1, "LONG",
        "Largest size a partition may grow to before its oldest segments are deleted under the delete policy; -1 "
        "means no limit."),
    "cleanup.policy": TopicConfigDef("cleanup_policy", _policy, frozenset({"delete"}), "LIST",
        "What happens to old segments: delete (by retention.ms/retention.bytes), compact (keep the latest record "
        "of each key), or both."),
    "delete.retention.ms": TopicConfigDef("delete_retention_ms", _int(0), 86400000, "LONG",
        "Time tombstones are kept in a compacted topic after compaction reached them."),
    "min.compaction.lag.ms": TopicConfigDef("min_compaction_lag_ms", _int(0), 0, "LONG",
        "Time a record stays uncompacted after it was written."),
    "max.compaction.lag.ms": TopicConfigDef("max_compaction_lag_ms", _int(1), LONG_MAX, "LONG",
        "Longest time a record can stay ineligible for compaction."),
    "min.cleanable.dirty.ratio": TopicConfigDef("min_cleanable_dirty_ratio", None, 0.5, "DOUBLE",
        "Share of a log that must be uncompacted before the cleaner compacts it."),
    "max.message.bytes": TopicConfigDef("max_message_bytes", _int(0, INT_MAX), 1048588, "INT",
        "Largest record batch size allowed in a partition (after compression)."),
    "message.timestamp.type": TopicConfigDef("message_timestamp_type", _choice(_TIMESTAMP_TYPES), "CreateTime", "STRING",
        "Whether record timestamps are the producer's (CreateTime) or set by the broker when appended "
        "(LogAppendTime)."),
    "compression.type": TopicConfigDef("compression_type", _choice(_COMPRESSION_TYPES), "producer", "STRING",
        "Compression of the stored batches; 'producer' keeps the producer's codec."),
    "flush.messages": TopicConfigDef("flush_messages", _int(1), LONG_MAX, "LONG",
        "Number of appended records after which the log is fsynced."),
    "flush.ms": TopicConfigDef("flush_ms", _int(0), LONG_MAX, "LONG",
        "Time after which appended data is fsynced."),
    "file.delete.delay.ms": TopicConfigDef("file_delete_delay_ms", _int(0), 60000, "LONG",
        "Delay before the files of a deleted segment are removed from disk."),
    "preallocate": TopicConfigDef("preallocate", _bool, False, "BOOLEAN",
        "Whether segment files are preallocated at their full size when created."),
    # replication (read by the Partition layer, not by the log itself)
    "min.insync.replicas": TopicConfigDef("min_insync_replicas", _int(1, INT_MAX), 1, "INT",
        "The fewest in-sync replicas an acks=all write needs (NOT_ENOUGH_REPLICAS below it)."),
    "unclean.leader.election.enable": TopicConfigDef("unclean_leader_election_enable", _bool, False, "BOOLEAN",
        "Whether a replica outside the ISR may become leader when no ISR member is live, losing what only the "
        "ISR had."),
    # Deprecated by Kafka 3.x and removed in 4.0, still written by 3.x tools and configs: accepted,
    # validated and shown as Kafka 3.7 shows them, and ignored (the log format is always v2 and a
    # fetch is never down-converted). Defaults are Kafka 3.7's.
    "message.format.version": TopicConfigDef("message_format_version", _message_format_version, "3.0-IV1", "STRING",
        "Deprecated since Kafka 3.0 and ignored: records are always stored as v2 batches."),
    "message.downconversion.enable": TopicConfigDef("message_downconversion_enable", _bool, True, "BOOLEAN",
        "Deprecated since Kafka 3.x and ignored: fetches are never down-converted to older message formats."),
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
            d.attr: d.default for d in TOPIC_CONFIGS.values()}
        self.values = dict(base)
        self.overrides = dict(defaults.overrides) if defaults is not None else {}
        for key, value in (overrides or {}).items():
            if key not in TOPIC_CONFIGS:
                raise InvalidConfigurationError(f"{key}={value!r}: unknown topic config")
            d = TOPIC_CONFIGS[key]
            parsed = _ratio(key, value) if d.parse is None else d.parse(key, value)
            self.values[d.attr] = parsed
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
        for key, d in TOPIC_CONFIGS.items():
            v = self.values[d.attr]
            if isinstance(v, frozenset):
                v = ",".join(sorted(v))
            elif isinstance(v, bool):
                v = "true" if v else "false"
            out[key] = str(v)
        return out

    def __repr__(self):
        return f"LogConfig({self.overrides!r})"
