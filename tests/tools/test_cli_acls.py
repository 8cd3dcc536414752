"""``kafkacore acls`` against a real broker with an authorizer: ACLs added with kafka-acls'
options (its --producer / --consumer shortcuts included), listed, read back with
confluent-kafka's AdminClient, enforced on a client, removed; misuse refused in one line."""
import pytest
from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType as CkResourceType

from _cli import fails, kafkacore
from broker_client import BrokerProcess
from kafkacore.tools.common import EXIT_FAILED, EXIT_USAGE


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # the CLI connects in plaintext as User:ANONYMOUS: a super user here, so the ACL APIs are its
    settings = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}
    with BrokerProcess(tmp_path_factory.mktemp("cli-acls") / "data", settings) as b:
        yield b


def _all(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    flt = AclBindingFilter(CkResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    return {(b.principal, b.operation.name, b.permission_type.name, b.restype.name, b.name, b.resource_pattern_type.name)
            for b in admin.describe_acls(flt).result(30)}


def test_add_list_and_remove_with_kafka_acls_options(broker):
    b = broker.bootstrap
    r = kafkacore("acls", "add", "--allow-principal", "User:alice", "--producer", "--topic", "orders",
                  "--transactional-id", "orders-tx", "--idempotent", bootstrap=b)
    assert r.out == "Added 6 ACLs.\n"
    kafkacore("acls", "add", "--allow-principal", "User:bob", "--consumer", "--topic", "orders", "--group", "readers",
              bootstrap=b)
    kafkacore("acls", "add", "--deny-principal", "User:mallory", "--operation", "All", "--topic", "ord",
              "--resource-pattern-type", "prefixed", bootstrap=b)
    assert _all(b) == {
        ("User:alice", "WRITE", "ALLOW", "TOPIC", "orders", "LITERAL"),
        ("User:alice", "DESCRIBE", "ALLOW", "TOPIC", "orders", "LITERAL"),
        ("User:alice", "CREATE", "ALLOW", "TOPIC", "orders", "LITERAL"),
        ("User:alice", "WRITE", "ALLOW", "TRANSACTIONAL_ID", "orders-tx", "LITERAL"),
        ("User:alice", "DESCRIBE", "ALLOW", "TRANSACTIONAL_ID", "orders-tx", "LITERAL"),
        ("User:alice", "IDEMPOTENT_WRITE", "ALLOW", "BROKER", "kafka-cluster", "LITERAL"),
        ("User:bob", "READ", "ALLOW", "TOPIC", "orders", "LITERAL"),
        ("User:bob", "DESCRIBE", "ALLOW", "TOPIC", "orders", "LITERAL"),
        ("User:bob", "READ", "ALLOW", "GROUP", "readers", "LITERAL"),
        ("User:mallory", "ALL", "DENY", "TOPIC", "ord", "PREFIXED")}
    # list: every pattern that applies to a topic (match), or one principal's
    rows = kafkacore("acls", "list", "--topic", "orders", "--resource-pattern-type", "match", "-o", "json",
                     bootstrap=b).json()
    assert {(r["principal"], r["operation"], r["pattern_type"]) for r in rows} == {
        ("User:alice", "Write", "LITERAL"), ("User:alice", "Describe", "LITERAL"), ("User:alice", "Create", "LITERAL"),
        ("User:bob", "Read", "LITERAL"), ("User:bob", "Describe", "LITERAL"), ("User:mallory", "All", "PREFIXED")}
    table = kafkacore("acls", "list", "--principal", "User:bob", bootstrap=b).table()
    assert {(r["OPERATION"], r["RESOURCE"], r["NAME"]) for r in table} == {
        ("Read", "Topic", "orders"), ("Describe", "Topic", "orders"), ("Read", "Group", "readers")}
    assert kafkacore("acls", "remove", "--principal", "User:bob", bootstrap=b).out == "Removed 3 ACLs.\n"
    assert kafkacore("acls", "remove", "--allow-principal", "User:alice", "--operation", "Create", "--topic", "orders",
                     bootstrap=b).out == "Removed 1 ACL.\n"
    assert {a[0] for a in _all(b)} == {"User:alice", "User:mallory"}
    assert len(_all(b)) == 6
    kafkacore("acls", "remove", "--topic", "ord", "--resource-pattern-type", "prefixed", bootstrap=b)
    kafkacore("acls", "remove", "--principal", "User:alice", bootstrap=b)
    assert _all(b) == set()


def test_misuse_is_refused_in_one_line(broker):
    b = broker.bootstrap
    assert "name a resource" in fails("acls", "add", "--allow-principal", "User:a", "--operation", "Read",
                                      code=EXIT_USAGE, bootstrap=b)
    assert "no operation" in fails("acls", "add", "--allow-principal", "User:a", "--topic", "t", code=EXIT_USAGE,
                                   bootstrap=b)
    assert "Type:name" in fails("acls", "add", "--allow-principal", "alice", "--topic", "t", "--operation", "Read",
                                code=EXIT_USAGE, bootstrap=b)
    assert "--consumer needs --group" in fails("acls", "add", "--allow-principal", "User:a", "--consumer",
                                               "--topic", "t", code=EXIT_USAGE, bootstrap=b)
    assert "invalid operation value" in fails("acls", "add", "--allow-principal", "User:a", "--topic", "t",
                                              "--operation", "Fly", code=EXIT_USAGE, bootstrap=b)
    assert "say what to remove" in fails("acls", "remove", code=EXIT_USAGE, bootstrap=b)


def test_a_broker_without_an_authorizer_says_so(tmp_path):
    with BrokerProcess(tmp_path / "data") as plain:
        err = fails("acls", "list", code=EXIT_FAILED, bootstrap=plain.bootstrap)
    assert "SECURITY_DISABLED" in err and "No Authorizer is configured" in err
