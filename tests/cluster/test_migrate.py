"""A single node grows into a cluster (issue 27): `kafkacore cluster migrate` moves a stopped
single node's topics into ZooKeeper, and its data directory then starts as broker 1 of a
three-broker cluster with every topic, record and committed group offset kept; a partition can
then be reassigned onto the new brokers. Real processes throughout: a single node, Debian's
ZooKeeper, three brokers, confluent-kafka and kafkacore's admin client."""
import os
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from _cluster import topic_metadata, wait_for
from _zookeeper import skip_or_fail_without_zookeeper
from broker_client import BrokerProcess, free_port
from kafkacore.client.admin import AdminClient
from kafkacore.cluster.local_cluster import LocalCluster

SETTINGS = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "3000",
            "replica.fetch.wait.max.ms": "200", "offsets.topic.num.partitions": "4", "num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0", "auto.leader.rebalance.enable": "false"}


def _read_all(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "migrate-reader", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, eof = {p: [] for p in range(partitions)}, set()
        while len(eof) < partitions:
            m = c.poll(30)
            assert m is not None, "no end of partition within 30 s"
            if m.error():
                eof.add(m.partition())
                continue
            out[m.partition()].append((m.offset(), m.value()))
        return out
    finally:
        c.close()


def _migrate(data_dir, zk):
    return subprocess.run([sys.executable, "-m", "kafkacore", "cluster", "migrate", "--data-dir", str(data_dir),
                           "--zookeeper", zk], capture_output=True, text=True, timeout=120)


def test_a_single_node_moves_into_zookeeper_and_starts_as_broker_1_of_three(tmp_path):
    skip_or_fail_without_zookeeper()
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, settings=SETTINGS)
    data_dir = cluster.brokers[1].data_dir
    # the single node, as a user runs it (node.id 1 by default), with records and a group's offsets
    single = BrokerProcess(data_dir, settings={"offsets.topic.num.partitions": "4", "num.partitions": "3"})
    single.start()
    try:
        p = Producer({"bootstrap.servers": single.bootstrap, "acks": "all"})
        for i in range(300):
            p.produce("orders", b"order-%03d" % i, key=b"k%d" % (i % 7), partition=i % 3)
        assert p.flush(30) == 0
        with AdminClient(single.bootstrap) as admin:
            admin.alter_group_offsets("billing", {("orders", 0): 40, ("orders", 1): 70, ("orders", 2): 100})
            topic_id = admin.describe_topics(["orders"])["orders"].topic_id
        before = _read_all(single.bootstrap, "orders", 3)
    finally:
        assert single.stop() == 0
    assert sum(len(v) for v in before.values()) == 300
    try:
        cluster.zookeeper.start()
        moved = _migrate(data_dir, cluster.zookeeper.connect_string)
        assert moved.returncode == 0, moved.stderr
        assert "broker.id=1" in moved.stdout and "orders: 3 partition(s) on broker 1" in moved.stdout
        assert "__consumer_offsets: 4 partition(s)" in moved.stdout
        # the single node's own metadata store is set aside: ZooKeeper is the truth from now on
        assert not os.path.exists(os.path.join(data_dir, "znodes")) and os.path.isdir(os.path.join(data_dir, "znodes.migrated"))
        assert _migrate(data_dir, cluster.zookeeper.connect_string).stdout.count("already in ZooKeeper") >= 2
        for b in cluster.brokers.values():
            b.start()
        cluster.wait_until_brokers_know_each_other()
        # the data directory's topic, with its id, led by broker 1; its records and offsets as they were
        md = topic_metadata(cluster, "orders")
        assert sorted(md) == [0, 1, 2] and all(m.leader == 1 and list(m.replicas) == [1] for m in md.values())
        with AdminClient(cluster.bootstrap_servers) as admin:
            assert admin.describe_topics(["orders"])["orders"].topic_id == topic_id
            assert admin.list_group_offsets("billing") == {("orders", 0): 40, ("orders", 1): 70, ("orders", 2): 100}
        assert _read_all(cluster.bootstrap_servers, "orders", 3) == before
        # the data directory is in use now: a second migrate refuses and writes nothing
        again = _migrate(data_dir, cluster.zookeeper.connect_string)
        assert again.returncode == 1 and again.stderr.startswith("kafkacore cluster migrate: error:")
        assert "Traceback" not in again.stderr
        # and the topic grows onto the new brokers: every partition on all three, nothing lost
        with AdminClient(cluster.bootstrap_servers) as admin:
            admin.alter_partition_reassignments({("orders", p): [1, 2, 3] for p in range(3)})
        wait_for(lambda: all(sorted(m.isrs) == [1, 2, 3] for m in topic_metadata(cluster, "orders").values()),
                 "every partition of orders on brokers 1, 2 and 3, all in sync", 90)
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        p.produce("orders", b"after-the-move", partition=0)
        assert p.flush(30) == 0
        after = _read_all(cluster.bootstrap_servers, "orders", 3)
        assert after[0][:-1] == before[0] and after[0][-1] == (len(before[0]), b"after-the-move")
        assert after[1] == before[1] and after[2] == before[2]
    finally:
        cluster.stop()


def test_migrate_refuses_what_is_not_a_stopped_data_directory(tmp_path):
    skip_or_fail_without_zookeeper()
    got = _migrate(tmp_path / "nothing-here", "127.0.0.1:1")
    assert got.returncode == 1 and "not a kafkacore data directory" in got.stderr
    assert "Traceback" not in got.stderr
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / "meta.properties").write_bytes(b"\x00\xffnot=properties\n")
    got = _migrate(garbled, "127.0.0.1:1")
    assert got.returncode == 1 and "not UTF-8" in got.stderr and "Traceback" not in got.stderr
    (garbled / "meta.properties").write_text("version=1\n")
    got = _migrate(garbled, "127.0.0.1:1")
    assert got.returncode == 1 and "names no node.id" in got.stderr and "Traceback" not in got.stderr
    # a real data directory and a ZooKeeper nobody answers at: one line, nothing written
    single = BrokerProcess(tmp_path / "single")
    single.start()
    assert single.stop() == 0
    got = _migrate(tmp_path / "single", f"127.0.0.1:{free_port()}")
    assert got.returncode == 1 and got.stderr.startswith("kafkacore cluster migrate: error:"), got.stderr
    assert "Traceback" not in got.stderr
    pytest.importorskip("kazoo")
