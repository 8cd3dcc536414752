"""The znodes Kafka keeps in ZooKeeper: their paths and the exact JSON Kafka writes into them.

Names, paths, field names, versions and value types are Kafka's (core/src/main/scala/kafka/zk/
ZkData.scala at 3.6, the last ZooKeeper-mode line), so ZooKeeper-era tools (kafka-topics
--zookeeper, zkCli, Burrow, Kafka brokers' own decoders) read what kafkacore writes. Kafka
encodes with Jackson: compact JSON, UTF-8, no spaces; key order is that of a hash map, so
readers never depend on it. Every ``decode`` raises ``ZkDataError`` (one line, naming the znode)
on data Kafka itself could not parse.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..clock import wall_ms
from ..protocol.kafka_uuid import uuid_from_text, uuid_to_text

__all__ = [
    "ZkDataError", "ZkVersion", "ZkData",
    "validate_topic_name", "SECURITY_PROTOCOLS", "EndPoint", "BrokerInfo", "ReplicaAssignment", "TopicAssignment",
    "LeaderIsrAndControllerEpoch", "ControllerRegistration", "ProducerIdsBlock", "FeatureZNodeData",
    "ControllerZNode", "ControllerEpochZNode", "BrokersZNode", "BrokerIdsZNode", "BrokerIdZNode",
    "TopicsZNode", "TopicZNode", "TopicPartitionsZNode", "TopicPartitionZNode",
    "TopicPartitionStateZNode", "ConfigZNode", "ConfigType", "ConfigEntityTypeZNode",
    "ConfigEntityZNode", "ConfigEntityChangeNotificationZNode",
    "ConfigEntityChangeNotificationSequenceZNode", "IsrChangeNotificationZNode",
    "IsrChangeNotificationSequenceZNode", "LogDirEventNotificationZNode", "AdminZNode",
    "DeleteTopicsZNode", "DeleteTopicsTopicZNode", "ReassignPartitionsZNode",
    "PreferredReplicaElectionZNode", "ConsumerPathZNode", "ClusterZNode", "ClusterIdZNode",
    "BrokerSequenceIdZNode", "ProducerIdBlockZNode", "FeatureZNode",
]


class ZkDataError(ValueError):
    """A znode holds data that is not what Kafka writes there."""


class ZkVersion:
    MATCH_ANY_VERSION = -1  # a conditional write with it matches any version (ZooKeeper's value)


def _dumps(obj) -> bytes:
    # Jackson's output: compact separators, non-ASCII written as UTF-8 rather than \u escapes
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _text(data) -> str:
    return bytes(data).decode("utf-8", "replace") if data is not None else "null"


def _loads(data, what: str):
    if data is None or len(data) == 0:
        raise ZkDataError(f"{what}: znode has no data")
    try:
        return json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ZkDataError(f"{what}: not JSON ({e}): {_text(data)[:200]}") from None


def _obj(data, what: str) -> dict:
    js = _loads(data, what)
    if not isinstance(js, dict):
        raise ZkDataError(f"{what}: expected a JSON object: {_text(data)[:200]}")
    return js


def _int(js: dict, key: str, what: str, data) -> int:
    # Jackson's to[Int] takes JSON numbers only (a bool or a string is an error)
    v = js.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ZkDataError(f"{what}: field {key!r} must be an integer, got {v!r}: {_text(data)[:200]}")
    return v


def _str(js: dict, key: str, what: str, data) -> str:
    v = js.get(key)
    if not isinstance(v, str):
        raise ZkDataError(f"{what}: field {key!r} must be a string, got {v!r}: {_text(data)[:200]}")
    return v


def _int_list(v, key: str, what: str, data) -> tuple:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise ZkDataError(f"{what}: field {key!r} must be a list of integers, got {v!r}: {_text(data)[:200]}")
    return tuple(v)


def _topic_id_text(topic_id) -> str | None:
    if topic_id is None:
        return None
    if isinstance(topic_id, (bytes, bytearray)):
        return uuid_to_text(bytes(topic_id))
    uuid_from_text(topic_id)  # validates
    return topic_id


_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(topic: str) -> None:
    """Kafka's Topic.validate. It matters here beyond Kafka's rules: a name with '/' would become
    nested znodes."""
    from ..errors import InvalidTopicError

    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(topic) > 249:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than 249 characters, topic name: {topic}")
    if not _LEGAL_TOPIC.match(topic):
        raise InvalidTopicError(f"Topic name \"{topic}\" is illegal, it contains a character other than "
                                "ASCII alphanumerics, '.', '_' and '-'")


# ---- /controller and /controller_epoch ----

@dataclass(frozen=True)
class ControllerRegistration:
    broker_id: int
    timestamp_ms: int | None = None
    kraft_controller_epoch: int | None = None  # absent before 3.4; -1 from a ZooKeeper-mode controller
    version: int = 2


class ControllerZNode:
    """Ephemeral; its owner is the controller. 3.4+ writes version 2 with kraftControllerEpoch
    (-1 for a ZooKeeper-mode controller); 2.x-3.3 wrote version 1 without it. Both decode."""

    path = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None, kraft_controller_epoch: int = -1) -> bytes:
        return _dumps({"version": 2, "brokerid": int(broker_id),
                       "timestamp": str(wall_ms() if timestamp_ms is None else int(timestamp_ms)),
                       "kraftControllerEpoch": int(kraft_controller_epoch)})

    @staticmethod
    def decode(data) -> ControllerRegistration:
        what = ControllerZNode.path
        js = _obj(data, what)
        ts = js.get("timestamp")
        try:
            ts = int(ts) if ts is not None else None
        except (TypeError, ValueError):
            raise ZkDataError(f"{what}: field 'timestamp' is not a number of ms: {_text(data)[:200]}") from None
        kraft = js.get("kraftControllerEpoch")
        if kraft is not None:
            kraft = _int(js, "kraftControllerEpoch", what, data)
        version = js.get("version", 1)
        return ControllerRegistration(_int(js, "brokerid", what, data), ts, kraft,
                                      version if isinstance(version, int) else 1)


class ControllerEpochZNode:
    """Persistent; the epoch as a bare decimal string (not JSON). Its zk version fences every
    write of a deposed controller (Kafka's CheckOp on it)."""

    path = "/controller_epoch"
    INITIAL_CONTROLLER_EPOCH = 0  # KafkaController.InitialControllerEpoch

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(int(epoch)).encode("ascii")

    @staticmethod
    def decode(data) -> int:
        try:
            return int(bytes(data).decode("ascii"))
        except (TypeError, ValueError, UnicodeDecodeError):
            raise ZkDataError(f"{ControllerEpochZNode.path}: not a decimal epoch: {_text(data)[:50]}") from None


# ---- /brokers ----

class BrokersZNode:
    path = "/brokers"


class BrokerIdsZNode:
    path = "/brokers/ids"


# Kafka's SecurityProtocol names; the index is its id (UpdateMetadata's security_protocol)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's EndPoint.uriParseExp: listener://host:port, host may be empty or a [bracketed] IPv6 address
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


@dataclass(frozen=True)
class EndPoint:
    listener_name: str
    host: str | None
    port: int
    security_protocol: str = "PLAINTEXT"

    def __post_init__(self):
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {self.security_protocol!r} for listener "
                             f"{self.listener_name} (one of {', '.join(SECURITY_PROTOCOLS)})")

    @property
    def connection_string(self) -> str:
        """Kafka's EndPoint.connectionString: ``LISTENER://host:port``, IPv6 in brackets, no host
        as ``LISTENER://:port``."""
        if self.host is None:
            hostport = f":{self.port}"
        elif ":" in self.host:
            hostport = f"[{self.host}]:{self.port}"
        else:
            hostport = f"{self.host}:{self.port}"
        return f"{self.listener_name}://{hostport}"

    @classmethod
    def parse(cls, connection_string: str, security_protocol_map: Mapping[str, str] | None = None) -> "EndPoint":
        """Kafka's EndPoint.createEndPoint. Without a map, listener names are protocol names."""
        m = _ENDPOINT.match(connection_string)
        if not m:
            raise ValueError(f"Unable to parse {connection_string} to a broker endpoint")
        listener = m.group(1).upper()  # ListenerName.normalised
        if security_protocol_map is None:
            if listener not in SECURITY_PROTOCOLS:
                raise ValueError(f"No security protocol defined for listener {listener}")
            protocol = listener
        else:
            protocol = security_protocol_map.get(listener)
            if protocol is None:
                raise ValueError(f"No security protocol defined for listener {listener}")
        return cls(listener, m.group(2) or None, int(m.group(3)), protocol)


@dataclass(frozen=True)
class BrokerInfo:
    """A broker's registration. ``features``: {name: (min_version, max_version)}; a ZooKeeper-mode
    Kafka broker registers none (BrokerFeatures.createEmpty in KafkaServer). ``epoch`` is not in
    the JSON: it is the znode's czxid (Kafka's broker epoch), filled in when read from ZooKeeper."""

    broker_id: int
    endpoints: tuple
    rack: str | None = None
    jmx_port: int = -1
    version: int = 5
    timestamp_ms: int | None = None
    features: Mapping[str, tuple] = field(default_factory=dict)
    epoch: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "endpoints", tuple(
            e if isinstance(e, EndPoint) else EndPoint.parse(e) for e in self.endpoints))

    def _plaintext(self) -> EndPoint | None:
        # Kafka's top-level host/port: the first PLAINTEXT endpoint, for pre-0.9 readers
        return next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)

    @property
    def host(self) -> str | None:
        e = self._plaintext()
        return e.host if e else None

    @property
    def port(self) -> int:
        e = self._plaintext()
        return e.port if e else -1

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name.upper()), None)


class BrokerIdZNode:
    """Ephemeral /brokers/ids/<id>, owned by the broker's session. Version 5 (IBP >= 2.7):

    {"version":5,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"],
     "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"jmx_port":-1,
     "timestamp":"1700000000000","features":{}}  (+ "rack":"r" when the broker has one)
    """

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path}/{int(broker_id)}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        if info.version < 1 or info.version > 5:
            raise ValueError(f"broker registration version {info.version} is not one Kafka writes (1-5)")
        plain = info._plaintext()
        js = {"version": info.version,
              "host": plain.host if plain else None,  # Kafka writes null with no PLAINTEXT endpoint
              "port": plain.port if plain else -1,
              "endpoints": [e.connection_string for e in info.endpoints],
              "jmx_port": int(info.jmx_port),
              "timestamp": str(wall_ms() if info.timestamp_ms is None else int(info.timestamp_ms))}
        if info.rack is not None and info.version >= 3:
            js["rack"] = info.rack
        if info.version >= 4:
            js["listener_security_protocol_map"] = {e.listener_name: e.security_protocol for e in info.endpoints}
        if info.version >= 5:
            js["features"] = {name: {"min_version": int(lo), "max_version": int(hi)}
                              for name, (lo, hi) in info.features.items()}
        return _dumps(js)

    @staticmethod
    def decode(broker_id: int, data) -> BrokerInfo:
        what = f"{BrokerIdsZNode.path}/{broker_id}"
        js = _obj(data, what)
        version = _int(js, "version", what, data)
        jmx_port = _int(js, "jmx_port", what, data)
        if version < 1:
            raise ZkDataError(f"{what}: unsupported version of broker registration: {_text(data)[:200]}")
        try:
            if version == 1:
                endpoints = (EndPoint("PLAINTEXT", _str(js, "host", what, data), _int(js, "port", what, data)),)
            else:
                pmap = js.get("listener_security_protocol_map")
                if pmap is not None and not (isinstance(pmap, dict) and all(isinstance(v, str) for v in pmap.values())):
                    raise ZkDataError(f"{what}: listener_security_protocol_map must map names to protocols")
                if pmap is not None:
                    pmap = {k.upper(): v for k, v in pmap.items()}
                eps = js.get("endpoints")
                if not isinstance(eps, list) or not all(isinstance(e, str) for e in eps):
                    raise ZkDataError(f"{what}: field 'endpoints' must be a list of strings: {_text(data)[:200]}")
                endpoints = tuple(EndPoint.parse(e, pmap) for e in eps)
        except ValueError as e:
            if isinstance(e, ZkDataError):
                raise
            raise ZkDataError(f"{what}: {e}") from None
        rack = js.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise ZkDataError(f"{what}: field 'rack' must be a string or null, got {rack!r}")
        features = {}
        for name, rng in (js.get("features") or {}).items():
            if not isinstance(rng, dict):
                raise ZkDataError(f"{what}: feature {name!r} must be an object, got {rng!r}")
            features[name] = (_int(rng, "min_version", what, data), _int(rng, "max_version", what, data))
        ts = js.get("timestamp")
        try:
            ts = int(ts) if ts is not None else None
        except (TypeError, ValueError):
            raise ZkDataError(f"{what}: field 'timestamp' is not a number of ms: {ts!r}") from None
        return BrokerInfo(int(broker_id), endpoints, rack, jmx_port, version, ts, features)


class BrokerSequenceIdZNode:
    """Persistent, no data; its zk version is the last broker id generated (broker.id.generation)."""

    path = "/brokers/seqid"


# ---- /brokers/topics ----

class TopicsZNode:
    path = "/brokers/topics"


@dataclass(frozen=True)
class ReplicaAssignment:
    """Kafka's controller.ReplicaAssignment: replicas, and those being added/removed by a
    reassignment in progress."""

    replicas: tuple
    adding_replicas: tuple = ()
    removing_replicas: tuple = ()

    def __post_init__(self):
        for name in ("replicas", "adding_replicas", "removing_replicas"):
            v = getattr(self, name)
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                raise TypeError(f"{name} must be broker ids (ints), got {v!r}")
            object.__setattr__(self, name, tuple(v))


@dataclass(frozen=True)
class TopicAssignment:
    """A topic znode. Unpacks as ``(assignment, topic_id)`` where assignment is
    {partition: [replicas]}; ``partitions`` keeps adding/removing replicas; ``zk_version`` is the
    znode's version when read from ZooKeeper (for a conditional ``set_topic_assignment``)."""

    partitions: Mapping[int, ReplicaAssignment]
    topic_id: str | None = None
    zk_version: int | None = None

    @property
    def assignment(self) -> dict:
        return {p: list(a.replicas) for p, a in sorted(self.partitions.items())}

    def __iter__(self):
        return iter((self.assignment, self.topic_id))


def _replica_assignment(v) -> ReplicaAssignment:
    return v if isinstance(v, ReplicaAssignment) else ReplicaAssignment(tuple(v))


class TopicZNode:
    """Persistent /brokers/topics/<topic>, version 3 (adding/removing replicas since 2.4, topic_id
    since 2.8; written only when the topic has one):

    {"version":3,"partitions":{"0":[1,2,3]},"adding_replicas":{},"removing_replicas":{},
     "topic_id":"zJlZ6LBHQz2dkg6w0x2ZpA"}
    """

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path}/{topic}"

    @staticmethod
    def encode(assignment: Mapping[int, Sequence[int] | ReplicaAssignment], topic_id=None) -> bytes:
        partitions, adding, removing = {}, {}, {}
        for p, a in sorted((int(p), _replica_assignment(a)) for p, a in assignment.items()):
            partitions[str(p)] = list(a.replicas)
            if a.adding_replicas:
                adding[str(p)] = list(a.adding_replicas)
            if a.removing_replicas:
                removing[str(p)] = list(a.removing_replicas)
        js = {"version": 3, "partitions": partitions, "adding_replicas": adding, "removing_replicas": removing}
        tid = _topic_id_text(topic_id)
        if tid is not None:
            js["topic_id"] = tid
        return _dumps(js)

    @staticmethod
    def decode(topic: str, data) -> TopicAssignment:
        what = TopicZNode.path(topic)
        if data is None or len(data) == 0:
            return TopicAssignment({}, None)  # Kafka: no data reads as no partitions
        js = _obj(data, what)
        tid = js.get("topic_id")
        if tid is not None:
            if not isinstance(tid, str):
                raise ZkDataError(f"{what}: field 'topic_id' must be a string, got {tid!r}")
            try:
                uuid_from_text(tid)
            except ValueError as e:
                raise ZkDataError(f"{what}: {e}") from None

        def section(key):
            v = js.get(key) or {}
            if not isinstance(v, dict):
                raise ZkDataError(f"{what}: field {key!r} must be an object, got {v!r}")
            return v

        parts, adding, removing = section("partitions"), section("adding_replicas"), section("removing_replicas")
        out = {}
        for p, replicas in parts.items():
            try:
                pid = int(p)
            except ValueError:
                raise ZkDataError(f"{what}: partition key {p!r} is not an integer") from None
            out[pid] = ReplicaAssignment(
                _int_list(replicas, f"partitions.{p}", what, data),
                _int_list(adding.get(p, []), f"adding_replicas.{p}", what, data),
                _int_list(removing.get(p, []), f"removing_replicas.{p}", what, data))
        return TopicAssignment(out, tid)


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{int(partition)}"


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """Kafka's LeaderIsrAndControllerEpoch. leader -1: no leader. leader_recovery_state 0 is
    RECOVERED, 1 RECOVERING (KIP-704, after an unclean election)."""

    leader: int
    leader_epoch: int
    isr: tuple
    controller_epoch: int
    leader_recovery_state: int = 0

    def __post_init__(self):
        object.__setattr__(self, "isr", tuple(self.isr))
        if self.leader_recovery_state not in (0, 1):
            raise ValueError(f"leader_recovery_state must be 0 (RECOVERED) or 1 (RECOVERING), "
                             f"got {self.leader_recovery_state}")


class TopicPartitionStateZNode:
    """Persistent /brokers/topics/<topic>/partitions/<n>/state; its zk version is the partition
    epoch that fences a stale writer:

    {"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}

    leader_recovery_state is written only when not RECOVERED (Kafka 3.2+), so 2.x readers see
    the same JSON as before.
    """

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionZNode.path(topic, partition)}/state"

    @staticmethod
    def encode(state: LeaderIsrAndControllerEpoch) -> bytes:
        js = {"controller_epoch": int(state.controller_epoch), "leader": int(state.leader), "version": 1,
              "leader_epoch": int(state.leader_epoch), "isr": [int(b) for b in state.isr]}
        if state.leader_recovery_state != 0:
            js["leader_recovery_state"] = int(state.leader_recovery_state)
        return _dumps(js)

    @staticmethod
    def decode(data, what: str = "partition state") -> LeaderIsrAndControllerEpoch:
        js = _obj(data, what)
        lrs = js.get("leader_recovery_state", 0)
        if lrs not in (0, 1) or isinstance(lrs, bool):
            raise ZkDataError(f"{what}: unknown leader_recovery_state {lrs!r}")
        return LeaderIsrAndControllerEpoch(_int(js, "leader", what, data), _int(js, "leader_epoch", what, data),
                              _int_list(js.get("isr"), "isr", what, data),
                              _int(js, "controller_epoch", what, data), lrs)


# ---- /config ----

class ConfigZNode:
    path = "/config"


class ConfigType:
    """kafka.server.ConfigType: the entity types under /config."""

    TOPIC = "topics"
    CLIENT = "clients"
    USER = "users"
    BROKER = "brokers"
    IP = "ips"
    # the GROUP config resource (KIP-848/932 group configs; Kafka keeps them in KRaft metadata
    # only): stored here as /config/groups/<sanitized group id>, in the same entity layout
    GROUP = "groups"
    ALL = (TOPIC, CLIENT, USER, BROKER, IP, GROUP)


class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type: str) -> str:
        return f"{ConfigZNode.path}/{entity_type}"


def _config_value(key, v) -> str:
    # java.util.Properties holds strings only; convert the obvious scalars the way Java prints them
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int, float)):
        return str(v)
    raise TypeError(f"config {key!r}: value {v!r} is not a string, number or bool")


class ConfigEntityZNode:
    """Persistent /config/<type>/<name>: {"version":1,"config":{"retention.ms":"1000"}}, every
    value a string (java.util.Properties)."""

    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        return f"{ConfigEntityTypeZNode.path(entity_type)}/{entity_name}"

    @staticmethod
    def encode(config: Mapping[str, object]) -> bytes:
        return _dumps({"version": 1, "config": {str(k): _config_value(k, v) for k, v in config.items()}})

    @staticmethod
    def decode(data, what: str = "config") -> dict:
        if data is None or len(data) == 0:
            return {}  # Kafka: a znode without data holds no overrides
        js = _loads(data, what)
        config = js.get("config") if isinstance(js, dict) else None
        if not isinstance(config, dict):
            return {}  # Kafka's decode also ignores JSON without a "config" object
        for k, v in config.items():
            if not isinstance(v, str):
                raise ZkDataError(f"{what}: config {k!r} must be a string, got {v!r}")
        return dict(config)


class ConfigEntityChangeNotificationZNode:
    path = "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    """Persistent sequential /config/changes/config_change_<10 digits>:
    {"version":2,"entity_path":"topics/my-topic"}; brokers watch the parent and reload."""

    SEQUENCE_NUMBER_PREFIX = "config_change_"
    create_path = f"{ConfigEntityChangeNotificationZNode.path}/{SEQUENCE_NUMBER_PREFIX}"

    @staticmethod
    def encode(sanitized_entity_path: str) -> bytes:
        return _dumps({"version": 2, "entity_path": sanitized_entity_path})

    @staticmethod
    def decode(data) -> str:
        what = "config change notification"
        js = _obj(data, what)
        return _str(js, "entity_path", what, data)


# ---- ACLs (Kafka's ZkAclStore, ResourceZNode and the ACL change stores) ----

class AclZNodes:
    """Where Kafka's ZooKeeper-mode authorizer keeps ACLs: one znode per resource pattern,
    literal ones under /kafka-acl/<Type>/<name>, the others under
    /kafka-acl-extended/<pattern type, lower case>/<Type>/<name> (<Type> as Kafka's SecurityUtils
    writes it: Topic, Group, Cluster, TransactionalId, DelegationToken, User). A change adds a
    sequential acl_changes_N under /kafka-acl-changes (literal: "<TYPE>:<name>") or
    /kafka-acl-extended-changes (JSON), and every broker reloads the resource it names."""

    LITERAL_PATH = "/kafka-acl"
    EXTENDED_PATH = "/kafka-acl-extended"
    LITERAL_CHANGES_PATH = "/kafka-acl-changes"
    EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
    SEQUENCE_NUMBER_PREFIX = "acl_changes_"
    RESOURCE_SEPARATOR = ":"  # Kafka's AclEntry.RESOURCE_SEPARATOR
    VERSION = 1  # of the ACL lists and of the extended change events

    @classmethod
    def store_path(cls, pattern_type: str) -> str:
        """pattern_type: "LITERAL", "PREFIXED"."""
        return cls.LITERAL_PATH if pattern_type == "LITERAL" else f"{cls.EXTENDED_PATH}/{pattern_type.lower()}"

    @staticmethod
    def encode_acls(entries: Iterable[Mapping[str, str]]) -> bytes:
        """entries: {"principal", "permissionType", "operation", "host"} each, Kafka's names."""
        return _dumps({"version": AclZNodes.VERSION, "acls": [dict(e) for e in entries]})

    @staticmethod
    def decode_acls(data, what: str) -> list[dict]:
        """The entries of a resource's znode (no data: none, as Kafka reads it)."""
        if data is None or len(data) == 0:
            return []
        js = _obj(data, what)
        if js.get("version") != AclZNodes.VERSION:
            raise ZkDataError(f"{what}: ACL version {js.get('version')!r}, expected {AclZNodes.VERSION}")
        acls = js.get("acls")
        if not isinstance(acls, list):
            raise ZkDataError(f"{what}: no \"acls\" list: {_text(data)[:200]}")
        out = []
        for item in acls:
            if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in
                                                     ("principal", "permissionType", "operation", "host")):
                raise ZkDataError(f"{what}: ACL entry without principal/permissionType/operation/host: {item!r}")
            out.append(item)
        return out

    @classmethod
    def encode_literal_change(cls, resource_type: str, name: str) -> bytes:
        """resource_type: Kafka's enum name ("TOPIC"), as its LiteralAclChangeStore writes it."""
        return f"{resource_type}{cls.RESOURCE_SEPARATOR}{name}".encode("utf-8")

    @classmethod
    def decode_literal_change(cls, data) -> tuple[str, str]:
        text = _text(data)
        resource_type, sep, name = text.partition(cls.RESOURCE_SEPARATOR)
        if not sep:
            raise ZkDataError(f"ACL change notification: expected ResourceType:ResourceName, got {text[:200]!r}")
        return resource_type, name

    @classmethod
    def encode_extended_change(cls, resource_type: str, name: str, pattern_type: str) -> bytes:
        """Kafka's ExtendedAclChangeEvent, enum names as Kafka writes them ("TOPIC", "PREFIXED")."""
        return _dumps({"version": cls.VERSION, "resourceType": resource_type, "name": name,
                       "patternType": pattern_type})

    @classmethod
    def decode_extended_change(cls, data) -> tuple[str, str, str]:
        what = "extended ACL change notification"
        js = _obj(data, what)
        if not isinstance(js.get("version"), int) or js["version"] > cls.VERSION:
            raise ZkDataError(f"{what}: unsupported version {js.get('version')!r}")
        return _str(js, "resourceType", what, data), _str(js, "name", what, data), _str(js, "patternType", what, data)


# ---- notifications ----

class IsrChangeNotificationZNode:
    path = "/isr_change_notification"


class IsrChangeNotificationSequenceZNode:
    """Persistent sequential /isr_change_notification/isr_change_<10 digits>:
    {"version":1,"partitions":[{"topic":"t","partition":0}]} (brokers with IBP < 2.7; later ones
    send AlterPartition to the controller instead)."""

    SEQUENCE_NUMBER_PREFIX = "isr_change_"
    VERSION = 1  # IsrChangeNotificationHandler.Version

    @staticmethod
    def path(sequence_number: str = "") -> str:
        return f"{IsrChangeNotificationZNode.path}/{IsrChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX}{sequence_number}"

    @staticmethod
    def encode(partitions: Iterable[tuple]) -> bytes:
        return _dumps({"version": IsrChangeNotificationSequenceZNode.VERSION,
                       "partitions": [{"topic": t, "partition": int(p)} for t, p in sorted(set(partitions))]})

    @staticmethod
    def decode(data) -> set:
        return _decode_partition_list(data, "isr change notification")

    @staticmethod
    def sequence_number(path: str) -> str:
        prefix = IsrChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return path[path.rindex(prefix) + len(prefix):]


def _decode_partition_list(data, what) -> set:
    js = _obj(data, what)
    parts = js.get("partitions")
    if not isinstance(parts, list):
        raise ZkDataError(f"{what}: field 'partitions' must be a list: {_text(data)[:200]}")
    out = set()
    for p in parts:
        if not isinstance(p, dict):
            raise ZkDataError(f"{what}: partition entry must be an object, got {p!r}")
        out.add((_str(p, "topic", what, data), _int(p, "partition", what, data)))
    return out


class LogDirEventNotificationZNode:
    path = "/log_dir_event_notification"


# ---- /admin ----

class AdminZNode:
    path = "/admin"


class DeleteTopicsZNode:
    path = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """Persistent /admin/delete_topics/<topic>, no data: a request the controller carries out."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path}/{topic}"


class ReassignPartitionsZNode:
    """Persistent /admin/reassign_partitions (the pre-2.4 way; still read by the 3.x controller):
    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}"""

    path = "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[tuple, Sequence[int]]) -> bytes:
        return _dumps({"version": 1, "partitions": [
            {"topic": t, "partition": int(p), "replicas": [int(r) for r in replicas]}
            for (t, p), replicas in sorted(reassignment.items())]})

    @staticmethod
    def decode(data) -> dict:
        what = ReassignPartitionsZNode.path
        js = _obj(data, what)
        parts = js.get("partitions")
        if not isinstance(parts, list):
            raise ZkDataError(f"{what}: field 'partitions' must be a list: {_text(data)[:200]}")
        out = {}
        for p in parts:
            if not isinstance(p, dict):
                raise ZkDataError(f"{what}: partition entry must be an object, got {p!r}")
            out[(_str(p, "topic", what, data), _int(p, "partition", what, data))] = list(
                _int_list(p.get("replicas"), "replicas", what, data))
        return out


class PreferredReplicaElectionZNode:
    """Persistent /admin/preferred_replica_election:
    {"version":1,"partitions":[{"topic":"t","partition":0}]}"""

    path = "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[tuple]) -> bytes:
        return _dumps({"version": 1, "partitions": [{"topic": t, "partition": int(p)}
                                                    for t, p in sorted(set(partitions))]})

    @staticmethod
    def decode(data) -> set:
        return _decode_partition_list(data, PreferredReplicaElectionZNode.path)


class ConsumerPathZNode:
    path = "/consumers"  # the old (pre-0.9) consumer's; Kafka still creates it


# ---- cluster id, producer ids, features ----

class ClusterZNode:
    path = "/cluster"


class ClusterIdZNode:
    """Persistent /cluster/id: {"version":"1","id":"<22-char base64 uuid>"} (the version is a
    string here, unlike every other znode)."""

    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data) -> str:
        js = _obj(data, ClusterIdZNode.path)
        return _str(js, "id", ClusterIdZNode.path, data)


@dataclass(frozen=True)
class ProducerIdsBlock:
    """org.apache.kafka.server.common.ProducerIdsBlock: ids first..last (inclusive)."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


class ProducerIdBlockZNode:
    """Persistent /latest_producer_id_block: the last block handed out,
    {"version":1,"broker":0,"block_start":"0","block_end":"999"} — the bounds are strings (longs
    beyond a double's precision), the version and broker numbers."""

    path = "/latest_producer_id_block"
    CURRENT_VERSION = 1
    PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
    MAX_PRODUCER_ID = (1 << 63) - 1

    @staticmethod
    def encode(block: ProducerIdsBlock) -> bytes:
        return _dumps({"version": ProducerIdBlockZNode.CURRENT_VERSION, "broker": int(block.assigned_broker_id),
                       "block_start": str(block.first_producer_id), "block_end": str(block.last_producer_id)})

    @staticmethod
    def decode(data) -> ProducerIdsBlock:
        what = ProducerIdBlockZNode.path
        js = _obj(data, what)
        start_text, end_text = _str(js, "block_start", what, data), _str(js, "block_end", what, data)
        try:
            start, end = int(start_text), int(end_text)
        except ValueError:
            raise ZkDataError(f"{what}: block_start/block_end are not integers: {_text(data)[:200]}") from None
        if end < start or end > ProducerIdBlockZNode.MAX_PRODUCER_ID:
            raise ZkDataError(f"{what}: block {start}..{end} is not a valid range of producer ids")
        return ProducerIdsBlock(_int(js, "broker", what, data), start, end - start + 1)


@dataclass(frozen=True)
class FeatureZNodeData:
    """Kafka's FeatureZNode case class: status 1 Enabled, 0 Disabled; features {name: max level}."""

    version: int = 2
    status: int = 1
    features: Mapping[str, int] = field(default_factory=dict)


class FeatureZNode:
    """Persistent /feature, written by the controller (IBP >= 2.7). Version 2 (IBP >= 3.3):
    {"version":2,"status":1,"features":{"f":{"max_version_level":2}}}; version 1 also carries
    min_version_level (equal to the max)."""

    path = "/feature"
    V1, V2 = 1, 2
    DISABLED, ENABLED = 0, 1

    @staticmethod
    def encode(node: FeatureZNodeData) -> bytes:
        if node.version not in (1, 2):
            raise ValueError(f"feature znode version {node.version} is not 1 or 2")
        if node.status not in (0, 1):
            raise ValueError(f"feature znode status {node.status} is not 0 (Disabled) or 1 (Enabled)")
        if node.version == 1:
            feats = {f: {"max_version_level": int(v), "min_version_level": int(v)} for f, v in node.features.items()}
        else:
            feats = {f: {"max_version_level": int(v)} for f, v in node.features.items()}
        return _dumps({"version": node.version, "status": node.status, "features": feats})

    @staticmethod
    def decode(data) -> FeatureZNodeData:
        what = FeatureZNode.path
        js = _obj(data, what)
        version = _int(js, "version", what, data)
        if version not in (1, 2):
            raise ZkDataError(f"{what}: unsupported version {version} of feature information")
        status = js.get("status")
        if status not in (0, 1) or isinstance(status, bool):
            raise ZkDataError(f"{what}: malformed status {status!r} in feature information")
        feats = js.get("features")
        if not isinstance(feats, dict):
            raise ZkDataError(f"{what}: features map can not be absent: {_text(data)[:200]}")
        out = {}
        for name, levels in feats.items():
            if not isinstance(levels, dict):
                raise ZkDataError(f"{what}: feature {name!r} must be an object, got {levels!r}")
            hi = _int(levels, "max_version_level", what, data)
            if version == 1:
                lo = _int(levels, "min_version_level", what, data)
                if lo < 1 or hi < lo:
                    raise ZkDataError(f"{what}: feature {name!r}: expected 1 <= min <= max, got {lo}..{hi}")
            if hi < 1:
                raise ZkDataError(f"{what}: feature {name!r}: expected max_version_level >= 1, got {hi}")
            out[name] = hi
        return FeatureZNodeData(version, status, out)


class ZkData:
    # ZkData.PersistentZkPaths: what every Kafka broker makes sure exists at startup
    PERSISTENT_ZK_PATHS = (
        ConsumerPathZNode.path,
        BrokerIdsZNode.path,
        TopicsZNode.path,
        ConfigEntityChangeNotificationZNode.path,
        DeleteTopicsZNode.path,
        BrokerSequenceIdZNode.path,
        IsrChangeNotificationZNode.path,
        ProducerIdBlockZNode.path,
        LogDirEventNotificationZNode.path,
    ) + tuple(ConfigEntityTypeZNode.path(t) for t in ConfigType.ALL)
