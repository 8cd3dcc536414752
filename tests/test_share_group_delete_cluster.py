"""KIP-932 on a two-broker cluster: a share group deleted through its coordinator on one broker
while the leader of its topic-partition is the other. The leader must not serve the deleted
state to a new group of the same id: it drops a group's share partitions when the group's last
share session there ends (Kafka 4.1's onGroupEmpty), checks them against the share coordinator
when a share session opens, and a write of deleted state is fenced (FENCED_STATE_EPOCH) by the
share coordinator. Real brokers (EmbeddedKafkaCluster: each broker on its own socket), real
confluent-kafka ShareConsumers."""
import uuid

import pytest

from _kcutil import share_consume_accepting, wait_for
from broker_client import KafkaConnection, request
from kafkacore.client.admin import AdminClient
from kafkacore.coordinator.share_state_log import coordinator_key
from kafkacore.embedded_cluster import EmbeddedKafkaCluster
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.messages.share_fetch_request import AcknowledgementBatch, FetchPartition, FetchTopic

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin as ka  # noqa: E402

if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

pytestmark = pytest.mark.timeout(180)

COUNT = 20
ACCEPT = 1
FENCED_STATE_EPOCH = 124
SETTINGS = {
    "offsets.topic.replication.factor": 2, "share.coordinator.state.topic.replication.factor": 2,
    "share.coordinator.state.topic.min.isr": 1, "share.coordinator.state.topic.num.partitions": 1,
    "group.share.session.timeout.ms": 3000, "group.share.min.session.timeout.ms": 1000,
    "group.share.heartbeat.interval.ms": 200, "group.share.min.heartbeat.interval.ms": 100,
    "group.share.min.record.lock.duration.ms": 1000, "group.share.record.lock.duration.ms": 2000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with EmbeddedKafkaCluster(tmp_path_factory.mktemp("share-del-cl"), brokers=2, settings=SETTINGS) as c:
        yield c


def _find(conn, key_type, key):
    """The coordinator's node id (None while there is none yet)."""
    r = conn.call(ApiKey.FIND_COORDINATOR, 6, request(ApiKey.FIND_COORDINATOR, key_type=key_type,
                                                      coordinator_keys=[key]))
    c = r.coordinators[0]
    return c.node_id if c.error_code == 0 else None


def _setup(cluster, prefix):
    """A group id whose group coordinator is also the share coordinator (``__share_group_state``
    has one partition), and a topic of one partition led by the other broker: (group, topic,
    topic id, leader, coordinator)."""
    first = next(iter(cluster.brokers.values()))
    with KafkaConnection("127.0.0.1", first.port) as conn:
        share = wait_for(lambda: _find(conn, 2, coordinator_key("any", uuid.uuid4().bytes, 0)),
                         what="a share coordinator")
        group = next(g for g in (f"{prefix}-{i}" for i in range(64))
                     if wait_for(lambda g=g: _find(conn, 0, g), what="a group coordinator") == share)
    leader = next(i for i in cluster.brokers if i != share)
    topic = f"{prefix}-t"
    admin = ka.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([ka.NewTopic(topic, num_partitions=1, replica_assignment=[[leader, share]])])[topic].result(30)
    server = cluster.brokers[leader].server
    wait_for(lambda: server.metadata_cache.leader(topic, 0) == leader and topic in server.topics,
             what="the topic led by the other broker")
    assert leader != share
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(COUNT):
        p.produce(topic, b"%d" % i, partition=0)
    assert p.flush(30) == 0
    return group, topic, server.topics[topic].topic_id, leader, share


def _earliest(cluster, group, leader):
    admin = ka.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    res = ka.ConfigResource(ka.ResourceType.GROUP, group, incremental_configs=[ka.ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=ka.AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    configs = cluster.brokers[leader].server.group_configs
    wait_for(lambda: configs.get(group, "share.auto.offset.reset") == "earliest", what="the leader sees earliest")


def _delete(cluster, group, coordinator):
    gc = cluster.brokers[coordinator].server.group_coordinator
    wait_for(lambda: (lambda g: g is not None and g.state == "Empty")(gc.groups.get(group)), what="the group empty")
    admin = ka.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.delete_consumer_groups([group], request_timeout=30)[group].result(30)


def _spso(cluster, group, topic):
    with AdminClient(cluster.bootstrap_servers) as a:
        return a.describe_share_group_offsets(group, [(topic, 0)])[(topic, 0)][0]


def test_a_new_group_of_a_deleted_ones_id_gets_every_record_again(cluster):
    group, topic, _tid, leader, coordinator = _setup(cluster, "sdc")
    _earliest(cluster, group, leader)
    assert share_consume_accepting(cluster.bootstrap_servers, group, topic, COUNT, 15) == list(range(COUNT))
    assert _spso(cluster, group, topic) == COUNT
    # the group's last share session on the leader ended: its share partition there went with it
    manager = cluster.brokers[leader].server.share_partition_manager
    wait_for(lambda: (group, topic, 0) not in manager.partitions, what="the leader's share partition dropped")
    _delete(cluster, group, coordinator)
    assert _spso(cluster, group, topic) == -1  # no state: nothing wrote the old one back
    _earliest(cluster, group, leader)
    assert share_consume_accepting(cluster.bootstrap_servers, group, topic, COUNT, 15) == list(range(COUNT))  # each once
    assert _spso(cluster, group, topic) == COUNT  # the new group's progress


def _share_fetch(conn, group, member, topic_id, epoch, acks=(), max_records=2 * COUNT):
    r = conn.call(ApiKey.SHARE_FETCH, 1, request(
        ApiKey.SHARE_FETCH, group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=0,
        min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=0, forgotten_topics_data=[],
        topics=[FetchTopic(topic_id=topic_id, partitions=[FetchPartition(partition_index=0, acknowledgement_batches=[
            AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[ACCEPT]) for f, last in acks])])]))
    assert r.error_code == 0, r
    return r.responses[0].partitions[0] if r.responses else None


def test_a_share_session_left_open_through_the_deletion_does_not_serve_the_old_state(cluster):
    """A share session of the old group stays open on the leader while the group is deleted (a
    member the coordinator no longer counts, its connection still up), so the leader's share
    partition outlives the deletion; the new group's first share session has the leader check it
    against the share coordinator, which no longer has its state: it is loaded anew."""
    group, topic, tid, leader, coordinator = _setup(cluster, "sdz")
    _earliest(cluster, group, leader)
    assert share_consume_accepting(cluster.bootstrap_servers, group, topic, COUNT, 15) == list(range(COUNT))
    manager = cluster.brokers[leader].server.share_partition_manager
    with KafkaConnection("127.0.0.1", cluster.brokers[leader].port) as zombie:
        assert _share_fetch(zombie, group, "zombie", tid, 0).acquired_records == []  # all accepted: none
        _delete(cluster, group, coordinator)
        assert (group, topic, 0) in manager.partitions  # the open session keeps it
        _earliest(cluster, group, leader)
        assert share_consume_accepting(cluster.bootstrap_servers, group, topic, COUNT, 15) == list(range(COUNT))  # each once
        assert _spso(cluster, group, topic) == COUNT


def test_a_write_of_the_deleted_state_is_fenced_and_not_brought_back(cluster):
    """As above, but the member of the open session acquires records produced after the deletion
    (from the old SPSO) and accepts them: the write carries the deleted state's epoch and the
    share coordinator refuses it (FENCED_STATE_EPOCH); the leader drops the share partition and
    the state stays deleted, so a new group gets every record."""
    group, topic, tid, leader, coordinator = _setup(cluster, "sdf")
    _earliest(cluster, group, leader)
    assert share_consume_accepting(cluster.bootstrap_servers, group, topic, COUNT, 15) == list(range(COUNT))
    manager = cluster.brokers[leader].server.share_partition_manager
    with KafkaConnection("127.0.0.1", cluster.brokers[leader].port) as zombie:
        assert _share_fetch(zombie, group, "zombie", tid, 0).acquired_records == []
        _delete(cluster, group, coordinator)
        p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(COUNT, 2 * COUNT):
            p.produce(topic, b"%d" % i, partition=0)
        assert p.flush(30) == 0
        got = _share_fetch(zombie, group, "zombie", tid, 1).acquired_records  # from the old SPSO
        assert (got[0].first_offset, got[-1].last_offset) == (COUNT, 2 * COUNT - 1)
        answer = _share_fetch(zombie, group, "zombie", tid, 2, acks=[(COUNT, 2 * COUNT - 1)], max_records=0)
        assert answer.acknowledge_error_code == FENCED_STATE_EPOCH
        assert (group, topic, 0) not in manager.partitions  # fenced: dropped
        assert _spso(cluster, group, topic) == -1  # not brought back
        _earliest(cluster, group, leader)
        assert share_consume_accepting(cluster.bootstrap_servers, group, topic, 2 * COUNT, 15) == list(range(2 * COUNT))  # each once
        assert _spso(cluster, group, topic) == 2 * COUNT
