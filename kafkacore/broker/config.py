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

import dataclasses
import os
from pathlib import Path

from ..cluster.zk_data import SECURITY_PROTOCOLS, EndPoint
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


def _protocol_map(key, value):
    """``NAME:PROTOCOL,...`` (Kafka's listener.security.protocol.map), names upper-cased as
    Kafka's ListenerName.normalised does."""
    out = {}
    for item in filter(None, (s.strip() for s in str(value).split(","))):
        name, sep, protocol = (part.strip() for part in item.partition(":"))
        if not sep or not name:
            raise InvalidConfigurationError(f"{key}={value!r}: expected LISTENER_NAME:SECURITY_PROTOCOL pairs")
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise InvalidConfigurationError(f"{key}={value!r}: unknown security protocol {protocol!r} "
                                            f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        if name.upper() in out:
            raise InvalidConfigurationError(f"{key}={value!r}: listener {name.upper()} is mapped twice")
        out[name.upper()] = protocol.upper()
    return out


def _security_protocol(key, value):
    text = str(value).strip().upper()
    if text not in SECURITY_PROTOCOLS:
        raise InvalidConfigurationError(f"{key}={value!r}: one of {', '.join(SECURITY_PROTOCOLS)}")
    return text


def _choice(*options):
    def parse(key, value):
        text = str(value).strip().lower()
        if text not in options:
            raise InvalidConfigurationError(f"{key}={value!r}: one of {', '.join(options)}")
        return text
    return parse


def _list(key, value):
    return [s.strip() for s in str(value).split(",") if s.strip()]


def _assignors(key, value):
    """group.consumer.assignors: Kafka's class names or the assignors' names, the first the
    default; kept as the names (``uniform``, ``range``)."""
    from ..coordinator.assignors import assignor_name

    names = []
    for item in _list(key, value):
        name = assignor_name(item)
        if name is None:
            raise InvalidConfigurationError(f"{key}={value!r}: {item!r} is not an assignor here (uniform, range "
                                            "or Kafka's class names of them)")
        names.append(name)
    if not names:
        raise InvalidConfigurationError(f"{key}={value!r}: at least one assignor is needed")
    return names


def _rebalance_protocols(key, value):
    """group.coordinator.rebalance.protocols: Kafka requires ``classic``; ``consumer`` (KIP-848)
    and ``share`` (KIP-932, while ``group.share.enable`` too) are served here, ``streams`` not yet."""
    names = [n.lower() for n in _list(key, value)]
    if "classic" not in names:
        raise InvalidConfigurationError(f"{key}={value!r}: must include classic")
    unknown = sorted(set(names) - {"classic", "consumer", "share"})
    if unknown:
        raise InvalidConfigurationError(f"{key}={value!r}: {', '.join(unknown)} not served (classic, consumer "
                                        "and share are)")
    return names


def served_group_protocols(config):
    """The group protocols whose APIs are advertised and served: group.coordinator.rebalance.
    protocols, less ``share`` while group.share.enable is off (Kafka 4.0's pair of switches)."""
    names = config["group.coordinator.rebalance.protocols"]
    if "share" in names and not config["group.share.enable"]:
        return [n for n in names if n != "share"]
    return names


def _share_assignors(key, value):
    """group.share.assignors: ``simple`` or Kafka's class name of it (its only share assignor)."""
    from ..coordinator.share_assignor import assignor_name

    names = []
    for item in _list(key, value):
        name = assignor_name(item)
        if name is None:
            raise InvalidConfigurationError(f"{key}={value!r}: {item!r} is not a share assignor here (simple or "
                                            "Kafka's class name of it)")
        names.append(name)
    if not names:
        raise InvalidConfigurationError(f"{key}={value!r}: at least one assignor is needed")
    return names


def _store_type(key, value):
    text = str(value).strip().upper()
    if text == "JKS":
        raise InvalidConfigurationError(f"{key}={value!r}: Java KeyStore files are not supported; "
                                        "use PEM or PKCS12 (keytool -importkeystore -deststoretype PKCS12 converts one)")
    if text not in ("PEM", "PKCS12"):
        raise InvalidConfigurationError(f"{key}={value!r}: one of PEM, PKCS12")
    return text


def _ip_overrides(key, value):
    """``host:count,host:count`` (Kafka's max.connections.per.ip.overrides) as {address: count};
    a host name is resolved now, as Kafka resolves it when the broker starts."""
    import ipaddress
    import socket

    out = {}
    for item in filter(None, (s.strip() for s in str(value).split(","))):
        host, sep, count = (part.strip() for part in item.rpartition(":"))  # rpartition: IPv6 hosts
        if not sep or not host:
            raise InvalidConfigurationError(f"{key}={value!r}: expected host:count pairs, got {item!r}")
        count = _int(0, INT_MAX)(f"{key} ({host})", count)
        host = host.strip("[]")
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            try:
                address = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
            except OSError as e:
                raise InvalidConfigurationError(f"{key}={value!r}: cannot resolve host {host!r} "
                                                f"({e.strerror or e})") from None
        out[address] = count
    return out


def _mapping_rules(key, value):
    from .security import parse_mapping_rules
    parse_mapping_rules(value, key)  # checked here; the TLS set-up compiles them again
    return str(value)


# name -> (parser, default). Kafka's defaults, from its 4.x documentation, except where noted.
BROKER_CONFIGS = {
    "node.id": (_int(0, INT_MAX), 1),
    "broker.id": (_int(-1, INT_MAX), -1),  # the ZooKeeper-era name of node.id; wins when set
    # NAME://host:port, comma-separated; the names' protocols come from the map below
    "listeners": (_string, "PLAINTEXT://127.0.0.1:9092"),  # Kafka binds all interfaces; we stay local
    "advertised.listeners": (_string, None),  # default: the listeners (a wildcard host as 127.0.0.1)
    "listener.security.protocol.map": (_protocol_map, _protocol_map(
        "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")),
    # the listener brokers talk to each other on: named, or by its protocol (not both, as in Kafka)
    "inter.broker.listener.name": (_string, None),
    "security.inter.broker.protocol": (_security_protocol, "PLAINTEXT"),
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
    # KIP-848 consumer groups (Kafka 4's GroupCoordinatorConfig names and defaults)
    "group.consumer.session.timeout.ms": (_int(1, INT_MAX), 45000),
    "group.consumer.min.session.timeout.ms": (_int(1, INT_MAX), 45000),
    "group.consumer.max.session.timeout.ms": (_int(1, INT_MAX), 60000),
    "group.consumer.heartbeat.interval.ms": (_int(1, INT_MAX), 5000),
    "group.consumer.min.heartbeat.interval.ms": (_int(1, INT_MAX), 5000),
    "group.consumer.max.heartbeat.interval.ms": (_int(1, INT_MAX), 15000),
    "group.consumer.max.size": (_int(1, INT_MAX), INT_MAX),
    "group.consumer.assignors": (_assignors, ["uniform", "range"]),
    "group.coordinator.rebalance.protocols": (_rebalance_protocols, ["classic", "consumer", "share"]),
    # KIP-932 share groups' membership (Kafka 4.1's GroupCoordinatorConfig/ShareGroupConfig names
    # and defaults; group.share.enable is on here, as issue 29 asks)
    "group.share.enable": (_bool, True),
    # KIP-932 share partitions on their leader (Kafka 4.1's ShareGroupConfig names, defaults, ranges)
    "group.share.record.lock.duration.ms": (_int(1000, 3600000), 30000),
    "group.share.min.record.lock.duration.ms": (_int(1000, 30000), 15000),
    "group.share.max.record.lock.duration.ms": (_int(30000, 3600000), 60000),
    "group.share.delivery.count.limit": (_int(2, 10), 5),
    "group.share.partition.max.record.locks": (_int(100, 10000), 2000),
    "group.share.max.share.sessions": (_int(1, INT_MAX), 2000),
    # the share group members' bounds (Kafka's GroupCoordinatorConfig); the GROUP config resource's
    # share.session.timeout.ms / share.heartbeat.interval.ms are checked against them
    "group.share.session.timeout.ms": (_int(1, INT_MAX), 45000),
    "group.share.min.session.timeout.ms": (_int(1, INT_MAX), 45000),
    "group.share.max.session.timeout.ms": (_int(1, INT_MAX), 60000),
    "group.share.heartbeat.interval.ms": (_int(1, INT_MAX), 5000),
    "group.share.min.heartbeat.interval.ms": (_int(1, INT_MAX), 5000),
    "group.share.max.heartbeat.interval.ms": (_int(1, INT_MAX), 15000),
    "group.share.max.size": (_int(1, 1000), 200),
    "group.share.assignors": (_share_assignors, ["simple"]),
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
    # the share coordinator and __share_group_state (KIP-932, Kafka's ShareCoordinatorConfig)
    "share.coordinator.state.topic.num.partitions": (_int(1, INT_MAX), 50),
    "share.coordinator.state.topic.replication.factor": (_int(1, 32767), 3),
    "share.coordinator.state.topic.min.isr": (_int(1, INT_MAX), 2),
    "share.coordinator.state.topic.segment.bytes": (_int(1, INT_MAX), 104857600),
    "share.coordinator.snapshot.update.records.per.snapshot": (_int(0, 500), 500),
    "share.coordinator.write.timeout.ms": (_int(1, INT_MAX), 5000),
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

# TLS listeners (docs/security.md), Kafka's names and defaults; each may also be given for one
# listener as listener.name.<lower-case listener name>.<name>, which wins for that listener
SSL_CONFIGS = {
    "ssl.keystore.type": (_store_type, "JKS"),  # Kafka's default, refused with a hint: set PEM or PKCS12
    "ssl.keystore.location": (_string, None),
    "ssl.keystore.password": (_string, None),
    "ssl.key.password": (_string, None),
    "ssl.keystore.certificate.chain": (_string, None),  # KIP-651: PEM given inline
    "ssl.keystore.key": (_string, None),
    "ssl.truststore.type": (_store_type, "JKS"),
    "ssl.truststore.location": (_string, None),
    "ssl.truststore.password": (_string, None),
    "ssl.truststore.certificates": (_string, None),
    "ssl.client.auth": (_choice("none", "requested", "required"), "none"),
    "ssl.enabled.protocols": (_list, ["TLSv1.2", "TLSv1.3"]),
    "ssl.protocol": (_string, "TLSv1.3"),
    "ssl.cipher.suites": (_list, []),
    "ssl.endpoint.identification.algorithm": (_string, "https"),  # a client's check: accepted, unused here
    "ssl.principal.mapping.rules": (_mapping_rules, "DEFAULT"),
}
BROKER_CONFIGS.update(SSL_CONFIGS)
# shown as Kafka shows a PASSWORD config (DescribeConfigs: no value, sensitive) and never logged
PASSWORD_CONFIGS = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password",
                              "ssl.keystore.key", "password.encoder.secret", "password.encoder.old.secret"})
# SASL listeners (docs/security.md, broker/sasl_authenticator.py), Kafka's names and defaults
SASL_CONFIGS = {
    # Kafka's default is GSSAPI (Kerberos), which kafkacore does not offer: a SASL listener
    # must name its mechanisms, and the error says so
    "sasl.enabled.mechanisms": (_list, ["GSSAPI"]),
    "sasl.mechanism.inter.broker.protocol": (_string, "GSSAPI"),
    "connections.max.reauth.ms": (_int(0), 0),  # KIP-368; 0: sessions never end
    "sasl.server.max.receive.size": (_int(1, INT_MAX), 524288),  # KIP-541: the largest frame before login
    # OAUTHBEARER with signed tokens (KIP-768's broker validator, security/oauth_jwks.py)
    "sasl.oauthbearer.jwks.endpoint.url": (_string, None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (_int(1), 3600000),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (_int(0), 100),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (_int(0), 10000),
    "sasl.oauthbearer.expected.audience": (_list, []),
    "sasl.oauthbearer.expected.issuer": (_string, None),
    "sasl.oauthbearer.scope.claim.name": (_string, "scope"),
    "sasl.oauthbearer.sub.claim.name": (_string, "sub"),
    "sasl.oauthbearer.clock.skew.seconds": (_int(0), 30),
}
BROKER_CONFIGS.update(SASL_CONFIGS)
# connection limits (broker/connection_quotas.py, docs/security.md "Connection limits"): Kafka's
# names and defaults (Integer.MAX_VALUE: no limit); max.connections and
# max.connection.creation.rate may also be given per listener as listener.name.<l>.<name>
LISTENER_QUOTA_CONFIGS = {
    "max.connections": (_int(0, INT_MAX), INT_MAX),
    "max.connection.creation.rate": (_int(0, INT_MAX), INT_MAX),  # KIP-612: new connections per second
}
BROKER_CONFIGS.update(LISTENER_QUOTA_CONFIGS)
BROKER_CONFIGS.update({
    "max.connections.per.ip": (_int(0, INT_MAX), INT_MAX),
    "max.connections.per.ip.overrides": (_ip_overrides, {}),
    # Kafka's delayed close after a failed login: a client retrying a wrong password at once is slowed
    "connection.failed.authentication.delay.ms": (_int(0, INT_MAX), 100),
})
# how dynamic password configs are stored (security/password_encoder.py): Kafka's names and
# defaults; without the secret, password configs cannot be set dynamically
BROKER_CONFIGS.update({
    "password.encoder.secret": (_string, None),
    "password.encoder.old.secret": (_string, None),  # decodes what the previous secret encoded
    "password.encoder.keyfactory.algorithm": (_string, None),  # none: PBKDF2WithHmacSHA512
    "password.encoder.cipher.algorithm": (_string, "AES/CBC/PKCS5Padding"),
    "password.encoder.key.length": (_int(8, INT_MAX), 128),
    "password.encoder.iterations": (_int(1024, INT_MAX), 4096),
})
# client quotas' measurement (security/client_quotas.py): Kafka's names and defaults
BROKER_CONFIGS.update({
    "quota.window.num": (_int(1, INT_MAX), 11),
    "quota.window.size.seconds": (_int(1, INT_MAX), 1),
})
LISTENER_PREFIX = "listener.name."
# other settings a listener may override (listener.name.<l>.<setting>), with their parsers
LISTENER_SETTINGS = {"sasl.enabled.mechanisms": _list,
                     **{key: parse for key, (parse, _default) in LISTENER_QUOTA_CONFIGS.items()}}
JAAS_SUFFIX = ".sasl.jaas.config"  # listener.name.<listener>.<mechanism>.sasl.jaas.config
# listener.name.<listener>.<mechanism>.sasl.server.callback.handler.class: how a mechanism checks
# a login (OAUTHBEARER: Kafka's OAuthBearerValidatorCallbackHandler checks signed tokens)
CALLBACK_HANDLER_SUFFIX = ".sasl.server.callback.handler.class"

# Kafka properties that have no effect on a single-node, plaintext broker. Accepted (a real
# server.properties has them) and reported at start-up.
IGNORED = frozenset({
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "controller.listener.names",
    # Java's TLS engine settings: Python's ssl module has no such knobs
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
    "ssl.provider", "ssl.engine.factory.class",
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir", "metadata.log.dir", "queued.max.requests",
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
        # listener.name.<name>.ssl.* and .sasl.enabled.mechanisms: {LISTENER NAME: {key: value}};
        # listener.name.<name>.<mechanism>.sasl.jaas.config: {LISTENER NAME: {MECHANISM: text}}
        self.listener_overrides = {}
        self.listener_jaas = {}
        self.listener_callback_handlers = {}  # {LISTENER NAME: {MECHANISM: class name}}
        for key in props:
            if key.startswith(LISTENER_PREFIX):
                name, _dot, setting = key[len(LISTENER_PREFIX):].partition(".")
                if (setting in SSL_CONFIGS or setting in LISTENER_SETTINGS) and name:
                    parse = SSL_CONFIGS[setting][0] if setting in SSL_CONFIGS else LISTENER_SETTINGS[setting]
                    self.listener_overrides.setdefault(name.upper(), {})[setting] = parse(key, props[key])
                elif name and setting.endswith(JAAS_SUFFIX) and setting.count(".") == JAAS_SUFFIX.count("."):
                    mechanism = setting[:-len(JAAS_SUFFIX)].upper()
                    self.listener_jaas.setdefault(name.upper(), {})[mechanism] = str(props[key])
                elif (name and setting.endswith(CALLBACK_HANDLER_SUFFIX)
                      and setting.count(".") == CALLBACK_HANDLER_SUFFIX.count(".")):
                    mechanism = setting[:-len(CALLBACK_HANDLER_SUFFIX)].upper()
                    self.listener_callback_handlers.setdefault(name.upper(), {})[mechanism] = str(props[key]).strip()
        topic_keys = set(BROKER_DEFAULTS) | {"log.retention.ms", "log.retention.minutes", "log.retention.hours"}
        unknown = [k for k in props if k not in BROKER_CONFIGS and k not in IGNORED and k not in topic_keys
                   and not self._is_listener_override(k)]
        if unknown:
            k = sorted(unknown)[0]
            raise InvalidConfigurationError(f"{k}={shown(k, props[k])}: unknown broker config")
        for k in sorted(set(props) & set(BROKER_DEFAULTS)):
            try:
                LogConfig({BROKER_DEFAULTS[k]: props[k]})
            except InvalidConfigurationError as e:  # name the broker property the user wrote
                raise InvalidConfigurationError(f"{k}={props[k]!r}: {e.message.split(': ', 1)[-1]}") from None
        self.log_config = LogConfig.from_broker({k: v for k, v in props.items() if k in topic_keys})
        v = self.values
        self.node_id = v["broker.id"] if v["broker.id"] >= 0 else v["node.id"]
        self._read_listeners()
        data_dir = v["log.dirs"] or v["log.dir"]
        if data_dir and "," in data_dir:
            raise InvalidConfigurationError(f"log.dirs={data_dir!r}: one data directory only (JBOD is not supported)")
        self.data_dir = data_dir or default_data_dir()
        self._check_connection_quotas()
        self.password_encoder()  # its algorithms checked now, in one line
        self._check_consumer_group_bounds(v)
        lo, lock, hi = (v[f"group.share.{k}record.lock.duration.ms"] for k in ("min.", "", "max."))
        if not lo <= lock <= hi:
            raise InvalidConfigurationError(
                f"group.share.record.lock.duration.ms={lock}: must be within group.share.min.record.lock.duration.ms="
                f"{lo} and group.share.max.record.lock.duration.ms={hi}")
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise InvalidConfigurationError(
                f"group.min.session.timeout.ms={v['group.min.session.timeout.ms']!r}: above "
                f"group.max.session.timeout.ms={v['group.max.session.timeout.ms']}")

    @staticmethod
    def _check_consumer_group_bounds(v):
        """Kafka's GroupCoordinatorConfig checks, for consumer and share groups: each default
        within its min and max, the heartbeat interval below the session timeout."""
        for kind in ("consumer", "share"):
            p = f"group.{kind}."
            for what in ("session.timeout.ms", "heartbeat.interval.ms"):
                lo, value, hi = (v[p + k] for k in (f"min.{what}", what, f"max.{what}"))
                if not lo <= value <= hi:
                    raise InvalidConfigurationError(
                        f"{p}{what}={value}: must be within {p}min.{what}={lo} and {p}max.{what}={hi}")
            if v[p + "heartbeat.interval.ms"] >= v[p + "session.timeout.ms"]:
                raise InvalidConfigurationError(
                    f"{p}heartbeat.interval.ms={v[p + 'heartbeat.interval.ms']}: must be less than "
                    f"{p}session.timeout.ms={v[p + 'session.timeout.ms']}")

    def __getitem__(self, key):
        return self.values[key]

    def _check_connection_quotas(self):
        v = self.values
        delay, idle = v["connection.failed.authentication.delay.ms"], v["connections.max.idle.ms"]
        # Kafka's rule, so a delayed close is not overtaken by the idle expiry; with -1 (no idle
        # expiry, which Kafka's check would refuse) nothing can overtake it
        if idle >= 0 and delay >= idle:
            raise InvalidConfigurationError(
                f"connection.failed.authentication.delay.ms={delay}: must be less than connections.max.idle.ms={idle}")
        if v["max.connections.per.ip"] == 0 and not v["max.connections.per.ip.overrides"]:
            raise InvalidConfigurationError(
                "max.connections.per.ip=0: allowed only with max.connections.per.ip.overrides (else no address "
                "could connect)")
        names = {ep.listener_name for ep in self.listeners}
        for name, overrides in self.listener_overrides.items():
            quota_keys = sorted(k for k in overrides if k in LISTENER_QUOTA_CONFIGS)
            if quota_keys and name not in names:
                raise InvalidConfigurationError(
                    f"{LISTENER_PREFIX}{name.lower()}.{quota_keys[0]}: there is no listener {name} "
                    f"(listeners: {', '.join(sorted(names))})")

    def password_encoder(self, secret_key="password.encoder.secret"):
        """The PasswordEncoder of ``password.encoder.secret`` (or of the old secret), None
        without one."""
        from ..security.password_encoder import PasswordEncoder
        v = self.values
        if not v[secret_key]:
            return None
        return PasswordEncoder(v[secret_key], v["password.encoder.keyfactory.algorithm"],
                               v["password.encoder.cipher.algorithm"], v["password.encoder.key.length"],
                               v["password.encoder.iterations"])

    def listener_quota(self, listener_name, key) -> int:
        """max.connections or max.connection.creation.rate of one listener:
        listener.name.<l>.<key>, else the broker-wide value (Kafka's prefix override)."""
        return self.listener_overrides.get(listener_name, {}).get(key, self.values[key])

    def _is_listener_override(self, key):
        if not key.startswith(LISTENER_PREFIX):
            return False
        name, _dot, setting = key[len(LISTENER_PREFIX):].partition(".")
        return bool(name) and (setting in SSL_CONFIGS or setting in LISTENER_SETTINGS
                               or any(setting.endswith(suffix) and setting.count(".") == suffix.count(".")
                                      for suffix in (JAAS_SUFFIX, CALLBACK_HANDLER_SUFFIX)))

    # -- listeners (Kafka's KafkaConfig.listeners/advertisedListeners and their checks) --------
    def _endpoints(self, key) -> list:
        text = self.values[key]
        pmap = self.values["listener.security.protocol.map"]
        out = []
        for item in filter(None, (part.strip() for part in text.split(","))):
            try:
                ep = EndPoint.parse(item, pmap)
            except ValueError as e:
                raise InvalidConfigurationError(f"{key}={text!r}: {e}") from None
            if not 0 <= ep.port <= 65535:
                raise InvalidConfigurationError(f"{key}={text!r}: port {ep.port} of {ep.listener_name} is outside 0-65535")
            out.append(ep)
        if not out:
            raise InvalidConfigurationError(f"{key}={text!r}: no listener")
        names = [ep.listener_name for ep in out]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise InvalidConfigurationError(f"{key}={text!r}: each listener must have a different name ({dup} twice)")
        ports = [ep.port for ep in out if ep.port]
        dup_port = next((p for p in ports if ports.count(p) > 1), None)
        if dup_port and key == "listeners":
            raise InvalidConfigurationError(f"{key}={text!r}: each listener must have a different port "
                                            f"({dup_port} twice)")
        return out

    def _read_listeners(self):
        v = self.values
        self.listeners = self._endpoints("listeners")
        self._advertised_explicit = v["advertised.listeners"] is not None
        if self._advertised_explicit:
            bind_hosts = {ep.listener_name: ep.host for ep in self.listeners}
            self._advertised = [ep if ep.host else dataclasses.replace(ep, host=_reachable(bind_hosts.get(ep.listener_name)))
                                for ep in self._endpoints("advertised.listeners")]
            names = set(bind_hosts)
            extra = [ep.listener_name for ep in self._advertised if ep.listener_name not in names]
            if extra:
                raise InvalidConfigurationError(
                    f"advertised.listeners={v['advertised.listeners']!r}: listener {extra[0]} is not in "
                    f"listeners={v['listeners']!r} (advertised names must be among the listeners')")
        else:
            self._advertised = None
        if "inter.broker.listener.name" in self.props and "security.inter.broker.protocol" in self.props:
            raise InvalidConfigurationError("inter.broker.listener.name and security.inter.broker.protocol are both "
                                            "set: only one of them may be")
        name = v["inter.broker.listener.name"]
        advertised = self.advertised_listeners
        if name is not None:
            name = name.strip().upper()
            if all(ep.listener_name != name for ep in advertised):
                raise InvalidConfigurationError(
                    f"inter.broker.listener.name={v['inter.broker.listener.name']!r}: not a listener of "
                    f"advertised.listeners (one of {', '.join(ep.listener_name for ep in advertised)})")
        else:
            protocol = v["security.inter.broker.protocol"]
            # Kafka names the listener after the protocol; failing that, the first of that protocol
            same = [ep.listener_name for ep in advertised if ep.security_protocol == protocol]
            name = protocol if protocol in same else (same[0] if same else None)
        self.inter_broker_listener_name = name  # None: no listener of that protocol (a single node needs none)

    @property
    def advertised_listeners(self) -> list:
        """The endpoints registered for clients and brokers: advertised.listeners, else the
        listeners with a wildcard or missing host as 127.0.0.1."""
        if self._advertised is not None:
            return list(self._advertised)
        return [dataclasses.replace(ep, host=_reachable(ep.host)) for ep in self.listeners]

    def take_bound_port(self, name, port) -> EndPoint:
        """Listener ``name`` was given port 0 and bound ``port``: it and its advertised endpoint
        (when that says port 0 too) take it, as Kafka's broker registers the bound port."""
        self.listeners = [dataclasses.replace(ep, port=port) if ep.listener_name == name and ep.port == 0 else ep
                          for ep in self.listeners]
        if self._advertised is not None:
            self._advertised = [dataclasses.replace(ep, port=port) if ep.listener_name == name and ep.port == 0
                                else ep for ep in self._advertised]
        return self.listener(name)

    def listener(self, name) -> EndPoint | None:
        return next((ep for ep in self.listeners if ep.listener_name == name), None)

    def check_inter_broker(self) -> None:
        """A broker of a cluster needs a listener for brokers: InvalidConfigurationError in one
        line when none has the inter-broker protocol (how it dials the others on it:
        broker/inter_broker.py)."""
        if self.inter_broker_listener_name is None:
            raise InvalidConfigurationError(
                f"security.inter.broker.protocol={self['security.inter.broker.protocol']!r}: no listener of "
                f"advertised.listeners has that protocol; set inter.broker.listener.name")

    @property
    def primary_listener_name(self) -> str:
        """The listener --host/--port and the single-address views below speak of: the
        inter-broker one, else the first."""
        names = [ep.listener_name for ep in self.listeners]
        return self.inter_broker_listener_name if self.inter_broker_listener_name in names else names[0]

    def _replace(self, endpoints, **changes):
        name = self.primary_listener_name
        return [dataclasses.replace(ep, **changes) if ep.listener_name == name else ep for ep in endpoints]

    @property
    def host(self):
        return self.listener(self.primary_listener_name).host or "0.0.0.0"

    @host.setter
    def host(self, host):
        self.listeners = self._replace(self.listeners, host=host)

    @property
    def port(self):
        return self.listener(self.primary_listener_name).port

    @port.setter
    def port(self, port):
        self.listeners = self._replace(self.listeners, port=int(port))

    def _primary_advertised(self):
        advertised = self.advertised_listeners
        return next((ep for ep in advertised if ep.listener_name == self.primary_listener_name), advertised[0])

    @property
    def advertised_host(self):
        return self._primary_advertised().host

    @advertised_host.setter
    def advertised_host(self, host):
        self._advertised = self._replace(self.advertised_listeners, host=host)

    @property
    def advertised_port(self):
        return self._primary_advertised().port

    @advertised_port.setter
    def advertised_port(self, port):
        self._advertised = self._replace(self.advertised_listeners, port=int(port))

    def set_listener(self, host=None, port=None):
        """--host/--port: the primary listener's (and its advertised address unless
        advertised.listeners is set)."""
        if host is not None:
            self.host = host
        if port is not None:
            self.port = port

    def sasl_settings(self, listener_name) -> tuple[list, dict]:
        """(enabled mechanisms, {mechanism: sasl.jaas.config text}) of one SASL listener."""
        mechanisms = self.listener_overrides.get(listener_name, {}).get("sasl.enabled.mechanisms",
                                                                        self.values["sasl.enabled.mechanisms"])
        return [m.upper() for m in mechanisms], dict(self.listener_jaas.get(listener_name, {}))

    def ssl_settings(self, listener_name) -> dict:
        """The ssl.* settings of one listener: listener.name.<name>.ssl.* over ssl.*."""
        out = {key: self.values[key] for key in SSL_CONFIGS}
        out.update(self.listener_overrides.get(listener_name, {}))
        return out

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


def _reachable(host):
    """What a client can dial for a bind address: a wildcard or missing host as 127.0.0.1."""
    return "127.0.0.1" if host in (None, "", "0.0.0.0", "::") else host


def is_password(key) -> bool:
    """Whether ``key``, bare or as listener.name.<l>.<key>, is a PASSWORD config in Kafka's
    sense: never shown, stored encoded when set dynamically."""
    if key.startswith(LISTENER_PREFIX):
        key = key[len(LISTENER_PREFIX):].partition(".")[2]
    return key in PASSWORD_CONFIGS or key.endswith("sasl.jaas.config")


def shown(key, value) -> str:
    """A value as an error message may show it: passwords and keys hidden (Kafka's [hidden]),
    also under a misspelt name that looks like one."""
    lowered = key.lower()
    if (key in PASSWORD_CONFIGS or lowered.startswith(("ssl.", "sasl.", LISTENER_PREFIX))
            or any(w in lowered for w in ("pas", "secret", "key"))):
        return "[hidden]"
    return repr(value)


def default_data_dir() -> str:
    """The embedded default: $KAFKACORE_DATA_DIR, else ~/.local/share/kafkacore/data
    ($XDG_DATA_HOME respected)."""
    env = os.environ.get("KAFKACORE_DATA_DIR")
    if env:
        return env
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "kafkacore", "data")
