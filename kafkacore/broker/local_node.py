"""A single node's membership, the counterpart of kafkacore/cluster/cluster_node.py's
ClusterNode: what the server, the metrics and start-up ask of "the cluster this broker is in",
answered for a cluster of one. There is nothing to register and no other broker; the node is
its own controller (as a combined KRaft node is), so the controller gauges count its topics and
the usual sum(activecontrollercount) == 1 alert holds. The inter-broker APIs (LeaderAndIsr,
UpdateMetadata, StopReplica, ControlledShutdown) have no sender here and are not served."""
from __future__ import annotations


class LocalNode:
    serves_inter_broker_apis = False

    def __init__(self, broker):
        self.broker = broker

    async def start(self, loop, host, port):
        """Nothing to join: the broker led its partitions as it opened them."""

    async def controlled_shutdown(self):
        """No leadership to move elsewhere: False (nothing was moved)."""
        return False

    def shutdown(self):
        pass

    def controller_gauges(self):
        """(active, offline partitions, topics, partitions) as the controller reports them."""
        topics = self.broker.topics
        return True, 0, len(topics), sum(t.partitions for t in topics.values())

    def health(self):
        """None: a single node is a member as soon as it serves."""
        return None
