"""Every served API checks exactly the ACLs Kafka's request handlers check (issue 28), on a
``kafkacore serve`` with an authorizer: a PLAINTEXT listener where the client is User:ANONYMOUS
with no ACL, and a SASL_PLAINTEXT listener where User:admin (a super user) grants ACLs through
confluent-kafka's AdminClient.

Each row of the table is one request and the ACLs it needs, in the order Kafka checks them: with
none of them the request is refused with the first row's error code, with each ACL added the
next check refuses it, and with all of them no authorization error is left (what the request
then answers is its own business: an unknown topic, a missing member...). The ACLs of a row are
removed after it. The cluster-only APIs (controller requests, reassignments, elections) are
checked on a one-broker cluster."""
from __future__ import annotations

import struct

import pytest

from broker_client import BrokerProcess, KafkaConnection, free_port, request
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.wire import ZERO_UUID

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, ResourcePatternType, ResourceType)

pytestmark = pytest.mark.timeout(300)

TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 29, 30, 31, 53
AUTH_ERRORS = {TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH}
ADMIN_PASSWORD = "admin-secret-pw"
USER_PASSWORD = "user-secret-pw"
ANONYMOUS = "User:ANONYMOUS"
T, G, X = "acl-t", "acl-g", "acl-txn"  # the topic, group and transactional id the rows name

Op = AclOperation
TOPIC, GROUP, CLUSTER, TXN = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER,
                              ResourceType.TRANSACTIONAL_ID)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    port, sasl_port = free_port(), free_port()
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'user_admin="{ADMIN_PASSWORD}" user_alice="{USER_PASSWORD}" user_bob="{USER_PASSWORD}";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}
    b = BrokerProcess(tmp_path_factory.mktemp("acl-enforced") / "data", settings, port=port)
    b.sasl_port = sasl_port
    b.start()
    yield b
    b.stop()
    assert ADMIN_PASSWORD not in b.output()


@pytest.fixture(scope="module")
def admin(broker):
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD}
    client = AdminClient(conf)
    client.conf = conf  # the super user's settings, for the rows' set-up clients
    # the group coordinator loaded before any row (a row's group check passes, and then its topic
    # check must be what answers, not COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR): a commit
    # as the super user waits for it
    warm = confluent_kafka.Consumer({**conf, "group.id": "acl-warm-up"})
    try:
        for f in client.create_topics([confluent_kafka.admin.NewTopic("acl-warm-up", 1, 1)]).values():
            f.result(30)
        warm.commit(offsets=[confluent_kafka.TopicPartition("acl-warm-up", 0, 0)], asynchronous=False)
    finally:
        warm.close()
    return client


def _binding(rtype, name, op):
    name = "kafka-cluster" if rtype == CLUSTER else name
    return AclBinding(rtype, name, ResourcePatternType.LITERAL, ANONYMOUS, "*", op, AclPermissionType.ALLOW)


def _grant(admin, rtype, name, op):
    for f in admin.create_acls([_binding(rtype, name, op)]).values():
        f.result(30)


def _revoke_all(admin):
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, ANONYMOUS, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    for f in admin.delete_acls([flt]).values():
        f.result(30)


# -- the requests and where their error codes are ---------------------------------------------
def _m(module, cls):
    import importlib
    return getattr(importlib.import_module(f"kafkacore.protocol.messages.{module}"), cls)


def _produce(txn_id=None):
    pd = _m("produce_request", "PartitionProduceData")(index=0, records=None)
    return request(ApiKey.PRODUCE, transactional_id=txn_id, acks=1, timeout_ms=1000,
                   topic_data=[_m("produce_request", "TopicProduceData")(name=T, partition_data=[pd])])


def _produce_codes(r):
    return [p.error_code for t in r.responses for p in t.partition_responses]


def _fetch(replica_id=-1):
    part = _m("fetch_request", "FetchPartition")(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                 last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1000)
    return request(ApiKey.FETCH, replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1000,
                   isolation_level=0, session_id=0, session_epoch=-1,
                   topics=[_m("fetch_request", "FetchTopic")(topic=T, partitions=[part])], forgotten_topics_data=[])


def _fetch_codes(r):
    return [r.error_code] + [p.error_code for t in r.responses for p in t.partitions]


def _list_offsets():
    part = _m("list_offsets_request", "ListOffsetsPartition")(partition_index=0, current_leader_epoch=-1, timestamp=-1)
    return request(ApiKey.LIST_OFFSETS, replica_id=-1, isolation_level=0,
                   topics=[_m("list_offsets_request", "ListOffsetsTopic")(name=T, partitions=[part])])


def _share_state(key, topic_cls, **fields):
    module = request(key).__class__.__module__.rsplit(".", 1)[1]
    return request(key, group_id="acl-share", topics=[_m(module, topic_cls)(
        topic_id=b"\x01" * 16, partitions=[_m(module, "PartitionData")(partition=0, **fields)])])


def _describe_share_offsets():
    mod = "describe_share_group_offsets_request"
    return request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, groups=[_m(mod, "DescribeShareGroupOffsetsRequestGroup")(
        group_id="acl-share", topics=[_m(mod, "DescribeShareGroupOffsetsRequestTopic")(topic_name=T, partitions=[0])])])


def _share_state_codes(r):
    return [p.error_code for t in r.results for p in t.partitions]


def _topic_partitions_codes(r):
    return [p.error_code for t in r.topics for p in t.partitions]


def _metadata(name=T, auto=False):
    return request(ApiKey.METADATA, topics=[_m("metadata_request", "MetadataRequestTopic")(name=name)],
                   allow_auto_topic_creation=auto)


def _offset_commit():
    part = _m("offset_commit_request", "OffsetCommitRequestPartition")(
        partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")
    return request(ApiKey.OFFSET_COMMIT, group_id=G, generation_id_or_member_epoch=-1, member_id="",
                   topics=[_m("offset_commit_request", "OffsetCommitRequestTopic")(name=T, partitions=[part])])


def _offset_fetch_v7():
    return request(ApiKey.OFFSET_FETCH, group_id=G, require_stable=False,
                   topics=[_m("offset_fetch_request", "OffsetFetchRequestTopic")(name=T, partition_indexes=[0])])


def _offset_fetch_v8():
    topic = _m("offset_fetch_request", "OffsetFetchRequestTopics")(name=T, partition_indexes=[0])
    return request(ApiKey.OFFSET_FETCH, require_stable=False,
                   groups=[_m("offset_fetch_request", "OffsetFetchRequestGroup")(group_id=G, topics=[topic])])


def _find_coordinator(key_type, key):
    return request(ApiKey.FIND_COORDINATOR, key_type=key_type, coordinator_keys=[key])


def _join():
    proto = _m("join_group_request", "JoinGroupRequestProtocol")(name="range", metadata=b"")
    return request(ApiKey.JOIN_GROUP, group_id=G, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                   member_id="", protocol_type="consumer", protocols=[proto])


def _add_partitions_v3():
    topic = _m("add_partitions_to_txn_request", "AddPartitionsToTxnTopic")(name=T, partitions=[0])
    return request(ApiKey.ADD_PARTITIONS_TO_TXN, v3_and_below_transactional_id=X, v3_and_below_producer_id=0,
                   v3_and_below_producer_epoch=0, v3_and_below_topics=[topic])


def _add_partitions_v4():
    topic = _m("add_partitions_to_txn_request", "AddPartitionsToTxnTopic")(name=T, partitions=[0])
    txn = _m("add_partitions_to_txn_request", "AddPartitionsToTxnTransaction")(
        transactional_id=X, producer_id=0, producer_epoch=0, verify_only=True, topics=[topic])
    return request(ApiKey.ADD_PARTITIONS_TO_TXN, transactions=[txn])


def _add_partitions_codes(r):
    codes = [r.error_code]
    for t in r.results_by_transaction or []:
        codes += [p.partition_error_code for tr in t.topic_results for p in tr.results_by_partition]
    codes += [p.partition_error_code for tr in (r.results_by_topic_v3_and_below or [])
              for p in tr.results_by_partition]
    return codes


def _txn_offset_commit():
    part = _m("txn_offset_commit_request", "TxnOffsetCommitRequestPartition")(
        partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")
    return request(ApiKey.TXN_OFFSET_COMMIT, transactional_id=X, group_id=G, producer_id=0, producer_epoch=0,
                   generation_id=-1, member_id="",
                   topics=[_m("txn_offset_commit_request", "TxnOffsetCommitRequestTopic")(name=T, partitions=[part])])


def _configs(api, rtype_code, name, **kw):
    if api == ApiKey.DESCRIBE_CONFIGS:
        res = _m("describe_configs_request", "DescribeConfigsResource")(resource_type=rtype_code, resource_name=name,
                                                                        configuration_keys=None)
        return request(api, resources=[res], include_synonyms=False, include_documentation=False)
    module = "alter_configs_request" if api == ApiKey.ALTER_CONFIGS else "incremental_alter_configs_request"
    cfg = _m(module, "AlterableConfig")(name="retention.ms" if rtype_code == 2 else "log.retention.ms",
                                        value="1000", **kw)
    res = _m(module, "AlterConfigsResource")(resource_type=rtype_code, resource_name=name, configs=[cfg])
    return request(api, resources=[res], validate_only=True)


def _results_codes(attr):
    return lambda r: [x.error_code for x in getattr(r, attr)]


def _top(r):
    return [r.error_code]


_SHARE_TOPIC_ID = {}


def _share_topic(admin):
    """A row's set-up: T exists and its topic id is known (ShareFetch names topics by id)."""
    try:
        _existing_topic(T)(admin)
    except confluent_kafka.KafkaException as e:
        if e.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    desc = admin.describe_topics(confluent_kafka.TopicCollection([T]))[T].result(30)
    uid = desc.topic_id
    _SHARE_TOPIC_ID[T] = struct.pack(">qq", uid.get_most_significant_bits(), uid.get_least_significant_bits())


def _share_fetch():
    part = _m("share_fetch_request", "FetchPartition")(partition_index=0)
    return request(ApiKey.SHARE_FETCH, group_id="acl-sg", member_id="m", share_session_epoch=0, max_wait_ms=0,
                   min_bytes=1, max_bytes=1000, max_records=10, batch_size=10, forgotten_topics_data=[],
                   topics=[_m("share_fetch_request", "FetchTopic")(topic_id=_SHARE_TOPIC_ID[T], partitions=[part])])


def _share_codes(r):
    return [r.error_code] + [p.error_code for t in r.responses for p in t.partitions]


# (label, api, version, request factory, codes of the response, [(ACL to add, the code before it)])
ROWS = [
    ("produce", ApiKey.PRODUCE, 9, _produce, _produce_codes, [((TOPIC, T, Op.WRITE), TOPIC_AUTH)]),
    ("produce-transactional", ApiKey.PRODUCE, 9, lambda: _produce(X), _produce_codes,
     [((TXN, X, Op.WRITE), TXN_AUTH), ((TOPIC, T, Op.WRITE), TOPIC_AUTH)]),
    ("fetch", ApiKey.FETCH, 12, _fetch, _fetch_codes, [((TOPIC, T, Op.READ), TOPIC_AUTH)]),
    ("fetch-follower", ApiKey.FETCH, 12, lambda: _fetch(replica_id=1), _fetch_codes,
     [((CLUSTER, None, Op.CLUSTER_ACTION), TOPIC_AUTH)]),
    ("list-offsets", ApiKey.LIST_OFFSETS, 7, _list_offsets, _topic_partitions_codes,
     [((TOPIC, T, Op.DESCRIBE), TOPIC_AUTH)]),
    ("metadata", ApiKey.METADATA, 12, _metadata, lambda r: [t.error_code for t in r.topics],
     [((TOPIC, T, Op.DESCRIBE), TOPIC_AUTH)]),
    ("metadata-auto-create", ApiKey.METADATA, 12, lambda: _metadata("acl-auto", auto=True),
     lambda r: [t.error_code for t in r.topics],
     [((TOPIC, "acl-auto", Op.DESCRIBE), TOPIC_AUTH), ((TOPIC, "acl-auto", Op.CREATE), TOPIC_AUTH)]),
    ("offset-commit", ApiKey.OFFSET_COMMIT, 8, _offset_commit, _topic_partitions_codes,
     [((GROUP, G, Op.READ), GROUP_AUTH), ((TOPIC, T, Op.READ), TOPIC_AUTH)]),
    ("offset-fetch-v7", ApiKey.OFFSET_FETCH, 7, _offset_fetch_v7,
     lambda r: [r.error_code] + _topic_partitions_codes(r),
     [((GROUP, G, Op.DESCRIBE), GROUP_AUTH), ((TOPIC, T, Op.DESCRIBE), TOPIC_AUTH)]),
    ("offset-fetch-v8", ApiKey.OFFSET_FETCH, 8, _offset_fetch_v8,
     lambda r: [g.error_code for g in r.groups] + [p.error_code for g in r.groups for t in g.topics
                                                   for p in t.partitions],
     [((GROUP, G, Op.DESCRIBE), GROUP_AUTH), ((TOPIC, T, Op.DESCRIBE), TOPIC_AUTH)]),
    ("find-group-coordinator", ApiKey.FIND_COORDINATOR, 4, lambda: _find_coordinator(0, G),
     lambda r: [c.error_code for c in r.coordinators], [((GROUP, G, Op.DESCRIBE), GROUP_AUTH)]),
    ("find-transaction-coordinator", ApiKey.FIND_COORDINATOR, 4, lambda: _find_coordinator(1, X),
     lambda r: [c.error_code for c in r.coordinators], [((TXN, X, Op.DESCRIBE), TXN_AUTH)]),
    ("find-share-coordinator", ApiKey.FIND_COORDINATOR, 6,
     lambda: _find_coordinator(2, "acl-share:AQEBAQEBAQEBAQEBAQEBAQ:0"),
     lambda r: [c.error_code for c in r.coordinators], [((CLUSTER, None, Op.CLUSTER_ACTION), CLUSTER_AUTH)]),
    ("join-group", ApiKey.JOIN_GROUP, 5, _join, _top, [((GROUP, G, Op.READ), GROUP_AUTH)]),
    ("heartbeat", ApiKey.HEARTBEAT, 4,
     lambda: request(ApiKey.HEARTBEAT, group_id=G, generation_id=1, member_id="m"), _top,
     [((GROUP, G, Op.READ), GROUP_AUTH)]),
    ("leave-group", ApiKey.LEAVE_GROUP, 4,
     lambda: request(ApiKey.LEAVE_GROUP, group_id=G, members=[_m("leave_group_request", "MemberIdentity")(
         member_id="m", group_instance_id=None)]), _top, [((GROUP, G, Op.READ), GROUP_AUTH)]),
    ("sync-group", ApiKey.SYNC_GROUP, 4,
     lambda: request(ApiKey.SYNC_GROUP, group_id=G, generation_id=1, member_id="m", assignments=[]), _top,
     [((GROUP, G, Op.READ), GROUP_AUTH)]),
    ("describe-groups", ApiKey.DESCRIBE_GROUPS, 5,
     lambda: request(ApiKey.DESCRIBE_GROUPS, groups=[G], include_authorized_operations=True),
     _results_codes("groups"), [((GROUP, G, Op.DESCRIBE), GROUP_AUTH)]),
    ("create-topics", ApiKey.CREATE_TOPICS, 5,
     lambda: request(ApiKey.CREATE_TOPICS, timeout_ms=5000, validate_only=True, topics=[
         _m("create_topics_request", "CreatableTopic")(name="acl-new", num_partitions=1, replication_factor=1,
                                                       assignments=[], configs=[])]),
     _results_codes("topics"), [((TOPIC, "acl-new", Op.CREATE), TOPIC_AUTH)]),
    ("delete-topics", ApiKey.DELETE_TOPICS, 6,
     lambda: request(ApiKey.DELETE_TOPICS, timeout_ms=5000, topics=[
         _m("delete_topics_request", "DeleteTopicState")(name="acl-doomed", topic_id=ZERO_UUID)]),
     _results_codes("responses"),
     [((TOPIC, "acl-doomed", Op.DESCRIBE), TOPIC_AUTH), ((TOPIC, "acl-doomed", Op.DELETE), TOPIC_AUTH)]),
    ("delete-records", ApiKey.DELETE_RECORDS, 2,
     lambda: request(ApiKey.DELETE_RECORDS, timeout_ms=1000, topics=[_m("delete_records_request", "DeleteRecordsTopic")(
         name=T, partitions=[_m("delete_records_request", "DeleteRecordsPartition")(partition_index=0, offset=0)])]),
     _topic_partitions_codes, [((TOPIC, T, Op.DELETE), TOPIC_AUTH)]),
    ("init-producer-id-transactional", ApiKey.INIT_PRODUCER_ID, 4,
     lambda: request(ApiKey.INIT_PRODUCER_ID, transactional_id=X, transaction_timeout_ms=60000, producer_id=-1,
                     producer_epoch=-1), _top, [((TXN, X, Op.WRITE), TXN_AUTH)]),
    ("init-producer-id-idempotent-by-topic", ApiKey.INIT_PRODUCER_ID, 4,
     lambda: request(ApiKey.INIT_PRODUCER_ID, transactional_id=None, transaction_timeout_ms=-1, producer_id=-1,
                     producer_epoch=-1), _top, [((TOPIC, T, Op.WRITE), CLUSTER_AUTH)]),
    ("init-producer-id-idempotent-by-cluster", ApiKey.INIT_PRODUCER_ID, 4,
     lambda: request(ApiKey.INIT_PRODUCER_ID, transactional_id=None, transaction_timeout_ms=-1, producer_id=-1,
                     producer_epoch=-1), _top, [((CLUSTER, None, Op.IDEMPOTENT_WRITE), CLUSTER_AUTH)]),
    ("offset-for-leader-epoch", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4,
     lambda: request(ApiKey.OFFSET_FOR_LEADER_EPOCH, replica_id=-1, topics=[
         _m("offset_for_leader_epoch_request", "OffsetForLeaderTopic")(topic=T, partitions=[
             _m("offset_for_leader_epoch_request", "OffsetForLeaderPartition")(
                 partition=0, current_leader_epoch=-1, leader_epoch=0)])]),
     _topic_partitions_codes, [((TOPIC, T, Op.DESCRIBE), TOPIC_AUTH)]),
    ("offset-for-leader-epoch-follower", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4,
     lambda: request(ApiKey.OFFSET_FOR_LEADER_EPOCH, replica_id=1, topics=[
         _m("offset_for_leader_epoch_request", "OffsetForLeaderTopic")(topic=T, partitions=[
             _m("offset_for_leader_epoch_request", "OffsetForLeaderPartition")(
                 partition=0, current_leader_epoch=-1, leader_epoch=0)])]),
     _topic_partitions_codes, [((CLUSTER, None, Op.CLUSTER_ACTION), TOPIC_AUTH)]),
    ("add-partitions-to-txn-v3", ApiKey.ADD_PARTITIONS_TO_TXN, 3, _add_partitions_v3, _add_partitions_codes,
     [((TXN, X, Op.WRITE), TXN_AUTH), ((TOPIC, T, Op.WRITE), TOPIC_AUTH)]),
    ("add-partitions-to-txn-v4", ApiKey.ADD_PARTITIONS_TO_TXN, 4, _add_partitions_v4, _add_partitions_codes,
     [((CLUSTER, None, Op.CLUSTER_ACTION), CLUSTER_AUTH), ((TXN, X, Op.WRITE), TXN_AUTH),
      ((TOPIC, T, Op.WRITE), TOPIC_AUTH)]),
    ("add-offsets-to-txn", ApiKey.ADD_OFFSETS_TO_TXN, 3,
     lambda: request(ApiKey.ADD_OFFSETS_TO_TXN, transactional_id=X, producer_id=0, producer_epoch=0, group_id=G),
     _top, [((TXN, X, Op.WRITE), TXN_AUTH), ((GROUP, G, Op.READ), GROUP_AUTH)]),
    ("end-txn", ApiKey.END_TXN, 3,
     lambda: request(ApiKey.END_TXN, transactional_id=X, producer_id=0, producer_epoch=0, committed=True),
     _top, [((TXN, X, Op.WRITE), TXN_AUTH)]),
    ("write-txn-markers", ApiKey.WRITE_TXN_MARKERS, 1,
     lambda: request(ApiKey.WRITE_TXN_MARKERS, markers=[_m("write_txn_markers_request", "WritableTxnMarker")(
         producer_id=0, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
         topics=[_m("write_txn_markers_request", "WritableTxnMarkerTopic")(name=T, partition_indexes=[0])])]),
     lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions],
     [((CLUSTER, None, Op.CLUSTER_ACTION), CLUSTER_AUTH)]),
    # KIP-932's share-state APIs: only brokers send them
    ("initialize-share-group-state", ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
     lambda: _share_state(ApiKey.INITIALIZE_SHARE_GROUP_STATE, "InitializeStateData", state_epoch=0, start_offset=0),
     _share_state_codes, [((CLUSTER, None, Op.CLUSTER_ACTION), CLUSTER_AUTH)]),
    ("read-share-group-state", ApiKey.READ_SHARE_GROUP_STATE, 0,
     lambda: _share_state(ApiKey.READ_SHARE_GROUP_STATE, "ReadStateData", leader_epoch=0),
     _share_state_codes, [((CLUSTER, None, Op.CLUSTER_ACTION), CLUSTER_AUTH)]),
    ("write-share-group-state", ApiKey.WRITE_SHARE_GROUP_STATE, 0,
     lambda: _share_state(ApiKey.WRITE_SHARE_GROUP_STATE, "WriteStateData", state_epoch=0, leader_epoch=0,
                          start_offset=0, state_batches=[]),
     _share_state_codes, [((CLUSTER, None, Op.CLUSTER_ACTION), CLUSTER_AUTH)]),
    ("delete-share-group-state", ApiKey.DELETE_SHARE_GROUP_STATE, 0,
     lambda: _share_state(ApiKey.DELETE_SHARE_GROUP_STATE, "DeleteStateData"),
     _share_state_codes, [((CLUSTER, None, Op.CLUSTER_ACTION), CLUSTER_AUTH)]),
    ("read-share-group-state-summary", ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0,
     lambda: _share_state(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, "ReadStateSummaryData", leader_epoch=0),
     _share_state_codes, [((CLUSTER, None, Op.CLUSTER_ACTION), CLUSTER_AUTH)]),
    # Kafka 4.1's share-group offsets APIs, on a share group of their own
    ("describe-share-group-offsets", ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0,
     _describe_share_offsets,
     lambda r: [g.error_code for g in r.groups] + [p.error_code for g in r.groups for t in g.topics
                                                   for p in t.partitions],
     [((GROUP, "acl-share", Op.DESCRIBE), GROUP_AUTH), ((TOPIC, T, Op.DESCRIBE), TOPIC_AUTH)]),
    ("alter-share-group-offsets", ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0,
     lambda: request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, group_id="acl-share", topics=[
         _m("alter_share_group_offsets_request", "AlterShareGroupOffsetsRequestTopic")(topic_name=T, partitions=[
             _m("alter_share_group_offsets_request", "AlterShareGroupOffsetsRequestPartition")(
                 partition_index=0, start_offset=0)])]),
     lambda r: [r.error_code] + [p.error_code for t in r.responses for p in t.partitions],
     [((GROUP, "acl-share", Op.READ), GROUP_AUTH), ((TOPIC, T, Op.READ), TOPIC_AUTH)]),
    ("delete-share-group-offsets", ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0,
     lambda: request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, group_id="acl-share", topics=[
         _m("delete_share_group_offsets_request", "DeleteShareGroupOffsetsRequestTopic")(topic_name=T)]),
     lambda r: [r.error_code] + [t.error_code for t in r.responses],
     [((GROUP, "acl-share", Op.DELETE), GROUP_AUTH), ((TOPIC, T, Op.READ), TOPIC_AUTH)]),
    ("txn-offset-commit", ApiKey.TXN_OFFSET_COMMIT, 3, _txn_offset_commit, _topic_partitions_codes,
     [((TXN, X, Op.WRITE), TXN_AUTH), ((GROUP, G, Op.READ), GROUP_AUTH), ((TOPIC, T, Op.READ), TOPIC_AUTH)]),
    # a KIP-848 group of its own: a member joined here must not turn the classic rows' group
    ("consumer-group-heartbeat", ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
     lambda: request(ApiKey.CONSUMER_GROUP_HEARTBEAT, group_id="acl-cg", member_id="m", member_epoch=-1), _top,
     [((GROUP, "acl-cg", Op.READ), GROUP_AUTH)]),
    ("consumer-group-describe", ApiKey.CONSUMER_GROUP_DESCRIBE, 0,
     lambda: request(ApiKey.CONSUMER_GROUP_DESCRIBE, group_ids=["acl-cg"], include_authorized_operations=True),
     _results_codes("groups"), [((GROUP, "acl-cg", Op.DESCRIBE), GROUP_AUTH)]),
    # KIP-932 share fetching: READ on the share group, then READ on the topic (partition errors)
    ("share-fetch", ApiKey.SHARE_FETCH, 1, lambda: _share_fetch(), _share_codes,
     [((GROUP, "acl-sg", Op.READ), GROUP_AUTH), ((TOPIC, T, Op.READ), TOPIC_AUTH)]),
    ("share-acknowledge", ApiKey.SHARE_ACKNOWLEDGE, 1,
     lambda: request(ApiKey.SHARE_ACKNOWLEDGE, group_id="acl-sg", member_id="m", share_session_epoch=-1, topics=[]),
     _top, [((GROUP, "acl-sg", Op.READ), GROUP_AUTH)]),
    ("describe-group-configs", ApiKey.DESCRIBE_CONFIGS, 4, lambda: _configs(ApiKey.DESCRIBE_CONFIGS, 32, G),
     _results_codes("results"), [((GROUP, G, Op.DESCRIBE_CONFIGS), GROUP_AUTH)]),
    ("incremental-alter-group-configs", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
     lambda: _configs(ApiKey.INCREMENTAL_ALTER_CONFIGS, 32, G, config_operation=0),
     _results_codes("responses"), [((GROUP, G, Op.ALTER_CONFIGS), GROUP_AUTH)]),
    # a share group of its own (KIP-932): READ on the group, then DESCRIBE on the subscribed topics
    ("share-group-heartbeat", ApiKey.SHARE_GROUP_HEARTBEAT, 1,
     lambda: request(ApiKey.SHARE_GROUP_HEARTBEAT, group_id="acl-sg", member_id="m", member_epoch=-1,
                     subscribed_topic_names=[T]), _top,
     [((GROUP, "acl-sg", Op.READ), GROUP_AUTH), ((TOPIC, T, Op.DESCRIBE), TOPIC_AUTH)]),
    ("share-group-describe", ApiKey.SHARE_GROUP_DESCRIBE, 1,
     lambda: request(ApiKey.SHARE_GROUP_DESCRIBE, group_ids=["acl-sg"], include_authorized_operations=True),
     _results_codes("groups"), [((GROUP, "acl-sg", Op.DESCRIBE), GROUP_AUTH)]),
    ("describe-acls", ApiKey.DESCRIBE_ACLS, 3,
     lambda: request(ApiKey.DESCRIBE_ACLS, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                     principal_filter=None, host_filter=None, operation=1, permission_type=1),
     _top, [((CLUSTER, None, Op.DESCRIBE), CLUSTER_AUTH)]),
    ("create-acls", ApiKey.CREATE_ACLS, 3,
     lambda: request(ApiKey.CREATE_ACLS, creations=[_m("create_acls_request", "AclCreation")(
         resource_type=2, resource_name="x", resource_pattern_type=3, principal="User:z", host="*", operation=3,
         permission_type=3)]),
     _results_codes("results"), [((CLUSTER, None, Op.ALTER), CLUSTER_AUTH)]),
    ("delete-acls", ApiKey.DELETE_ACLS, 3,
     lambda: request(ApiKey.DELETE_ACLS, filters=[_m("delete_acls_request", "DeleteAclsFilter")(
         resource_type_filter=2, resource_name_filter="x", pattern_type_filter=3, principal_filter="User:z",
         host_filter=None, operation=1, permission_type=1)]),
     _results_codes("filter_results"), [((CLUSTER, None, Op.ALTER), CLUSTER_AUTH)]),
    ("describe-topic-configs", ApiKey.DESCRIBE_CONFIGS, 4, lambda: _configs(ApiKey.DESCRIBE_CONFIGS, 2, T),
     _results_codes("results"), [((TOPIC, T, Op.DESCRIBE_CONFIGS), TOPIC_AUTH)]),
    ("describe-broker-configs", ApiKey.DESCRIBE_CONFIGS, 4, lambda: _configs(ApiKey.DESCRIBE_CONFIGS, 4, "1"),
     _results_codes("results"), [((CLUSTER, None, Op.DESCRIBE_CONFIGS), CLUSTER_AUTH)]),
    ("alter-topic-configs", ApiKey.ALTER_CONFIGS, 2, lambda: _configs(ApiKey.ALTER_CONFIGS, 2, T),
     _results_codes("responses"), [((TOPIC, T, Op.ALTER_CONFIGS), TOPIC_AUTH)]),
    ("incremental-alter-topic-configs", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
     lambda: _configs(ApiKey.INCREMENTAL_ALTER_CONFIGS, 2, T, config_operation=0),
     _results_codes("responses"), [((TOPIC, T, Op.ALTER_CONFIGS), TOPIC_AUTH)]),
    ("incremental-alter-broker-configs", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
     lambda: _configs(ApiKey.INCREMENTAL_ALTER_CONFIGS, 4, "1", config_operation=0),
     _results_codes("responses"), [((CLUSTER, None, Op.ALTER_CONFIGS), CLUSTER_AUTH)]),
    ("describe-log-dirs", ApiKey.DESCRIBE_LOG_DIRS, 4, lambda: request(ApiKey.DESCRIBE_LOG_DIRS, topics=None),
     _top, [((CLUSTER, None, Op.DESCRIBE), CLUSTER_AUTH)]),
    ("create-partitions", ApiKey.CREATE_PARTITIONS, 3,
     lambda: request(ApiKey.CREATE_PARTITIONS, timeout_ms=1000, validate_only=True, topics=[
         _m("create_partitions_request", "CreatePartitionsTopic")(name=T, count=2, assignments=None)]),
     _results_codes("results"), [((TOPIC, T, Op.ALTER), TOPIC_AUTH)]),
    ("delete-groups", ApiKey.DELETE_GROUPS, 2, lambda: request(ApiKey.DELETE_GROUPS, groups_names=[G]),
     _results_codes("results"), [((GROUP, G, Op.DELETE), GROUP_AUTH)]),
    ("offset-delete", ApiKey.OFFSET_DELETE, 0,
     lambda: request(ApiKey.OFFSET_DELETE, group_id=G, topics=[_m("offset_delete_request", "OffsetDeleteRequestTopic")(
         name=T, partitions=[_m("offset_delete_request", "OffsetDeleteRequestPartition")(partition_index=0)])]),
     lambda r: [r.error_code] + _topic_partitions_codes(r),
     [((GROUP, G, Op.DELETE), GROUP_AUTH), ((TOPIC, T, Op.READ), TOPIC_AUTH)]),
    ("describe-client-quotas", ApiKey.DESCRIBE_CLIENT_QUOTAS, 1,
     lambda: request(ApiKey.DESCRIBE_CLIENT_QUOTAS, components=[], strict=False), _top,
     [((CLUSTER, None, Op.DESCRIBE_CONFIGS), CLUSTER_AUTH)]),
    ("alter-client-quotas", ApiKey.ALTER_CLIENT_QUOTAS, 1,
     lambda: request(ApiKey.ALTER_CLIENT_QUOTAS, validate_only=True, entries=[
         _m("alter_client_quotas_request", "EntryData")(
             entity=[_m("alter_client_quotas_request", "EntityData")(entity_type="user", entity_name="z")],
             ops=[_m("alter_client_quotas_request", "OpData")(key="producer_byte_rate", value=1000.0,
                                                              remove=False)])]),
     _results_codes("entries"), [((CLUSTER, None, Op.ALTER_CONFIGS), CLUSTER_AUTH)]),
    ("describe-user-scram-credentials", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
     lambda: request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, users=None), _top,
     [((CLUSTER, None, Op.DESCRIBE), CLUSTER_AUTH)]),
    ("alter-user-scram-credentials", ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
     lambda: request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, upsertions=[], deletions=[
         _m("alter_user_scram_credentials_request", "ScramCredentialDeletion")(name="z", mechanism=1)]),
     _results_codes("results"), [((CLUSTER, None, Op.ALTER), CLUSTER_AUTH)]),
    ("describe-producers", ApiKey.DESCRIBE_PRODUCERS, 0,
     lambda: request(ApiKey.DESCRIBE_PRODUCERS, topics=[_m("describe_producers_request", "TopicRequest")(
         name=T, partition_indexes=[0])]),
     _topic_partitions_codes, [((TOPIC, T, Op.READ), TOPIC_AUTH)]),
    ("describe-transactions", ApiKey.DESCRIBE_TRANSACTIONS, 0,
     lambda: request(ApiKey.DESCRIBE_TRANSACTIONS, transactional_ids=[X]),
     _results_codes("transaction_states"), [((TXN, X, Op.DESCRIBE), TXN_AUTH)]),
]


def _existing_topic(name):
    """A row's set-up: the topic exists (a DESCRIBE that finds no topic answers UNKNOWN_TOPIC, as
    Kafka's, before the DELETE check)."""
    def make(admin):
        for f in admin.create_topics([confluent_kafka.admin.NewTopic(name, 1, 1)]).values():
            f.result(30)
    return make


def _committed_group(admin):
    """The group G holds an offset of T (a group without offsets answers GROUP_ID_NOT_FOUND
    before any topic is checked, as Kafka's)."""
    try:
        _existing_topic(T)(admin)
    except confluent_kafka.KafkaException as e:
        if e.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    consumer = confluent_kafka.Consumer({**admin.conf, "group.id": G})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(T, 0, 0)], asynchronous=False)
    finally:
        consumer.close()


SETUP = {"delete-topics": _existing_topic("acl-doomed"), "offset-delete": _committed_group,
         "share-fetch": _share_topic}


def _call(broker, api, version, make, codes_of):
    with KafkaConnection("127.0.0.1", broker.port) as conn:
        return codes_of(conn.call(api, version, make()))


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_each_api_needs_exactly_kafkas_acls_in_kafkas_order(broker, admin, row):
    label, api, version, make, codes_of, steps = row
    _revoke_all(admin)
    if label in SETUP:
        SETUP[label](admin)
    try:
        for acl, refused_with in steps:
            codes = _call(broker, api, version, make, codes_of)
            assert refused_with in codes and not set(codes) & (AUTH_ERRORS - {refused_with}), (acl, codes)
            _grant(admin, *acl)
        codes = _call(broker, api, version, make, codes_of)
        assert not set(codes) & AUTH_ERRORS, codes
    finally:
        _revoke_all(admin)


def test_every_served_api_is_in_the_table_or_needs_no_acl():
    """A new API cannot be served without its row here (or in the cluster-only test)."""
    from kafkacore.broker.handlers import HANDLERS
    without_acl = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.DESCRIBE_CLUSTER}
    tested = {r[1] for r in ROWS} | set(CLUSTER_ONLY_ROWS) | {ApiKey.LIST_GROUPS, ApiKey.LIST_TRANSACTIONS}
    assert set(HANDLERS) - without_acl - tested == set()


def test_listings_show_only_what_the_principal_may_describe(broker, admin):
    """Metadata for every topic, ListGroups and ListTransactions filter by DESCRIBE; the
    authorized-operations fields of Metadata, DescribeCluster and DescribeGroups are the ACLs'."""
    for f in admin.create_topics([confluent_kafka.admin.NewTopic("acl-listed", 1, 1),
                                  confluent_kafka.admin.NewTopic("acl-hidden", 1, 1)]).values():
        f.result(30)
    conf = admin.conf
    producer = confluent_kafka.Producer({**conf, "transactional.id": "acl-listed-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("acl-listed", b"v")
    producer.flush(30)
    consumer = confluent_kafka.Consumer({**conf, "group.id": "acl-listed-group", "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition("acl-listed", 0, 0)])
    consumer.commit(offsets=[confluent_kafka.TopicPartition("acl-listed", 0, 0)], asynchronous=False)
    consumer.close()
    _revoke_all(admin)
    try:
        with KafkaConnection("127.0.0.1", broker.port) as conn:
            def listed():
                md = conn.call(ApiKey.METADATA, 12, request(ApiKey.METADATA, topics=None,
                                                            allow_auto_topic_creation=False,
                                                            include_topic_authorized_operations=True))
                groups = conn.call(ApiKey.LIST_GROUPS, 4, request(ApiKey.LIST_GROUPS, states_filter=[]))
                txns = conn.call(ApiKey.LIST_TRANSACTIONS, 1, request(ApiKey.LIST_TRANSACTIONS, state_filters=[],
                                                                      producer_id_filters=[], duration_filter=-1))
                return ({t.name: t.topic_authorized_operations for t in md.topics},
                        {g.group_id for g in groups.groups}, {t.transactional_id for t in txns.transaction_states})

            assert listed() == ({}, set(), set())
            _grant(admin, TOPIC, "acl-listed", Op.READ)
            _grant(admin, GROUP, "acl-listed-group", Op.DESCRIBE)
            _grant(admin, TXN, "acl-listed-txn", Op.DESCRIBE)
            # READ allows DESCRIBE too (Kafka's implication); the bits are READ and DESCRIBE
            assert listed() == ({"acl-listed": (1 << 3) | (1 << 8)}, {"acl-listed-group"}, {"acl-listed-txn"})
            cluster = conn.call(ApiKey.DESCRIBE_CLUSTER, 1, request(ApiKey.DESCRIBE_CLUSTER,
                                                                    include_cluster_authorized_operations=True))
            assert cluster.error_code == 0 and cluster.cluster_authorized_operations == 0
            _grant(admin, CLUSTER, None, Op.ALTER)
            cluster = conn.call(ApiKey.DESCRIBE_CLUSTER, 1, request(ApiKey.DESCRIBE_CLUSTER,
                                                                    include_cluster_authorized_operations=True))
            assert cluster.cluster_authorized_operations == (1 << 7) | (1 << 8)  # ALTER and the DESCRIBE it implies
            groups = conn.call(ApiKey.DESCRIBE_GROUPS, 5, request(ApiKey.DESCRIBE_GROUPS, groups=["acl-listed-group"],
                                                                  include_authorized_operations=True))
            assert [(g.error_code, g.authorized_operations) for g in groups.groups] == [(0, 1 << 8)]
            # DESCRIBE on the cluster lists every group (Kafka's rule)
            _revoke_all(admin)
            _grant(admin, CLUSTER, None, Op.DESCRIBE)
            assert listed()[1] >= {"acl-listed-group"}
    finally:
        producer.abort_transaction(30)
        _revoke_all(admin)


# -- the cluster-only APIs, on a one-broker cluster -------------------------------------------
CLUSTER_ONLY_ROWS = {
    ApiKey.LEADER_AND_ISR: (7, lambda: request(ApiKey.LEADER_AND_ISR, controller_id=1, controller_epoch=1,
                                               broker_epoch=-1, topic_states=[], live_leaders=[])),
    ApiKey.STOP_REPLICA: (4, lambda: request(ApiKey.STOP_REPLICA, controller_id=1, controller_epoch=1,
                                             broker_epoch=-1, topic_states=[])),
    ApiKey.UPDATE_METADATA: (8, lambda: request(ApiKey.UPDATE_METADATA, controller_id=1, controller_epoch=1,
                                                broker_epoch=-1, topic_states=[], live_brokers=[])),
    ApiKey.CONTROLLED_SHUTDOWN: (3, lambda: request(ApiKey.CONTROLLED_SHUTDOWN, broker_id=7, broker_epoch=-1)),
    ApiKey.ELECT_LEADERS: (2, lambda: request(ApiKey.ELECT_LEADERS, election_type=0, topic_partitions=None,
                                              timeout_ms=1000)),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, lambda: request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, timeout_ms=1000,
                                                              topics=[])),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, lambda: request(ApiKey.LIST_PARTITION_REASSIGNMENTS, timeout_ms=1000,
                                                             topics=None)),
}


@pytest.mark.parametrize("allow_everyone", [False, True], ids=["no-acl-refused", "allowed-when-no-acl"])
def test_the_cluster_only_apis_need_the_cluster(tmp_path, allow_everyone):
    """On a one-broker cluster the controller's requests reach the broker itself without a
    socket (trusted), so User:ANONYMOUS on the listener has no ACL at all: every cluster-only
    API answers CLUSTER_AUTHORIZATION_FAILED; with allow.everyone.if.no.acl.found none does."""
    from kafkacore.embedded_cluster import EmbeddedKafkaCluster
    settings = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": str(allow_everyone).lower()}
    with EmbeddedKafkaCluster(tmp_path, brokers=1, settings=settings) as cluster:
        host, port = cluster.bootstrap_servers.split(",")[0].split(":")
        with KafkaConnection(host, int(port)) as conn:
            for api, (version, make) in CLUSTER_ONLY_ROWS.items():
                resp = conn.call(api, version, make())
                codes = {getattr(resp, "error_code", 0)} | {
                    getattr(x, "error_code", 0) for attr in ("replication_election_results", "responses")
                    for x in (getattr(resp, attr, None) or [])}
                if allow_everyone:
                    assert CLUSTER_AUTH not in codes, (api, resp)
                else:
                    assert CLUSTER_AUTH in codes, (api, resp)


def _user_conf(broker, user):
    return {"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USER_PASSWORD}


def test_confluent_kafka_clients_work_with_their_acls_and_are_refused_without(broker, admin):
    """alice may write and read topics ``alice-*`` in groups ``alice-*`` (PREFIXED ACLs, as a
    user would grant them); bob has no ACL: his produce fails with TOPIC_AUTHORIZATION_FAILED and
    nothing is written, his consumer is refused its group."""
    for f in admin.create_topics([confluent_kafka.admin.NewTopic("alice-orders", 1, 1)]).values():
        f.result(30)
    prefixed = ResourcePatternType.PREFIXED
    grants = [AclBinding(rtype, "alice-", prefixed, "User:alice", "*", op, AclPermissionType.ALLOW)
              for rtype, op in ((TOPIC, Op.WRITE), (TOPIC, Op.READ), (GROUP, Op.READ))]
    for f in admin.create_acls(grants).values():
        f.result(30)
    try:
        producer = confluent_kafka.Producer({**_user_conf(broker, "alice"), "enable.idempotence": True})
        for i in range(10):
            producer.produce("alice-orders", f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = confluent_kafka.Consumer({**_user_conf(broker, "alice"), "group.id": "alice-readers",
                                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["alice-orders"])
        got = []
        while len(got) < 10:
            m = consumer.poll(30)
            assert m is not None and m.error() is None, m and m.error()
            got.append(m.value())
        consumer.commit(asynchronous=False)
        consumer.close()
        assert got == [f"v{i}".encode() for i in range(10)]

        errors = []
        bob = confluent_kafka.Producer({**_user_conf(broker, "bob"), "message.timeout.ms": 5000})
        bob.produce("alice-orders", b"intruder", on_delivery=lambda err, _m: errors.append(err))
        bob.flush(30)
        assert [e.code() for e in errors] == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
        thief = confluent_kafka.Consumer({**_user_conf(broker, "bob"), "group.id": "alice-readers",
                                          "auto.offset.reset": "earliest"})
        thief.subscribe(["alice-orders"])
        m = thief.poll(30)
        thief.close()
        assert m is not None and m.error() is not None and m.error().code() in (
            confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED, confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED)
        low, high = confluent_kafka.Consumer({**admin.conf, "group.id": "x"}).get_watermark_offsets(
            confluent_kafka.TopicPartition("alice-orders", 0), timeout=30)
        assert (low, high) == (0, 10)  # bob wrote nothing
    finally:
        _revoke_all(admin)
        for f in admin.delete_acls([AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                                     None, AclOperation.ANY, AclPermissionType.ANY)]).values():
            f.result(30)


def test_a_client_with_a_quota_is_refused_the_same(broker, admin):
    """Quotas and ACLs together: a connection whose requests are metered (a quota is set for
    it) is checked exactly as one without. (confluent-kafka has no client-quota admin: the
    quota is set raw, by User:ANONYMOUS given ALTER_CONFIGS on the cluster for it.)"""
    from kafkacore.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
    entry = EntryData(entity=[EntityData(entity_type="user", entity_name="ANONYMOUS")],
                      ops=[OpData(key="producer_byte_rate", value=1e9, remove=False)])
    _revoke_all(admin)
    _grant(admin, CLUSTER, None, Op.ALTER_CONFIGS)
    try:
        with KafkaConnection("127.0.0.1", broker.port) as conn:
            resp = conn.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request(ApiKey.ALTER_CLIENT_QUOTAS, entries=[entry],
                                                                     validate_only=False))
        assert [e.error_code for e in resp.entries] == [0]
    finally:
        _revoke_all(admin)
    try:
        _label, api, version, make, codes_of, _steps = ROWS[0]  # produce
        assert TOPIC_AUTH in _call(broker, api, version, make, codes_of)
    finally:
        entry.ops[0].remove = True
        _grant(admin, CLUSTER, None, Op.ALTER_CONFIGS)
        with KafkaConnection("127.0.0.1", broker.port) as conn:
            conn.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request(ApiKey.ALTER_CLIENT_QUOTAS, entries=[entry],
                                                             validate_only=False))
        _revoke_all(admin)
