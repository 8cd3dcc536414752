"""A KIP-932 share group across a coordinator failover, on the in-process three-broker cluster
(kafkacore.embedded_cluster): the broker leading the group's __consumer_offsets partition is
killed, the new leader replays the group's ShareGroup* records, and the confluent-kafka
ShareConsumers carry on at their member epochs on the new coordinator - no member fenced, the
same assignment. (Membership only: fetching is ShareFetch's.)"""
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from _kcutil import wait_for
from broker_client import KafkaConnection, request
from kafkacore.embedded_cluster import EmbeddedKafkaCluster

TOPIC, GROUP, PARTITIONS = "share-failover", "share-failover-group", 4
SESSION_MS = 4000
SETTINGS = {"min.insync.replicas": "2", "default.replication.factor": "3", "num.partitions": str(PARTITIONS),
            "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3",
            "group.share.session.timeout.ms": str(SESSION_MS), "group.share.min.session.timeout.ms": "1000",
            "group.share.heartbeat.interval.ms": "300", "group.share.min.heartbeat.interval.ms": "100"}


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
        return conn.call(77, 1, request(77, group_ids=[GROUP], include_authorized_operations=False)).groups[0]


def membership(group):
    return sorted((m.member_id, m.member_epoch, tuple(sorted((t.topic_name, tuple(t.partitions))
                                                               for t in m.assignment.topic_partitions)))
                  for m in group.members)


def test_the_share_group_survives_its_coordinators_death(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    consumers = []
    for name in ("a", "b"):
        c = confluent_kafka.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
                                           "client.id": name})
        c.subscribe([TOPIC])
        consumers.append(c)
    try:
        node, address = coordinator_of(cluster, 1)

        def settled():
            g = describe_at(address)
            return g.error_code == 0 and len(g.members) == 2 and g.group_state == "Stable" and all(
                m.member_epoch == g.assignment_epoch == g.group_epoch for m in g.members) and g
        before = wait_for(settled, "both share consumers in the group", timeout=30)
        assert sorted(len(m.assignment.topic_partitions[0].partitions) for m in before.members) == [2, 2]
        cluster.kill(node)
        killed_at = time.monotonic()
        survivor = next(i for i in cluster.brokers if i != node)
        new_node, new_address = wait_for(lambda: (c := coordinator_of(cluster, survivor))[0] != node and c,
                                         "a new coordinator", timeout=30, tolerate=(Exception,))
        after = wait_for(lambda: (g := describe_at(new_address)).error_code == 0 and g, "the group loaded there",
                         timeout=30, tolerate=(Exception,))
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == \
            (before.group_epoch, before.assignment_epoch, "Stable")
        assert membership(after) == membership(before)
        # the members heartbeat the new coordinator for longer than a session: the same members, epochs, partitions
        wait_for(lambda: time.monotonic() - killed_at > SESSION_MS / 1000 * 2, "two sessions' time after the kill",
                 timeout=20)
        final = describe_at(new_address)
        assert (final.group_epoch, membership(final)) == (before.group_epoch, membership(before))
    finally:
        for c in consumers:
            c.close()
