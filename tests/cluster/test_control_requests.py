"""Control requests from a controller a broker must not obey (KIP-380): one meant for an earlier
incarnation of the broker (an older broker epoch: the czxid of an earlier /brokers/ids/N) is
refused with STALE_BROKER_EPOCH, one from a deposed controller (an older controller epoch) with
STALE_CONTROLLER_EPOCH; either way nothing changes. The requests are sent by hand, as a stale
controller's would arrive, to a broker of a real cluster."""
import json
import os

from kazoo.client import KazooClient

from _cluster import create_topic, topic_metadata
from broker_client import KafkaConnection, request
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
    host, port = cluster.brokers[target].address.rsplit(":", 1)
    with KafkaConnection(host, int(port)) as c:
        assert c.call(LEADER_AND_ISR, 5, leader_and_isr(controller_epoch, broker_epoch - 1)).error_code == \
            STALE_BROKER_EPOCH
        assert c.call(LEADER_AND_ISR, 5, leader_and_isr(controller_epoch - 1, broker_epoch)).error_code == \
            STALE_CONTROLLER_EPOCH
        assert c.call(STOP_REPLICA, 3, stop_replica).error_code == STALE_BROKER_EPOCH
        assert c.call(UPDATE_METADATA, 7, update_metadata).error_code == STALE_BROKER_EPOCH
    after = topic_metadata(cluster, TOPIC)[0]
    assert (after.leader, sorted(after.isrs)) == (before.leader, sorted(before.isrs))
    assert os.path.isdir(os.path.join(cluster.brokers[target].data_dir, f"{TOPIC}-0"))  # StopReplica deleted nothing
