"""A replicated kafkacore cluster coordinated by Apache ZooKeeper, as Kafka ran in ZooKeeper mode.

``zk_data`` holds Kafka's znode paths and JSON codecs, ``zk_client`` Kafka's ZooKeeper operations
(over kazoo). Importing the package loads neither: a single broker never needs kazoo.
"""

from .._lazy import lazy_getattr

_LAZY = {
    "KafkaZkClient": "zk_client", "ControllerElection": "zk_client", "Watch": "zk_client",
    "ZkError": "zk_client", "ZkConnectionError": "zk_client", "ZkNoNodeError": "zk_client",
    "ZkNodeExistsError": "zk_client", "ZkVersionMismatchError": "zk_client",
    "ControllerMovedError": "zk_client", "BrokerIdInUseError": "zk_client", "TopicExistsError": "zk_client",
    "UnknownTopicError": "zk_client", "TopicAlreadyMarkedForDeletionError": "zk_client",
    "InvalidReplicaAssignmentError": "zk_client",
    "ZkDataError": "zk_data", "BrokerInfo": "zk_data", "EndPoint": "zk_data", "LeaderIsrAndControllerEpoch": "zk_data",
    "ReplicaAssignment": "zk_data", "TopicAssignment": "zk_data",
}


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)

__all__ = sorted(_LAZY)
