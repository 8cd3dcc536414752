"""Fetch from the closest replica (KIP-392) on the in-process cluster: brokers in racks a, b, c,
replica.selector.class Kafka's RackAwareReplicaSelector. The protocol first (the leader names a
replica of the consumer's rack, that follower serves the records up to its high watermark), then
librdkafka's consumer with client.rack, whose statistics say which broker it fetches from."""
import json

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from _kcutil import wait_for
from broker_client import KafkaConnection, request
from kafkacore.broker.config import RACK_AWARE_REPLICA_SELECTOR
from kafkacore.embedded_cluster import EmbeddedKafkaCluster
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.messages.fetch_request import FetchPartition, FetchTopic

RACKS = ["a", "b", "c"]  # broker i is in RACKS[i - 1]
RECORDS = 500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = EmbeddedKafkaCluster(tmp_path_factory.mktemp("racks"), brokers=3, racks=RACKS,
                             settings={"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR,
                                       "default.replication.factor": "3", "min.insync.replicas": "2"})
    try:
        c.start()
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic("near", 1, 3)])["near"].result(30)
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
        for i in range(RECORDS):
            p.produce("near", value=b"%d" % i)
        assert p.flush(30) == 0
        c.values = [b"%d" % i for i in range(RECORDS)]
        yield c
    finally:
        c.stop()


def leader_and_isr(cluster):
    t = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics("near", timeout=10).topics["near"]
    return t.partitions[0].leader, sorted(t.partitions[0].isrs)


def fetch(cluster, broker_id, rack, version=12):
    req = request(ApiKey.FETCH, replica_id=-1, max_wait_ms=0, min_bytes=1, rack_id=rack, topics=[
        FetchTopic(topic="near", partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    with KafkaConnection("127.0.0.1", cluster.brokers[broker_id].port) as c:
        return c.call(ApiKey.FETCH, version, req).responses[0].partitions[0]


def full_isr(cluster):
    wait_for(lambda: leader_and_isr(cluster)[1] == [1, 2, 3], "every replica in sync")
    return leader_and_isr(cluster)[0]


def test_the_leader_names_the_replica_in_the_consumers_rack(cluster):
    leader = full_isr(cluster)
    follower = next(b for b in (1, 2, 3) if b != leader)
    # the followers report their fetch offsets to the leader with their next fetch
    pd = wait_for(lambda: (lambda pd: pd.preferred_read_replica == follower and pd)(
        fetch(cluster, leader, RACKS[follower - 1])), f"broker {follower} named as the preferred replica")
    assert pd.error_code == 0 and not pd.records and pd.high_watermark == RECORDS
    # a consumer in the leader's rack, in no known rack, or without a rack reads from the leader
    for rack in (RACKS[leader - 1], "elsewhere", ""):
        pd = fetch(cluster, leader, rack)
        assert pd.preferred_read_replica == -1 and pd.error_code == 0 and len(pd.records) > 0, rack
    # before v11 there is no rack to say
    assert fetch(cluster, leader, "", version=10).preferred_read_replica == -1


def test_a_follower_serves_a_consumer_up_to_its_high_watermark(cluster):
    leader = full_isr(cluster)
    follower = next(b for b in (1, 2, 3) if b != leader)
    pd = wait_for(lambda: (lambda pd: pd.high_watermark == RECORDS and pd)(fetch(cluster, follower, "")),
                  "the follower's high watermark at the end")
    assert pd.error_code == 0 and len(pd.records) > 0
    # before KIP-392 (v10) a follower answers NOT_LEADER_OR_FOLLOWER, as Kafka's does
    assert fetch(cluster, follower, "", version=10).error_code == 6


def test_librdkafka_with_client_rack_fetches_from_the_follower_in_its_rack(cluster):
    leader = full_isr(cluster)
    follower = next(b for b in (1, 2, 3) if b != leader)
    stats = []
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "near-readers",
                         "client.rack": RACKS[follower - 1], "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "statistics.interval.ms": 200,
                         "stats_cb": lambda js: stats.append(json.loads(js))})
    try:
        consumer.assign([TopicPartition("near", 0, 0)])
        got = []
        wait_for(lambda: got.extend(m.value() for m in consumer.consume(100, 0.2) if not m.error())
                 or len(got) >= RECORDS, lambda: f"{RECORDS} records (have {len(got)})")
        assert got == cluster.values

        def fetching_from():
            p = stats[-1]["topics"]["near"]["partitions"]["0"] if stats else {}
            consumer.poll(0.1)  # serves the statistics callback
            return p.get("broker")

        # librdkafka's partition statistics: "broker" is where it fetches, "leader" the leader
        wait_for(lambda: fetching_from() == follower,
                 lambda: f"fetching from broker {follower} (statistics say {fetching_from()})")
        assert stats[-1]["topics"]["near"]["partitions"]["0"]["leader"] == leader
    finally:
        consumer.close()


def test_kafkacores_consumer_with_client_rack_reads_everything_from_the_follower_in_its_rack(cluster):
    from kafkacore import Consumer

    leader = full_isr(cluster)
    follower = next(b for b in (1, 2, 3) if b != leader)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "near-kafkacore",
                         "client.rack": RACKS[follower - 1], "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.assign([("near", 0)])
        got = []
        wait_for(lambda: got.extend(r.value for r in consumer.poll(0.2)) or len(got) >= RECORDS,
                 lambda: f"{RECORDS} records (have {len(got)})")
        assert got == cluster.values
        # where its fetches went: the replica the leader named, the follower in its rack
        assert consumer._states[("near", 0)].read_replica == follower
    finally:
        consumer.close()
