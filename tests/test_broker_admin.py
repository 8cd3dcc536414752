"""The admin APIs against a real ``kafkacore serve`` process: CreateTopics, DeleteTopics,
CreatePartitions, DeleteRecords, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
DescribeCluster, DescribeLogDirs and OffsetForLeaderEpoch, at their lowest and highest versions, with Kafka's
error codes; configs reaching the live logs (segment rolling, retention, max.message.bytes)
and surviving restarts; and confluent-kafka's and kafka-python's admin clients end to end."""
import os
import time

import pytest

from kafkacore.protocol.messages.alter_configs_request import AlterableConfig as LegacyConfig
from kafkacore.protocol.messages.alter_configs_request import AlterConfigsRequest
from kafkacore.protocol.messages.alter_configs_request import AlterConfigsResource as LegacyResource
from kafkacore.protocol.messages.create_partitions_request import (CreatePartitionsAssignment,
                                                                   CreatePartitionsRequest, CreatePartitionsTopic)
from kafkacore.protocol.messages.create_topics_request import (CreatableReplicaAssignment, CreatableTopic,
                                                               CreatableTopicConfig, CreateTopicsRequest)
from kafkacore.protocol.messages.delete_records_request import (DeleteRecordsPartition, DeleteRecordsRequest,
                                                                DeleteRecordsTopic)
from kafkacore.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from kafkacore.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kafkacore.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kafkacore.protocol.messages.describe_log_dirs_request import DescribableLogDirTopic, DescribeLogDirsRequest
from kafkacore.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                           IncrementalAlterConfigsRequest)
from kafkacore.protocol.messages.list_offsets_request import (ListOffsetsPartition, ListOffsetsRequest,
                                                              ListOffsetsTopic)
from kafkacore.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kafkacore.protocol.messages.offset_for_leader_epoch_request import (OffsetForLeaderEpochRequest,
                                                                         OffsetForLeaderPartition,
                                                                         OffsetForLeaderTopic)
from kafkacore.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafkacore.protocol.wire import ZERO_UUID
from kafkacore.record import RecordBatchBuilder

from broker_client import BrokerProcess

NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE = 0, 1, 3, 10
INVALID_TOPIC, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR = 17, 36, 37, 38
INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST, POLICY_VIOLATION = 39, 40, 42, 44
TOPIC_DELETION_DISABLED, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID = 73, 74, 75, 100
MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 114, 115
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
NODE = 1

SETTINGS = {"log.retention.ms": "86400000", "log.retention.check.interval.ms": "100"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("admin") / "data", settings=SETTINGS) as b:
        yield b


@pytest.fixture()
def conn(broker):
    with broker.client() as c:
        yield c


# -- helpers ------------------------------------------------------------------------------------
def create(c, name, partitions=1, v=7, configs=None, rf=1, validate_only=False, assignments=()):
    req = CreateTopicsRequest(timeout_ms=10000, validate_only=validate_only, topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CreatableReplicaAssignment(partition_index=p, broker_ids=b) for p, b in assignments],
        configs=[CreatableTopicConfig(name=k, value=val) for k, val in (configs or {}).items()])])
    return c.call(19, v, req).topics[0]


def created(c, name, partitions=1, configs=None):
    r = create(c, name, partitions, configs=configs)
    assert r.error_code == NONE, r
    return r


def metadata(c, *names):
    resp = c.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in names],
                                         allow_auto_topic_creation=False))
    return {t.name: t for t in resp.topics}


def produce(c, topic, partition, values, expect=NONE):
    b = RecordBatchBuilder()
    for i, val in enumerate(values):
        b.append(val, key=b"k%d" % i)
    req = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=b.build())])])
    pr = c.call(0, 9, req).responses[0].partition_responses[0]
    assert pr.error_code == expect, pr
    return pr.base_offset


def earliest(c, topic, partition=0, timestamp=-2):
    req = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=topic, partitions=[
        ListOffsetsPartition(partition_index=partition, timestamp=timestamp)])])
    p = c.call(2, 7, req).topics[0].partitions[0]
    assert p.error_code == NONE, p
    return p.offset


def describe(c, rtype, name, keys=None, v=4, synonyms=False, docs=False):
    req = DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                                                    configuration_keys=keys)],
                                 include_synonyms=synonyms, include_documentation=docs)
    return c.call(32, v, req).results[0]


def topic_configs(c, name, v=4, **kw):
    r = describe(c, TOPIC, name, v=v, **kw)
    assert r.error_code == NONE, r
    return {e.name: e for e in r.configs}


def incremental(c, rtype, name, ops, v=1, validate_only=False):
    req = IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[AlterableConfig(name=k, config_operation=op, value=val) for k, op, val in ops])])
    return c.call(44, v, req).responses[0]


def legacy_alter(c, rtype, name, configs, v=2, validate_only=False):
    req = AlterConfigsRequest(validate_only=validate_only, resources=[LegacyResource(
        resource_type=rtype, resource_name=name,
        configs=[LegacyConfig(name=k, value=val) for k, val in configs.items()])])
    return c.call(33, v, req).responses[0]


def delete_records(c, topic, offsets, v=2):
    req = DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsTopic(name=topic, partitions=[
        DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets.items()])])
    return {p.partition_index: p for p in c.call(21, v, req).topics[0].partitions}


def create_partitions(c, topic, count, v=3, assignments=None, validate_only=False):
    req = CreatePartitionsRequest(timeout_ms=5000, validate_only=validate_only, topics=[CreatePartitionsTopic(
        name=topic, count=count,
        assignments=None if assignments is None else [CreatePartitionsAssignment(broker_ids=b) for b in assignments])])
    return c.call(37, v, req).results[0]


def segment_files(broker, topic, partition=0):
    d = os.path.join(broker.data_dir, f"{topic}-{partition}")
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


# -- CreateTopics -------------------------------------------------------------------------------
def test_create_topics_v0_and_v7(conn):
    r0 = create(conn, "ct-v0", 3, v=0)
    assert (r0.name, r0.error_code) == ("ct-v0", NONE)
    assert len(metadata(conn, "ct-v0")["ct-v0"].partitions) == 3

    r7 = create(conn, "ct-v7", -1, rf=-1, configs={"retention.ms": "3600000", "cleanup.policy": "compact,delete"})
    assert r7.error_code == NONE and r7.error_message is None
    assert (r7.num_partitions, r7.replication_factor) == (1, 1)  # num.partitions / default.replication.factor
    assert r7.topic_id != ZERO_UUID and r7.topic_id == metadata(conn, "ct-v7")["ct-v7"].topic_id
    cfg = {e.name: e for e in r7.configs}
    assert (cfg["retention.ms"].value, cfg["retention.ms"].config_source) == ("3600000", DYNAMIC_TOPIC_CONFIG)
    assert (cfg["cleanup.policy"].value, cfg["cleanup.policy"].config_source) == ("compact,delete",
                                                                                  DYNAMIC_TOPIC_CONFIG)
    assert (cfg["segment.bytes"].value, cfg["segment.bytes"].config_source) == ("1073741824", DEFAULT_CONFIG)
    assert not any(e.read_only or e.is_sensitive for e in r7.configs)
    assert topic_configs(conn, "ct-v7")["retention.ms"].value == "3600000"


def test_create_topics_manual_assignment_and_validate_only(conn):
    r = create(conn, "ct-assigned", -1, rf=-1, assignments=[(0, [NODE]), (1, [NODE])])
    assert r.error_code == NONE and r.num_partitions == 2
    r = create(conn, "ct-validate", 4, validate_only=True, configs={"segment.bytes": "100000"})
    assert r.error_code == NONE and r.num_partitions == 4
    assert {e.name: e.value for e in r.configs}["segment.bytes"] == "100000"
    assert metadata(conn, "ct-validate")["ct-validate"].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert create(conn, "ct-validate", 4, v=1, validate_only=True).error_code == NONE  # v1: first with it


@pytest.mark.parametrize("v", [1, 7])
def test_create_topics_errors(conn, v):
    created(conn, f"ct-exists.{v}")
    cases = [
        (dict(name=f"ct-exists.{v}"), TOPIC_ALREADY_EXISTS, "already exists"),
        (dict(name=f"ct-exists_{v}"), INVALID_TOPIC, "collides"),
        (dict(name="bad/name"), INVALID_TOPIC, None),
        (dict(name="x" * 250), INVALID_TOPIC, None),
        (dict(name=f"ct-p0-{v}", partitions=0), INVALID_PARTITIONS, "non-positive"),
        (dict(name=f"ct-p0-{v}", partitions=-5), INVALID_PARTITIONS, None),
        (dict(name=f"ct-rf3-{v}", rf=3), INVALID_REPLICATION_FACTOR, "only 1 broker"),
        (dict(name=f"ct-rf0-{v}", rf=0), INVALID_REPLICATION_FACTOR, None),
        (dict(name=f"ct-cfg-{v}", configs={"retention.ms": "soon"}), INVALID_CONFIG, "retention.ms"),
        (dict(name=f"ct-cfg-{v}", configs={"no.such.config": "1"}), INVALID_CONFIG, "no.such.config"),
        (dict(name=f"ct-cfg-{v}", configs={"retention.ms": None}), INVALID_CONFIG, "Null value"),
        (dict(name=f"ct-as-{v}", partitions=2, rf=-1, assignments=[(0, [NODE])]), INVALID_REQUEST, "numPartitions"),
        (dict(name=f"ct-as-{v}", partitions=-1, assignments=[(0, [NODE])]), INVALID_REQUEST, "replication factor"),
        (dict(name=f"ct-as-{v}", partitions=-1, rf=-1, assignments=[(0, [NODE, 2])]),
         INVALID_REPLICA_ASSIGNMENT, "broker 2"),
        (dict(name=f"ct-as-{v}", partitions=-1, rf=-1, assignments=[(1, [NODE])]), INVALID_REPLICA_ASSIGNMENT, None),
        (dict(name="__cluster_metadata"), INVALID_REQUEST, "prohibited"),
    ]
    for kw, code, text in cases:
        name = kw.pop("name")
        r = create(conn, name, v=v, **kw)
        assert r.error_code == code, (name, kw, r)
        if text:
            assert text in r.error_message, r
    # ... and nothing was created
    assert all(t.error_code == UNKNOWN_TOPIC_OR_PARTITION
               for n, t in metadata(conn, f"ct-p0-{v}", f"ct-rf3-{v}", f"ct-cfg-{v}", f"ct-as-{v}").items())
    # duplicates: each copy refused, the rest of the request is served
    req = CreateTopicsRequest(timeout_ms=1000, topics=[CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                                                       for n in (f"ct-dup-{v}", f"ct-ok-{v}", f"ct-dup-{v}")])
    res = {(t.name, t.error_code, t.error_message) for t in conn.call(19, v, req).topics}
    assert res == {(f"ct-ok-{v}", NONE, None), (f"ct-dup-{v}", INVALID_REQUEST, "Duplicate topic name.")}


# -- DeleteTopics -------------------------------------------------------------------------------
def test_delete_topics_v0_by_name(conn):
    created(conn, "dt-a")
    produce(conn, "dt-a", 0, [b"x"] * 3)
    resp = conn.call(20, 0, DeleteTopicsRequest(topic_names=["dt-a", "dt-missing"], timeout_ms=1000))
    assert {(r.name, r.error_code) for r in resp.responses} == {("dt-a", NONE),
                                                                 ("dt-missing", UNKNOWN_TOPIC_OR_PARTITION)}
    assert metadata(conn, "dt-a")["dt-a"].error_code == UNKNOWN_TOPIC_OR_PARTITION
    created(conn, "dt-a")  # the name is free again, and the new topic is empty
    assert earliest(conn, "dt-a", timestamp=-1) == 0


def test_delete_topics_v6_by_id(conn):
    tid = created(conn, "dt-b").topic_id
    created(conn, "dt-c")
    other_id = b"\x01" * 16
    topics = [DeleteTopicState(topic_id=tid), DeleteTopicState(topic_id=other_id),
              DeleteTopicState(name="dt-c", topic_id=tid), DeleteTopicState(name=None),
              DeleteTopicState(name="dt-x"), DeleteTopicState(name="dt-x")]
    resp = conn.call(20, 6, DeleteTopicsRequest(topics=topics, timeout_ms=1000))
    got = {(r.name, r.topic_id, r.error_code) for r in resp.responses}
    assert got == {("dt-b", tid, NONE), (None, other_id, UNKNOWN_TOPIC_ID), ("dt-c", tid, INVALID_REQUEST),
                   (None, ZERO_UUID, INVALID_REQUEST), ("dt-x", ZERO_UUID, INVALID_REQUEST)}
    meta = metadata(conn, "dt-b", "dt-c")  # dt-c was named both ways: not deleted
    assert (meta["dt-b"].error_code, meta["dt-c"].error_code) == (UNKNOWN_TOPIC_OR_PARTITION, NONE)


def test_delete_internal_topic_refused(conn):
    assert create(conn, "__transaction_state").error_code in (NONE, TOPIC_ALREADY_EXISTS)
    resp = conn.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="__transaction_state")]))
    assert resp.responses[0].error_code == INVALID_TOPIC
    assert metadata(conn, "__transaction_state")["__transaction_state"].error_code == NONE


def test_delete_topics_disabled(tmp_path):
    with BrokerProcess(tmp_path / "data", settings={"delete.topic.enable": "false"}) as b, b.client() as c:
        created(c, "keep")
        assert c.call(20, 2, DeleteTopicsRequest(topic_names=["keep"])).responses[0].error_code == INVALID_REQUEST
        r = c.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="keep")])).responses[0]
        assert (r.name, r.error_code) == ("keep", TOPIC_DELETION_DISABLED)
        assert metadata(c, "keep")["keep"].error_code == NONE


# -- CreatePartitions ---------------------------------------------------------------------------
@pytest.mark.parametrize("v", [0, 3])
def test_create_partitions(conn, v):
    t = f"cp-{v}"
    created(conn, t)
    assert create_partitions(conn, t, 3, v=v, validate_only=True).error_code == NONE
    assert len(metadata(conn, t)[t].partitions) == 1
    r = create_partitions(conn, t, 3, v=v)
    assert (r.error_code, r.error_message) == (NONE, None)
    assert [p.partition_index for p in metadata(conn, t)[t].partitions] == [0, 1, 2]
    assert produce(conn, t, 2, [b"new"]) == 0
    r = create_partitions(conn, t, 3, v=v)
    assert (r.error_code, r.error_message) == (INVALID_PARTITIONS, "Topic already has 3 partition(s).")
    assert create_partitions(conn, t, 2, v=v).error_code == INVALID_PARTITIONS
    assert create_partitions(conn, "cp-missing", 2, v=v).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert create_partitions(conn, t, 5, v=v, assignments=[[NODE]]).error_code == INVALID_REPLICA_ASSIGNMENT
    assert create_partitions(conn, t, 4, v=v, assignments=[[2]]).error_code == INVALID_REPLICA_ASSIGNMENT
    assert create_partitions(conn, t, 4, v=v, assignments=[[NODE, NODE]]).error_code == INVALID_REPLICA_ASSIGNMENT
    assert create_partitions(conn, t, 5, v=v, assignments=[[NODE], [NODE]]).error_code == NONE
    req = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name=t, count=9, assignments=None)] * 2)
    r = conn.call(37, v, req).results
    assert [(x.name, x.error_code) for x in r] == [(t, INVALID_REQUEST)]
    assert len(metadata(conn, t)[t].partitions) == 5


# -- DeleteRecords ------------------------------------------------------------------------------
@pytest.mark.parametrize("v", [0, 2])
def test_delete_records(conn, v):
    t = f"dr-{v}"
    created(conn, t, 2)
    for i in range(5):
        produce(conn, t, 0, [b"a", b"b"])  # 10 records, offsets 0-9
    r = delete_records(conn, t, {0: 4, 1: 0}, v=v)
    assert (r[0].error_code, r[0].low_watermark) == (NONE, 4)
    assert (r[1].error_code, r[1].low_watermark) == (NONE, 0)
    assert earliest(conn, t) == 4
    assert delete_records(conn, t, {0: 2}, v=v)[0].low_watermark == 4  # below the start: no change
    r = delete_records(conn, t, {0: 11, 1: -7, 5: 1}, v=v)
    assert [(r[p].error_code, r[p].low_watermark) for p in (0, 1, 5)] == [
        (OFFSET_OUT_OF_RANGE, -1), (OFFSET_OUT_OF_RANGE, -1), (UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert delete_records(conn, t, {0: -1}, v=v)[0].low_watermark == 10  # -1: the high watermark
    assert earliest(conn, t) == 10 and earliest(conn, t, timestamp=-1) == 10
    assert produce(conn, t, 0, [b"c"]) == 10


def test_delete_records_policy_and_internal(conn):
    created(conn, "dr-compact", configs={"cleanup.policy": "compact"})
    assert delete_records(conn, "dr-compact", {0: 0})[0].error_code == POLICY_VIOLATION
    assert create(conn, "__transaction_state").error_code in (NONE, TOPIC_ALREADY_EXISTS)
    assert delete_records(conn, "__transaction_state", {0: 0})[0].error_code == INVALID_TOPIC
    assert delete_records(conn, "dr-missing", {0: 0})[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


# -- DescribeConfigs ----------------------------------------------------------------------------
def test_describe_configs_topic(conn):
    created(conn, "dc-t", configs={"retention.bytes": "123456"})
    v4 = topic_configs(conn, "dc-t", synonyms=True, docs=True)
    rb, rm, seg = v4["retention.bytes"], v4["retention.ms"], v4["segment.bytes"]
    assert (rb.value, rb.config_source, rb.config_type, rb.read_only, rb.is_sensitive) == (
        "123456", DYNAMIC_TOPIC_CONFIG, 5, False, False)
    assert [(s.name, s.value, s.source) for s in rb.synonyms] == [
        ("retention.bytes", "123456", DYNAMIC_TOPIC_CONFIG), ("log.retention.bytes", "-1", DEFAULT_CONFIG)]
    # the broker's log.retention.ms is the topic's default: STATIC_BROKER_CONFIG
    assert (rm.value, rm.config_source) == ("86400000", STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in rm.synonyms] == [
        ("log.retention.ms", "86400000", STATIC_BROKER_CONFIG), ("log.retention.hours", "168", DEFAULT_CONFIG)]
    assert (seg.config_source, seg.config_type) == (DEFAULT_CONFIG, 3) and "roll" in seg.documentation
    assert v4["cleanup.policy"].config_type == 7 and v4["preallocate"].config_type == 1
    assert v4["min.cleanable.dirty.ratio"].config_type == 6
    # v0: is_default instead of config_source; no synonyms
    v0 = topic_configs(conn, "dc-t", v=0)
    assert not v0["retention.bytes"].is_default and v0["segment.bytes"].is_default
    assert v0["retention.ms"].is_default  # not set on the topic
    # without include_synonyms / include_documentation
    v4 = topic_configs(conn, "dc-t")
    assert v4["retention.bytes"].synonyms == [] and v4["retention.bytes"].documentation is None
    # keys filter (unknown keys are left out); empty list means all
    r = describe(conn, TOPIC, "dc-t", keys=["retention.bytes", "flush.ms", "nope"], v=1)
    assert sorted(e.name for e in r.configs) == ["flush.ms", "retention.bytes"]
    assert len(describe(conn, TOPIC, "dc-t", keys=[]).configs) == len(v4)


def test_kafka_3_deprecated_topic_configs_are_accepted_and_ignored(conn):
    """message.format.version and message.downconversion.enable (deprecated by Kafka 3.x, still in
    3.x tools' scripts and Terraform files) are taken as Kafka 3.7 takes them: validated, stored,
    described; they change nothing, records are v2 batches either way."""
    created(conn, "dc-deprecated", configs={"message.format.version": "2.8-IV1",
                                            "message.downconversion.enable": "false"})
    got = topic_configs(conn, "dc-deprecated")
    assert (got["message.format.version"].value, got["message.format.version"].config_source) == (
        "2.8-IV1", DYNAMIC_TOPIC_CONFIG)
    assert got["message.downconversion.enable"].value == "false"
    created(conn, "dc-deprecated-defaults")
    defaults = topic_configs(conn, "dc-deprecated-defaults")
    assert (defaults["message.format.version"].value, defaults["message.downconversion.enable"].value) == (
        "3.0-IV1", "true")
    produce(conn, "dc-deprecated", 0, [b"still v2"])
    for bad in ({"message.format.version": "latest"}, {"message.downconversion.enable": "maybe"}):
        r = create(conn, "dc-deprecated-bad", 1, configs=bad)
        assert r.error_code == INVALID_CONFIG and next(iter(bad)) in r.error_message, r
    assert incremental(conn, TOPIC, "dc-deprecated", [("message.format.version", 0, "3.0")]).error_code == NONE


def test_describe_configs_errors(conn):
    for v in (0, 4):
        r = describe(conn, TOPIC, "dc-missing", v=v)
        assert (r.error_code, r.resource_name, r.configs) == (UNKNOWN_TOPIC_OR_PARTITION, "dc-missing", [])
        assert describe(conn, TOPIC, "bad name", v=v).error_code == INVALID_TOPIC
        assert describe(conn, BROKER, "7", v=v).error_code == INVALID_REQUEST
        assert describe(conn, BROKER, "one", v=v).error_code == INVALID_REQUEST
        assert describe(conn, BROKER_LOGGER, str(NODE), v=v).error_code == INVALID_REQUEST
    # several resources answered separately
    req = DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type=TOPIC, resource_name="dc-missing"),
                                            DescribeConfigsResource(resource_type=BROKER, resource_name="")])
    r = conn.call(32, 4, req).results
    assert [(x.error_code, x.configs) for x in r] == [(UNKNOWN_TOPIC_OR_PARTITION, []), (NONE, [])]


def test_describe_configs_broker(conn, broker):
    for v in (0, 4):
        r = describe(conn, BROKER, str(NODE), v=v, synonyms=True)
        assert r.error_code == NONE
        cfg = {e.name: e for e in r.configs}
        assert cfg["log.dirs"].value == broker.data_dir and cfg["log.dirs"].read_only
        # only what Kafka can change at run time is not read-only (tests/test_broker_dynamic_config.py)
        assert {e.name for e in r.configs if not e.read_only} >= {"log.retention.ms", "message.max.bytes"}
        assert not {e.name for e in r.configs if not e.read_only} & {"num.partitions", "listeners", "log.dirs"}
        assert cfg["num.partitions"].value == "1"
        assert cfg["log.segment.bytes"].value == "1073741824"
        assert cfg["log.retention.ms"].value == "86400000"
        assert cfg["auto.create.topics.enable"].value == "true"
        if v == 0:
            assert cfg["num.partitions"].is_default and not cfg["log.retention.ms"].is_default
        else:
            assert cfg["num.partitions"].config_source == DEFAULT_CONFIG
            assert cfg["log.retention.ms"].config_source == STATIC_BROKER_CONFIG
            assert cfg["log.dirs"].config_source == STATIC_BROKER_CONFIG
            assert [(s.name, s.source) for s in cfg["log.dirs"].synonyms] == [("log.dirs", STATIC_BROKER_CONFIG)]


# -- AlterConfigs (legacy) ----------------------------------------------------------------------
@pytest.mark.parametrize("v", [0, 2])
def test_alter_configs_replaces_overrides(conn, v):
    t = f"ac-{v}"
    created(conn, t, configs={"retention.ms": "1000000", "flush.messages": "100"})
    r = legacy_alter(conn, TOPIC, t, {"segment.bytes": "500000", "cleanup.policy": "compact"}, v=v)
    assert (r.error_code, r.error_message, r.resource_name) == (NONE, None, t)
    cfg = topic_configs(conn, t)
    assert cfg["segment.bytes"].value == "500000" and cfg["cleanup.policy"].value == "compact"
    assert (cfg["retention.ms"].value, cfg["retention.ms"].config_source) == ("86400000", STATIC_BROKER_CONFIG)
    assert cfg["flush.messages"].config_source == DEFAULT_CONFIG  # left out: back to the default
    # validate_only changes nothing; errors change nothing
    assert legacy_alter(conn, TOPIC, t, {"segment.bytes": "600000"}, v=v, validate_only=True).error_code == NONE
    r = legacy_alter(conn, TOPIC, t, {"segment.bytes": "big"}, v=v)
    assert r.error_code == INVALID_CONFIG and "segment.bytes" in r.error_message and "big" in r.error_message
    assert legacy_alter(conn, TOPIC, t, {"segment.bytes": None}, v=v).error_code == INVALID_REQUEST
    assert topic_configs(conn, t)["segment.bytes"].value == "500000"
    assert legacy_alter(conn, TOPIC, "ac-missing", {"segment.bytes": "500000"}, v=v).error_code == \
        UNKNOWN_TOPIC_OR_PARTITION
    assert legacy_alter(conn, TOPIC, "ac-missing", {"segment.bytes": "x"}, v=v).error_code == INVALID_CONFIG
    r = legacy_alter(conn, BROKER, str(NODE), {"num.partitions": "3"}, v=v)
    assert r.error_code == INVALID_REQUEST and "num.partitions" in r.error_message
    assert legacy_alter(conn, BROKER, "", {}, v=v).error_code == NONE
    assert legacy_alter(conn, BROKER, "9", {}, v=v).error_code == INVALID_REQUEST
    assert legacy_alter(conn, BROKER_LOGGER, str(NODE), {"kafkacore": "DEBUG"}, v=v).error_code == INVALID_REQUEST
    # a resource named twice: both refused, the others served
    req = AlterConfigsRequest(resources=[
        LegacyResource(resource_type=TOPIC, resource_name=t, configs=[]),
        LegacyResource(resource_type=TOPIC, resource_name=t, configs=[]),
        LegacyResource(resource_type=TOPIC, resource_name=f"ct-v{0}", configs=[
            LegacyConfig(name="flush.ms", value="1"), LegacyConfig(name="flush.ms", value="2")])])
    assert [x.error_code for x in conn.call(33, v, req).responses] == [INVALID_REQUEST] * 3
    assert topic_configs(conn, t)["cleanup.policy"].value == "compact"


# -- IncrementalAlterConfigs --------------------------------------------------------------------
@pytest.mark.parametrize("v", [0, 1])
def test_incremental_alter_configs(conn, v):
    t = f"iac-{v}"
    created(conn, t, configs={"flush.messages": "100"})
    r = incremental(conn, TOPIC, t, [("retention.ms", SET, "5000000"), ("cleanup.policy", APPEND, "compact")], v=v)
    assert (r.error_code, r.error_message) == (NONE, None)
    cfg = topic_configs(conn, t)
    assert cfg["retention.ms"].value == "5000000" and cfg["cleanup.policy"].value == "compact,delete"
    assert cfg["flush.messages"].value == "100"  # untouched keys keep their overrides
    assert incremental(conn, TOPIC, t, [("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", DELETE, None),
                                        ("no.such.key", DELETE, None)], v=v).error_code == NONE
    cfg = topic_configs(conn, t)
    assert cfg["cleanup.policy"].value == "compact" and cfg["retention.ms"].config_source == STATIC_BROKER_CONFIG
    assert incremental(conn, TOPIC, t, [("segment.bytes", SET, "2000")], v=v, validate_only=True).error_code == NONE
    assert topic_configs(conn, t)["segment.bytes"].config_source == DEFAULT_CONFIG
    r = incremental(conn, TOPIC, t, [("retention.ms", APPEND, "5")], v=v)
    assert (r.error_code, r.error_message) == (INVALID_CONFIG,
                                                "Can't APPEND to key retention.ms because its type is not LIST.")
    r = incremental(conn, TOPIC, t, [("cleanup.policy", APPEND, "forever")], v=v)
    assert r.error_code == INVALID_CONFIG and "forever" in r.error_message
    assert incremental(conn, TOPIC, t, [("no.such.key", SET, "1")], v=v).error_code == INVALID_CONFIG
    assert incremental(conn, TOPIC, t, [("flush.ms", 9, "1")], v=v).error_code == INVALID_REQUEST
    assert incremental(conn, TOPIC, t, [("flush.ms", SET, None)], v=v).error_code == INVALID_REQUEST
    assert incremental(conn, TOPIC, t, [("flush.ms", SET, "1"), ("flush.ms", DELETE, None)],
                       v=v).error_code == INVALID_REQUEST
    assert incremental(conn, TOPIC, "iac-missing", [("flush.ms", SET, "1")], v=v).error_code == \
        UNKNOWN_TOPIC_OR_PARTITION
    # a static broker config cannot change at run time (the dynamic ones: tests/test_broker_dynamic_config.py)
    assert incremental(conn, BROKER, str(NODE), [("num.partitions", SET, "3")], v=v).error_code == INVALID_REQUEST
    assert incremental(conn, BROKER, str(NODE), [("num.partitions", DELETE, None)], v=v).error_code == NONE  # no change
    assert incremental(conn, BROKER_LOGGER, str(NODE), [("kafkacore", SET, "DEBUG")], v=v).error_code == \
        INVALID_REQUEST
    cfg = topic_configs(conn, t)
    assert (cfg["cleanup.policy"].value, cfg["flush.messages"].value) == ("compact", "100")


def test_configs_reach_the_live_logs(conn, broker):
    t = "live"
    created(conn, t)
    assert incremental(conn, TOPIC, t, [("segment.bytes", SET, "1000")]).error_code == NONE
    assert topic_configs(conn, t)["segment.bytes"].value == "1000"
    for _ in range(6):
        produce(conn, t, 0, [b"v" * 600])
    assert len(segment_files(broker, t)) == 6  # two ~670-byte batches do not fit in 1000 bytes
    # retention: every segment is older than 1 ms; the retention pass runs every 100 ms and, as
    # Kafka's, rolls and deletes the active segment too when it has expired
    assert incremental(conn, TOPIC, t, [("retention.ms", SET, "1")]).error_code == NONE
    deadline = time.monotonic() + 10
    while earliest(conn, t) != 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert earliest(conn, t) == 6 and earliest(conn, t, timestamp=-1) == 6
    # max.message.bytes applies to the next produce
    assert incremental(conn, TOPIC, t, [("max.message.bytes", SET, "200"), ("retention.ms", DELETE, None)]
                       ).error_code == NONE
    produce(conn, t, 0, [b"v" * 300], expect=MESSAGE_TOO_LARGE)
    produce(conn, t, 0, [b"small"])


# -- DescribeCluster ----------------------------------------------------------------------------
def test_describe_cluster(conn, broker):
    meta = conn.call(3, 12, MetadataRequest(topics=[]))
    for v in (0, 1):
        r = conn.call(60, v, DescribeClusterRequest(include_cluster_authorized_operations=True))
        assert (r.error_code, r.error_message, r.cluster_id, r.controller_id) == (NONE, None, meta.cluster_id, NODE)
        assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [(NODE, "127.0.0.1", broker.port, None)]
        assert r.cluster_authorized_operations > 0
    r = conn.call(60, 1, DescribeClusterRequest())
    assert r.endpoint_type == 1 and r.cluster_authorized_operations == -2147483648
    assert conn.call(60, 1, DescribeClusterRequest(endpoint_type=2)).error_code == MISMATCHED_ENDPOINT_TYPE
    assert conn.call(60, 1, DescribeClusterRequest(endpoint_type=7)).error_code == UNSUPPORTED_ENDPOINT_TYPE


# -- DescribeLogDirs ----------------------------------------------------------------------------
def log_dirs(c, v, topics=None):
    r = c.call(35, v, DescribeLogDirsRequest(topics=topics))
    assert len(r.results) == 1 and r.results[0].error_code == NONE, r
    return r.results[0]


@pytest.mark.parametrize("v", [0, 1, 3, 4])
def test_describe_log_dirs(conn, broker, v):
    t = f"ld-{v}"
    created(conn, t, 3)
    for _ in range(3):
        produce(conn, t, 1, [b"x" * 100, b"y" * 50])
    d = log_dirs(conn, v)
    assert d.log_dir == os.path.abspath(broker.data_dir)
    sizes = {p.partition_index: p for topic in d.topics if topic.name == t for p in topic.partitions}
    on_disk = sum(os.path.getsize(os.path.join(broker.data_dir, f"{t}-1", f)) for f in segment_files(broker, t, 1))
    assert sorted(sizes) == [0, 1, 2] and on_disk > 450
    assert (sizes[0].partition_size, sizes[1].partition_size, sizes[2].partition_size) == (0, on_disk, 0)
    assert all(p.offset_lag == 0 and not p.is_future_key for p in sizes.values())
    if v >= 4:
        vfs = os.statvfs(broker.data_dir)
        assert d.total_bytes == vfs.f_blocks * vfs.f_frsize and 0 < d.usable_bytes <= d.total_bytes
    else:
        assert (d.total_bytes, d.usable_bytes) == (-1, -1)  # not in the version: the schema's default

    asked = log_dirs(conn, v, [DescribableLogDirTopic(topic=t, partitions=[1, 7]),
                               DescribableLogDirTopic(topic="ld-missing", partitions=[0])])
    assert [(x.name, [(p.partition_index, p.partition_size) for p in x.partitions]) for x in asked.topics] == [
        (t, [(1, on_disk)])]  # what this broker does not store is left out
    assert log_dirs(conn, v, []).topics == []


def test_describe_log_dirs_error_response_at_every_version():
    from kafkacore.broker.handlers import HANDLERS
    from kafkacore.protocol.frames import decode_response, encode_response

    entry = HANDLERS[35]
    assert (entry.min_version, entry.max_version) == (0, 4)
    for v in range(5):
        frame = encode_response(35, v, 7, entry.error_response(DescribeLogDirsRequest(topics=None), v, 42))
        _cid, r = decode_response(35, v, frame.getvalue()[4:])
        assert (r.error_code if v >= 3 else r.results[0].error_code) == 42, (v, r)


# -- OffsetForLeaderEpoch -----------------------------------------------------------------------
@pytest.mark.parametrize("v", [0, 2, 4])
def test_offset_for_leader_epoch(conn, v):
    t = f"ofle-{v}"
    created(conn, t)
    produce(conn, t, 0, [b"a", b"b", b"c"])
    parts = [OffsetForLeaderPartition(partition=0, leader_epoch=0),
             OffsetForLeaderPartition(partition=0, leader_epoch=3),
             OffsetForLeaderPartition(partition=4, leader_epoch=0),
             OffsetForLeaderPartition(partition=0, leader_epoch=0, current_leader_epoch=1),
             OffsetForLeaderPartition(partition=0, leader_epoch=0, current_leader_epoch=0)]
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderTopic(topic=t, partitions=parts)])
    got = [(p.error_code, p.leader_epoch, p.end_offset) for p in conn.call(23, v, req).topics[0].partitions]
    known = 0 if v >= 1 else -1  # v0 has no leader_epoch in the response
    assert got[:3] == [(NONE, known, 3), (NONE, -1, -1), (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    if v >= 2:
        assert got[3:] == [(UNKNOWN_LEADER_EPOCH, -1, -1), (NONE, 0, 3)]
    else:  # current_leader_epoch is not in v0/v1
        assert got[3:] == [(NONE, known, 3)] * 2
    if v >= 2:
        req = OffsetForLeaderEpochRequest(topics=[OffsetForLeaderTopic(topic=t, partitions=[
            OffsetForLeaderPartition(partition=0, leader_epoch=0, current_leader_epoch=-2)])])
        assert conn.call(23, v, req).topics[0].partitions[0].error_code == FENCED_LEADER_EPOCH


# -- persistence --------------------------------------------------------------------------------
def test_configs_partitions_and_records_survive_restart(tmp_path):
    with BrokerProcess(tmp_path / "data") as b:
        with b.client() as c:
            tid = created(c, "keep", 1, configs={"retention.bytes": "9999999"}).topic_id
            assert incremental(c, TOPIC, "keep", [("cleanup.policy", SET, "compact,delete"),
                                                  ("segment.bytes", SET, "4096")]).error_code == NONE
            assert create_partitions(c, "keep", 3).error_code == NONE
            for _ in range(3):
                produce(c, "keep", 1, [b"r1", b"r2"])
            assert delete_records(c, "keep", {1: 4})[1].low_watermark == 4
            created(c, "gone")
            assert c.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="gone")])).responses[0]\
                .error_code == NONE
        b.restart()
        with b.client() as c:
            meta = metadata(c, "keep", "gone")
            assert meta["keep"].topic_id == tid and len(meta["keep"].partitions) == 3
            assert meta["gone"].error_code == UNKNOWN_TOPIC_OR_PARTITION
            cfg = topic_configs(c, "keep")
            assert {k: (cfg[k].value, cfg[k].config_source) for k in ("retention.bytes", "cleanup.policy",
                                                                      "segment.bytes")} == {
                "retention.bytes": ("9999999", DYNAMIC_TOPIC_CONFIG),
                "cleanup.policy": ("compact,delete", DYNAMIC_TOPIC_CONFIG),
                "segment.bytes": ("4096", DYNAMIC_TOPIC_CONFIG)}
            assert earliest(c, "keep", 1) == 4 and earliest(c, "keep", 1, timestamp=-1) == 6
            # the restored segment.bytes still rolls the log
            for _ in range(3):
                produce(c, "keep", 2, [b"z" * 2000])
            assert len(segment_files(b, "keep", 2)) >= 2


# -- whole-request errors -----------------------------------------------------------------------
ERROR_REQUESTS = {
    19: CreateTopicsRequest(topics=[CreatableTopic(name="t", num_partitions=1, replication_factor=1)]),
    20: DeleteTopicsRequest(topic_names=["t"], topics=[DeleteTopicState(name="t")]),
    21: DeleteRecordsRequest(topics=[DeleteRecordsTopic(name="t", partitions=[DeleteRecordsPartition()])]),
    23: OffsetForLeaderEpochRequest(topics=[OffsetForLeaderTopic(topic="t", partitions=[OffsetForLeaderPartition()])]),
    32: DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type=TOPIC, resource_name="t")]),
    33: AlterConfigsRequest(resources=[LegacyResource(resource_type=TOPIC, resource_name="t")]),
    37: CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="t", count=2)]),
    44: IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(resource_type=TOPIC, resource_name="t")]),
    60: DescribeClusterRequest(),
}


@pytest.mark.parametrize("api_key", sorted(ERROR_REQUESTS))
def test_error_responses_encode_at_every_version(api_key):
    """The server answers a request with error_response when a handler fails unexpectedly:
    it must carry the code for every item and encode at every served version."""
    from kafkacore.broker.handlers import HANDLERS
    from kafkacore.protocol.frames import RequestHeader, decode_request, decode_response, encode_request, \
        encode_response

    entry = HANDLERS[api_key]
    for v in range(entry.min_version, entry.max_version + 1):
        _h, req = decode_request(encode_request(RequestHeader(api_key, v, 7, "t"), ERROR_REQUESTS[api_key])[4:])
        body = entry.error_response(req, v, 42)
        frame = encode_response(api_key, v, 7, body).getvalue()[4:]
        _cid, decoded = decode_response(api_key, v, frame)
        codes = [getattr(x, "error_code") for x in _leaves(decoded)]
        assert codes and set(codes) == {42}, (v, decoded)


def _leaves(obj):
    """The objects of a response that carry an error code."""
    if hasattr(obj, "error_code"):
        yield obj
        return
    for name in getattr(obj, "__slots__", ()):
        value = getattr(obj, name)
        if isinstance(value, list):
            for item in value:
                yield from _leaves(item)


# -- real admin clients -------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_confluent_admin_client(broker):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                       NewPartitions, NewTopic, ResourceType)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    t = "ck-admin"
    admin.create_topics([NewTopic(t, num_partitions=2, replication_factor=1,
                                  config={"retention.ms": "3600000"})])[t].result(10)
    with pytest.raises(ck.KafkaException) as e:
        admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1)])[t].result(10)
    assert e.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS

    res = ConfigResource(ResourceType.TOPIC, t)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    inc = ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([inc])[inc].result(10)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["cleanup.policy"].value == "compact,delete" and cfg["retention.ms"].value == "86400000"
    legacy = ConfigResource(ResourceType.TOPIC, t, set_config={"segment.bytes": "2000000"})
    admin.alter_configs([legacy])[legacy].result(10)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["segment.bytes"].value == "2000000" and cfg["cleanup.policy"].value == "delete"  # replaced

    admin.create_partitions([NewPartitions(t, 3)])[t].result(10)
    assert len(admin.list_topics(t, timeout=10).topics[t].partitions) == 3

    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce(t, value=b"%d" % i, partition=0)
    assert producer.flush(10) == 0
    tp = ck.TopicPartition(t, 0, 3)
    deleted = admin.delete_records([tp])[tp].result(10)
    assert deleted.low_watermark == 3

    bres = ConfigResource(ResourceType.BROKER, str(NODE))
    bcfg = admin.describe_configs([bres])[bres].result(10)
    assert bcfg["log.retention.ms"].value == "86400000"

    cluster = admin.describe_cluster(request_timeout=10).result(10)
    assert [n.id for n in cluster.nodes] == [NODE] and cluster.controller.id == NODE and cluster.cluster_id

    admin.delete_topics([t])[t].result(10)
    with broker.client() as c:
        assert metadata(c, t)[t].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_kafka_python_admin_client(broker):
    pytest.importorskip("kafka")
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.structs import TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kp-admin", request_timeout_ms=10000)
    try:
        t = "kp-admin"
        admin.create_topics({t: {"num_partitions": 2, "replication_factor": 1,
                                 "configs": {"retention.bytes": "5000000"}}})
        cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])
        assert _kp_value(cfg, t, "retention.bytes") == "5000000"

        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t, configs={"flush.ms": "60000"})])
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t, configs={"retention.bytes": "7000000"})],
                            incremental=False)
        cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)], config_filter="all")
        assert _kp_value(cfg, t, "retention.bytes") == "7000000"

        admin.create_partitions({t: 4})
        with broker.client() as c:
            assert len(metadata(c, t)[t].partitions) == 4
            for _ in range(2):
                produce(c, t, 1, [b"a", b"b"])
        result = admin.delete_records({TopicPartition(t, 1): 3})
        assert list(result.values())[0]["low_watermark"] == 3

        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == NODE and [b["broker_id"] for b in cluster["brokers"]] == [NODE]

        admin.delete_topics([t])
        with broker.client() as c:
            assert metadata(c, t)[t].error_code == UNKNOWN_TOPIC_OR_PARTITION
    finally:
        admin.close()


def _kp_value(described, topic, key):
    """A config value out of kafka-python's describe_configs result, whichever shape it has."""
    by_type = described.get("TOPIC") if isinstance(described, dict) else None
    if by_type is None:
        by_type = next(iter(described.values()))
    entry = by_type[topic][key]
    return entry["value"] if isinstance(entry, dict) else entry
