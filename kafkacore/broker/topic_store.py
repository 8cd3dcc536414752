"""What a broker knows of a topic (TopicInfo), and which topics are internal.

Topics and their configs are written by the broker's topic store, ZkTopicStore
(kafkacore/cluster/topic_store.py): into ZooKeeper, or into a single node's own metadata store
(kafkacore/cluster/local_metadata.py), as Kafka lays them out; the controller then creates the
partitions. Its calls are round trips (``blocking``: the handlers run them in a worker thread,
KafkaServer.topic_store_call)."""
from __future__ import annotations

from ..coordinator.offset_store import TOPIC as CONSUMER_OFFSETS_TOPIC
from ..coordinator.share_state_log import SHARE_GROUP_STATE_TOPIC
from ..coordinator.transaction_log import TRANSACTION_STATE_TOPIC

INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})


class TopicInfo:
    """What a broker knows of a topic: its name, id (16 bytes) and partition count."""

    __slots__ = ("name", "topic_id", "partitions")

    def __init__(self, name, topic_id, partitions):
        self.name = name
        self.topic_id = topic_id
        self.partitions = partitions

    @property
    def internal(self):
        return self.name in INTERNAL_TOPICS

    def __repr__(self):
        return f"TopicInfo({self.name!r}, partitions={self.partitions})"
