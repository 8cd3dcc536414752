"""Kafka's ACL APIs (CreateAcls, DescribeAcls, DeleteAcls) on a broker process, through
confluent-kafka's AdminClient and raw requests: Kafka's errors, the ACLs stored as Kafka's
ZooKeeper-mode authorizer stores them, kept across a restart."""
import json
import os

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from _kcutil import wait_for
from broker_client import BrokerProcess, KafkaConnection, request
from kafkacore.cluster.local_metadata import METADATA_DIR
from kafkacore.cluster.local_znodes import ZnodeTree
from kafkacore.embedded_cluster import EmbeddedKafkaCluster
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.messages.create_acls_request import AclCreation
from kafkacore.protocol.messages.metadata_request import MetadataRequestTopic

# the tests' clients connect in plaintext as User:ANONYMOUS: a super user, so that the ACL APIs
# (ALTER / DESCRIBE on the cluster) are theirs
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("acl") / "data", settings=AUTHORIZER) as b:
        yield b


def _admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(admin, bindings):
    return {b: f.result(30) for b, f in admin.create_acls(bindings).items()}


def _describe(admin, binding_filter):
    return sorted(admin.describe_acls(binding_filter).result(30), key=str)


def _delete(admin, filters):
    return {f: sorted(fut.result(30), key=str) for f, fut in admin.delete_acls(filters).items()}


def _binding(name, principal="User:alice", op=AclOperation.READ, perm=AclPermissionType.ALLOW,
             pattern=ResourcePatternType.LITERAL, rtype=ResourceType.TOPIC, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def _filter(name=None, pattern=ResourcePatternType.ANY, rtype=ResourceType.ANY, principal=None,
            op=AclOperation.ANY, perm=AclPermissionType.ANY):
    return AclBindingFilter(rtype, name, pattern, principal, None, op, perm)


def test_confluent_kafka_creates_describes_and_deletes_acls(broker):
    admin = _admin(broker)
    read = _binding("orders")
    write_prefixed = _binding("ord", op=AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED)
    group = _binding("g1", principal="User:bob", rtype=ResourceType.GROUP)
    assert set(_create(admin, [read, write_prefixed, group]).values()) == {None}
    assert _describe(admin, _filter(principal="User:alice")) == sorted([read, write_prefixed], key=str)
    assert _describe(admin, _filter(name="orders", pattern=ResourcePatternType.MATCH,
                                    rtype=ResourceType.TOPIC)) == sorted([read, write_prefixed], key=str)
    assert _describe(admin, _filter(rtype=ResourceType.GROUP)) == [group]
    assert _create(admin, [read]) == {read: None}  # again: nothing changes
    deleted = _delete(admin, [_filter(principal="User:alice", op=AclOperation.READ), _filter(name="nothing")])
    assert list(deleted.values()) == [[read], []]
    assert _describe(admin, _filter(rtype=ResourceType.TOPIC)) == [write_prefixed]
    assert _delete(admin, [_filter()])[_filter()] == sorted([write_prefixed, group], key=str)
    assert _describe(admin, _filter()) == []


def _raw_create(broker, creations, version=3):
    with broker.client() as conn:
        resp = conn.call(ApiKey.CREATE_ACLS, version, request(ApiKey.CREATE_ACLS, creations=creations))
    return [(r.error_code, r.error_message) for r in resp.results]


def _creation(**kw):
    fields = dict(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
                  operation=3, permission_type=3)
    return AclCreation(**{**fields, **kw})


def test_invalid_bindings_are_refused_with_kafkas_errors(broker):
    results = _raw_create(broker, [_creation(resource_type=4, resource_name="my-cluster"),
                                   _creation(resource_name=""), _creation(resource_pattern_type=2),
                                   _creation(operation=1), _creation(permission_type=99),
                                   _creation(principal="alice"), _creation(resource_name="fine")])
    assert [code for code, _m in results] == [42] * 6 + [0]  # INVALID_REQUEST, then the valid one
    assert results[0][1] == "The only valid name for the CLUSTER resource is kafka-cluster"
    assert results[2][1] == "Invalid patternType MATCH"
    assert results[4][1] == "Invalid permissionType UNKNOWN"
    assert results[5][1].startswith("Could not parse principal from `alice`")
    # librdkafka names Kafka's CLUSTER resource type (4) BROKER
    with pytest.raises(Exception, match="INVALID_REQUEST|only valid name"):
        _create(_admin(broker), [_binding("other-cluster", rtype=ResourceType.BROKER, op=AclOperation.ALTER)])
    _delete(_admin(broker), [_filter()])


def test_acls_are_stored_as_kafka_stores_them_and_survive_a_restart(broker):
    admin = _admin(broker)
    literal = _binding("payments", principal="User:carol", op=AclOperation.DESCRIBE_CONFIGS,
                       perm=AclPermissionType.DENY, host="10.0.0.7")
    prefixed = _binding("tx-", principal="User:carol", op=AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED,
                        rtype=ResourceType.TRANSACTIONAL_ID)
    _create(admin, [literal, prefixed])
    broker.stop()
    tree = ZnodeTree(os.path.join(broker.data_dir, METADATA_DIR))
    try:
        topic_acls = json.loads(tree.get("/kafka-acl/Topic/payments")[0])
        prefixed_acls = json.loads(tree.get("/kafka-acl-extended/prefixed/TransactionalId/tx-")[0])
        literal_changes = [tree.get(f"/kafka-acl-changes/{c}")[0] for c in tree.get_children("/kafka-acl-changes")]
        extended_changes = [json.loads(tree.get(f"/kafka-acl-extended-changes/{c}")[0])
                            for c in tree.get_children("/kafka-acl-extended-changes")]
    finally:
        tree.close()
    assert topic_acls == {"version": 1, "acls": [{"principal": "User:carol", "permissionType": "Deny",
                                                  "operation": "DescribeConfigs", "host": "10.0.0.7"}]}
    assert prefixed_acls == {"version": 1, "acls": [{"principal": "User:carol", "permissionType": "Allow",
                                                     "operation": "Write", "host": "*"}]}
    assert b"TOPIC:payments" in literal_changes
    assert {"version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-",
            "patternType": "PREFIXED"} in extended_changes
    broker.start()
    assert _describe(_admin(broker), _filter(principal="User:carol")) == sorted([literal, prefixed], key=str)


def test_without_an_authorizer_the_apis_answer_security_disabled(tmp_path):
    with BrokerProcess(tmp_path / "data") as plain:
        admin = _admin(plain)
        for call in (lambda: _create(admin, [_binding("t")]), lambda: _delete(admin, [_filter()])):
            with pytest.raises(Exception, match="SECURITY_DISABLED|No Authorizer is configured"):
                call()
        assert _raw_create(plain, [_creation()]) == [(54, "No Authorizer is configured.")]
        # librdkafka's describe_acls drops the response's top-level error: asked raw
        with plain.client() as conn:
            resp = conn.call(ApiKey.DESCRIBE_ACLS, 3, request(
                ApiKey.DESCRIBE_ACLS, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1))
        assert (resp.error_code, resp.error_message) == (54, "No Authorizer is configured.")


def test_an_unknown_authorizer_is_refused_at_start(tmp_path):
    b = BrokerProcess(tmp_path / "data", settings={"authorizer.class.name": "com.example.MyAuthorizer"})
    with pytest.raises(Exception):
        b.start(timeout=20)
    assert "authorizer.class.name='com.example.MyAuthorizer'" in b.output()


def test_every_broker_of_a_cluster_applies_acls_written_through_any_other(tmp_path):
    """ACLs reach every broker through the change notifications (Kafka's
    AclChangeNotificationHandler): a DENY written through broker 1 hides the topic from broker
    2's Metadata; deleted through broker 2, broker 1 lists it again; a restarted broker loads them."""
    settings = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "allow.everyone.if.no.acl.found": "true"}  # anonymous may do what no ACL names
    with EmbeddedKafkaCluster(tmp_path, brokers=2, settings=settings) as cluster:
        first, second = (b.address for b in cluster.brokers.values())
        admins = {a: AdminClient({"bootstrap.servers": a}) for a in (first, second)}
        for f in admins[first].create_topics([NewTopic("acl-spread", 1, 2)]).values():
            f.result(30)

        def visible(address):
            host, port = address.split(":")
            with KafkaConnection(host, int(port)) as conn:
                resp = conn.call(ApiKey.METADATA, 12, request(ApiKey.METADATA, topics=[
                    MetadataRequestTopic(name="acl-spread")], allow_auto_topic_creation=False))
            return resp.topics[0].error_code == 0  # TOPIC_AUTHORIZATION_FAILED (29) once denied

        wait_for(lambda: visible(first) and visible(second), "the topic on both brokers", 30)
        deny = _binding("acl-spread", principal="User:ANONYMOUS", op=AclOperation.DESCRIBE,
                        perm=AclPermissionType.DENY)
        assert _create(admins[first], [deny]) == {deny: None}
        wait_for(lambda: not visible(second), "broker 2 to apply the ACL written through broker 1", 30)
        cluster.restart(2)
        assert not visible(cluster.brokers[2].address)  # loaded at start-up
        assert _describe(admins[second], _filter("acl-spread")) == [deny]
        assert _delete(admins[second], [_filter("acl-spread")]) == {_filter("acl-spread"): [deny]}
        wait_for(lambda: visible(first), "broker 1 to apply the deletion made through broker 2", 30)
