"""Control requests from a controller a broker must not obey (KIP-380): one meant for an earlier
incarnation of the broker (an older broker epoch: the czxid of an earlier /brokers/ids/N) is
refused with STALE_BROKER_EPOCH, one from a deposed controller (an older controller epoch) with
STALE_CONTROLLER_EPOCH; either way nothing changes. The requests are sent by hand, as a stale
controller's would arrive, to a broker of a real cluster."""
import json
import os
import time

from kazoo.client import KazooClient

from _cluster import client_conf, connect, create_topic, topic_metadata
from broker_client import request
from kafkacore.protocol.messages.leader_and_isr_request import LeaderAndIsrPartitionState, LeaderAndIsrTopicState
from kafkacore.protocol.messages.stop_replica_request import StopReplicaPartitionState, StopReplicaTopicState

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH = 11, 77
TOPIC = "stale-control"


def test_requests_for_an_earlier_incarnation_or_from_a_deposed_controller_are_refused(cluster):
    create_topic(cluster, TOPIC, partitions=1, rf=3)
    before = topic_metadata(cluster, TOPIC)[0]
    target = next(b for b in sorted(cluster.brokers) if b != before.leader)
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    try:
        broker_epoch = zk.exists(f"/brokers/ids/{target}").czxid
        controller_epoch = int(zk.get("/controller_epoch")[0])
        controller_id = json.loads(zk.get("/controller")[0])["brokerid"]
    finally:
        zk.stop()
        zk.close()

    def leader_and_isr(c_epoch, b_epoch):
        # would make `target` the leader under a far newer leader epoch, if obeyed
        return request(LEADER_AND_ISR, controller_id=controller_id, controller_epoch=c_epoch, broker_epoch=b_epoch,
                       type=0, topic_states=[LeaderAndIsrTopicState(topic_name=TOPIC, partition_states=[
                           LeaderAndIsrPartitionState(topic_name=TOPIC, partition_index=0, controller_epoch=c_epoch,
                                                      leader=target, leader_epoch=1000, isr=[target],
                                                      partition_epoch=0, replicas=before.replicas, is_new=False)])],
                       live_leaders=[])

    stop_replica = request(STOP_REPLICA, controller_id=controller_id, controller_epoch=controller_epoch,
                           broker_epoch=broker_epoch - 1, topic_states=[StopReplicaTopicState(
                               topic_name=TOPIC, partition_states=[StopReplicaPartitionState(
                                   partition_index=0, leader_epoch=1000, delete_partition=True)])])
    update_metadata = request(UPDATE_METADATA, controller_id=controller_id, controller_epoch=controller_epoch,
                              broker_epoch=broker_epoch - 1, topic_states=[], live_brokers=[])
    with connect(cluster, target) as c:
        assert c.call(LEADER_AND_ISR, 5, leader_and_isr(controller_epoch, broker_epoch - 1)).error_code == \
            STALE_BROKER_EPOCH
        assert c.call(LEADER_AND_ISR, 5, leader_and_isr(controller_epoch - 1, broker_epoch)).error_code == \
            STALE_CONTROLLER_EPOCH
        assert c.call(STOP_REPLICA, 3, stop_replica).error_code == STALE_BROKER_EPOCH
        assert c.call(UPDATE_METADATA, 7, update_metadata).error_code == STALE_BROKER_EPOCH
    after = topic_metadata(cluster, TOPIC)[0]
    assert (after.leader, sorted(after.isrs)) == (before.leader, sorted(before.isrs))
    assert os.path.isdir(os.path.join(cluster.brokers[target].data_dir, f"{TOPIC}-0"))  # StopReplica deleted nothing


def test_followers_keep_fetching_from_a_leader_that_lost_the_partition_and_got_it_back(cluster):
    """Issue 26's follower half: the leader stops hosting the partition (StopReplica, as a
    restarted broker has nothing until the controller speaks), its followers' fetches get
    NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION, then the leader is given the partition
    back under the same leader epoch. Followers that dropped the partition on the error (the old
    behaviour) never fetched again and the ISR shrank to the leader; followers that back off and
    retry resume, and acks=all writes go on."""
    from confluent_kafka import Producer

    from _cluster import wait_for

    topic = "follower-retry"
    create_topic(cluster, topic, partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    try:
        state_path = f"/brokers/topics/{topic}/partitions/0/state"
        state = json.loads(zk.get(state_path)[0])
        leader = state["leader"]
        broker_epoch = zk.exists(f"/brokers/ids/{leader}").czxid
        controller_epoch = int(zk.get("/controller_epoch")[0])
        controller_id = json.loads(zk.get("/controller")[0])["brokerid"]
        replicas = sorted(json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"]["0"])
        followers = [b for b in replicas if b != leader]
        logs = {b: len(open(cluster.brokers[b].log_path, "rb").read()) for b in followers}
        with connect(cluster, leader) as c:
            stop = request(STOP_REPLICA, controller_id=controller_id, controller_epoch=controller_epoch,
                           broker_epoch=broker_epoch, topic_states=[StopReplicaTopicState(
                               topic_name=topic, partition_states=[StopReplicaPartitionState(
                                   partition_index=0, leader_epoch=state["leader_epoch"],
                                   delete_partition=False)])])
            assert c.call(STOP_REPLICA, 3, stop).error_code == 0

            def followers_saw_the_error():
                for b in followers:
                    with open(cluster.brokers[b].log_path, "rb") as f:
                        f.seek(logs[b])
                        if f"{topic}-0: fetch from broker {leader}: ".encode() not in f.read():
                            return False
                return True

            wait_for(followers_saw_the_error, "both followers answered an error by the leader", 30)
            back = request(LEADER_AND_ISR, controller_id=controller_id, controller_epoch=controller_epoch,
                           broker_epoch=broker_epoch, type=0, topic_states=[LeaderAndIsrTopicState(
                               topic_name=topic, partition_states=[LeaderAndIsrPartitionState(
                                   topic_name=topic, partition_index=0, controller_epoch=state["controller_epoch"],
                                   leader=leader, leader_epoch=state["leader_epoch"], isr=state["isr"],
                                   partition_epoch=zk.exists(state_path).version, replicas=replicas,
                                   is_new=False)])],
                           live_leaders=[])
            assert c.call(LEADER_AND_ISR, 5, back).error_code == 0
        # the same leader epoch, so nobody tells the followers anything: they must come back alone
        p = Producer({**client_conf(cluster), "acks": "all", "message.timeout.ms": 20000})
        errors = []
        for i in range(20):
            p.produce(topic, b"after %d" % i, partition=0, on_delivery=lambda err, _m: err and errors.append(err))
            p.poll(0)
            time.sleep(0.25)  # past replica.lag.time.max.ms in all: a follower that stopped would be shrunk away
        assert p.flush(30) == 0 and errors == []
        assert sorted(json.loads(zk.get(state_path)[0])["isr"]) == replicas
        assert json.loads(zk.get(state_path)[0])["leader_epoch"] == state["leader_epoch"]
    finally:
        zk.stop()
        zk.close()
