"""ShareFetch on a two-broker in-process cluster: a follower answers NOT_LEADER_OR_FOLLOWER with the
leader and its endpoint (as Kafka's, so a client moves there), and after the leader dies the new
leader serves the share partition, its old one gone with the leadership."""
import pytest

from _kcutil import wait_for
from broker_client import KafkaConnection, request
from kafkacore.embedded_cluster import EmbeddedKafkaCluster
from kafkacore.errors import NotLeaderOrFollowerError
from kafkacore.protocol.messages.share_fetch_request import FetchPartition, FetchTopic

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

SHARE_FETCH, METADATA = 78, 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # __share_group_state on both brokers with a min ISR of 1: the share state stays writable
    # while one of the two is dead (Kafka's defaults, 3 replicas and min ISR 2, need three brokers)
    with EmbeddedKafkaCluster(tmp_path_factory.mktemp("sharecl"), brokers=2, settings={
            "offsets.topic.replication.factor": 2, "share.coordinator.state.topic.replication.factor": 2,
            "share.coordinator.state.topic.min.isr": 1}) as c:
        yield c


def share_fetch(port, topic_id, epoch, member="m1", conn=None):
    """A ShareFetch on ``conn``, else on a connection of its own (closed after: the session goes
    with it, and with the group's last session the leader's share partitions of the group)."""
    if conn is None:
        with KafkaConnection("127.0.0.1", port) as conn:
            return share_fetch(port, topic_id, epoch, member, conn)
    return conn.call(SHARE_FETCH, 1, request(
            SHARE_FETCH, group_id="g-cluster", member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
            max_bytes=1 << 20, max_records=100, batch_size=0, forgotten_topics_data=[],
            topics=[FetchTopic(topic_id=topic_id, partitions=[FetchPartition(partition_index=0)])]))


def leader_and_id(cluster, topic):
    """(leader id, leader epoch, topic id) from a broker's metadata cache."""
    server = next(b.server for b in cluster.brokers.values() if b.running)
    state = server.metadata_cache.partition(topic, 0)
    if state is None or server.metadata_cache.leader(topic, 0) < 0 or topic not in server.topics:
        return None
    return state.leader, state.leader_epoch, server.topics[topic].topic_id


def test_a_follower_names_the_leader_and_a_new_leader_serves_after_failover(cluster):
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([confluent_kafka.admin.NewTopic("shared", 1, 2)])["shared"].result(30)
    leader, epoch, tid = wait_for(lambda: leader_and_id(cluster, "shared"), what="the topic's leader")
    follower = next(i for i in cluster.brokers if i != leader)
    wait_for(lambda: cluster.brokers[follower].server.topics.get("shared"), what="the follower knows the topic")
    resp = share_fetch(cluster.brokers[follower].port, tid, 0)
    p = resp.responses[0].partitions[0]
    assert p.error_code == NotLeaderOrFollowerError.code
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, epoch)
    assert [(e.node_id, e.port) for e in resp.node_endpoints] == [(leader, cluster.brokers[leader].port)]
    with KafkaConnection("127.0.0.1", cluster.brokers[leader].port) as conn:  # the session kept open
        assert share_fetch(None, tid, 0, conn=conn).responses[0].partitions[0].error_code == 0
        assert cluster.brokers[leader].server.share_partition_manager.partitions
    cluster.kill(leader)
    wait_for(lambda: (lambda s: s is not None and s[0] == follower)(leader_and_id(cluster, "shared")),
             what="the follower elected")
    with KafkaConnection("127.0.0.1", cluster.brokers[follower].port) as follower_conn:  # open until the end
        p = share_fetch(None, tid, 0, conn=follower_conn).responses[0].partitions[0]
        assert p.error_code == 0
        # the old leader comes back and the preferred leader election gives it the partition again:
        # the broker losing the leadership drops its share partition (loaded afresh if it leads again)
        assert cluster.brokers[follower].server.share_partition_manager.partitions
        cluster.restart(leader)
        tp = confluent_kafka.TopicPartition("shared", 0)

        def elected():  # once the controller has the old leader back in the ISR
            try:
                result = admin.elect_leaders(confluent_kafka.ElectionType.PREFERRED, [tp]).result(30)
            except confluent_kafka.KafkaException as e:
                # the controller may itself have moved with the failover (NOT_CONTROLLER), or not
                # know the topic yet: asked again until the wait's timeout
                if e.args[0].retriable() or e.args[0].code() in (confluent_kafka.KafkaError.NOT_CONTROLLER,
                                                                confluent_kafka.KafkaError.UNKNOWN_TOPIC_ID):
                    return False
                raise
            return result[tp] is None
        wait_for(elected, what="the preferred leader elected again", timeout=60, interval=0.2)
        wait_for(lambda: not cluster.brokers[follower].server.replica_manager.partitions[("shared", 0)].is_leader,
                 what="the leadership moved back")
        assert not cluster.brokers[follower].server.share_partition_manager.partitions
