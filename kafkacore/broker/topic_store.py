"""Where a broker's topics and their configs are written: one interface, two stores.

- ``LocalTopicStore`` (here): a single node's, in its data directory - a partition directory
  per partition (``partition.metadata`` holds the topic id) and ``kafkacore-topic-configs.json``.
  Its writes are local; they run on the event loop, and a topic is led the moment it exists.
- ``ZkTopicStore`` (kafkacore/cluster/topic_store.py): a cluster's, in ZooKeeper as Kafka lays
  it out; its writes are round trips (``blocking``: the handlers run them in a worker thread,
  KafkaServer.topic_store_call) and the controller then creates the partitions.

Both apply Kafka's CreateTopics / CreatePartitions / DeleteTopics / AlterConfigs rules and raise
Kafka's errors; the handlers and the KafkaServer never ask which one they have.
``kafkacore cluster migrate`` moves the first into the second (kafkacore/cluster/migrate.py)."""
from __future__ import annotations

import logging

from ..coordinator.offset_store import TOPIC as CONSUMER_OFFSETS_TOPIC
from ..coordinator.transaction_log import TRANSACTION_STATE_TOPIC
from ..errors import (InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError,
                      InvalidRequestError, UnknownTopicOrPartitionError)
from ..protocol.kafka_uuid import random_uuid, uuid_to_text
from ..storage.log_manager import MAX_PARTITIONS

log = logging.getLogger("kafkacore.broker")

INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


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


class LocalTopicStore:
    """A single node's topics, in its data directory."""

    blocking = False  # local writes: done on the event loop

    def __init__(self, broker):
        self.broker = broker

    def create_topic(self, name, num_partitions, replication_factor, configs, validate_only, assignments):
        """Creates and leads the partitions at once. Returns (topic id, partition count)."""
        b = self.broker
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequestError("both a replica assignment and a partition count or replication factor")
            parts = sorted(a[0] for a in assignments)
            if parts != list(range(len(parts))):
                raise InvalidReplicaAssignmentError(f"partitions {parts} are not consecutive from 0")
            for p, replicas in assignments:
                if list(replicas) != [b.node_id]:
                    raise InvalidReplicaAssignmentError(
                        f"partition {p} is assigned to brokers {list(replicas)}; the only broker is {b.node_id}")
            num_partitions = len(parts)
        if num_partitions == -1:
            num_partitions = b.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = b.config["default.replication.factor"]
        if num_partitions <= 0 or num_partitions > MAX_PARTITIONS:
            raise InvalidPartitionsError(f"number of partitions {num_partitions} must be between 1 and {MAX_PARTITIONS}")
        if replication_factor <= 0:
            raise InvalidReplicationFactorError(f"replication factor {replication_factor} must be larger than 0")
        if replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the number of available brokers (1)")
        configs = {k: v for k, v in (configs or {}).items()}
        b.log_manager.config_for(name, configs)  # INVALID_CONFIG before anything is made
        with b._lock:
            b.check_new_topic_name(name)
            if validate_only:
                return b"\x00" * 16, num_partitions
            topic_id = random_uuid()
            created = []
            try:
                for p in range(num_partitions):
                    lg = b.log_manager.create_log(name, p, configs if p == 0 else None, topic_id=uuid_to_text(topic_id))
                    created.append(p)
                    b.lead_alone(lg, topic_id)
            except BaseException:
                for p in created:
                    b.replica_manager.forget(name, p)
                    b.log_manager.delete_log(name, p)
                raise
            info = TopicInfo(name, topic_id, num_partitions)
            b.topics[name] = info
            b.topics_by_id[topic_id] = info
        log.info("created topic %s with %d partitions%s", name, num_partitions,
                 f" and configs {configs}" if configs else "")
        return topic_id, num_partitions

    def delete_topic(self, name):
        b = self.broker
        with b._lock:
            info = b.topics.pop(name, None)
            if info is None:
                raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
            b.topics_by_id.pop(info.topic_id, None)
            for p in range(info.partitions):
                b.unwatch_log(name, p)
                b.replica_manager.forget(name, p)
                b.log_manager.delete_log(name, p)
            b.publish_local_metadata(deleted=[name])
        if b.group_coordinator is not None:
            b.group_coordinator.on_topic_deleted(name, info.partitions)
        log.info("deleted topic %s", name)

    def create_partitions(self, name, count, validate_only=False, assignments=None):
        b = self.broker
        with b._lock:
            info = b.topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
            if count < info.partitions:
                raise InvalidPartitionsError(
                    f"topic currently has {info.partitions} partitions, which is higher than the requested {count}")
            if count == info.partitions:
                raise InvalidPartitionsError(f"topic already has {info.partitions} partitions")
            if count > MAX_PARTITIONS:
                raise InvalidPartitionsError(f"{count} partitions is more than {MAX_PARTITIONS}")
            if validate_only:
                return info
            for p in range(info.partitions, count):
                b.lead_alone(b.log_manager.create_log(name, p, topic_id=uuid_to_text(info.topic_id)), info.topic_id)
                info.partitions = p + 1
        log.info("topic %s now has %d partitions", name, count)
        return info

    # -- topic configs ------------------------------------------------------------------------
    def topic_overrides(self, name) -> dict:
        return dict(self.broker.log_manager.topic_overrides.get(name, {}))

    def topic_exists(self, name) -> bool:
        return name in self.broker.topics

    def set_topic_overrides(self, name, overrides):
        """Stores the overrides and hands the new config to the topic's live logs."""
        self.broker.log_manager.set_topic_config(name, overrides)
