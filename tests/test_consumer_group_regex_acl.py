"""A KIP-848 regex subscription under ACLs: the coordinator assigns only the matching topics
the member's principal may DESCRIBE (Kafka 4's rule), judged by the principal of its heartbeats.
A confluent-kafka consumer (``group.protocol=consumer``) logs in as User:bob on a SASL_PLAINTEXT
listener with an authorizer; the PLAINTEXT listener is the operator's (User:ANONYMOUS, a super
user there), which creates the topics, grants the ACLs and describes the group."""
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType

from _kcutil import wait_for
from broker_client import BrokerProcess, auto_create, find_coordinators, free_port, request

GROUP, OPEN, SECRET = "rx-acl-group", "rxacl-open", "rxacl-secret"
PASSWORD = "bob-secret-pw"
DESCRIBE = 69


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    port, sasl_port = free_port(), free_port()
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="{PASSWORD}";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS",
        "num.partitions": "2", "offsets.topic.num.partitions": "1",
        "group.consumer.heartbeat.interval.ms": "300", "group.consumer.min.heartbeat.interval.ms": "100"}
    with BrokerProcess(tmp_path_factory.mktemp("regex-acl") / "data", settings, port=port) as b:
        b.sasl_port = sasl_port
        with b.client() as c:
            for topic in (OPEN, SECRET):
                auto_create(c, topic)
            find_coordinators(c)
        yield b


def grant(broker, rtype, name, op):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    binding = AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:bob", "*", op, AclPermissionType.ALLOW)
    for f in admin.create_acls([binding]).values():
        f.result(30)


def assigned_topics(broker):
    """{topic name: partitions} the coordinator assigns the group's members."""
    with broker.client() as conn:
        g = conn.call(DESCRIBE, 0, request(DESCRIBE, group_ids=[GROUP], include_authorized_operations=False)).groups[0]
        names = {t.topic_id: t.name for t in conn.call(3, 12, request(3, topics=None)).topics}
    out = {}
    for m in g.members:
        for tp in m.assignment.topic_partitions:
            out.setdefault(names[tp.topic_id], set()).update(tp.partitions)
    return out


def test_a_regex_member_gets_only_the_topics_it_may_describe(broker):
    grant(broker, ResourceType.GROUP, GROUP, AclOperation.READ)
    grant(broker, ResourceType.TOPIC, OPEN, AclOperation.READ)  # READ implies DESCRIBE; none on SECRET
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": PASSWORD, "group.id": GROUP,
        "group.protocol": "consumer", "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
    try:
        consumer.subscribe(["^rxacl-.*"])

        def settled(want):
            consumer.poll(0.1)
            return assigned_topics(broker) == want
        wait_for(lambda: settled({OPEN: {0, 1}}), lambda: f"only {OPEN} assigned: {assigned_topics(broker)}",
                 timeout=30)
        # a while later (heartbeats resolve the regex again each time) still only what bob may describe
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            consumer.poll(0.1)
        assert assigned_topics(broker) == {OPEN: {0, 1}}
        # bob may describe the other topic from now on: the next heartbeats assign it
        grant(broker, ResourceType.TOPIC, SECRET, AclOperation.READ)
        wait_for(lambda: settled({OPEN: {0, 1}, SECRET: {0, 1}}),
                 lambda: f"both topics assigned: {assigned_topics(broker)}", timeout=30)
    finally:
        consumer.close()
