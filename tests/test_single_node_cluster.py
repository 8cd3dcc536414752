"""A single node is a cluster of one (kafkacore/cluster/local_metadata.py): its metadata is
Kafka's znodes in a store in its data directory, its own controller leads its partitions, it
serves the inter-broker APIs, and a data directory written before the store existed is imported
on its first start with every topic id, record and committed offset."""
import json
import os
import shutil

from _kcutil import wait_for
from broker_client import BrokerProcess, request
from kafkacore.client.admin import LATEST, TOPIC_RESOURCE, AdminClient
from kafkacore.cluster.local_znodes import LOG_FILE, SNAPSHOT_FILE

API_VERSIONS, LEADER_AND_ISR, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 18, 4, 6, 7


def znodes_of(data_dir):
    """The store's persistent znodes as its files hold them: the snapshot, then the log over it."""
    store = os.path.join(data_dir, "znodes")
    with open(os.path.join(store, SNAPSHOT_FILE)) as f:
        nodes = json.load(f)["znodes"]
    with open(os.path.join(store, LOG_FILE)) as f:
        for line in f:
            for path, node in json.loads(line)["znodes"].items():
                if node is None:
                    nodes.pop(path, None)
                else:
                    nodes[path] = node
    return nodes


def produce_and_commit(b, topic, count):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap})
    acked = []
    for i in range(count):  # keyed: the topic is compacted
        p.produce(topic, key=b"k%d" % i, value=b"%d" % i, partition=i % 2,
                  on_delivery=lambda err, _m: err is None and acked.append(1))
    assert p.flush(30) == 0 and len(acked) == count
    with AdminClient(b.bootstrap) as admin:
        admin.alter_group_offsets("readers", {(topic, 0): 3, (topic, 1): 4})


def test_the_single_node_keeps_kafkas_znodes_and_runs_its_own_controller(tmp_path):
    with BrokerProcess(tmp_path / "data") as b:
        with AdminClient(b.bootstrap) as admin:
            admin.create_topic("orders", 2, 1, configs={"retention.ms": "86400000"})
            cluster = admin.describe_cluster()
            assert cluster.controller_id == 1 and [n.node_id for n in cluster.brokers] == [1]
        with b.client() as c:
            served = {k.api_key for k in c.call(API_VERSIONS, 3, request(API_VERSIONS, client_software_name="t",
                                                                         client_software_version="1")).api_keys}
        # a broker of a cluster: it answers its controller's requests (its own, here)
        assert {LEADER_AND_ISR, UPDATE_METADATA, CONTROLLED_SHUTDOWN} <= served
        nodes = wait_for(lambda: (lambda n: "/config/topics/orders" in n and n)(znodes_of(b.data_dir)),
                         "the topic's znodes in the store's files")
    topic = json.loads(nodes["/brokers/topics/orders"]["data"])
    assert topic["version"] == 3 and topic["partitions"] == {"0": [1], "1": [1]}
    state = json.loads(nodes["/brokers/topics/orders/partitions/0/state"]["data"])
    assert (state["leader"], state["isr"], state["version"]) == (1, [1], 1)
    assert json.loads(nodes["/config/topics/orders"]["data"])["config"] == {"retention.ms": "86400000"}
    with open(os.path.join(b.data_dir, "meta.properties")) as f:
        cluster_id = next(ln.split("=", 1)[1].strip() for ln in f if ln.startswith("cluster.id="))
    assert json.loads(nodes["/cluster/id"]["data"])["id"] == cluster_id
    assert "/brokers/ids/1" not in nodes  # the registration is ephemeral: never written


def test_a_data_directory_from_before_the_store_is_imported_with_everything_in_it(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        with AdminClient(b.bootstrap) as admin:
            admin.create_topic("legacy", 2, 1, configs={"cleanup.policy": "compact"})
            topic_id = admin.describe_topics(["legacy"])["legacy"].topic_id
        produce_and_commit(b, "legacy", 20)
    finally:
        assert b.stop() == 0
    # what an older kafkacore left: the partition directories, the topic configs and
    # meta.properties, and no store
    shutil.rmtree(os.path.join(b.data_dir, "znodes"))
    b.start()
    try:
        assert "imported topic legacy (2 partitions)" in b.output()
        with AdminClient(b.bootstrap) as admin:
            assert admin.describe_topics(["legacy"])["legacy"].topic_id == topic_id
            configs = {e.name: e.value for e in admin.describe_configs(TOPIC_RESOURCE, "legacy")}
            assert configs["cleanup.policy"] == "compact"
            assert admin.list_group_offsets("readers") == {("legacy", 0): 3, ("legacy", 1): 4}
            ends = admin.list_offsets({("legacy", 0): LATEST, ("legacy", 1): LATEST})
            assert {tp: o.offset for tp, o in ends.items()} == {("legacy", 0): 10, ("legacy", 1): 10}
    finally:
        b.stop()


def test_a_damaged_store_stops_start_up_with_one_line_and_touches_nothing(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    try:
        with AdminClient(b.bootstrap) as admin:
            admin.create_topic("kept", 1, 1)
    finally:
        assert b.stop() == 0
    snapshot = os.path.join(b.data_dir, "znodes", SNAPSHOT_FILE)
    with open(snapshot, "wb") as f:
        f.write(b"\x00 not json")
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "kafkacore", "serve", "--port", "0", "--data-dir", b.data_dir],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkacore: cannot start: cannot load the metadata store in"), lines
    assert os.path.isdir(os.path.join(b.data_dir, "kept-0"))  # the data is left as it was
