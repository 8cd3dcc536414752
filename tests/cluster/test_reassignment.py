"""Scale-out on the cluster: partitions moved to a new broker (KIP-455, through kafka-python's
admin client, and through /admin/reassign_partitions as the ZooKeeper-era tool writes it), a
move cancelled, and partitions added to a replicated topic, against real brokers and a real
ZooKeeper. The busy move checks the producer's history: nothing acknowledged lost or doubled,
and no error beyond retriable ones reached the application."""
import json
import signal
import threading
from pathlib import Path

import pytest
from confluent_kafka.admin import NewPartitions, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError
from kazoo.client import KazooClient

from _cluster import CLUSTER_SETTINGS, admin, create_topic, kafka_python_conf, register_broker, partition_logs, topic_metadata, wait_for
from _history import AckedProducer, check_history, read_all
from kafkacore.cluster.local_cluster import LocalBroker


@pytest.fixture(scope="module")
def new_broker(cluster):
    """Broker 4 joins the three-broker cluster (scale-out); stopped with the cluster."""
    b = LocalBroker(4, cluster.root, cluster.zookeeper.connect_string, settings=CLUSTER_SETTINGS)
    if cluster.security is not None:
        cluster.secure(b)
    cluster.brokers[4] = b
    register_broker(cluster, b)
    b.start()
    wait_for(lambda: 4 in admin(cluster).list_topics(timeout=10).brokers, "broker 4 registered", 60)
    return b


@pytest.fixture(scope="module")
def kadmin(cluster, new_broker):
    client = KafkaAdminClient(**kafka_python_conf(cluster), request_timeout_ms=30000)
    yield client
    client.close()


def replicas_of(cluster, topic, p):
    md = topic_metadata(cluster, topic)[p]
    return list(md.replicas), sorted(md.isrs), md.leader


def reassignments(kadmin):
    return {(tp.topic, tp.partition): v for tp, v in kadmin.list_partition_reassignments().items()}


def log_dirs(cluster, topic, p):
    return sorted(bid for bid, b in cluster.brokers.items() if (Path(b.data_dir) / f"{topic}-{p}").is_dir())


def test_a_busy_partition_moves_to_a_new_broker(cluster, new_broker, kadmin):
    topic = "moving"
    client = admin(cluster)
    fut = client.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[1, 2, 3], [2, 3, 1]])],
                               operation_timeout=30)[topic]
    fut.result(60)
    wait_for(lambda: all(len(m.isrs) == 3 for m in topic_metadata(cluster, topic).values()), "full ISRs", 60)
    producer = AckedProducer(cluster.bootstrap_servers, topic, keys=8)
    producer.run_for(2, rate=1000)
    stop = threading.Event()
    errors = []

    def keep_producing():
        try:
            while not stop.is_set():
                producer.run_for(0.5, rate=1000)
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    t = threading.Thread(target=keep_producing)
    t.start()
    try:
        # partition 0 leaves broker 1 (its leader) for broker 4; partition 1 gains broker 4 too
        result = kadmin.alter_partition_reassignments({TopicPartition(topic, 0): [4, 2, 3],
                                                       TopicPartition(topic, 1): [2, 3, 4]})
        assert result == {TopicPartition(topic, 0): None, TopicPartition(topic, 1): None}
        wait_for(lambda: not reassignments(kadmin), "both reassignments done", 90)
    finally:
        stop.set()
        t.join(60)
    assert not errors
    producer.flush(60)
    assert not producer.failed, producer.failed[:5]
    assert replicas_of(cluster, topic, 0)[:2] == ([4, 2, 3], [2, 3, 4])
    assert replicas_of(cluster, topic, 1)[:2] == ([2, 3, 4], [2, 3, 4])
    assert replicas_of(cluster, topic, 0)[2] in (2, 3, 4)
    # the removed replicas are deleted from broker 1's disk
    wait_for(lambda: log_dirs(cluster, topic, 0) == [2, 3, 4] and log_dirs(cluster, topic, 1) == [2, 3, 4],
             "broker 1's replicas deleted", 30)
    n = check_history(producer.acked, read_all(cluster.bootstrap_servers, topic, 2))
    assert n >= len(producer.acked) > 2000
    for p in (0, 1):
        wait_for(lambda p=p: len(set(partition_logs(cluster, topic, p).values())) == 1,
                 f"{topic}-{p}'s replicas byte-identical", 60)
    # the topic znode is a plain assignment again (no adding/removing left for a new controller)
    zk = KazooClient(hosts=cluster.zookeeper.connect_string)
    zk.start(30)
    try:
        js = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
    finally:
        zk.stop()
    assert js["partitions"] == {"0": [4, 2, 3], "1": [2, 3, 4]}
    assert js["adding_replicas"] == {} and js["removing_replicas"] == {}


def test_a_move_in_progress_is_listed_and_can_be_cancelled(cluster, new_broker, kadmin):
    topic = "cancelled"
    create_topic(cluster, topic, partitions=1, rf=2)  # two brokers left to add, one not the controller
    before, _isr, _leader = replicas_of(cluster, topic, 0)
    target_new = next(b for b in (4, 1, 2, 3) if b not in before and b != controller_id(cluster))
    target = [target_new] + before[1:]
    assert reassignments(kadmin) == {}  # the admin client knows the controller before a broker pauses
    # the new replica cannot catch up while its broker is paused (a short pause: its ZooKeeper
    # session lives on, so the controller keeps it live and its requests wait for it)
    new_broker_proc = cluster.brokers[target_new]
    new_broker_proc.signal(signal.SIGSTOP)
    try:
        assert kadmin.alter_partition_reassignments({TopicPartition(topic, 0): target}) == {
            TopicPartition(topic, 0): None}
        running = reassignments(kadmin)
        assert running == {(topic, 0): {"replicas": target + [before[0]], "adding_replicas": [target_new],
                                        "removing_replicas": [before[0]]}}
        assert kadmin.alter_partition_reassignments({TopicPartition(topic, 0): None}) == {
            TopicPartition(topic, 0): None}
        assert reassignments(kadmin) == {}
    finally:
        new_broker_proc.signal(signal.SIGCONT)
    wait_for(lambda: replicas_of(cluster, topic, 0)[:2] == (before, sorted(before)), "back to the original", 30)
    # the replica that was being added is deleted again
    wait_for(lambda: log_dirs(cluster, topic, 0) == sorted(before), f"no replica left on broker {target_new}", 30)
    assert kadmin.alter_partition_reassignments({TopicPartition(topic, 0): None}) == {
        TopicPartition(topic, 0): NoReassignmentInProgressError}


def test_reassignment_errors(cluster, new_broker, kadmin):
    create_topic(cluster, "wrong-moves", partitions=1, rf=3)
    got = kadmin.alter_partition_reassignments({
        TopicPartition("wrong-moves", 0): [1, 9, 2],  # broker 9 does not exist
        TopicPartition("wrong-moves", 5): [1, 2, 3],  # no partition 5
        TopicPartition("no-such-topic", 0): [1, 2, 3]})
    assert got == {TopicPartition("wrong-moves", 0): InvalidReplicationAssignmentError,
                   TopicPartition("wrong-moves", 5): UnknownTopicOrPartitionError,
                   TopicPartition("no-such-topic", 0): UnknownTopicOrPartitionError}
    got = kadmin.alter_partition_reassignments({TopicPartition("wrong-moves", 0): [1, 1, 2]})
    assert got == {TopicPartition("wrong-moves", 0): InvalidReplicationAssignmentError}


def test_a_malformed_reassign_znode_is_dropped_and_the_controller_stays(cluster, new_broker, kadmin):
    before = controller_id(cluster)
    zk = KazooClient(hosts=cluster.zookeeper.connect_string)
    zk.start(30)
    try:
        zk.create("/admin/reassign_partitions", b'{"version":1,"partitions":[{"topic":', makepath=True)
        wait_for(lambda: zk.exists("/admin/reassign_partitions") is None, "the malformed znode deleted", 30)
    finally:
        zk.stop()
    assert controller_id(cluster) == before
    assert reassignments(kadmin) == {}  # the controller still answers


def test_the_zookeeper_era_reassign_znode_is_honoured(cluster, new_broker, kadmin):
    topic = "moved-by-znode"
    create_topic(cluster, topic, partitions=1, rf=2)
    before = replicas_of(cluster, topic, 0)[0]
    target = [b for b in (4, 3, 2, 1) if b not in before][:2]
    zk = KazooClient(hosts=cluster.zookeeper.connect_string)
    zk.start(30)
    try:
        # what kafka-reassign-partitions.sh --zookeeper writes
        zk.create("/admin/reassign_partitions", json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": target}]}).encode(),
            makepath=True)
        wait_for(lambda: replicas_of(cluster, topic, 0)[:2] == (target, sorted(target)), "the partition moved", 60)
        wait_for(lambda: zk.exists("/admin/reassign_partitions") is None, "the znode removed when done", 30)
    finally:
        zk.stop()
    wait_for(lambda: log_dirs(cluster, topic, 0) == sorted(target), "the old replicas deleted", 30)


def test_partitions_added_to_a_replicated_topic(cluster, new_broker):
    topic = "growing"
    create_topic(cluster, topic, partitions=2, rf=2)
    client = admin(cluster)
    client.create_partitions([NewPartitions(topic, 4)], operation_timeout=30)[topic].result(60)
    md = topic_metadata(cluster, topic)
    assert sorted(md) == [0, 1, 2, 3]
    for p in (2, 3):
        assert len(md[p].replicas) == 2 and md[p].leader in md[p].replicas
    wait_for(lambda: all(len(m.isrs) == 2 for m in topic_metadata(cluster, topic).values()), "full ISRs", 30)
    # explicit placement, and the errors Kafka gives
    client.create_partitions([NewPartitions(topic, 5, replica_assignment=[[4, 1]])],
                             operation_timeout=30)[topic].result(60)
    assert list(topic_metadata(cluster, topic)[4].replicas) == [4, 1]
    with pytest.raises(Exception, match="INVALID_REPLICA_ASSIGNMENT"):
        client.create_partitions([NewPartitions(topic, 6, replica_assignment=[[1, 9]])])[topic].result(60)
    with pytest.raises(Exception, match="INVALID_REPLICA_ASSIGNMENT"):
        client.create_partitions([NewPartitions(topic, 6, replica_assignment=[[1, 2, 3]])])[topic].result(60)
    with pytest.raises(Exception, match="INVALID_PARTITIONS"):
        client.create_partitions([NewPartitions(topic, 3)])[topic].result(60)
    # every new partition takes writes with acks=all and reads them back
    producer = AckedProducer(cluster.bootstrap_servers, topic, keys=16)
    producer.send(500)
    producer.flush(60)
    read = read_all(cluster.bootstrap_servers, topic, 5)
    assert check_history(producer.acked, read) == 501
    assert all(read[p] for p in range(5)), {p: len(r) for p, r in read.items()}


def controller_id(cluster):
    zk = KazooClient(hosts=cluster.zookeeper.connect_string)
    zk.start(30)
    try:
        got = zk.exists("/controller") and zk.get("/controller")[0]
        return json.loads(got)["brokerid"] if got else None
    finally:
        zk.stop()


def test_a_new_controller_finishes_a_move_the_old_one_started(cluster, new_broker, kadmin):
    """The controller stops with a move half done; its successor finishes it from the topic
    znode. The removed replica lived on the stopped broker: when that broker returns, the FULL
    LeaderAndIsr it gets makes it delete the stray log."""
    topic = "handed-over"
    old_controller = controller_id(cluster)
    kept, adding = [b for b in sorted(cluster.brokers) if b != old_controller][:2]
    client = admin(cluster)
    client.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[old_controller, kept]])],
                         operation_timeout=30)[topic].result(60)
    wait_for(lambda: replicas_of(cluster, topic, 0)[1] == sorted([old_controller, kept]), "a full ISR", 30)
    target = [adding, kept]
    assert reassignments(kadmin) == {}  # the admin client knows the controller before a broker pauses
    paused = cluster.brokers[adding]
    paused.signal(signal.SIGSTOP)
    try:
        assert kadmin.alter_partition_reassignments({TopicPartition(topic, 0): target}) == {
            TopicPartition(topic, 0): None}
        # the controller stops before the move can finish: what it started is in the topic znode
        assert cluster.brokers[old_controller].stop() == 0
        wait_for(lambda: controller_id(cluster) not in (None, old_controller), "a new controller", 30)
    finally:
        paused.signal(signal.SIGCONT)
    try:
        wait_for(lambda: replicas_of(cluster, topic, 0)[:2] == (target, sorted(target)),
                 "the new controller finished the move", 60)
        assert (Path(cluster.brokers[old_controller].data_dir) / f"{topic}-0").is_dir()  # down: not told yet
    finally:
        cluster.brokers[old_controller].start()
    wait_for(lambda: log_dirs(cluster, topic, 0) == sorted(target),
             f"the stray replica on broker {old_controller} deleted when it returned", 60)
