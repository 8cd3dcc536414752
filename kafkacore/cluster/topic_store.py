"""A cluster's topic store (kafkacore/broker/topic_store.py has the interface and the single
node's): topics and their configs in ZooKeeper, as Kafka's AdminZkClient writes them. Every call
is a ZooKeeper round trip (``blocking``: the handlers make it from a worker thread); a created
topic's partitions are then made by the controller, and its metadata reaches the brokers with
UpdateMetadata."""
from __future__ import annotations

import logging

from ..coordinator.offset_store import TOPIC as CONSUMER_OFFSETS_TOPIC
from ..coordinator.share_state_log import SHARE_GROUP_STATE_TOPIC
from ..coordinator.transaction_log import TRANSACTION_STATE_TOPIC
from ..errors import InvalidPartitionsError
from ..protocol.kafka_uuid import random_uuid
from ..storage.log_manager import MAX_PARTITIONS

log = logging.getLogger("kafkacore.cluster")


class ZkTopicStore:
    blocking = True  # ZooKeeper round trips: never on the event loop

    def __init__(self, broker, cluster_node, config_manager):
        self.broker = broker
        self.cluster = cluster_node
        self.config_manager = config_manager

    def create_topic(self, name, num_partitions, replication_factor, configs, validate_only, assignments):
        """Writes the assignment and configs. Returns (topic id, partition count); the partitions
        follow from the controller. The internal topics' replication factors are capped at the
        live brokers (Kafka instead waits for enough of them)."""
        b = self.broker
        cfg = b.config
        if num_partitions == -1 and not assignments:
            num_partitions = cfg["num.partitions"]
        if replication_factor == -1 and not assignments:
            replication_factor = cfg["default.replication.factor"]
        live = max(1, len(b.metadata_cache.brokers))
        if name == CONSUMER_OFFSETS_TOPIC:
            replication_factor = min(cfg["offsets.topic.replication.factor"], live)
        elif name == TRANSACTION_STATE_TOPIC:
            replication_factor = min(cfg["transaction.state.log.replication.factor"], live)
            configs = dict(configs or {}, **{"min.insync.replicas": str(
                min(cfg["transaction.state.log.min.isr"], replication_factor))})
        elif name == SHARE_GROUP_STATE_TOPIC:
            replication_factor = min(cfg["share.coordinator.state.topic.replication.factor"], live)
            configs = dict(configs or {}, **{"min.insync.replicas": str(
                min(cfg["share.coordinator.state.topic.min.isr"], replication_factor))})
        if not assignments and (num_partitions <= 0 or num_partitions > MAX_PARTITIONS):
            raise InvalidPartitionsError(f"number of partitions {num_partitions} must be between 1 and {MAX_PARTITIONS}")
        configs = {k: v for k, v in (configs or {}).items()}
        b.log_manager.config_for(name, configs)  # INVALID_CONFIG before anything is written
        b.check_new_topic_name(name)
        topic_id = random_uuid()
        assignment = self.cluster.create_topic(name, num_partitions, replication_factor, configs, assignments,
                                               topic_id, validate_only=validate_only)
        if not validate_only:
            log.info("created topic %s in ZooKeeper: assignment %s%s", name, assignment,
                     f", configs {configs}" if configs else "")
        return topic_id, len(assignment)

    def delete_topic(self, name):
        self.cluster.delete_topic(name)

    def create_partitions(self, name, count, validate_only=False, assignments=None):
        return self.cluster.create_partitions(name, count, validate_only, assignments)

    # -- topic configs: ZooKeeper's, so that every broker answers the same at once ----------------
    def topic_overrides(self, name) -> dict:
        return self.config_manager.topic_overrides(name)

    def topic_exists(self, name) -> bool:
        """As Kafka's AdminZkClient checks: in ZooKeeper (this broker's metadata may lag a new
        topic)."""
        return self.config_manager.topic_exists(name)

    def topic_name_in_use(self, name) -> bool:
        """Its znode or its deletion request is still in ZooKeeper (its deletion not finished)."""
        return self.config_manager.topic_name_in_use(name)

    def set_topic_overrides(self, name, overrides):
        """With a change notification, which every broker (this one too) applies to its
        replicas."""
        self.config_manager.set_topic_overrides(name, overrides)
