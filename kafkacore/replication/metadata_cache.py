"""Kafka's MetadataCache: what a broker of the cluster knows of the cluster, as the controller's
UpdateMetadata requests last told it - the live brokers and their endpoints, the controller, and
for every partition its leader, leader epoch, replicas, ISR and offline replicas. Metadata,
FindCoordinator and CreateTopics answer from it; it is never read from ZooKeeper on a request's
path.

A partition whose leader is not a live broker is answered LEADER_NOT_AVAILABLE with leader -1
(Kafka's MetadataCache does the same), so clients wait for an election instead of connecting to
a dead broker."""
from __future__ import annotations

import threading
from typing import NamedTuple

NO_LEADER = -1


class BrokerEndpoint(NamedTuple):
    """A live broker: ``host``/``port`` on the inter-broker listener (what brokers dial), and
    ``listeners`` ((name, host, port), every endpoint it registered: what clients are told,
    each on the listener it asked on)."""

    node_id: int
    host: str
    port: int
    rack: str | None
    listeners: tuple = ()

    def address(self, listener_name) -> tuple | None:
        """(host, port) on that listener, None if the broker has none of that name."""
        return next(((h, p) for name, h, p in self.listeners if name == listener_name), None)


class CachedPartitionState(NamedTuple):
    """What the metadata cache holds of one partition: the fields of the controller's
    UpdateMetadata partition state (Kafka's cache keeps that request object itself)."""

    leader: int
    leader_epoch: int
    isr: tuple
    replicas: tuple
    offline_replicas: tuple
    controller_epoch: int
    zk_version: int


class MetadataCache:
    def __init__(self, node_id):
        self.node_id = node_id
        self._lock = threading.Lock()
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.controller_id = NO_LEADER
        self.partitions: dict[tuple, CachedPartitionState] = {}
        self.topic_ids: dict[str, bytes] = {}
        self.partition_counts: dict[str, int] = {}

    def update(self, controller_id, brokers, partition_states, deleted_topics=()):
        """Applies one UpdateMetadata: ``brokers`` replaces the live set; ``partition_states`` is
        {(topic, partition): (CachedPartitionState, topic_id)}; ``deleted_topics`` are dropped."""
        with self._lock:
            self.controller_id = controller_id
            self.brokers = {b.node_id: b for b in brokers}
            for topic in deleted_topics:
                self._drop_topic(topic)
            for (topic, partition), (state, topic_id) in partition_states.items():
                self.partitions[(topic, partition)] = state
                if topic_id is not None:
                    self.topic_ids[topic] = topic_id
                self.partition_counts[topic] = max(self.partition_counts.get(topic, 0), partition + 1)

    def _drop_topic(self, topic):
        for p in range(self.partition_counts.pop(topic, 0)):
            self.partitions.pop((topic, p), None)
        self.topic_ids.pop(topic, None)

    def partition(self, topic, partition) -> CachedPartitionState | None:
        return self.partitions.get((topic, partition))

    def leader(self, topic, partition) -> int:
        """The leader if it is a live broker, else NO_LEADER."""
        state = self.partitions.get((topic, partition))
        if state is None or state.leader not in self.brokers:
            return NO_LEADER
        return state.leader

    def alive(self, node_id) -> bool:
        return node_id in self.brokers

    def live_brokers(self) -> list[BrokerEndpoint]:
        return sorted(self.brokers.values())

    def live_brokers_on(self, listener_name) -> list[tuple]:
        """[(node_id, host, port, rack)] of the live brokers with that listener; the others are
        left out, as Kafka's MetadataCache.getAliveBrokerNodes(listenerName) does."""
        out = []
        for b in sorted(self.brokers.values()):
            addr = b.address(listener_name)
            if addr is not None:
                out.append((b.node_id, addr[0], addr[1], b.rack))
        return out

    def topics(self) -> dict[str, int]:
        return dict(self.partition_counts)
