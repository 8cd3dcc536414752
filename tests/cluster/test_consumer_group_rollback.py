"""A consumer-group change whose records fail to replicate is undone in the coordinator's memory
(Kafka reverts to its last committed snapshot), on the in-process two-broker cluster
(kafkacore.embedded_cluster): __consumer_offsets has two replicas and min.insync.replicas=2;
the follower stalls, so a member's join is written by the leader but never replicated - the
follower drops out of the ISR and the write fails with NOT_ENOUGH_REPLICAS_AFTER_APPEND. The
group is then as before the join, and carries on once the follower is back."""
import pytest

from _kcutil import wait_for
from broker_client import KafkaConnection, auto_create, request
from kafkacore.embedded_cluster import EmbeddedKafkaCluster
from kafkacore.protocol.messages.consumer_group_heartbeat_request import TopicPartitions

TOPIC, GROUP = "rollback-flow", "rollback-group"
HEARTBEAT, DESCRIBE, FIND_COORDINATOR = 68, 69, 10
COORDINATOR_NOT_AVAILABLE = 15
SETTINGS = {"min.insync.replicas": "2", "offsets.topic.replication.factor": "2", "offsets.topic.num.partitions": "1",
            "num.partitions": "4", "default.replication.factor": "1", "replica.lag.time.max.ms": "1000",
            "group.consumer.session.timeout.ms": "10000", "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "300", "group.consumer.min.heartbeat.interval.ms": "100"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedKafkaCluster(tmp_path_factory.mktemp("rollback"), brokers=2, settings=SETTINGS)
    try:
        yield c.start()
    finally:
        c.stop()


def hb(conn, member_id, epoch, owned=None, group=GROUP):
    return conn.call(HEARTBEAT, 1, request(
        HEARTBEAT, group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=30000 if not epoch
        else -1, subscribed_topic_names=[TOPIC] if not epoch else None,
        topic_partitions=None if owned is None else [TopicPartitions(topic_id=t, partitions=sorted(p))
                                                     for t, p in owned.items()]))


def state(conn):
    g = conn.call(DESCRIBE, 0, request(DESCRIBE, group_ids=[GROUP], include_authorized_operations=False)).groups[0]
    return (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch,
            sorted((m.member_id, m.member_epoch, sorted((tp.topic_id, tuple(tp.partitions))
                                                         for tp in m.assignment.topic_partitions))
                   for m in g.members))


def coordinator_and_follower(cluster, group):
    """The group's coordinator (FindCoordinator's answer) and the other broker, its follower."""
    with KafkaConnection("127.0.0.1", cluster.brokers[1].port) as conn:
        auto_create(conn, TOPIC)
        coordinator = wait_for(lambda: (c := conn.call(FIND_COORDINATOR, 4, request(
            FIND_COORDINATOR, key_type=0, coordinator_keys=[group])).coordinators[0]).error_code == 0 and c,
            "the group's coordinator", timeout=30)
    return coordinator, next(b for i, b in cluster.brokers.items() if i != coordinator.node_id)


def test_a_join_that_fails_to_replicate_leaves_the_group_as_before(cluster):
    coordinator, follower = coordinator_and_follower(cluster, GROUP)
    with KafkaConnection(coordinator.host, coordinator.port) as conn:
        a = wait_for(lambda: (r := hb(conn, "a", 0, {})).error_code == 0 and r, "a to join", timeout=30)
        owned = {tp.topic_id: tp.partitions for tp in a.assignment.topic_partitions}
        assert hb(conn, "a", a.member_epoch, owned).error_code == 0
        before = state(conn)
        assert before[1] == "Stable" and [m[0] for m in before[4]] == ["a"], before

        follower.pause(3)  # its fetches stop: the ISR shrinks to the leader after replica.lag.time.max.ms
        failed = hb(conn, "b", 0, {})
        assert failed.error_code == COORDINATOR_NOT_AVAILABLE, failed  # NOT_ENOUGH_REPLICAS_AFTER_APPEND's mapping
        assert state(conn) == before  # b is not in the group, the epochs did not move
        assert hb(conn, "a", a.member_epoch, owned).error_code == 0  # a carries on at its epoch

        # the follower catches up and is back in the ISR: the join goes through
        b = wait_for(lambda: (r := hb(conn, "b", 0, {})).error_code == 0 and r, "b to join once the ISR is whole",
                     timeout=30)
        assert b.member_epoch == before[2] + 1
        after = state(conn)
        assert after[2] == before[2] + 1 and [m[0] for m in after[4]] == ["a", "b"], after


def test_an_upgrade_that_fails_to_replicate_leaves_the_classic_group(cluster):
    """The ConsumerGroupHeartbeat that would upgrade a classic group is not replicated: the
    classic group is back, Stable, its member heartbeating; the upgrade goes through later."""
    from kafkacore.client.assignors import Assignment, Subscription, encode_assignment, encode_subscription
    from kafkacore.protocol.messages.join_group_request import JoinGroupRequestProtocol
    from kafkacore.protocol.messages.sync_group_request import SyncGroupRequestAssignment

    group = "rollback-upgrade"
    coordinator, follower = coordinator_and_follower(cluster, group)
    protocols = [JoinGroupRequestProtocol(name="range", metadata=encode_subscription(Subscription(topics=[TOPIC])))]
    with KafkaConnection(coordinator.host, coordinator.port) as conn:
        def join(member_id=""):
            return conn.call(11, 7, request(11, group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                            member_id=member_id, protocol_type="consumer", protocols=protocols))

        def classic_state():
            g = conn.call(15, 5, request(15, groups=[group], include_authorized_operations=False)).groups[0]
            return g.group_state, g.protocol_data, [m.member_id for m in g.members]

        joined = wait_for(lambda: (r := join(join().member_id)).error_code == 0 and r, "a classic member",
                          timeout=30)
        everything = encode_assignment(Assignment(partitions=[(TOPIC, p) for p in range(4)]))
        assert conn.call(14, 5, request(14, group_id=group, generation_id=joined.generation_id,
                                        member_id=joined.member_id, protocol_type="consumer", protocol_name="range",
                                        assignments=[SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                                assignment=everything)])).error_code == 0
        before = classic_state()
        assert before == ("Stable", "range", [joined.member_id]), before

        follower.pause(3)
        failed = hb(conn, "modern", 0, {}, group=group)
        assert failed.error_code == COORDINATOR_NOT_AVAILABLE, failed
        assert classic_state() == before  # a classic group again, with its member
        assert conn.call(12, 4, request(12, group_id=group, generation_id=joined.generation_id,
                                        member_id=joined.member_id)).error_code == 0

        modern = wait_for(lambda: (r := hb(conn, "modern", 0, {}, group=group)).error_code == 0 and r,
                          "the upgrade once the ISR is whole", timeout=30)
        assert modern.member_epoch == joined.generation_id + 1  # the classic generation, then the join
        assert classic_state()[0] == "Dead"  # DescribeGroups does not describe a consumer group
