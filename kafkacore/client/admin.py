"""AdminClient: the cluster-management requests of the Kafka protocol, for the operator tools.

It speaks only the Kafka protocol, so it works against any Kafka-compatible cluster (Apache
Kafka, tansu, kafkacore). Each method is one question or one change; it blocks until the
cluster answers and raises the Kafka error (``kafkacore.errors``) of the first item that failed,
with a message naming that item. Requests go where Kafka's Java AdminClient sends them:
topic and partition changes to the controller, group requests to the group's coordinator,
ListOffsets and DeleteRecords to each partition's leader, DescribeLogDirs and ListGroups to
every broker. Connections are kept per broker until ``close``.

Results are plain dataclasses (``TopicDescription``, ``GroupInfo``...), so a tool can print them as a
table or as JSON.
"""
from __future__ import annotations

import base64
import struct
import time
from dataclasses import dataclass, field

from ..errors import (BrokerNotAvailableError, GroupIdNotFoundError, KafkaError, KafkaTimeoutError,
                      NotControllerError, UnknownTopicOrPartitionError, UnsupportedVersionError, error_for_code,
                      error_name)
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from ..protocol.wire import ProtocolDecodeError
from .assignors import decode_assignment
from .connection import BrokerConnection, ConnectionClosed

# API keys (Kafka's ApiKeys)

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest)
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
# ConfigResource.Type
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
# ConfigEntry.ConfigSource, by the code DescribeConfigs v1+ answers
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
# IncrementalAlterConfigs operations
SET, DELETE = 0, 1
# ElectLeaders election types
PREFERRED, UNCLEAN = 0, 1
ANY_NAME = object()  # describe_client_quotas: any name of an entity type, the default included
COORDINATOR_RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def _req(api_key, name=None):
    """The request class of ``api_key`` or one of its nested structures by name."""
    cls = request_class(api_key)
    if name is None:
        return cls
    return getattr(__import__(cls.__module__, fromlist=[name]), name)


@dataclass
class Node:
    """A broker as the cluster's metadata lists it (Kafka's org.apache.kafka.common.Node)."""
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class ClusterInfo:
    cluster_id: str | None
    controller_id: int
    brokers: list  # [Node], by node id


@dataclass
class TopicPartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list
    isr: list
    offline: list
    error: str | None = None  # the partition's error name (e.g. LEADER_NOT_AVAILABLE), None when fine

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass
class TopicDescription:
    """A topic and its partitions (Kafka's Admin TopicDescription)."""
    name: str
    topic_id: str | None
    internal: bool
    partitions: list  # [TopicPartitionInfo], by partition


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: str
    is_default: bool
    read_only: bool
    sensitive: bool
    # [(name, value, source)] in Kafka's order of precedence (the entry's own source first);
    # filled only when describe_configs is asked for them
    synonyms: list = field(default_factory=list)


@dataclass
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = ""  # "classic", "consumer" (KIP-848) or "share" (KIP-932); "" before ListGroups v5


@dataclass
class MemberInfo:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list  # [(topic, partition)] for consumer groups, else []
    member_epoch: int | None = None  # KIP-848 and KIP-932 groups


@dataclass
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: list = field(default_factory=list)  # [MemberInfo]
    group_epoch: int | None = None  # KIP-848 and KIP-932 groups: the group and assignment epochs
    assignment_epoch: int | None = None
    group_type: str = ""  # "classic", "consumer" (KIP-848) or "share" (KIP-932); "": no such group


@dataclass
class LogDirInfo:
    broker: int
    path: str
    error: str | None  # the directory's error name (KAFKA_STORAGE_ERROR...), None when fine
    total_bytes: int  # of its volume; -1 when the broker does not say (DescribeLogDirs before v4)
    usable_bytes: int
    sizes: dict  # {(topic, partition): bytes}


@dataclass
class OffsetAndTimestamp:
    offset: int
    timestamp: int
    leader_epoch: int = -1


class AdminClient:
    """``AdminClient("127.0.0.1:9092")`` or ``AdminClient([(host, port)], ...)``.
    ``request_timeout_ms`` bounds each answer and each wait (Kafka's request.timeout.ms);
    ``connect_timeout_ms`` each connection set-up (socket.connection.setup.timeout.ms)."""

    def __init__(self, bootstrap, client_id: str = "kafkacore-admin", request_timeout_ms: int = 30000,
                 connect_timeout_ms: int = 10000, security=None):
        if isinstance(bootstrap, str):
            bootstrap = [_parse_address(a) for a in bootstrap.split(",") if a.strip()]
        if not bootstrap:
            raise ValueError("no bootstrap server given")
        self.bootstrap = list(bootstrap)
        self.client_id = client_id
        self.timeout = request_timeout_ms / 1000
        self.connect_timeout = connect_timeout_ms / 1000
        self.security = security  # a ClientSecurity (client/security.py), None for PLAINTEXT
        self._conns: dict[int, BrokerConnection] = {}
        self._any: BrokerConnection | None = None
        self._brokers: dict[int, tuple[str, int]] = {}
        self._controller = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for conn in list(self._conns.values()) + ([self._any] if self._any else []):
            conn.close()
        self._conns.clear()
        self._any = None

    # -- connections ------------------------------------------------------------------------
    def _connect_any(self) -> BrokerConnection:
        if self._any is not None and not self._any.closed:
            return self._any
        errors = []
        for host, port in list(self._brokers.values()) + self.bootstrap:
            try:
                self._any = BrokerConnection(host, port, self.client_id, timeout=self.timeout,
                                             connect_timeout=self.connect_timeout, security=self.security)
                return self._any
            except (ConnectionClosed, OSError, KafkaTimeoutError) as e:  # the next address may answer
                errors.append(str(e))
        raise ConnectionClosed("no broker reachable (" + "; ".join(dict.fromkeys(errors)) + ")")

    def _connection(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        if node_id not in self._brokers:
            self.describe_cluster()
        addr = self._brokers.get(node_id)
        if addr is None:
            raise BrokerNotAvailableError(f"broker {node_id} is not in the cluster (brokers: "
                                          f"{', '.join(map(str, sorted(self._brokers))) or 'none'})")
        conn = self._conns[node_id] = BrokerConnection(addr[0], addr[1], self.client_id, node_id=node_id,
                                                       timeout=self.timeout, connect_timeout=self.connect_timeout,
                                                       security=self.security)
        return conn

    def call_any(self, api_key, body):
        for attempt in (0, 1):
            conn = self._connect_any()
            try:
                return conn.call(api_key, body, timeout=self.timeout)
            except ConnectionClosed:
                self._any = None
                if attempt:
                    raise

    def call_node(self, node_id, api_key, body):
        for attempt in (0, 1):
            conn = self._connection(node_id)
            try:
                return conn.call(api_key, body, timeout=self.timeout)
            except ConnectionClosed:
                self._conns.pop(node_id, None)
                if attempt:
                    raise

    def _call_controller(self, api_key, body, errors_of):
        """Sends to the controller; on NOT_CONTROLLER (anywhere in the answer) learns the new
        controller and sends again, until the timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            if self._controller < 0:
                self.describe_cluster()
            node = self._controller if self._controller >= 0 else None
            resp = self.call_node(node, api_key, body) if node is not None else self.call_any(api_key, body)
            if NotControllerError.code not in errors_of(resp) or time.monotonic() > deadline:
                return resp
            self._controller = -1
            time.sleep(0.1)

    def supports(self, api_key: int) -> bool:
        """Whether the brokers answer ``api_key`` at a version kafkacore speaks."""
        conn = self._connect_any()
        try:
            conn.version(api_key)
            return True
        except KafkaError:
            return False

    # -- the cluster ------------------------------------------------------------------------
    def describe_cluster(self) -> ClusterInfo:
        """Brokers and controller (DescribeCluster where the broker has it, else Metadata)."""
        if self.supports(ApiKey.DESCRIBE_CLUSTER):
            resp = self.call_any(ApiKey.DESCRIBE_CLUSTER, _req(ApiKey.DESCRIBE_CLUSTER)())
            _raise(resp.error_code, "the cluster", resp.error_message)
            brokers = [Node(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers]
            info = ClusterInfo(resp.cluster_id, resp.controller_id, sorted(brokers, key=lambda b: b.node_id))
        else:
            resp = self.call_any(ApiKey.METADATA, _req(ApiKey.METADATA)(topics=[], allow_auto_topic_creation=False))
            info = self._cluster_from_metadata(resp)
        self._brokers = {b.node_id: (b.host, b.port) for b in info.brokers}
        self._controller = info.controller_id
        return info

    def _cluster_from_metadata(self, resp) -> ClusterInfo:
        brokers = sorted((Node(b.node_id, b.host, b.port, b.rack) for b in resp.brokers),
                         key=lambda b: b.node_id)
        self._brokers = {b.node_id: (b.host, b.port) for b in brokers}
        self._controller = resp.controller_id
        return ClusterInfo(resp.cluster_id, resp.controller_id, brokers)

    def metadata(self, topics=None) -> tuple[ClusterInfo, dict]:
        """(cluster, {name: TopicDescription}) for ``topics`` (None: every topic). A named topic that
        does not exist raises UNKNOWN_TOPIC_OR_PARTITION naming it."""
        topic_cls = _req(ApiKey.METADATA, "MetadataRequestTopic")
        body = _req(ApiKey.METADATA)(topics=None if topics is None else [topic_cls(name=t) for t in topics],
                              allow_auto_topic_creation=False)
        resp = self.call_any(ApiKey.METADATA, body)
        cluster = self._cluster_from_metadata(resp)
        out = {}
        for t in resp.topics:
            if t.error_code:
                if topics is not None:
                    _raise(t.error_code, f"topic {t.name!r}"
                           + (" does not exist" if t.error_code == UnknownTopicOrPartitionError.code else ""))
                continue
            parts = sorted((TopicPartitionInfo(p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes),
                                          list(p.isr_nodes), list(p.offline_replicas or ()),
                                          error_name(p.error_code) if p.error_code else None)
                            for p in t.partitions), key=lambda p: p.partition)
            out[t.name] = TopicDescription(t.name, uuid_text(t.topic_id), bool(t.is_internal), parts)
        return cluster, dict(sorted(out.items()))

    def list_topics(self, internal: bool = False) -> dict:
        """{name: TopicDescription} of every topic (internal ones only when asked)."""
        _, topics = self.metadata(None)
        return {n: t for n, t in topics.items() if internal or not t.internal}

    def describe_topics(self, names) -> dict:
        return self.metadata(list(names))[1]

    # -- topics -----------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1, configs=None,
                     assignment=None, validate_only: bool = False):
        """CreateTopics for one topic; -1 takes the broker's num.partitions /
        default.replication.factor. ``assignment``: [[broker ids] per partition]. Waits until
        the topic is in the metadata (unless validate_only)."""
        topic_cls = _req(ApiKey.CREATE_TOPICS, "CreatableTopic")
        cfg_cls = _req(ApiKey.CREATE_TOPICS, "CreatableTopicConfig")
        asg_cls = _req(ApiKey.CREATE_TOPICS, "CreatableReplicaAssignment")
        topic = topic_cls(name=name, num_partitions=-1 if assignment else partitions,
                          replication_factor=-1 if assignment else replication_factor,
                          assignments=[asg_cls(partition_index=i, broker_ids=list(r))
                                       for i, r in enumerate(assignment or ())],
                          configs=[cfg_cls(name=k, value=v) for k, v in (configs or {}).items()])
        body = _req(ApiKey.CREATE_TOPICS)(topics=[topic], timeout_ms=int(self.timeout * 1000),
                                          validate_only=validate_only)
        resp = self._call_controller(ApiKey.CREATE_TOPICS, body, lambda r: [t.error_code for t in r.topics])
        for t in resp.topics:
            _raise(t.error_code, f"topic {t.name!r}", t.error_message)
        if not validate_only:
            self._wait(lambda: name in self.metadata(None)[1], f"topic {name!r} to appear in the metadata")

    def delete_topic(self, name: str):
        """DeleteTopics for one topic; waits until it has left the metadata."""
        state_cls = _req(ApiKey.DELETE_TOPICS, "DeleteTopicState")
        body = _req(ApiKey.DELETE_TOPICS)(topic_names=[name], topics=[state_cls(name=name)],
                                          timeout_ms=int(self.timeout * 1000))
        resp = self._call_controller(ApiKey.DELETE_TOPICS, body, lambda r: [t.error_code for t in r.responses])
        for t in resp.responses:
            _raise(t.error_code, f"topic {name!r}", t.error_message)
        self._wait(lambda: name not in self.metadata(None)[1], f"topic {name!r} to leave the metadata")

    def create_partitions(self, name: str, total: int, validate_only: bool = False):
        """CreatePartitions: ``name`` grows to ``total`` partitions."""
        topic = _req(ApiKey.CREATE_PARTITIONS, "CreatePartitionsTopic")(name=name, count=total, assignments=None)
        body = _req(ApiKey.CREATE_PARTITIONS)(topics=[topic], timeout_ms=int(self.timeout * 1000),
                                       validate_only=validate_only)
        resp = self._call_controller(ApiKey.CREATE_PARTITIONS, body, lambda r: [t.error_code for t in r.results])
        for t in resp.results:
            _raise(t.error_code, f"topic {name!r}", t.error_message)
        if not validate_only:
            self._wait(lambda: len(self.describe_topics([name])[name].partitions) >= total,
                       f"topic {name!r} to show {total} partitions")

    # -- configs ----------------------------------------------------------------------------
    def describe_configs(self, resource_type: int, name: str, synonyms: bool = False) -> list:
        """[ConfigEntry] of a topic (TOPIC_RESOURCE) or a broker (BROKER_RESOURCE, name = its id),
        sorted by name. A broker's configs are asked of that broker. ``synonyms``: with each
        entry's synonyms (where its value would come from without its own setting)."""
        res = _req(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigsResource")(resource_type=resource_type, resource_name=name,
                                                                 configuration_keys=None)
        body = _req(ApiKey.DESCRIBE_CONFIGS)(resources=[res], include_synonyms=synonyms, include_documentation=False)
        if resource_type == BROKER_RESOURCE:
            resp = self.call_node(int(name), ApiKey.DESCRIBE_CONFIGS, body)
        else:
            resp = self.call_any(ApiKey.DESCRIBE_CONFIGS, body)
        out = []
        for r in resp.results:
            _raise(r.error_code, f"{_resource_name(resource_type)} {name!r}", r.error_message)
            for c in r.configs:
                source = CONFIG_SOURCES.get(c.config_source, "UNKNOWN") if c.config_source != -1 else \
                    ("DEFAULT_CONFIG" if c.is_default else "UNKNOWN")
                is_default = c.is_default or source == "DEFAULT_CONFIG"
                out.append(ConfigEntry(c.name, c.value, source, bool(is_default), bool(c.read_only),
                                       bool(c.is_sensitive),
                                       [(x.name, x.value, CONFIG_SOURCES.get(x.source, "UNKNOWN"))
                                        for x in (c.synonyms or ())]))
        return sorted(out, key=lambda e: e.name)

    def alter_configs(self, resource_type: int, name: str, set_configs=None, delete=(), validate_only=False):
        """IncrementalAlterConfigs: SET each of ``set_configs``, DELETE (back to the default)
        each of ``delete``. Topic changes go to the controller, a broker's to that broker."""
        cfg_cls = _req(ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterableConfig")
        configs = [cfg_cls(name=k, config_operation=SET, value=str(v)) for k, v in (set_configs or {}).items()]
        configs += [cfg_cls(name=k, config_operation=DELETE, value=None) for k in delete]
        res = _req(ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterConfigsResource")(resource_type=resource_type,
                                                                       resource_name=name, configs=configs)
        body = _req(ApiKey.INCREMENTAL_ALTER_CONFIGS)(resources=[res], validate_only=validate_only)
        if resource_type == BROKER_RESOURCE and name != "":
            resp = self.call_node(int(name), ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
        else:
            resp = self._call_controller(ApiKey.INCREMENTAL_ALTER_CONFIGS, body,
                                         lambda r: [x.error_code for x in r.responses])
        for r in resp.responses:
            _raise(r.error_code, f"{_resource_name(resource_type)} {name!r}", r.error_message)

    # -- offsets and records ----------------------------------------------------------------
    def list_offsets(self, specs: dict, read_committed: bool = False, partial: bool = False) -> dict:
        """{(topic, partition): spec} with spec LATEST, EARLIEST, MAX_TIMESTAMP or a timestamp in
        ms -> {(topic, partition): OffsetAndTimestamp}; offset -1 where no record has that
        timestamp or later. Asked of each partition's leader. ``partial``: partitions without a
        leader or with an error are left out of the answer instead of waited for or raised (for
        a report that shows what it can)."""
        return self._by_leader(specs, lambda node, items: self._list_offsets_at(node, items, read_committed),
                               partial)

    def _list_offsets_at(self, node, items, read_committed):
        part_cls = _req(ApiKey.LIST_OFFSETS, "ListOffsetsPartition")
        topic_cls = _req(ApiKey.LIST_OFFSETS, "ListOffsetsTopic")
        by_topic = {}
        for (t, p), ts in items.items():
            by_topic.setdefault(t, []).append(part_cls(partition_index=p, current_leader_epoch=-1, timestamp=ts))
        body = _req(ApiKey.LIST_OFFSETS)(replica_id=-1, isolation_level=1 if read_committed else 0,
                                  topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()])
        resp = self.call_node(node, ApiKey.LIST_OFFSETS, body)
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                out[(t.name, p.partition_index)] = (p.error_code, OffsetAndTimestamp(p.offset, p.timestamp,
                                                                                     p.leader_epoch))
        return out

    def delete_records(self, before: dict) -> dict:
        """DeleteRecords: {(topic, partition): offset} (-1: the high watermark) -> {(topic,
        partition): new log start offset}."""
        def at(node, items):
            part_cls = _req(ApiKey.DELETE_RECORDS, "DeleteRecordsPartition")
            by_topic = {}
            for (t, p), off in items.items():
                by_topic.setdefault(t, []).append(part_cls(partition_index=p, offset=off))
            topic_cls = _req(ApiKey.DELETE_RECORDS, "DeleteRecordsTopic")
            body = _req(ApiKey.DELETE_RECORDS)(topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()],
                                               timeout_ms=int(self.timeout * 1000))
            resp = self.call_node(node, ApiKey.DELETE_RECORDS, body)
            return {(t.name, p.partition_index): (p.error_code, p.low_watermark)
                    for t in resp.topics for p in t.partitions}
        return self._by_leader(before, at)

    def _by_leader(self, items: dict, ask, partial: bool = False) -> dict:
        """Groups ``items`` by partition leader, asks each leader, retries partitions whose
        leader moved (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION
        right after a change) until the timeout; raises the first other error. ``partial``:
        no retries, failed partitions left out."""
        deadline = time.monotonic() + self.timeout
        pending, out = dict(items), {}
        while pending:
            _, topics = self.metadata(sorted({t for t, _ in pending}))
            by_node = {}
            for (t, p), v in pending.items():
                parts = {x.partition: x for x in topics[t].partitions}
                if p not in parts:
                    raise UnknownTopicOrPartitionError(f"partition {t}-{p} does not exist "
                                                       f"(the topic has {len(parts)} partitions)")
                by_node.setdefault(parts[p].leader, {})[(t, p)] = v
            retry = {}
            for node, group in by_node.items():
                if node < 0 and partial:
                    continue
                answers = ask(node, group) if node >= 0 else {tp: (5, None) for tp in group}
                for tp, v in group.items():
                    code, result = answers.get(tp, (3, None))
                    if partial:
                        if not code:
                            out[tp] = result
                    elif code in (3, 5, 6) and time.monotonic() < deadline:  # leadership moving
                        retry[tp] = v
                    else:
                        _raise(code, f"partition {tp[0]}-{tp[1]}")
                        out[tp] = result
            pending = retry
            if pending:
                time.sleep(0.1)
        return out

    # -- groups -----------------------------------------------------------------------------
    def list_groups(self) -> list:
        """[GroupListing] from every broker (each answers for the groups it coordinates)."""
        cluster = self.describe_cluster()
        out = {}
        for b in cluster.brokers:
            resp = self.call_node(b.node_id, ApiKey.LIST_GROUPS,
                                  _req(ApiKey.LIST_GROUPS)(states_filter=[], types_filter=[]))
            _raise(resp.error_code, f"ListGroups on broker {b.node_id}")
            for g in resp.groups:
                out[g.group_id] = GroupListing(g.group_id, g.protocol_type or "", g.group_state or "",
                                               g.group_type or "")
        return [out[k] for k in sorted(out)]

    def coordinator(self, group_id: str, key_type: int = 0) -> int:
        """The node id of ``group_id``'s coordinator (retrying while it loads)."""
        deadline = time.monotonic() + self.timeout
        while True:
            body = _req(ApiKey.FIND_COORDINATOR)(key=group_id, key_type=key_type, coordinator_keys=[group_id])
            resp = self.call_any(ApiKey.FIND_COORDINATOR, body)
            if resp.coordinators:
                c = resp.coordinators[0]
                code, node, host, port, msg = c.error_code, c.node_id, c.host, c.port, c.error_message
            else:
                code, node, host, port, msg = resp.error_code, resp.node_id, resp.host, resp.port, resp.error_message
            if code in COORDINATOR_RETRIABLE and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            _raise(code, f"group {group_id!r}", msg)
            self._brokers.setdefault(node, (host, port))
            return node

    def _call_coordinator(self, group_id, api_key, body, code_of):
        deadline = time.monotonic() + self.timeout
        while True:
            node = self.coordinator(group_id)
            resp = self.call_node(node, api_key, body)
            if code_of(resp) in COORDINATOR_RETRIABLE and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            return node, resp

    def describe_group(self, group_id: str) -> GroupInfo:
        """A classic group through DescribeGroups; one that answers Dead there (as KIP-848
        consumer groups and KIP-932 share groups do, in Kafka too) through ConsumerGroupDescribe,
        then ShareGroupDescribe, when the broker has them."""
        body = _req(ApiKey.DESCRIBE_GROUPS)(groups=[group_id], include_authorized_operations=False)
        node, resp = self._call_coordinator(group_id, ApiKey.DESCRIBE_GROUPS, body, lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        _raise(g.error_code, f"group {group_id!r}")
        if g.group_state == "Dead" and self.supports(ApiKey.CONSUMER_GROUP_DESCRIBE):
            consumer = self._describe_consumer_group(group_id)
            if consumer is not None:
                return consumer
        if g.group_state == "Dead" and self.supports(ApiKey.SHARE_GROUP_DESCRIBE):
            share = self.describe_share_group(group_id)
            if share is not None:
                return share
        members = []
        for m in g.members:
            assignment = []
            if g.protocol_type == "consumer" and m.member_assignment:
                try:
                    assignment = sorted(decode_assignment(bytes(m.member_assignment)).partitions)
                except Exception:  # noqa: BLE001 - another client's payload we cannot read: shown as none
                    assignment = []
            members.append(MemberInfo(m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment))
        return GroupInfo(g.group_id, g.group_state, g.protocol_type, g.protocol_data, node,
                         sorted(members, key=lambda m: m.member_id),
                         group_type="" if g.group_state == "Dead" else "classic")

    def _describe_consumer_group(self, group_id):
        """GroupInfo of a KIP-848 consumer group (protocol type "consumer", the assignor as its
        protocol, each member's current assignment), or None when there is none by that id."""
        body = _req(ApiKey.CONSUMER_GROUP_DESCRIBE)(group_ids=[group_id], include_authorized_operations=False)
        node, resp = self._call_coordinator(group_id, ApiKey.CONSUMER_GROUP_DESCRIBE, body,
                                            lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code == GroupIdNotFoundError.code:
            return None
        _raise(g.error_code, f"group {group_id!r}", g.error_message)
        members = [MemberInfo(m.member_id, m.instance_id, m.client_id, m.client_host,
                              sorted((tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions),
                              m.member_epoch)
                   for m in g.members]
        return GroupInfo(g.group_id, g.group_state, "consumer", g.assignor_name, node,
                         sorted(members, key=lambda m: m.member_id), g.group_epoch, g.assignment_epoch, "consumer")

    def describe_share_group(self, group_id):
        """GroupInfo of a KIP-932 share group (protocol type "share", the assignor as its
        protocol, each member's epoch and assignment; a partition may be in several members'),
        or None when there is none by that id."""
        body = _req(ApiKey.SHARE_GROUP_DESCRIBE)(group_ids=[group_id], include_authorized_operations=False)
        node, resp = self._call_coordinator(group_id, ApiKey.SHARE_GROUP_DESCRIBE, body,
                                            lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code == GroupIdNotFoundError.code:
            return None
        _raise(g.error_code, f"group {group_id!r}", g.error_message)
        members = [MemberInfo(m.member_id, None, m.client_id, m.client_host,
                              sorted((tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions),
                              m.member_epoch)
                   for m in g.members]
        return GroupInfo(g.group_id, g.group_state, "share", g.assignor_name, node,
                         sorted(members, key=lambda m: m.member_id), g.group_epoch, g.assignment_epoch, "share")

    def list_group_offsets(self, group_id: str, partitions=None) -> dict:
        """{(topic, partition): committed offset} of ``group_id`` (all its partitions, or those
        asked; partitions without a commit are left out).

        All partitions are asked with a null topic list; a broker whose answer to that does not
        decode (tansu 0.x sends a null or truncated topic list) is asked again for every
        partition of every topic by name."""
        if partitions is None:
            try:
                return self._group_offsets(group_id, None)
            except ConnectionClosed as e:
                if not isinstance(e.__cause__, (ProtocolDecodeError, ValueError, struct.error)):
                    raise
            _, topics = self.metadata(None)
            partitions = [(t.name, p.partition) for t in topics.values() for p in t.partitions]
            if not partitions:
                return {}
        return self._group_offsets(group_id, partitions)

    def _group_offsets(self, group_id: str, partitions) -> dict:
        topics = None
        if partitions is not None:
            by_topic = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            tcls = _req(ApiKey.OFFSET_FETCH, "OffsetFetchRequestTopic")
            topics = [tcls(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        body = _req(ApiKey.OFFSET_FETCH)(group_id=group_id, topics=topics, require_stable=False)
        _, resp = self._call_coordinator(group_id, ApiKey.OFFSET_FETCH, body, lambda r: r.error_code)
        _raise(resp.error_code, f"group {group_id!r}")
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                _raise(p.error_code, f"group {group_id!r} partition {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return dict(sorted(out.items()))

    def alter_group_offsets(self, group_id: str, offsets: dict):
        """Commits {(topic, partition): offset} for a group with no active members (an admin
        commit, generation -1, as kafka-consumer-groups.sh --reset-offsets does)."""
        pcls = _req(ApiKey.OFFSET_COMMIT, "OffsetCommitRequestPartition")
        tcls = _req(ApiKey.OFFSET_COMMIT, "OffsetCommitRequestTopic")
        by_topic = {}
        for (t, p), off in offsets.items():
            by_topic.setdefault(t, []).append(pcls(partition_index=p, committed_offset=off,
                                                   committed_leader_epoch=-1, committed_metadata=""))
        body = _req(ApiKey.OFFSET_COMMIT)(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, retention_time_ms=-1,
                                   topics=[tcls(name=t, partitions=ps) for t, ps in by_topic.items()])
        _, resp = self._call_coordinator(group_id, ApiKey.OFFSET_COMMIT, body,
                                         lambda r: r.topics[0].partitions[0].error_code if r.topics else 0)
        for t in resp.topics:
            for p in t.partitions:
                _raise(p.error_code, f"group {group_id!r} partition {t.name}-{p.partition_index}")

    def delete_group(self, group_id: str):
        body = _req(ApiKey.DELETE_GROUPS)(groups_names=[group_id])
        _, resp = self._call_coordinator(group_id, ApiKey.DELETE_GROUPS, body, lambda r: r.results[0].error_code)
        for r in resp.results:
            _raise(r.error_code, f"group {r.group_id!r}")

    def delete_group_offsets(self, group_id: str, partitions):
        by_topic = {}
        partition_cls = _req(ApiKey.OFFSET_DELETE, "OffsetDeleteRequestPartition")
        topic_cls = _req(ApiKey.OFFSET_DELETE, "OffsetDeleteRequestTopic")
        for t, p in partitions:
            by_topic.setdefault(t, []).append(partition_cls(partition_index=p))
        body = _req(ApiKey.OFFSET_DELETE)(group_id=group_id, topics=[
            topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()])
        _, resp = self._call_coordinator(group_id, ApiKey.OFFSET_DELETE, body, lambda r: r.error_code)
        _raise(resp.error_code, f"group {group_id!r}")
        for t in resp.topics:
            for p in t.partitions:
                _raise(p.error_code, f"group {group_id!r} partition {t.name}-{p.partition_index}")

    # -- share groups' offsets (KIP-932, Kafka 4.1's admin APIs 90-92) ----------------------
    def describe_share_group_offsets(self, group_id: str, partitions=None) -> dict:
        """{(topic, partition): (start offset, leader epoch)} of a share group: the SPSO of each
        share partition (-1: no state yet). ``partitions`` None: every partition that has state."""
        topics = None
        if partitions is not None:
            by_topic = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            tcls = _req(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsetsRequestTopic")
            topics = [tcls(topic_name=t, partitions=ps) for t, ps in by_topic.items()]
        gcls = _req(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsetsRequestGroup")
        body = _req(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)(groups=[gcls(group_id=group_id, topics=topics)])
        _, resp = self._call_coordinator(group_id, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, body,
                                         lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        _raise(g.error_code, f"share group {group_id!r}", g.error_message)
        out = {}
        for t in g.topics:
            for p in t.partitions:
                _raise(p.error_code, f"share group {group_id!r} partition {t.topic_name}-{p.partition_index}",
                       p.error_message)
                out[(t.topic_name, p.partition_index)] = (p.start_offset, p.leader_epoch)
        return dict(sorted(out.items()))

    def alter_share_group_offsets(self, group_id: str, offsets: dict):
        """Sets {(topic, partition): start offset} of an empty share group (NonEmptyGroupError
        while it has members)."""
        pcls = _req(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsetsRequestPartition")
        tcls = _req(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsetsRequestTopic")
        by_topic = {}
        for (t, p), off in offsets.items():
            by_topic.setdefault(t, []).append(pcls(partition_index=p, start_offset=off))
        body = _req(ApiKey.ALTER_SHARE_GROUP_OFFSETS)(group_id=group_id, topics=[
            tcls(topic_name=t, partitions=ps) for t, ps in by_topic.items()])
        _, resp = self._call_coordinator(group_id, ApiKey.ALTER_SHARE_GROUP_OFFSETS, body, lambda r: r.error_code)
        _raise(resp.error_code, f"share group {group_id!r}", resp.error_message)
        for t in resp.responses:
            for p in t.partitions:
                _raise(p.error_code, f"share group {group_id!r} partition {t.topic_name}-{p.partition_index}",
                       p.error_message)

    def delete_share_group_offsets(self, group_id: str, topics):
        """Deletes an empty share group's state on whole topics: it starts again at
        share.auto.offset.reset."""
        tcls = _req(ApiKey.DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsetsRequestTopic")
        body = _req(ApiKey.DELETE_SHARE_GROUP_OFFSETS)(group_id=group_id, topics=[tcls(topic_name=t) for t in topics])
        _, resp = self._call_coordinator(group_id, ApiKey.DELETE_SHARE_GROUP_OFFSETS, body, lambda r: r.error_code)
        _raise(resp.error_code, f"share group {group_id!r}", resp.error_message)
        for t in resp.responses:
            _raise(t.error_code, f"share group {group_id!r} topic {t.topic_name}", t.error_message)

    # -- storage ----------------------------------------------------------------------------
    def describe_log_dirs(self) -> list:
        """[LogDirInfo] of every broker that serves DescribeLogDirs (the others are left out:
        a tool shows their sizes as unknown), by broker id."""
        out = []
        for b in self.describe_cluster().brokers:
            try:
                self._connection(b.node_id).version(ApiKey.DESCRIBE_LOG_DIRS)
            except UnsupportedVersionError:
                continue
            resp = self.call_node(b.node_id, ApiKey.DESCRIBE_LOG_DIRS, _req(ApiKey.DESCRIBE_LOG_DIRS)(topics=None))
            _raise(resp.error_code, f"DescribeLogDirs on broker {b.node_id}")
            for d in resp.results:
                sizes = {(t.name, p.partition_index): p.partition_size
                         for t in d.topics for p in t.partitions if not p.is_future_key}
                out.append(LogDirInfo(b.node_id, d.log_dir, error_name(d.error_code) if d.error_code else None,
                                      d.total_bytes, d.usable_bytes, sizes))
        return out

    def log_dir_sizes(self) -> dict:
        """{(topic, partition, broker): bytes on that broker's disk} from DescribeLogDirs (future
        replicas and brokers without the API left out)."""
        return {(t, p, d.broker): size for d in self.describe_log_dirs() for (t, p), size in d.sizes.items()}

    # -- replicas ---------------------------------------------------------------------------
    def elect_leaders(self, partitions=None, election_type: int = PREFERRED) -> dict:
        """ElectLeaders for [(topic, partition)] (None: every partition) -> {(topic, partition):
        None (elected) or the error name, with the broker's message after a colon}; the caller
        decides whether ELECTION_NOT_NEEDED is a failure."""
        tps = None
        if partitions is not None:
            by_topic = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            tps = [_req(ApiKey.ELECT_LEADERS, "TopicPartitions")(topic=t, partitions=ps) for t, ps in by_topic.items()]
        body = _req(ApiKey.ELECT_LEADERS)(election_type=election_type, topic_partitions=tps,
                                   timeout_ms=int(self.timeout * 1000))
        resp = self._call_controller(ApiKey.ELECT_LEADERS, body, lambda r: [r.error_code])
        _raise(resp.error_code, "ElectLeaders")
        out = {}
        for r in resp.replica_election_results:
            for p in r.partition_result:
                out[(r.topic, p.partition_id)] = None if not p.error_code else (
                    error_name(p.error_code) + (f": {p.error_message}" if p.error_message else ""))
        return out

    def alter_partition_reassignments(self, targets: dict) -> dict:
        """{(topic, partition): [broker ids] or None (cancel)} -> {(topic, partition): None
        (started, or cancelled) or the error name with the broker's message after a colon}."""
        by_topic = {}
        for (t, p), replicas in targets.items():
            by_topic.setdefault(t, []).append(_req(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "ReassignablePartition")(
                partition_index=p, replicas=None if replicas is None else list(replicas)))
        body = _req(ApiKey.ALTER_PARTITION_REASSIGNMENTS)(timeout_ms=int(self.timeout * 1000), topics=[
            _req(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "ReassignableTopic")(name=t, partitions=ps)
            for t, ps in by_topic.items()])
        resp = self._call_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, lambda r: [r.error_code])
        _raise(resp.error_code, "AlterPartitionReassignments", resp.error_message)
        return {(t.name, p.partition_index): None if not p.error_code else (
                    error_name(p.error_code) + (f": {p.error_message}" if p.error_message else ""))
                for t in resp.responses for p in t.partitions}

    def list_partition_reassignments(self) -> dict:
        """{(topic, partition): (replicas, adding, removing)} of the reassignments in progress."""
        body = _req(ApiKey.LIST_PARTITION_REASSIGNMENTS)(timeout_ms=int(self.timeout * 1000), topics=None)
        resp = self._call_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, body, lambda r: [r.error_code])
        _raise(resp.error_code, "ListPartitionReassignments", resp.error_message)
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in resp.topics for p in t.partitions}

    # -- users' SCRAM credentials (KIP-554) ---------------------------------------------------
    def describe_user_scram_credentials(self, users=None) -> dict:
        """{user: [(mechanism name, iterations)]}; ``users`` None: every user with a credential.
        A named user without one raises RESOURCE_NOT_FOUND."""
        from ..security.scram import MECHANISMS_BY_TYPE

        names = None if users is None else [_req(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "UserName")(name=u)
                                             for u in users]
        resp = self.call_any(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                             _req(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)(users=names))
        _raise(resp.error_code, "DescribeUserScramCredentials", resp.error_message)
        out = {}
        for r in resp.results:
            _raise(r.error_code, f"user {r.user!r}", r.error_message)
            out[r.user] = [(MECHANISMS_BY_TYPE[c.mechanism].name if c.mechanism in MECHANISMS_BY_TYPE
                            else f"mechanism {c.mechanism}", c.iterations) for c in r.credential_infos]
        return out

    def alter_user_scram_credentials(self, upsertions=(), deletions=()):
        """``upsertions``: [(user, mechanism name, password, iterations)], salted here (the
        password never leaves this process); ``deletions``: [(user, mechanism name)]. Raises the
        first user's error."""
        import os

        from ..security import scram

        up_cls = _req(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "ScramCredentialUpsertion")
        del_cls = _req(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "ScramCredentialDeletion")
        ups = []
        for user, mechanism, password, iterations in upsertions:
            m = scram.MECHANISMS[mechanism]
            salt = os.urandom(scram.SALT_BYTES)
            ups.append(up_cls(name=user, mechanism=m.type_id, iterations=iterations, salt=salt,
                              salted_password=scram.salted_password(m, password, salt, iterations)))
        dels = [del_cls(name=user, mechanism=scram.MECHANISMS[mechanism].type_id) for user, mechanism in deletions]
        resp = self.call_any(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                             _req(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)(deletions=dels, upsertions=ups))
        for r in resp.results:
            _raise(r.error_code, f"user {r.user!r}", r.error_message)

    # -- client quotas (KIP-546) ------------------------------------------------------------------
    def describe_client_quotas(self, components=(), strict=False) -> list:
        """[(entity, {quota key: value})] where an entity is [(entity type, name or None for the
        default)]; ``components``: [(entity type, match)] with match a name, None (the default)
        or ANY_NAME."""
        comp_cls = _req(ApiKey.DESCRIBE_CLIENT_QUOTAS, "ComponentData")
        comps = [comp_cls(entity_type=t, match_type=2 if m is ANY_NAME else 1 if m is None else 0,
                          match=None if m is ANY_NAME or m is None else m) for t, m in components]
        resp = self.call_any(ApiKey.DESCRIBE_CLIENT_QUOTAS, _req(ApiKey.DESCRIBE_CLIENT_QUOTAS)(
            components=comps, strict=strict))
        _raise(resp.error_code, "DescribeClientQuotas", resp.error_message)
        return [([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry.values})
                for entry in resp.entries or []]

    def alter_client_quotas(self, entity, set_quotas=None, remove=(), validate_only=False):
        """Sets ``set_quotas`` ({key: value}) and removes the keys in ``remove`` for ``entity``
        ([(entity type, name or None for the default)])."""
        ent_cls = _req(ApiKey.ALTER_CLIENT_QUOTAS, "EntityData")
        op_cls = _req(ApiKey.ALTER_CLIENT_QUOTAS, "OpData")
        ops = [op_cls(key=k, value=float(v), remove=False) for k, v in (set_quotas or {}).items()]
        ops += [op_cls(key=k, value=0.0, remove=True) for k in remove]
        entry = _req(ApiKey.ALTER_CLIENT_QUOTAS, "EntryData")(
            entity=[ent_cls(entity_type=t, entity_name=n) for t, n in entity], ops=ops)
        resp = self.call_any(ApiKey.ALTER_CLIENT_QUOTAS, _req(ApiKey.ALTER_CLIENT_QUOTAS)(
            entries=[entry], validate_only=validate_only))
        for e in resp.entries:
            _raise(e.error_code, "AlterClientQuotas", e.error_message)

    # -- ACLs ----------------------------------------------------------------------------------
    def create_acls(self, bindings) -> None:
        """Adds the ACLs (security/acl.py AclBinding); raises the first one's error."""
        creation = _req(ApiKey.CREATE_ACLS, "AclCreation")
        body = _req(ApiKey.CREATE_ACLS)(creations=[creation(
            resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
            resource_pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal, host=b.entry.host,
            operation=int(b.entry.operation), permission_type=int(b.entry.permission_type)) for b in bindings])
        resp = self.call_any(ApiKey.CREATE_ACLS, body)
        for b, r in zip(bindings, resp.results):
            _raise(r.error_code, f"ACL {_acl_text(b)}", r.error_message)

    def describe_acls(self, binding_filter) -> list:
        """The ACLs the filter (security/acl.py AclBindingFilter) matches, as AclBindings."""
        pf, ef = binding_filter.pattern, binding_filter.entry
        body = _req(ApiKey.DESCRIBE_ACLS)(
            resource_type_filter=int(pf.resource_type), resource_name_filter=pf.name,
            pattern_type_filter=int(pf.pattern_type), principal_filter=ef.principal, host_filter=ef.host,
            operation=int(ef.operation), permission_type=int(ef.permission_type))
        resp = self.call_any(ApiKey.DESCRIBE_ACLS, body)
        _raise(resp.error_code, "DescribeAcls", resp.error_message)
        return [_binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                         a.permission_type) for r in resp.resources for a in r.acls]

    def delete_acls(self, filters) -> list:
        """Per filter, the AclBindings it deleted; raises the first filter's error."""
        flt = _req(ApiKey.DELETE_ACLS, "DeleteAclsFilter")
        body = _req(ApiKey.DELETE_ACLS)(filters=[flt(
            resource_type_filter=int(f.pattern.resource_type), resource_name_filter=f.pattern.name,
            pattern_type_filter=int(f.pattern.pattern_type), principal_filter=f.entry.principal,
            host_filter=f.entry.host, operation=int(f.entry.operation),
            permission_type=int(f.entry.permission_type)) for f in filters])
        resp = self.call_any(ApiKey.DELETE_ACLS, body)
        out = []
        for r in resp.filter_results:
            _raise(r.error_code, "DeleteAcls", r.error_message)
            out.append([_binding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                                 m.permission_type) for m in r.matching_acls])
        return out

    # -- helpers ----------------------------------------------------------------------------
    def _wait(self, done, what):
        deadline = time.monotonic() + self.timeout
        while not done():
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"waited {self.timeout:.0f} s for {what}")
            time.sleep(0.05)


def uuid_text(raw) -> str | None:
    """A topic id as Kafka prints it (Uuid.toString: URL-safe base64, no padding); None for
    the zero id a broker without topic ids sends."""
    raw = bytes(raw or b"")
    if len(raw) != 16 or not any(raw):
        return None
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _resource_name(resource_type):
    return {TOPIC_RESOURCE: "topic", BROKER_RESOURCE: "broker"}.get(resource_type, f"resource type {resource_type}")


def _binding(rtype, name, pattern_type, principal, host, operation, permission):
    from ..security.acl import (AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType,
                                ResourcePattern, ResourceType)
    return AclBinding(ResourcePattern(ResourceType.from_code(rtype), name, PatternType.from_code(pattern_type)),
                      AccessControlEntry(principal, host, AclOperation.from_code(operation),
                                         AclPermissionType.from_code(permission)))


def _acl_text(b) -> str:
    return (f"{b.entry.permission_type.name} {b.entry.principal} {b.entry.operation.name} from {b.entry.host} on "
            f"{b.pattern.resource_type.name} {b.pattern.pattern_type.name} {b.pattern.name!r}")


def _raise(code, what, message=None):
    if code:
        err = error_for_code(code, f"{what}: {message}" if message else what)
        raise err


def _parse_address(text: str) -> tuple[str, int]:
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{text!r} is not HOST:PORT")
    try:
        n = int(port)
    except ValueError:
        raise ValueError(f"{text!r} is not HOST:PORT (the port is not a number)") from None
    if not 0 < n < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT (port out of range)")
    return host.strip("[]"), n
