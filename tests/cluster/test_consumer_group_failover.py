"""A KIP-848 consumer group across a coordinator failover, on the in-process three-broker
cluster (kafkacore.embedded_cluster): the broker leading the group's __consumer_offsets
partition is killed, the new leader replays the group's records, and the confluent-kafka
members (``group.protocol=consumer``) carry on at their member epochs - no member fenced, no
partition moved, every record consumed."""
import threading
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from _kcutil import wait_for
from broker_client import KafkaConnection, request
from kafkacore.embedded_cluster import EmbeddedKafkaCluster

TOPIC, GROUP, PARTITIONS = "failover-flow", "failover-group", 4
SETTINGS = {"min.insync.replicas": "2", "default.replication.factor": "3", "num.partitions": str(PARTITIONS),
            "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3",
            "group.consumer.session.timeout.ms": "8000", "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "300", "group.consumer.min.heartbeat.interval.ms": "100"}


@pytest.fixture
def cluster(tmp_path):
    c = EmbeddedKafkaCluster(tmp_path, brokers=3, settings=SETTINGS)
    try:
        yield c.start()
    finally:
        c.stop()


def coordinator_of(cluster, alive):
    """(node id, address) of the group's coordinator as a live broker answers it."""
    host, port = cluster.brokers[alive].address.rsplit(":", 1)
    with KafkaConnection(host, int(port)) as conn:
        c = conn.call(10, 4, request(10, key_type=0, coordinator_keys=[GROUP])).coordinators[0]
        assert c.error_code == 0, c
        return c.node_id, (c.host, c.port)


def describe_at(address):
    with KafkaConnection(*address) as conn:
        return conn.call(69, 0, request(69, group_ids=[GROUP], include_authorized_operations=False)).groups[0]


class Consuming:
    def __init__(self, bootstrap, name):
        self.owned, self.records, self.revoked = set(), set(), []
        self.stop = threading.Event()
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer", "client.id": name,
            "auto.offset.reset": "earliest"})
        self.consumer.subscribe([TOPIC], on_assign=lambda _c, ps: self.owned.update(p.partition for p in ps),
                                on_revoke=self._revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _revoke(self, _c, parts):
        if not self.stop.is_set():
            self.revoked.extend(p.partition for p in parts)
        self.owned.difference_update(p.partition for p in parts)

    def _run(self):
        while not self.stop.is_set():
            m = self.consumer.poll(0.05)
            if m is not None and not m.error():
                self.records.add(m.value().decode())
        self.consumer.close()

    def close(self):
        self.stop.set()
        self.thread.join(30)


def test_the_group_survives_its_coordinators_death(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})

    def produce(first, count):
        for i in range(first, first + count):
            producer.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0

    produce(0, 200)
    a, b = Consuming(cluster.bootstrap_servers, "a"), Consuming(cluster.bootstrap_servers, "b")
    try:
        wait_for(lambda: len(a.owned) == len(b.owned) == 2, "a and b to share the partitions", timeout=30)
        node, address = coordinator_of(cluster, 1)
        before = wait_for(lambda: (g := describe_at(address)).group_state == "Stable" and g, "a stable group")
        revoked_before = (list(a.revoked), list(b.revoked))  # the first sharing revoked some
        cluster.kill(node)
        killed_at = time.monotonic()
        survivor = next(i for i in cluster.brokers if i != node)
        new_node, new_address = wait_for(lambda: (c := coordinator_of(cluster, survivor))[0] != node and c,
                                         "a new coordinator", timeout=30, tolerate=(Exception,))
        after = wait_for(lambda: (g := describe_at(new_address)).error_code == 0 and g, "the group loaded there",
                         timeout=30, tolerate=(Exception,))
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        epochs = sorted((m.member_id, m.member_epoch) for m in before.members)
        assert sorted((m.member_id, m.member_epoch) for m in after.members) == epochs
        produce(200, 200)
        wait_for(lambda: len(a.records | b.records) == 400, lambda: f"every record consumed: "
                 f"{400 - len(a.records | b.records)} missing", timeout=60)
        # the members heartbeat the new coordinator longer than a session: still the same members and epochs
        wait_for(lambda: time.monotonic() - killed_at > 10, "a session's time after the kill", timeout=20)
        final = describe_at(new_address)
        assert sorted((m.member_id, m.member_epoch) for m in final.members) == epochs
        assert (a.revoked, b.revoked) == revoked_before and len(a.owned) == len(b.owned) == 2
    finally:
        a.close()
        b.close()
