"""Producer and consumer configuration with the Java client's property names and defaults.

A config is a dict of Kafka property names (``"linger.ms"``, ``"group.id"``...). Every value is
checked when the client is made; a bad one raises KafkaConfigError naming the key and the value.
Names the Java client has that kafkacore does not act on (metrics, serializers...) are accepted
and listed in ``IGNORED``; names nobody knows are refused, as a typo should be. Defaults are the
Java client's (Kafka 4.x documentation), so that a config written for it means the same here.
"""
from __future__ import annotations

from ..errors import KafkaConfigError
from .security import SECURITY_CONFIGS

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
# batch.size: librdkafka's default (1,000,000 bytes), not the Java client's 16384. Larger
# batches cost the sender and the broker less per record, and cost no memory they do not use
# (buffer.memory counts the bytes records take, not batch.size per open batch); linger.ms still
# bounds how long a record waits. docs/client.md, "Defaults".
DEFAULT_BATCH_SIZE = 1000000
# Null-key records move to another partition after this many bytes (KIP-794's sticky
# partitioner switches after batch.size bytes; this is the Java client's default batch.size),
# so they spread over partitions as a Java producer's do, whatever batch.size is.
STICKY_PARTITION_BYTES = 16384


def _int(lo=None, hi=None):
    def parse(key, value):
        if isinstance(value, bool):
            raise KafkaConfigError(f"{key}={value!r}: expected an integer")
        try:
            v = int(str(value).strip()) if not isinstance(value, int) else value
        except ValueError:
            raise KafkaConfigError(f"{key}={value!r}: expected an integer") from None
        if lo is not None and v < lo or hi is not None and v > hi:
            bounds = f"at least {lo}" if hi is None else f"in [{lo}, {hi}]" if lo is not None else f"at most {hi}"
            raise KafkaConfigError(f"{key}={value!r}: must be {bounds}")
        return v
    return parse


def _bool(key, value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise KafkaConfigError(f"{key}={value!r}: expected true or false")


def _string(key, value):
    if not isinstance(value, str):
        raise KafkaConfigError(f"{key}={value!r}: expected a string")
    return value


def _optional_string(key, value):
    return None if value is None else _string(key, value)


def _choice(*options):
    def parse(key, value):
        text = str(value).strip().lower()
        if text not in options:
            raise KafkaConfigError(f"{key}={value!r}: must be one of {', '.join(options)}")
        return text
    return parse


def _acks(key, value):
    text = str(value).strip().lower()
    if text == "all":
        return -1
    try:
        v = int(text)
    except ValueError:
        v = None
    if v not in (-1, 0, 1):
        raise KafkaConfigError(f"{key}={value!r}: must be all, -1, 0 or 1")
    return v


def _servers(key, value):
    """``host:port`` list (comma-separated string or a list) -> [(host, port)]."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in (str(i).strip() for i in items):
        if not item:
            continue
        if "://" in item:  # PLAINTEXT://host:port, as in listener strings
            item = item.split("://", 1)[1]
        host, colon, port = item.rpartition(":")
        if not colon or not port.isdigit() or not 0 < int(port) <= 65535:
            raise KafkaConfigError(f"{key}={value!r}: expected host:port entries, got {item!r}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise KafkaConfigError(f"{key}={value!r}: no server")
    return out


def _list(key, value):
    items = value.split(",") if isinstance(value, str) else list(value)
    out = [str(i).strip() for i in items if str(i).strip()]
    if not out:
        raise KafkaConfigError(f"{key}={value!r}: empty list")
    return out


def _callable_or_name(key, value):
    if callable(value) or value is None:
        return value
    return _choice("murmur2", "default", "uniform_sticky", "sticky", "random", "consistent_random")(key, value)


COMMON = {
    "bootstrap.servers": (_servers, None),
    "client.id": (_string, ""),
    "request.timeout.ms": (_int(0, INT_MAX), 30000),
    "retry.backoff.ms": (_int(0, LONG_MAX), 100),
    "retry.backoff.max.ms": (_int(0, LONG_MAX), 1000),
    "reconnect.backoff.ms": (_int(0, LONG_MAX), 50),
    "reconnect.backoff.max.ms": (_int(0, LONG_MAX), 1000),
    "metadata.max.age.ms": (_int(0, LONG_MAX), 300000),
    "socket.connection.setup.timeout.ms": (_int(0, LONG_MAX), 10000),
    "connections.max.idle.ms": (_int(-1, LONG_MAX), 540000),
    # -1 (the kernel's sizes, autotuned) rather than Java's 131072 / 65536: a fixed 64 KiB
    # receive buffer caps a fetch at one window per round trip (docs/client.md)
    "send.buffer.bytes": (_int(-1, INT_MAX), -1),
    "receive.buffer.bytes": (_int(-1, INT_MAX), -1),
    **SECURITY_CONFIGS,
}

PRODUCER = dict(COMMON, **{
    "acks": (_acks, -1),
    "enable.idempotence": (_bool, True),
    "linger.ms": (_int(0, INT_MAX), 5),
    "batch.size": (_int(0, INT_MAX), DEFAULT_BATCH_SIZE),
    "buffer.memory": (_int(0, LONG_MAX), 33554432),
    "max.block.ms": (_int(0, LONG_MAX), 60000),
    "compression.type": (_choice("none", "gzip", "snappy", "lz4", "zstd"), "none"),
    "retries": (_int(0, INT_MAX), INT_MAX),
    "delivery.timeout.ms": (_int(0, INT_MAX), 120000),
    "max.in.flight.requests.per.connection": (_int(1, INT_MAX), 5),
    "max.request.size": (_int(0, INT_MAX), 1048576),
    "partitioner": (_callable_or_name, "murmur2"),
    "partitioner.ignore.keys": (_bool, False),
    "transactional.id": (_optional_string, None),
    "transaction.timeout.ms": (_int(1, INT_MAX), 60000),
    "metadata.max.idle.ms": (_int(5000, LONG_MAX), 300000),
})

CONSUMER = dict(COMMON, **{
    "group.id": (_optional_string, None),
    "group.instance.id": (_optional_string, None),
    "session.timeout.ms": (_int(1, INT_MAX), 45000),
    "heartbeat.interval.ms": (_int(1, INT_MAX), 3000),
    "max.poll.interval.ms": (_int(1, INT_MAX), 300000),
    "max.poll.records": (_int(1, INT_MAX), 500),
    "enable.auto.commit": (_bool, True),
    "auto.commit.interval.ms": (_int(0, INT_MAX), 5000),
    "auto.offset.reset": (_choice("earliest", "latest", "none"), "latest"),
    "isolation.level": (_choice("read_uncommitted", "read_committed"), "read_uncommitted"),
    "fetch.min.bytes": (_int(0, INT_MAX), 1),
    "fetch.max.bytes": (_int(0, INT_MAX), 52428800),
    "fetch.max.wait.ms": (_int(0, INT_MAX), 500),
    "max.partition.fetch.bytes": (_int(0, INT_MAX), 1048576),
    "partition.assignment.strategy": (_list, ["range", "cooperative-sticky"]),
    "check.crcs": (_bool, True),
    "allow.auto.create.topics": (_bool, True),
    "exclude.internal.topics": (_bool, True),
    "client.rack": (_string, ""),
    "group.protocol": (_choice("classic", "consumer"), "classic"),
    "group.remote.assignor": (_optional_string, None),
    "default.api.timeout.ms": (_int(0, INT_MAX), 60000),
})

# the consumer settings of the classic group protocol alone (group.protocol=consumer refuses them)
CLASSIC_ONLY = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")

# KIP-932's share consumer (client/share_consumer.py): the Java KafkaShareConsumer's names and
# defaults (confluent-kafka's ShareConsumer takes the same). The heartbeat interval and the
# session timeout are the group's (group.share.*), told by the coordinator, so not set here.
SHARE_CONSUMER = dict(COMMON, **{
    "group.id": (_optional_string, None),
    "share.acknowledgement.mode": (_choice("implicit", "explicit"), "implicit"),
    "max.poll.records": (_int(1, INT_MAX), 500),
    "fetch.min.bytes": (_int(0, INT_MAX), 1),
    "fetch.max.bytes": (_int(0, INT_MAX), 52428800),
    "fetch.max.wait.ms": (_int(0, INT_MAX), 500),
    "check.crcs": (_bool, True),
    "client.rack": (_string, ""),
    "default.api.timeout.ms": (_int(0, INT_MAX), 60000),
})

# Java-client names with no effect here: accepted so that an existing config loads.
IGNORED = {
    "metrics.sample.window.ms",
    "metrics.num.samples", "metrics.recording.level", "metric.reporters", "interceptor.classes",
    "client.dns.lookup", "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "enable.metrics.push", "auto.include.jmx.reporter", "socket.connection.setup.timeout.max.ms",
    "transaction.timeout.ms", "security.providers",
}


def parse(config: dict | None, table: dict, what: str) -> dict:
    """Kafka property dict -> {name: checked value} with every default filled in."""
    config = dict(config or {})
    out = {}
    for key, value in config.items():
        if not isinstance(key, str):
            raise KafkaConfigError(f"{what} config keys are strings, got {key!r}")
        if key in IGNORED:
            continue
        if key not in table:
            raise KafkaConfigError(f"unknown {what} config {key!r}")
        parser, _default = table[key]
        out[key] = parser(key, value)
    for key, (_parser, default) in table.items():
        out.setdefault(key, default)
    return out


def producer_config(config: dict | None, bootstrap_required: bool = True) -> dict:
    c = parse(config, PRODUCER, "producer")
    if bootstrap_required and c["bootstrap.servers"] is None:
        raise KafkaConfigError("bootstrap.servers is required")
    if c["enable.idempotence"]:
        # Kafka's rule: idempotence needs acks=all and at most 5 requests in flight. The Java
        # client refuses an explicit contradiction and turns implicit idempotence off.
        explicit = "enable.idempotence" in (config or {})
        if c["acks"] != -1 or c["max.in.flight.requests.per.connection"] > 5:
            if explicit:
                raise KafkaConfigError(
                    "enable.idempotence=true needs acks=all and max.in.flight.requests.per.connection <= 5 "
                    f"(got acks={c['acks']}, max.in.flight.requests.per.connection="
                    f"{c['max.in.flight.requests.per.connection']})")
            c["enable.idempotence"] = False
    if c["transactional.id"] is not None:
        # the Java client's rule: a transactional producer is idempotent, with acks=all and at
        # most 5 requests in flight; an explicit contradiction is refused
        if c["transactional.id"] == "":
            raise KafkaConfigError("transactional.id must not be empty")
        if not c["enable.idempotence"] or c["acks"] != -1 or c["max.in.flight.requests.per.connection"] > 5:
            raise KafkaConfigError(
                "transactional.id needs enable.idempotence=true, acks=all and "
                "max.in.flight.requests.per.connection <= 5 (got enable.idempotence="
                f"{str(c['enable.idempotence']).lower()}, acks={c['acks']}, max.in.flight.requests.per.connection="
                f"{c['max.in.flight.requests.per.connection']})")
    if c["delivery.timeout.ms"] < c["linger.ms"] + c["request.timeout.ms"]:
        raise KafkaConfigError(
            f"delivery.timeout.ms={c['delivery.timeout.ms']} must be at least linger.ms + request.timeout.ms "
            f"({c['linger.ms'] + c['request.timeout.ms']})")
    return c


def consumer_config(config: dict | None, bootstrap_required: bool = True) -> dict:
    c = parse(config, CONSUMER, "consumer")
    if bootstrap_required and c["bootstrap.servers"] is None:
        raise KafkaConfigError("bootstrap.servers is required")
    given = set(config or ())
    if c["group.protocol"] == "consumer":
        # the Java client's rule (ConsumerConfig): under KIP-848 the coordinator owns the session,
        # the heartbeat interval and the assignment, so a classic-only setting is a mistake
        for key in CLASSIC_ONLY:
            if key in given:
                raise KafkaConfigError(f"{key} cannot be set when group.protocol=CONSUMER")
    elif c["group.remote.assignor"] is not None:
        raise KafkaConfigError("group.remote.assignor cannot be set when group.protocol=CLASSIC")
    if c["group.protocol"] == "classic" and c["heartbeat.interval.ms"] >= c["session.timeout.ms"]:
        raise KafkaConfigError(
            f"heartbeat.interval.ms={c['heartbeat.interval.ms']} must be lower than "
            f"session.timeout.ms={c['session.timeout.ms']}")
    if c["group.instance.id"] is not None and c["group.id"] is None:
        raise KafkaConfigError("group.instance.id needs a group.id")
    return c


def security_config(props: dict) -> dict:
    """The security settings (client/security.py) among ``props``, checked, defaults filled in;
    the other keys are left alone (the admin client takes its other settings one by one)."""
    return parse({k: v for k, v in (props or {}).items() if k in SECURITY_CONFIGS}, SECURITY_CONFIGS, "client")


def share_consumer_config(config: dict | None) -> dict:
    c = parse(config, SHARE_CONSUMER, "share consumer")
    if c["bootstrap.servers"] is None:
        raise KafkaConfigError("bootstrap.servers is required")
    if not c["group.id"]:
        raise KafkaConfigError("group.id is required for a share consumer")
    return c
