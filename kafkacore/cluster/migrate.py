"""``kafkacore cluster migrate``: a stopped single node grows into a cluster.

A single node keeps its metadata in its data directory: the topics are its partition
directories (each ``partition.metadata`` holds the topic id), their configs are in
``kafkacore-topic-configs.json`` and the node and cluster ids in ``meta.properties`` (its own
metadata store, ``znodes/``, holds the same as znodes; it is set aside once the move is done).
A broker of a cluster reads the same from ZooKeeper instead. This command writes what the data directory
knows into ZooKeeper as Kafka lays it out (``/cluster/id``, ``/brokers/topics/<topic>`` with
every partition assigned to this node, ``/config/topics/<topic>``), so that the data directory
then starts as that broker of a cluster (``--set zookeeper.connect=... --set broker.id=N``) with
every topic, record and committed offset where it was; the internal topics (``__consumer_offsets``,
``__transaction_state``) are moved like any other, so groups and transactions carry on.

Refused, with nothing written: a data directory in use (its lock), one that is not a kafkacore
data directory, a ZooKeeper that belongs to another cluster (``/cluster/id``), or a topic that
already exists there with another id or assignment. Run again after a failure: topics already
moved with the same id and assignment are skipped.

Kafka has no such tool (a ZooKeeper-mode broker always had ZooKeeper); the node keeps its
node id, the cluster its cluster id, each topic its id.
"""
from __future__ import annotations

import os
import shutil

from ..errors import KafkaStorageError
from ..storage.checkpoints import META_PROPERTIES, read_meta_properties


class MigrationError(Exception):
    """Why the data directory was not moved (one line); nothing was written."""


def describe_data_dir(data_dir):
    """(node id, cluster id, {topic: (topic id text, partition count, {config: value})}) of a
    stopped single node's data directory, read with its lock held (KafkaStorageError when it
    is in use), logs recovered as a start would."""
    from ..storage.log_manager import LogManager

    path = os.path.join(data_dir, META_PROPERTIES)
    if not os.path.exists(path):
        raise MigrationError(f"{data_dir} is not a kafkacore data directory (no {META_PROPERTIES})")
    try:
        meta = read_meta_properties(path)
    except (KafkaStorageError, OSError) as e:
        raise MigrationError(str(e)) from None
    try:
        node_id = int(meta["node.id"])
        cluster_id = meta["cluster.id"]
    except (KeyError, ValueError):
        raise MigrationError(f"{path} names no node.id and cluster.id: not a data directory kafkacore wrote") from None
    lm = LogManager(data_dir, node_id=node_id, background=False)
    try:
        topics = {}
        for (topic, partition), lg in lm.logs.items():
            tid, count, _configs = topics.get(topic, (None, 0, None))
            if lg.topic_id is None:
                raise MigrationError(f"{topic}-{partition} has no topic id: start the single node once "
                                     "(it gives every partition one), stop it, and migrate again")
            if tid is not None and tid != lg.topic_id:
                raise MigrationError(f"topic {topic} has partitions with different topic ids ({tid}, {lg.topic_id})")
            topics[topic] = (lg.topic_id, max(count, partition + 1), dict(lm.topic_overrides.get(topic, {})))
        return node_id, cluster_id, topics
    finally:
        lm.shutdown()


def migrate(data_dir, zookeeper_connect, say=print):
    """Moves the metadata; returns the node id the data directory must start as."""
    from .local_metadata import METADATA_DIR
    from .zk_client import KafkaZkClient

    data_dir = os.path.abspath(data_dir)
    try:
        node_id, cluster_id, topics = describe_data_dir(data_dir)
    except (KafkaStorageError, OSError) as e:
        raise MigrationError(str(e)) from None
    zk = KafkaZkClient(zookeeper_connect, session_timeout_ms=18000, connection_timeout_ms=15000)
    zk.start()
    try:
        zk.create_top_level_paths()
        got = zk.get_or_create_cluster_id(cluster_id)
        if got != cluster_id:
            raise MigrationError(f"ZooKeeper at {zookeeper_connect} belongs to cluster {got}; the data directory "
                                 f"to cluster {cluster_id}")
        todo = {}
        for topic, (topic_id, count, configs) in sorted(topics.items()):
            assignment = {p: [node_id] for p in range(count)}
            existing = zk.get_topic_assignment(topic)
            if existing is None:
                todo[topic] = (topic_id, assignment, configs)
                continue
            have, have_id = existing  # ({partition: [replicas]}, topic id text)
            if have_id == topic_id and have == assignment:
                say(f"  {topic}: already in ZooKeeper")
                continue
            raise MigrationError(f"topic {topic} already exists in ZooKeeper with topic id {have_id} and assignment "
                                 f"{dict(have)}; the data directory has id {topic_id}, {count} partition(s)")
        for topic, (topic_id, assignment, configs) in todo.items():
            zk.create_topic(topic, assignment, configs, topic_id)
            say(f"  {topic}: {len(assignment)} partition(s) on broker {node_id}"
                + (f", configs {configs}" if configs else ""))
    finally:
        zk.close()
    # the single node's own metadata store is replaced by ZooKeeper: set aside, so that it is
    # neither read nor mistaken for the truth later (started again as a single node, the data
    # directory imports its topics afresh)
    local = os.path.join(data_dir, METADATA_DIR)
    if os.path.isdir(local):
        aside = local + ".migrated"
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(local, aside)
        say(f"  the single node's metadata store is set aside as {aside}")
    return node_id


def cluster_migrate(args) -> int:
    """The CLI verb."""
    import sys

    import logging

    from .zk_client import ZkError
    # kazoo warns at every failed connection attempt; the one line below says what failed
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    say = print
    say(f"moving the metadata of {os.path.abspath(args.data_dir)} into ZooKeeper at {args.zookeeper}")
    try:
        node_id = migrate(args.data_dir, args.zookeeper, say)
    except (MigrationError, ZkError) as e:
        print(f"kafkacore cluster migrate: error: {e}", file=sys.stderr)
        return 1
    say(f"done: start it as broker {node_id} of the cluster:\n"
        f"  kafkacore serve --data-dir {args.data_dir} --set zookeeper.connect={args.zookeeper} "
        f"--set broker.id={node_id}")
    return 0
