"""The producer and consumer behind the data commands (produce, consume, perf): their Kafka
properties from the global options and ``-X prop=value``, the topic's partitions, and times
given as ISO-8601."""
from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone

from .common import EXIT_FAILED, EXIT_USAGE, ToolError, client_settings

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")  # Kafka's TimestampType names, by the attribute bit


# what -X's help shows, per client: a property that client takes (a producer's linger.ms given to
# consume fails as an unknown consumer property)
PROPERTY_EXAMPLES = {"producer": "linger.ms=20", "consumer": "fetch.min.bytes=65536"}


def add_property_option(parser: argparse.ArgumentParser, client: str) -> None:
    parser.add_argument("-X", dest="properties", action="append", default=[], metavar="PROP=VALUE",
                        help=f"a {client} property, with the Java client's name (repeatable), "
                             f"e.g. -X {PROPERTY_EXAMPLES[client]}")


def properties(args, overrides: dict | None = None) -> dict:
    """bootstrap.servers and --command-config, then every -X, then the command's own options
    (``overrides``: what a dedicated option such as --acks said)."""
    props = client_settings(args)
    for item in args.properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"-X {item!r} is not prop=value", EXIT_USAGE)
        props[key.strip()] = value.strip()
    props.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return props


def make_producer(props: dict):
    from ..client.producer import Producer
    from ..errors import KafkaConfigError

    try:
        return Producer(props)
    except KafkaConfigError as e:
        raise ToolError(f"bad producer property: {e}", EXIT_USAGE) from None


def make_consumer(props: dict):
    from ..client.consumer import Consumer
    from ..errors import KafkaConfigError

    try:
        return Consumer(props)
    except KafkaConfigError as e:
        raise ToolError(f"bad consumer property: {e}", EXIT_USAGE) from None


def topic_partitions(props: dict, topic: str, create: bool = False) -> int:
    """The partition count of ``topic``, asking the cluster with a connection of its own.
    ``create``: let the broker auto-create it (as a producer's metadata request does), waiting
    while it is being created. A topic the cluster does not have (and will not create) is an
    error at once, not after max.block.ms."""
    from ..client.cluster import Cluster
    from ..client.config import producer_config
    from ..errors import KafkaConfigError, LeaderNotAvailableError, UnknownTopicOrPartitionError

    try:
        config = producer_config({k: v for k, v in props.items() if k in ("bootstrap.servers", "client.id",
                                                                             "request.timeout.ms")})
    except KafkaConfigError as e:
        raise ToolError(f"bad client property: {e}", EXIT_USAGE) from None
    cluster = Cluster(config["bootstrap.servers"], config["client.id"] or "kafkacore-cli",
                      config["request.timeout.ms"])
    try:
        deadline = time.monotonic() + config["request.timeout.ms"] / 1000
        while True:
            cluster.refresh([topic], allow_auto_create=create)
            n = cluster.partition_counts.get(topic)
            if n:
                return n
            err = cluster.topic_errors.get(topic)
            # LEADER_NOT_AVAILABLE: being created (auto-creation answers it first, as Kafka's does)
            if not isinstance(err, LeaderNotAvailableError) or time.monotonic() > deadline:
                if err is None or isinstance(err, UnknownTopicOrPartitionError):
                    raise ToolError(f"topic {topic!r} does not exist"
                                    + (" and the cluster does not create topics on use" if create else "")
                                    + " (UNKNOWN_TOPIC_OR_PARTITION)")
                raise err
            time.sleep(0.05)
    finally:
        cluster.close()


def check_partition(topic: str, partition: int | None, count: int) -> None:
    if partition is not None and not 0 <= partition < count:
        raise ToolError(f"partition {partition} of {topic!r} does not exist (the topic has {count} "
                        f"partition{'s' if count != 1 else ''}: 0-{count - 1})", EXIT_FAILED)


def parse_time_ms(text: str, what: str = "time") -> int:
    """Milliseconds since the epoch from ISO-8601 ('2024-05-01T12:00:00Z', '2024-05-01 12:00',
    '2024-05-01T14:00:00+02:00', '2024-05-01') or from a number of milliseconds. A time
    without a zone is UTC, like every time the tools print (groups reset-offsets reads it so)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise ToolError(f"{what} {text!r} is not ISO-8601 (e.g. 2024-05-01T12:00:00Z) nor milliseconds",
                        EXIT_USAGE) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(round(moment.timestamp() * 1000))


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "0": "\0", "\\": "\\"}


def unescape(text: str) -> str:
    """Backslash escapes typed on a command line: \\t, \\n, \\r, \\0 and \\\\ (a tab is hard to
    type in a shell argument); any other backslash stays as it is."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)
