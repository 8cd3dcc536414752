"""A single node's cluster metadata, in its own data directory: the node is a cluster of one.

A broker without ``zookeeper.connect`` keeps what a cluster keeps in ZooKeeper - cluster id,
its registration, topics and their assignments, partition states, configs, the controller's
epoch, producer id blocks - in a ZnodeTree under ``<data dir>/znodes`` (cluster/local_znodes.py:
ZooKeeper's data model and Kafka's znodes, durable), and runs exactly what a broker of a
ZooKeeper cluster runs over it: the registration, the elected controller (itself), LeaderAndIsr
and UpdateMetadata (sent to itself without a socket, broker/local_channel.py), topic creation
through the controller. The data directory's lock (held by the broker's LogManager before the
store is opened) keeps a second process off it.

The data directory's meta.properties names the cluster: the store takes its cluster id. A data
directory written before the store existed (topics as partition directories only) is imported
the first time: each topic with its id, its partitions assigned to this node and its configs
(the migration ``kafkacore cluster migrate`` makes into a real ZooKeeper), and the controller
then leads them as it would a new topic.
"""
from __future__ import annotations

import logging
import os

from ..errors import KafkaStorageError
from ..protocol.kafka_uuid import random_uuid_text
from .local_znodes import ZnodeTree
from .zk_client import KafkaZkClient

log = logging.getLogger("kafkacore.cluster")

METADATA_DIR = "znodes"  # in the data directory; not a partition directory (no -<partition>)


def open_local_metadata(broker) -> KafkaZkClient:
    """The started client of the node's store (closing it closes the store). Raises
    KafkaStorageError for a store that cannot be read or belongs to another cluster."""
    path = os.path.join(broker.data_dir, METADATA_DIR)
    fresh = not os.path.exists(path)
    tree = ZnodeTree(path)
    zk = KafkaZkClient(None, session_timeout_ms=broker.config["zookeeper.session.timeout.ms"], znodes=tree,
                       close_znodes=True)
    try:
        zk.start()
        zk.create_top_level_paths()
        cluster_id = zk.get_or_create_cluster_id(broker.cluster_id)
        if cluster_id != broker.cluster_id:
            raise KafkaStorageError(f"the metadata store in {path} belongs to cluster {cluster_id}, the data "
                                    f"directory to cluster {broker.cluster_id}")
        if fresh:
            _import_logs(zk, broker)
    except BaseException:
        zk.close()
        raise
    return zk


def _import_logs(zk, broker):
    """The topics of a data directory written before the store existed, into the store."""
    by_topic: dict[str, dict] = {}
    for (topic, partition), lg in broker.log_manager.logs.items():
        by_topic.setdefault(topic, {})[partition] = lg
    for topic, parts in sorted(by_topic.items()):
        ids = sorted({lg.topic_id for lg in parts.values() if lg.topic_id})
        topic_id = ids[0] if ids else random_uuid_text()
        if len(ids) > 1:
            log.warning("topic %s has partitions with different topic ids %s; using %s", topic, ids, topic_id)
        count = max(parts) + 1
        missing = sorted(set(range(count)) - set(parts))
        if missing:  # a partition directory lost: the controller makes it again, empty
            log.warning("topic %s: partitions %s are missing on disk; they start empty", topic, missing)
        configs = dict(broker.log_manager.topic_overrides.get(topic, {}))
        zk.create_topic(topic, {p: [broker.node_id] for p in range(count)}, configs, topic_id)
        log.info("imported topic %s (%d partitions) into the node's metadata store", topic, count)
