"""Broker configuration with Kafka's property names and defaults (Kafka's KafkaConfig).

Sources, later ones winning: the defaults below, a ``server.properties``-style file
(``--config FILE``), ``--set key=value`` options, then ``--host/--port/--data-dir``. Every value
is checked at start-up; a bad one raises InvalidConfigurationError naming the key and the value.
``log.*`` and the other topic-default names go to the storage engine's LogConfig (see
kafkacore/storage/config.py). Names Kafka has that this broker does not act on (replication,
quotas, SASL, ...) are accepted and listed by ``ignored_keys`` so that a real
server.properties loads; names nobody knows are refused, as a typo should be.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import InvalidConfigurationError
from ..storage.config import BROKER_DEFAULTS, INT_MAX, LONG_MAX, LogConfig, _bool, _int


def _string(key, value):
    return str(value)


# Kafka's authorizers: its ZooKeeper-mode one and its KRaft one; kafkacore's Authorizer
# (kafkacore/security/acl.py) follows both, over the ACLs in the metadata store
AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer",
                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer")


def _authorizer_class(key, value):
    """Empty: no authorizer (the ACL APIs answer SECURITY_DISABLED); one of Kafka's: ACLs on."""
    text = str(value).strip()
    if text and text not in AUTHORIZER_CLASS_NAMES:
        raise InvalidConfigurationError(f"{key}={value!r}: the authorizers are {' or '.join(AUTHORIZER_CLASS_NAMES)} "
                                        "(or empty for none)")
    return text


RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _replica_selector(key, value):
    """KIP-392's replica.selector.class: unset (consumers read from leaders) or Kafka's
    RackAwareReplicaSelector, the one selector Kafka ships."""
    text = str(value).strip()
    if text in ("", "null"):
        return None
    if text != RACK_AWARE_REPLICA_SELECTOR:
        raise InvalidConfigurationError(f"{key}={value!r}: the selectors are {RACK_AWARE_REPLICA_SELECTOR} "
                                        "or none (consumers read from the leaders)")
    return text


def _listeners(key, value):
    """``PLAINTEXT://host:port`` (comma-separated; the first PLAINTEXT one is used)."""
    text = str(value).strip()
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, rest = item.partition("://")
        if not sep:
            raise InvalidConfigurationError(f"{key}={value!r}: expected NAME://host:port")
        host, colon, port = rest.rpartition(":")
        if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise InvalidConfigurationError(f"{key}={value!r}: expected NAME://host:port with a port 0-65535")
        out.append((name.upper(), host.strip("[]"), int(port)))
    if not out:
        raise InvalidConfigurationError(f"{key}={value!r}: no listener")
    return out


# name -> (parser, default). Kafka's defaults, from its 4.x documentation, except where noted.
BROKER_CONFIGS = {
    "node.id": (_int(0, INT_MAX), 1),
    "broker.id": (_int(-1, INT_MAX), -1),  # the ZooKeeper-era name of node.id; wins when set
    "listeners": (_listeners, [("PLAINTEXT", "127.0.0.1", 9092)]),  # Kafka binds all interfaces; we stay local
    "advertised.listeners": (_listeners, None),  # default: the listener
    "log.dirs": (_string, None),
    "log.dir": (_string, None),
    "num.partitions": (_int(1, INT_MAX), 1),
    "default.replication.factor": (_int(1, 32767), 1),
    "auto.create.topics.enable": (_bool, True),
    "delete.topic.enable": (_bool, True),
    "socket.request.max.bytes": (_int(1, INT_MAX), 104857600),
    # a connection with no traffic for this long is closed (Kafka's Selector idle expiry; -1: never)
    "connections.max.idle.ms": (_int(-1), 600000),
    # Kafka's broker-side request.timeout.ms (its inter-broker clients' answer timeout): here also
    # how long a request may stall half-received before its connection is closed
    "request.timeout.ms": (_int(1, INT_MAX), 30000),
    "message.max.bytes": (_int(0, INT_MAX), 1048588),
    "offsets.topic.num.partitions": (_int(1, INT_MAX), 50),
    "offsets.topic.replication.factor": (_int(1, 32767), 3),
    "offsets.topic.segment.bytes": (_int(1, INT_MAX), 104857600),
    "offsets.retention.minutes": (_int(1, INT_MAX), 10080),
    "offsets.retention.check.interval.ms": (_int(1), 600000),
    "offset.metadata.max.bytes": (_int(0, INT_MAX), 4096),
    "group.initial.rebalance.delay.ms": (_int(0, INT_MAX), 3000),
    "group.min.session.timeout.ms": (_int(0, INT_MAX), 6000),
    "group.max.session.timeout.ms": (_int(0, INT_MAX), 1800000),
    "group.max.size": (_int(1, INT_MAX), INT_MAX),
    "producer.id.expiration.ms": (_int(1, INT_MAX), 86400000),
    "producer.id.expiration.check.interval.ms": (_int(1, INT_MAX), 600000),
    "transactional.id.expiration.ms": (_int(1, INT_MAX), 604800000),
    "log.retention.check.interval.ms": (_int(1), 300000),
    "log.flush.scheduler.interval.ms": (_int(1), LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": (_int(0, INT_MAX), 60000),
    "log.cleaner.enable": (_bool, True),
    "log.cleaner.backoff.ms": (_int(0), 15000),
    "log.cleaner.dedupe.buffer.size": (_int(1 << 16), 134217728),
    "log.retention.minutes": (_int(-1, INT_MAX), None),
    "log.retention.hours": (_int(-1, INT_MAX), 168),
    "cluster.id": (_string, None),
    "replica.fetch.max.bytes": (_int(0, INT_MAX), 1048576),
    "fetch.max.bytes": (_int(1024, INT_MAX), 57671680),
    "max.incremental.fetch.session.cache.slots": (_int(0, INT_MAX), 1000),  # KIP-227 sessions; 0: none
    # the replicated cluster (docs/cluster.md): on only with zookeeper.connect
    "zookeeper.connect": (_string, None),
    "zookeeper.session.timeout.ms": (_int(1, INT_MAX), 18000),
    "zookeeper.connection.timeout.ms": (_int(1, INT_MAX), None),  # default: the session timeout
    "broker.rack": (_string, None),
    # KIP-392 fetch from the closest replica: the leader tells a consumer with a client.rack to
    # read from a replica in its rack (docs/cluster.md)
    "replica.selector.class": (_replica_selector, None),
    "replica.lag.time.max.ms": (_int(1), 30000),
    "replica.fetch.min.bytes": (_int(1, INT_MAX), 1),
    "replica.fetch.wait.max.ms": (_int(0, INT_MAX), 500),
    "replica.fetch.backoff.ms": (_int(0, INT_MAX), 1000),
    "replica.fetch.response.max.bytes": (_int(0, INT_MAX), 10485760),
    "replica.socket.timeout.ms": (_int(1, INT_MAX), 30000),
    "replica.high.watermark.checkpoint.interval.ms": (_int(1), 5000),
    "num.replica.fetchers": (_int(1, INT_MAX), 1),
    "controlled.shutdown.enable": (_bool, True),
    "controlled.shutdown.max.retries": (_int(0, INT_MAX), 3),
    "controlled.shutdown.retry.backoff.ms": (_int(0), 5000),
    "controller.socket.timeout.ms": (_int(1, INT_MAX), 30000),
    "auto.leader.rebalance.enable": (_bool, True),
    "leader.imbalance.check.interval.seconds": (_int(1), 300),
    "leader.imbalance.per.broker.percentage": (_int(0, 100), 10),
    "transaction.state.log.replication.factor": (_int(1, 32767), 3),
    "transaction.state.log.min.isr": (_int(1, INT_MAX), 2),
    # the transaction coordinator (docs/transactions.md §8)
    "transaction.state.log.num.partitions": (_int(1, INT_MAX), 50),
    "transaction.state.log.segment.bytes": (_int(1, INT_MAX), 104857600),
    "transaction.state.log.load.buffer.size": (_int(1, INT_MAX), 5242880),
    "transaction.max.timeout.ms": (_int(1, INT_MAX), 900000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (_int(1, INT_MAX), 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (_int(1, INT_MAX), 3600000),
    "transaction.partition.verification.enable": (_bool, True),
    # ACLs (docs/security.md): which authorizer, the principals it always allows, and what it
    # decides for a resource without any ACL
    "authorizer.class.name": (_authorizer_class, ""),
    "super.users": (_string, ""),
    "allow.everyone.if.no.acl.found": (_bool, False),
    # kafkacore's own (Kafka exports JMX): Prometheus' /metrics and /healthz over HTTP on this port
    # of the listener's host (broker/metrics_http.py); absent: off; 0: a free port, printed at start
    "metrics.port": (_int(0, 65535), None),
}

# Kafka properties that have no effect on a single-node, plaintext broker. Accepted (a real
# server.properties has them) and reported at start-up.
IGNORED = frozenset({
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "controller.listener.names", "inter.broker.listener.name", "listener.security.protocol.map",
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir", "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr", "metadata.log.dir", "queued.max.requests",
    # Kafka's JMX metrics settings: kafkacore's metrics are metrics.port's Prometheus endpoint
    "metric.reporters", "metrics.num.samples", "metrics.sample.window.ms", "metrics.recording.level",
})


class BrokerConfig:
    """Typed broker settings. ``props`` keeps every key as given; ``log_config`` is the
    topic defaults LogConfig."""

    def __init__(self, props: dict | None = None):
        props = {str(k).strip(): v for k, v in (props or {}).items()}
        self.props = props
        self.values = {}
        self.ignored_keys = sorted(k for k in props if k in IGNORED)
        for key, (parse, default) in BROKER_CONFIGS.items():
            self.values[key] = parse(key, props[key]) if key in props else default
        topic_keys = set(BROKER_DEFAULTS) | {"log.retention.ms", "log.retention.minutes", "log.retention.hours"}
        unknown = [k for k in props if k not in BROKER_CONFIGS and k not in IGNORED and k not in topic_keys]
        if unknown:
            k = sorted(unknown)[0]
            raise InvalidConfigurationError(f"{k}={props[k]!r}: unknown broker config")
        for k in sorted(set(props) & set(BROKER_DEFAULTS)):
            try:
                LogConfig({BROKER_DEFAULTS[k]: props[k]})
            except InvalidConfigurationError as e:  # name the broker property the user wrote
                raise InvalidConfigurationError(f"{k}={props[k]!r}: {e.message.split(': ', 1)[-1]}") from None
        self.log_config = LogConfig.from_broker({k: v for k, v in props.items() if k in topic_keys})
        v = self.values
        self.node_id = v["broker.id"] if v["broker.id"] >= 0 else v["node.id"]
        listener = next((entry for entry in v["listeners"] if entry[0] == "PLAINTEXT"), v["listeners"][0])
        self.host, self.port = listener[1] or "0.0.0.0", listener[2]
        advertised = v["advertised.listeners"] or [listener]
        adv = advertised[0]
        self.advertised_host = adv[1] or self.host
        if self.advertised_host in ("0.0.0.0", "::"):
            self.advertised_host = "127.0.0.1"
        self.advertised_port = adv[2]
        self._advertised_explicit = v["advertised.listeners"] is not None
        data_dir = v["log.dirs"] or v["log.dir"]
        if data_dir and "," in data_dir:
            raise InvalidConfigurationError(f"log.dirs={data_dir!r}: one data directory only (JBOD is not supported)")
        self.data_dir = data_dir or default_data_dir()
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise InvalidConfigurationError(
                f"group.min.session.timeout.ms={v['group.min.session.timeout.ms']!r}: above "
                f"group.max.session.timeout.ms={v['group.max.session.timeout.ms']}")

    def __getitem__(self, key):
        return self.values[key]

    def set_listener(self, host=None, port=None):
        """--host/--port: the listener (and the advertised address unless set explicitly)."""
        if host is not None:
            self.host = host
        if port is not None:
            self.port = port
        if not self._advertised_explicit:
            self.advertised_host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
            self.advertised_port = self.port

    @staticmethod
    def read_properties(path) -> dict:
        """A Java .properties file (``key=value`` or ``key: value``, # and ! comments,
        backslash line continuations)."""
        out = {}
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise InvalidConfigurationError(f"--config {path}: {e.strerror}") from None
        pending = ""
        for raw in text.splitlines():
            line = pending + raw.strip()
            pending = ""
            if not line or line[0] in "#!":
                continue
            if line.endswith("\\"):
                pending = line[:-1]
                continue
            for i, ch in enumerate(line):
                if ch in "=:":
                    out[line[:i].strip()] = line[i + 1:].strip()
                    break
            else:
                out[line] = ""
        return out


def default_data_dir() -> str:
    """The embedded default: $KAFKACORE_DATA_DIR, else ~/.local/share/kafkacore/data
    ($XDG_DATA_HOME respected)."""
    env = os.environ.get("KAFKACORE_DATA_DIR")
    if env:
        return env
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "kafkacore", "data")
