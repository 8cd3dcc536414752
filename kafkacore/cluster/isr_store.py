"""Where a partition leader of a ZooKeeper cluster writes its ISR changes (Kafka's ZkIsrManager
of ZooKeeper mode): the partition's state znode, written conditionally on its version, and the
/isr_change_notification sequence znodes that tell the controller to spread the new ISRs. The
ReplicaManager (kafkacore/replication) calls it from a worker thread."""
from __future__ import annotations

from .zk_client import ZkVersionMismatchError


class ZkIsrStore:
    def __init__(self, zk):
        self.zk = zk

    def write_isr(self, topic, partition, leader, leader_epoch, isr, controller_epoch, version):
        """Writes the ISR if the state znode is still at ``version``. Returns (new version, the
        ISR now stored). The controller changes a partition's state only with a new leader
        epoch, so a state of the leader's own epoch that it does not know is a write of its own
        whose answer was lost (a timeout under load): that one is adopted, since keeping the
        stale version would fail every later ISR change and leave acks=all waiting on a
        follower long gone. Anything else raises (ZkVersionMismatchError: the controller or a
        newer leader changed the partition)."""
        try:
            return self.zk.update_leader_and_isr(topic, partition, leader, leader_epoch, isr, controller_epoch,
                                                 version), tuple(isr)
        except ZkVersionMismatchError:
            got = self.zk.get_partition_state(topic, partition)
            if got is None or got[0].leader != leader or got[0].leader_epoch != leader_epoch:
                raise
            return got[1], tuple(got[0].isr)

    def propagate_isr_changes(self, partitions):
        """[(topic, partition)] whose ISR changed, for the controller."""
        self.zk.propagate_isr_change(partitions)
