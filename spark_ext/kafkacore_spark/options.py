"""The data source's options, checked on the driver before any task runs.

Names and rules follow Spark's own Kafka source (structured-streaming-kafka-integration):
exactly one of ``assign`` / ``subscribe`` / ``subscribePattern``; ``startingOffsets`` and
``endingOffsets`` are ``earliest``, ``latest`` or JSON ``{"topic": {"0": 23, "1": -2}}`` with -2
for earliest and -1 for latest; ``startingTimestamp`` beats ``startingOffsetsByTimestamp``
beats ``startingOffsets``; ``kafka.*`` options go to kafkacore's consumer or producer. What
Spark's source forbids is refused here too, with the same reasons. kafkacore adds ``path``
(read a data directory's segment files; no broker) and ``maxBytesPerPartition`` (how many
segment bytes one task reads, 128 MiB by default, like spark.sql.files.maxPartitionBytes)."""
import json
import re
from dataclasses import dataclass, field

EARLIEST = -2
LATEST = -1

# Read options Spark's Kafka source knows (lower case: Spark hands options over case-insensitively).
_READ_OPTIONS = {
    "path", "subscribe", "subscribepattern", "assign",
    "startingoffsets", "endingoffsets", "startingtimestamp", "endingtimestamp",
    "startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy",
    "failondataloss", "minpartitions", "maxoffsetspertrigger", "minoffsetspertrigger",
    "maxrecordsperpartition", "includeheaders", "kafkaconsumer.polltimeoutms", "maxtriggerdelay",
    "maxbytesperpartition",
}
_WRITE_OPTIONS = {"topic", "includeheaders", "path", "checkpointlocation"}
# kafka.* settings Spark's source refuses because the source manages them itself.
_FORBIDDEN_KAFKA = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "enable.auto.commit": "the source does not commit offsets to Kafka; Spark checkpoints them",
    "key.deserializer": "keys are always binary; cast or decode them with DataFrame operations",
    "value.deserializer": "values are always binary; cast or decode them with DataFrame operations",
    "key.serializer": "keys are written as binary or string columns",
    "value.serializer": "values are written as binary or string columns",
    "interceptor.classes": "interceptors are not supported",
}


class OptionError(ValueError):
    """A bad, unknown or contradictory option: raised on the driver, before any task runs."""


@dataclass
class OffsetSpec:
    """Where reading starts or ends: one rule for every partition ("earliest"/"latest"), per
    partition offsets (JSON), a global timestamp, or per partition timestamps."""
    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: dict = field(default_factory=dict)  # {(topic, partition): offset or -2/-1}
    timestamp: int | None = None
    timestamps: dict = field(default_factory=dict)  # {(topic, partition): ms}


@dataclass
class SourceOptions:
    path: str | None
    kafka: dict  # kafka.* options without the prefix
    subscribe: list | None
    pattern: re.Pattern | None
    assign: list | None  # [(topic, partition)]
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: str  # "error" | "latest"
    fail_on_data_loss: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    max_records_per_partition: int | None
    max_bytes_per_partition: int
    include_headers: bool
    poll_timeout_ms: int

    def wants(self, topic: str) -> bool:
        """Whether a topic is part of the subscription (assign is handled by the caller)."""
        if topic.startswith("__"):
            return False  # internal topics (__consumer_offsets) are never subscribed to
        if self.subscribe is not None:
            return topic in self.subscribe
        return self.pattern is not None and self.pattern.fullmatch(topic) is not None


def _lower(options) -> dict:
    return {str(k).lower(): v for k, v in dict(options).items()}


def _bool(name, value) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise OptionError(f"option {name!r} must be true or false, not {value!r}")


def _positive_int(name, value) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be a positive integer, not {value!r}") from None
    if n <= 0:
        raise OptionError(f"option {name!r} must be a positive integer, not {value!r}")
    return n


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _time_ms(name, value) -> int:
    """A duration as Spark writes them (Utils.timeStringAsMs): a whole number with an optional
    unit (us, ms, s, m or min, h, d); milliseconds without one."""
    m = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", str(value).strip().lower())
    if m is None or (m.group(2) is not None and m.group(2) not in _TIME_UNITS_MS):
        raise OptionError(f"option {name!r} must be a duration such as 15m, 30s or 500ms, not {value!r}")
    return int(int(m.group(1)) * _TIME_UNITS_MS[m.group(2) or "ms"])


def _partition_json(name, value, what) -> dict:
    """{"topic": {"0": n}} -> {(topic, 0): int(n)}."""
    try:
        data = json.loads(value)
    except ValueError as e:
        raise OptionError(f"option {name!r} is not valid JSON ({e}): {value!r}") from None
    if not isinstance(data, dict):
        raise OptionError(f"option {name!r} must be a JSON object like {{\"topic\": {{\"0\": {what}}}}}")
    out = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name!r}: the value for topic {topic!r} must be an object of partition -> {what}")
        for p, n in parts.items():
            try:
                part = int(p)
            except ValueError:
                raise OptionError(f"option {name!r}: partition {p!r} of topic {topic!r} is not a number") from None
            if isinstance(n, bool) or not isinstance(n, int):
                raise OptionError(f"option {name!r}: {topic}-{p} must map to an integer {what}, not {n!r}")
            out[(topic, part)] = n
    return out


def _offset_spec(o, which: str, streaming: bool) -> OffsetSpec:
    """startingOffsets/endingOffsets and the timestamp variants, with Spark's precedence."""
    ts_key = f"{which}timestamp"
    by_ts_key = f"{which}offsetsbytimestamp"
    off_key = f"{which}offsets"
    if ts_key in o:
        try:
            ts = int(str(o[ts_key]).strip())
        except ValueError:
            raise OptionError(f"option {which}Timestamp must be a timestamp in ms, not {o[ts_key]!r}") from None
        if ts < 0:
            raise OptionError(f"option {which}Timestamp must not be negative, not {ts}")
        return OffsetSpec("timestamp", timestamp=ts)
    if by_ts_key in o:
        return OffsetSpec("timestamps", timestamps=_partition_json(f"{which}OffsetsByTimestamp", o[by_ts_key], "timestamp"))
    default = "latest" if (which == "starting" and streaming) or which == "ending" else "earliest"
    raw = str(o.get(off_key, default)).strip()
    name = f"{which}Offsets"
    if raw.lower() in ("earliest", "latest"):
        kind = raw.lower()
        if which == "starting" and kind == "latest" and not streaming:
            raise OptionError("startingOffsets=latest is not allowed for a batch read (it would read nothing)")
        if which == "ending" and kind == "earliest":
            raise OptionError("endingOffsets=earliest is not allowed (it would read nothing)")
        return OffsetSpec(kind)
    offsets = _partition_json(name, raw, "offset")
    for tp, n in offsets.items():
        if n < EARLIEST:
            raise OptionError(f"option {name}: offset {n} for {tp[0]}-{tp[1]} is invalid (use -2 for earliest, -1 for latest)")
        if which == "starting" and n == LATEST and not streaming:
            raise OptionError(f"startingOffsets for {tp[0]}-{tp[1]} can't be latest (-1) in a batch read")
        if which == "ending" and n == EARLIEST:
            raise OptionError(f"endingOffsets for {tp[0]}-{tp[1]} can't be earliest (-2)")
    return OffsetSpec("offsets", offsets=offsets)


def _kafka_options(o, known, what, known_desc) -> dict:
    """The ``kafka.*`` options (prefix dropped), once the rest are known and none is forbidden."""
    kafka = {k[6:]: str(v) for k, v in o.items() if k.startswith("kafka.")}
    unknown = sorted(k for k in o if not k.startswith("kafka.") and k not in known)
    if unknown:
        raise OptionError(f"unknown option(s) for {what}: {', '.join(unknown)}; known: {known_desc}")
    for k, why in _FORBIDDEN_KAFKA.items():
        if k in kafka:
            raise OptionError(f"kafka.{k} is not supported: {why}")
    return kafka


def parse_source_options(options, streaming: bool) -> SourceOptions:
    o = _lower(options)
    kafka = _kafka_options(o, _READ_OPTIONS, "format('kafkacore')", f"{', '.join(sorted(_READ_OPTIONS))} and kafka.*")
    path = o.get("path")
    servers = kafka.get("bootstrap.servers")
    if path and servers:
        raise OptionError("options 'path' and 'kafka.bootstrap.servers' contradict each other: read a data "
                          "directory's files or a broker, not both")
    if not path and not servers:
        raise OptionError("say where the data is: option 'kafka.bootstrap.servers' (a broker) or 'path' "
                          "(a kafkacore/Kafka data directory)")
    strategies = [k for k in ("assign", "subscribe", "subscribepattern") if k in o]
    if len(strategies) != 1:
        names = {"assign": "assign", "subscribe": "subscribe", "subscribepattern": "subscribePattern"}
        if not strategies:
            raise OptionError("one of the options 'assign', 'subscribe' or 'subscribePattern' is required")
        raise OptionError(f"only one of 'assign', 'subscribe' or 'subscribePattern' may be given, not "
                          f"{' and '.join(names[s] for s in strategies)}")
    subscribe = pattern = assign = None
    if "subscribe" in o:
        subscribe = [t.strip() for t in str(o["subscribe"]).split(",") if t.strip()]
        if not subscribe:
            raise OptionError("option 'subscribe' names no topic")
    elif "subscribepattern" in o:
        try:
            pattern = re.compile(str(o["subscribepattern"]))
        except re.error as e:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {e}") from None
    else:
        assign = sorted({(t, p) for t, ps in _assign_json(o["assign"]).items() for p in ps})
        if not assign:
            raise OptionError("option 'assign' names no partition")
    if streaming and any(k in o for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")):
        raise OptionError("ending offsets are not valid in streaming queries (endingOffsets, endingTimestamp, "
                          "endingOffsetsByTimestamp)")
    if not streaming and any(k in o for k in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay")):
        raise OptionError("maxOffsetsPerTrigger / minOffsetsPerTrigger / maxTriggerDelay apply to streaming "
                          "queries only")
    strategy = str(o.get("startingoffsetsbytimestampstrategy", "error")).strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
    iso = kafka.get("isolation.level", "read_uncommitted")
    if iso not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"kafka.isolation.level must be read_uncommitted or read_committed, not {iso!r}")
    return SourceOptions(
        path=path,
        kafka=kafka,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=_offset_spec(o, "starting", streaming),
        ending=_offset_spec(o, "ending", streaming) if not streaming else OffsetSpec("latest"),
        timestamp_strategy=strategy,
        fail_on_data_loss=_bool("failOnDataLoss", o.get("failondataloss", "true")),
        min_partitions=_positive_int("minPartitions", o["minpartitions"]) if "minpartitions" in o else None,
        max_offsets_per_trigger=(_positive_int("maxOffsetsPerTrigger", o["maxoffsetspertrigger"])
                                 if "maxoffsetspertrigger" in o else None),
        min_offsets_per_trigger=(_positive_int("minOffsetsPerTrigger", o["minoffsetspertrigger"])
                                 if "minoffsetspertrigger" in o else None),
        max_trigger_delay_ms=_time_ms("maxTriggerDelay", o.get("maxtriggerdelay", "15m")),
        max_records_per_partition=(_positive_int("maxRecordsPerPartition", o["maxrecordsperpartition"])
                                   if "maxrecordsperpartition" in o else None),
        max_bytes_per_partition=(_positive_int("maxBytesPerPartition", o["maxbytesperpartition"])
                                 if "maxbytesperpartition" in o else 128 << 20),
        include_headers=_bool("includeHeaders", o.get("includeheaders", "false")),
        poll_timeout_ms=(_positive_int("kafkaConsumer.pollTimeoutMs", o["kafkaconsumer.polltimeoutms"])
                         if "kafkaconsumer.polltimeoutms" in o else 120_000),
    )


def _assign_json(value) -> dict:
    """assign is {"topic": [0, 1]} in Spark."""
    try:
        data = json.loads(value)
    except ValueError as e:
        raise OptionError(f"option 'assign' is not valid JSON ({e}): {value!r}") from None
    if not isinstance(data, dict) or not all(
            isinstance(ps, list) and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in ps)
            for ps in data.values()):
        raise OptionError('option \'assign\' must look like {"topic": [0, 1]}')
    return data


@dataclass
class SinkOptions:
    kafka: dict
    topic: str | None


def parse_sink_options(options) -> SinkOptions:
    o = _lower(options)
    kafka = _kafka_options(o, _WRITE_OPTIONS, "writing format('kafkacore')", "topic, kafka.*")
    if "bootstrap.servers" not in kafka:
        raise OptionError("writing needs option 'kafka.bootstrap.servers'")
    topic = o.get("topic")
    return SinkOptions(kafka=kafka, topic=str(topic) if topic else None)
