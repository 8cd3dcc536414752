"""The admin APIs on a real 3-broker cluster with a real ZooKeeper: DescribeCluster, topic configs
through ZooKeeper (AlterConfigs on one broker, every broker describes and applies it), broker
config resources answered by their own broker, and ListOffsets / DeleteRecords at the leader.

Raw requests (tests/broker_client.py) pick the broker that answers; confluent-kafka's
AdminClient checks that an unmodified client routes and reads the answers."""
import json
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic, OffsetSpec,
                                   ResourceType)
from kazoo.client import KazooClient

from broker_client import KafkaConnection
from kafkacore.errors import (InvalidConfigurationError, InvalidRequestError, NotLeaderOrFollowerError,
                              UnknownTopicOrPartitionError)
from kafkacore.protocol.messages.alter_configs_request import AlterableConfig as LegacyConfig
from kafkacore.protocol.messages.alter_configs_request import AlterConfigsRequest
from kafkacore.protocol.messages.alter_configs_request import AlterConfigsResource as LegacyResource
from kafkacore.protocol.messages.delete_records_request import (DeleteRecordsPartition, DeleteRecordsRequest,
                                                                DeleteRecordsTopic)
from kafkacore.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kafkacore.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kafkacore.protocol.messages.incremental_alter_configs_request import (AlterableConfig, AlterConfigsResource,
                                                                           IncrementalAlterConfigsRequest)
from kafkacore.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from _cluster import admin, create_topic, ensure_all_running, topic_metadata, wait_for
from _kcutil import peer_has_read

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG = 1, 4


def conn(cluster, broker_id):
    return KafkaConnection("127.0.0.1", cluster.brokers[broker_id].port)


def zk_client(cluster):
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    return zk


def describe_topic(cluster, broker_id, topic):
    """{name: DescribeConfigs entry} of the topic, answered by broker_id."""
    with conn(cluster, broker_id) as c:
        r = c.call(32, 4, DescribeConfigsRequest(resources=[
            DescribeConfigsResource(resource_type=TOPIC, resource_name=topic, configuration_keys=None)])).results[0]
    assert r.error_code == 0, r
    return {e.name: e for e in r.configs}


def incremental(cluster, broker_id, topic, ops, rtype=TOPIC):
    """IncrementalAlterConfigs through broker_id; ops: [(name, op, value)]. The resource result."""
    with conn(cluster, broker_id) as c:
        return c.call(44, 1, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=rtype, resource_name=topic,
            configs=[AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])])).responses[0]


def local_overrides(cluster, broker_id, topic):
    """What broker_id applied to its logs of topic: its data directory's copy of the overrides."""
    path = Path(cluster.brokers[broker_id].data_dir) / "kafkacore-topic-configs.json"
    return json.loads(path.read_text()).get(topic) if path.exists() else None


def produce(cluster, topic, n, size=100, **extra):
    """n acks=all records; the delivery errors (None for each success)."""
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    errors = []
    for i in range(n):
        p.produce(topic, value=b"%06d" % i + b"x" * (size - 6), on_delivery=lambda err, _m: errors.append(err))
        p.poll(0)
    assert p.flush(60) == 0
    return errors


def stop_out_of_isr(cluster, topic, broker_id):
    """Stops a follower of the topic's partition 0 and waits until the ISR in ZooKeeper is
    without it. A broker still fetching during its controlled shutdown can be taken back into the
    ISR after the controller removed it (and the controller's cached ISR may not show it): a few
    acks=1 records make the leader see it lag and shrink the ISR itself."""
    assert cluster.brokers[broker_id].stop() == 0
    assert not any(produce(cluster, topic, 3, acks="1"))
    zk = zk_client(cluster)
    try:
        wait_for(lambda: broker_id not in json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])["isr"],
                 f"broker {broker_id} out of the ISR in ZooKeeper", 30)
    finally:
        zk.stop()
    wait_for(lambda: broker_id not in topic_metadata(cluster, topic)[0].isrs, f"broker {broker_id} out of the ISR", 30)


# -- DescribeCluster ---------------------------------------------------------------------------------
def test_describe_cluster_lists_every_broker_and_the_controller(cluster):
    ensure_all_running(cluster)
    zk = zk_client(cluster)
    try:
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
        cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
    finally:
        zk.stop()
    expected = sorted((bid, "127.0.0.1", b.port) for bid, b in cluster.brokers.items())
    for bid in cluster.brokers:
        with conn(cluster, bid) as c:
            r = c.call(60, 1, DescribeClusterRequest(endpoint_type=1))
        assert r.error_code == 0, r
        assert sorted((b.broker_id, b.host, b.port) for b in r.brokers) == expected, f"through broker {bid}"
        assert r.controller_id == controller and r.cluster_id == cluster_id
    client = admin(cluster)  # kept while the future is pending: its handle owns the request
    desc = client.describe_cluster().result(10)
    assert sorted(n.id for n in desc.nodes) == [1, 2, 3]
    assert desc.controller.id == controller and desc.cluster_id == cluster_id


# -- topic configs through ZooKeeper -------------------------------------------------------------------
def test_topic_config_change_through_one_broker_reaches_every_broker(cluster):
    ensure_all_running(cluster)
    create_topic(cluster, "cfg", partitions=1, rf=3)
    assert not any(produce(cluster, "cfg", 50, size=1000))

    # validated as on a single node, before anything is written
    bad = incremental(cluster, 1, "cfg", [("segment.bytes", SET, "lots")])
    assert bad.error_code == InvalidConfigurationError.code and "segment.bytes" in bad.error_message
    assert incremental(cluster, 1, "no-such-topic", [("retention.ms", SET, "1")]).error_code == \
        UnknownTopicOrPartitionError.code

    r = incremental(cluster, 1, "cfg", [("segment.bytes", SET, "16384"), ("retention.ms", SET, "3600000")])
    assert r.error_code == 0, r
    # DescribeConfigs reads ZooKeeper: the other brokers answer the new values at once
    for bid in (2, 3):
        entries = describe_topic(cluster, bid, "cfg")
        assert entries["segment.bytes"].value == "16384" and entries["segment.bytes"].config_source == \
            DYNAMIC_TOPIC_CONFIG, bid
        assert entries["retention.ms"].value == "3600000"
        assert entries["min.insync.replicas"].value == "2"  # the brokers' own setting, not overridden
        assert entries["min.insync.replicas"].config_source == STATIC_BROKER_CONFIG
    # Kafka's layout: the overrides, and a change notification naming the topic
    zk = zk_client(cluster)
    try:
        stored = json.loads(zk.get("/config/topics/cfg")[0])
        notes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in sorted(zk.get_children("/config/changes"))]
    finally:
        zk.stop()
    assert stored == {"version": 1, "config": {"segment.bytes": "16384", "retention.ms": "3600000"}}
    assert {"version": 2, "entity_path": "topics/cfg"} in notes

    # every broker applies it to its replica: its data directory's copy, then its segments roll
    # at the new size whether it leads or follows
    want = {"segment.bytes": "16384", "retention.ms": "3600000"}
    wait_for(lambda: all(local_overrides(cluster, b, "cfg") == want for b in cluster.brokers),
             "every broker to apply the new overrides", 30)
    assert not any(produce(cluster, "cfg", 100, size=1000, **{"batch.size": 4096}))  # batches under a segment

    def segments():
        return {b: len(list((Path(cluster.brokers[b].data_dir) / "cfg-0").glob("*.log"))) for b in cluster.brokers}
    wait_for(lambda: all(n >= 5 for n in segments().values()), "every replica rolling 16 KiB segments", 30)

    # the legacy AlterConfigs through another broker replaces the whole set
    with conn(cluster, 2) as c:
        resp = c.call(33, 2, AlterConfigsRequest(resources=[LegacyResource(
            resource_type=TOPIC, resource_name="cfg", configs=[LegacyConfig(name="retention.ms", value="7200000")])]))
    assert resp.responses[0].error_code == 0, resp
    entries = describe_topic(cluster, 3, "cfg")
    assert entries["retention.ms"].value == "7200000"
    assert entries["segment.bytes"].config_source != DYNAMIC_TOPIC_CONFIG
    wait_for(lambda: all(local_overrides(cluster, b, "cfg") == {"retention.ms": "7200000"} for b in cluster.brokers),
             "every broker to drop the segment.bytes override", 30)


def test_min_insync_replicas_changed_at_run_time_refuses_acks_all(cluster):
    ensure_all_running(cluster)
    create_topic(cluster, "mir", partitions=1, rf=3)
    md = topic_metadata(cluster, "mir")[0]
    follower = next(r for r in md.replicas if r != md.leader)
    other = next(r for r in md.replicas if r not in (md.leader, follower))
    assert incremental(cluster, other, "mir", [("min.insync.replicas", SET, "3")]).error_code == 0
    assert describe_topic(cluster, md.leader, "mir")["min.insync.replicas"].value == "3"
    wait_for(lambda: local_overrides(cluster, md.leader, "mir") == {"min.insync.replicas": "3"},
             "the leader to apply min.insync.replicas=3", 30)
    assert not any(produce(cluster, "mir", 5))  # the full ISR is enough
    try:
        stop_out_of_isr(cluster, "mir", follower)
        # two in-sync replicas would do under the brokers' min.insync.replicas=2; the topic asks 3
        errors = produce(cluster, "mir", 3, retries=0, **{"enable.idempotence": False, "message.timeout.ms": 10000})
        assert errors and all(e is not None and e.code() == KafkaError.NOT_ENOUGH_REPLICAS for e in errors), errors
        # deleting the override (through the leader this time) goes back to the brokers' 2
        assert incremental(cluster, md.leader, "mir", [("min.insync.replicas", DELETE, None)]).error_code == 0
        wait_for(lambda: local_overrides(cluster, md.leader, "mir") == {}, "the leader to drop the override", 30)
        assert not any(produce(cluster, "mir", 3))
    finally:
        cluster.brokers[follower].start()
    ensure_all_running(cluster)


def test_unclean_leader_election_enabled_at_run_time_elects_an_offline_partition(cluster):
    """RF=2 on brokers 1 and 2: 2 leaves the ISR, 1 stops, 2 returns; the partition stays
    offline (clean election) until unclean.leader.election.enable is set through broker 3."""
    ensure_all_running(cluster)
    client = admin(cluster)
    client.create_topics([NewTopic("dirty", num_partitions=1, replica_assignment=[[1, 2]],
                                   config={"min.insync.replicas": "1"})], operation_timeout=30)["dirty"].result(60)
    wait_for(lambda: (lambda m: m and m[0].leader == 1 and sorted(m[0].isrs) == [1, 2])(
        topic_metadata(cluster, "dirty")), "leader 1 with ISR [1, 2]", 60)
    assert not any(produce(cluster, "dirty", 10))
    try:
        stop_out_of_isr(cluster, "dirty", 2)
        assert cluster.brokers[1].stop() == 0
        cluster.brokers[2].start()
        wait_for(lambda: sorted(admin(cluster).list_topics(timeout=10).brokers) == [2, 3], "broker 2 back", 30)
        time.sleep(1)  # a negative check: the controller elects nobody meanwhile
        assert topic_metadata(cluster, "dirty")[0].leader == -1  # broker 2 is not in the ISR: offline
        assert incremental(cluster, 3, "dirty", [("unclean.leader.election.enable", SET, "true")]).error_code == 0
        wait_for(lambda: topic_metadata(cluster, "dirty")[0].leader == 2, "broker 2 elected uncleanly", 30)
    finally:
        for b in (1, 2):
            if not cluster.brokers[b].running:
                cluster.brokers[b].start()
    ensure_all_running(cluster)


# -- broker resources ----------------------------------------------------------------------------------
def test_each_broker_describes_its_own_config(cluster):
    ensure_all_running(cluster)
    client = admin(cluster)
    for bid, b in cluster.brokers.items():
        res = ConfigResource(ResourceType.BROKER, str(bid))
        cfg = client.describe_configs([res])[res].result(20)  # librdkafka sends it to broker bid
        assert cfg["broker.id"].value == str(bid)
        assert cfg["listeners"].value.endswith(f":{b.port}")
        assert cfg["min.insync.replicas"].value == "2"
    # a broker asked about another one answers Kafka's error
    with conn(cluster, 1) as c:
        r = c.call(32, 4, DescribeConfigsRequest(resources=[
            DescribeConfigsResource(resource_type=BROKER, resource_name="2", configuration_keys=None),
            DescribeConfigsResource(resource_type=BROKER, resource_name="", configuration_keys=None)]))
    assert r.results[0].error_code == InvalidRequestError.code
    assert r.results[0].error_message == "Unexpected broker id, expected 1 or empty string, but received 2"
    assert r.results[1].error_code == 0 and r.results[1].configs == []
    assert incremental(cluster, 1, "2", [("log.retention.ms", SET, "1")], rtype=BROKER).error_code == \
        InvalidRequestError.code
    # a static broker config cannot change at run time, even through the broker the resource names
    # (the dynamic ones: tests/test_broker_dynamic_config.py)
    res = ConfigResource(ResourceType.BROKER, "3",
                         incremental_configs=[ConfigEntry("num.partitions", "3",
                                                          incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        client.incremental_alter_configs([res])[res].result(20)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST, refused.value


def test_the_consoles_broker_pages_on_a_cluster(cluster):
    """The console's Brokers pages (kafkacore/console/brokers.py) against three brokers: each
    broker's replicas and leaders add up to the metadata's, one controller, each broker's own
    log directory, and a broker's configs asked of that broker."""
    from kafkacore.client.admin import AdminClient as KafkacoreAdmin
    from kafkacore.console.brokers import broker_detail, broker_list

    ensure_all_running(cluster)
    create_topic(cluster, "console-brokers", partitions=3, rf=2)
    with KafkacoreAdmin(cluster.bootstrap_servers) as a:
        doc = broker_list(a)
        info, topics = a.metadata(None)
        parts = [p for t in topics.values() for p in t.partitions]
        assert [b["node_id"] for b in doc["brokers"]] == sorted(cluster.brokers)
        for b in doc["brokers"]:
            bid = b["node_id"]
            assert (b["replicas"], b["leaders"]) == (sum(bid in p.replicas for p in parts),
                                                     sum(p.leader == bid for p in parts))
            assert b["controller"] == (bid == info.controller_id)
            assert [d["path"] for d in b["log_dirs"]] == [cluster.brokers[bid].data_dir]
            assert b["size"] == sum(d["size"] for d in b["log_dirs"])
        assert sum(b["controller"] for b in doc["brokers"]) == 1 and doc["controller"] == info.controller_id
        assert sum(b["replicas"] for b in doc["brokers"]) == sum(len(p.replicas) for p in parts)
        detail = broker_detail(a, "2")
        configs = {c["name"]: c for c in detail["configs"]}
        assert configs["broker.id"]["value"] == "2" and configs["listeners"]["value"].endswith(
            f":{cluster.brokers[2].port}")
        assert configs["min.insync.replicas"]["source"] == "STATIC_BROKER_CONFIG"
        mine = {t["topic"]: (t["replicas"], t["leaders"]) for t in detail["topics"]}
        ours = topics["console-brokers"].partitions
        assert mine.get("console-brokers", (0, 0)) == (sum(2 in p.replicas for p in ours),
                                                       sum(p.leader == 2 for p in ours))


# -- ListOffsets and DeleteRecords ----------------------------------------------------------------------
def test_list_offsets_and_delete_records_are_answered_by_the_leader(cluster):
    ensure_all_running(cluster)
    create_topic(cluster, "lo", partitions=1, rf=3)
    assert not any(produce(cluster, "lo", 100))
    md = topic_metadata(cluster, "lo")[0]
    follower = next(r for r in md.replicas if r != md.leader)

    def raw_list(broker_id, timestamp):
        with conn(cluster, broker_id) as c:
            p = c.call(2, 7, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name="lo", partitions=[
                ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])).topics[0].partitions[0]
        return p.error_code, p.offset

    assert raw_list(md.leader, -1) == (0, 100)
    assert raw_list(follower, -1)[0] == NotLeaderOrFollowerError.code
    client = admin(cluster)
    tp = TopicPartition("lo", 0)
    assert client.list_offsets({tp: OffsetSpec.latest()})[tp].result(20).offset == 100
    assert client.list_offsets({tp: OffsetSpec.earliest()})[tp].result(20).offset == 0

    with conn(cluster, follower) as c:
        r = c.call(21, 2, DeleteRecordsRequest(timeout_ms=10000, topics=[DeleteRecordsTopic(name="lo", partitions=[
            DeleteRecordsPartition(partition_index=0, offset=10)])]))
    assert r.topics[0].partitions[0].error_code == NotLeaderOrFollowerError.code
    upto = TopicPartition("lo", 0, 40)
    deleted = client.delete_records([upto])[upto].result(20)
    assert deleted.low_watermark == 40
    assert raw_list(md.leader, -2) == (0, 40)
    assert client.list_offsets({tp: OffsetSpec.earliest()})[tp].result(20).offset == 40


def test_delete_records_waits_for_every_live_replica_then_times_out_on_a_silent_one(cluster):
    """As Kafka's DelayedDeleteRecords: the answer comes once every replica on a live broker has
    moved its log start offset. A follower paused (still registered: its ZooKeeper session
    outlives the pause) keeps the request waiting until timeout_ms: REQUEST_TIMED_OUT; once it
    runs again the same request succeeds."""
    import signal

    from kafkacore.errors import RequestTimedOutError

    ensure_all_running(cluster)
    create_topic(cluster, "dr-wait", partitions=1, rf=3)
    assert not any(produce(cluster, "dr-wait", 100))
    md = topic_metadata(cluster, "dr-wait")[0]
    paused = cluster.brokers[next(r for r in md.replicas if r != md.leader)]

    def delete(offset, timeout_ms):
        with conn(cluster, md.leader) as c:
            return c.call(21, 2, DeleteRecordsRequest(timeout_ms=timeout_ms, topics=[DeleteRecordsTopic(
                name="dr-wait", partitions=[DeleteRecordsPartition(partition_index=0, offset=offset)])])
            ).topics[0].partitions[0]

    paused.signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        timed_out = delete(30, 1000)
        waited = time.monotonic() - started
    finally:
        paused.signal(signal.SIGCONT)
    assert timed_out.error_code == RequestTimedOutError.code, timed_out
    assert waited >= 0.9, waited  # it waited out timeout_ms for the paused follower
    done = delete(30, 10000)
    assert (done.error_code, done.low_watermark) == (0, 30), done


def test_delete_records_is_done_on_the_followers_when_it_is_answered(cluster):
    """The leader dies the moment DeleteRecords is answered: the follower that takes over has
    already deleted (its earliest offset is the one deleted up to). Answering before the
    followers had moved let deleted records come back after a failover."""
    ensure_all_running(cluster)
    create_topic(cluster, "dr-failover", partitions=1, rf=3)
    assert not any(produce(cluster, "dr-failover", 100))
    md = topic_metadata(cluster, "dr-failover")[0]
    client = admin(cluster)
    upto = TopicPartition("dr-failover", 0, 60)
    assert client.delete_records([upto])[upto].result(20).low_watermark == 60
    cluster.brokers[md.leader].kill()

    def new_leader():
        lead = topic_metadata(cluster, "dr-failover")[0].leader
        return lead not in (-1, md.leader) and [lead]  # a list: broker 0 is a leader too

    leader = wait_for(new_leader, "a new leader", 60)[0]

    def offset_at(timestamp):  # ListOffsets to the new leader: -2 the earliest, -1 the latest
        with conn(cluster, leader) as c:
            p = c.call(2, 7, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name="dr-failover", partitions=[
                ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])).topics[0].partitions[0]
        return p.error_code, p.offset

    assert offset_at(-2) == (0, 60)
    assert offset_at(-1) == (0, 100)
    ensure_all_running(cluster)


# -- ZooKeeper's round trips off the event loop ----------------------------------------------------------
def test_a_create_topics_waiting_on_zookeeper_does_not_stall_the_brokers_other_clients(cluster):
    """ZooKeeper paused for 2 s (less than a session: no broker loses it) while CreateTopics is
    being written: the same broker answers ApiVersions and Metadata meanwhile, and the topic is
    created once ZooKeeper runs again. Writing ZooKeeper on the event loop stalled every client
    of the broker for the whole pause."""
    import signal
    import threading

    from kafkacore.protocol.messages.api_versions_request import ApiVersionsRequest
    from kafkacore.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
    from kafkacore.protocol.messages.metadata_request import MetadataRequest

    ensure_all_running(cluster)
    broker_id = min(cluster.brokers)
    created = {}

    def answer(c, cid):
        created["response"] = c.receive(cid)

    with conn(cluster, broker_id) as other, conn(cluster, broker_id) as creator:
        cluster.zookeeper.signal(signal.SIGSTOP)
        started = time.monotonic()
        try:
            cid = creator.send(19, 5, CreateTopicsRequest(timeout_ms=30000, validate_only=False, topics=[
                CreatableTopic(name="zk-paused", num_partitions=1, replication_factor=3, assignments=[], configs=[])]))
            writer = threading.Thread(target=answer, args=(creator, cid))
            writer.start()
            # the broker has taken the CreateTopics: its ZooKeeper writes are under way
            wait_for(lambda: peer_has_read(creator.sock), "the broker to take the CreateTopics", 2.0, 0.005)
            started = time.monotonic()
            other.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
            other.call(3, 9, MetadataRequest(topics=None, allow_auto_topic_creation=False))
            answered_in = time.monotonic() - started
            still_waiting = writer.is_alive()
        finally:
            time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))  # ZooKeeper held 2 s in all
            cluster.zookeeper.signal(signal.SIGCONT)
        writer.join(60)  # (before its connection closes)
    assert still_waiting  # the creation really was held up by ZooKeeper...
    assert answered_in < 1.0, answered_in  # ...and the other client was answered meanwhile
    result = created["response"].topics[0]
    assert (result.name, result.error_code) == ("zk-paused", 0), result
    assert len(topic_metadata(cluster, "zk-paused")) == 1


def test_auto_creation_on_a_cluster_answers_leader_not_available_until_the_topic_is_there(cluster):
    """Kafka answers a topic being auto-created LEADER_NOT_AVAILABLE on every Metadata request
    until its leader is known; TOPIC_ALREADY_EXISTS is not a Metadata error a client expects."""
    from kafkacore.errors import LeaderNotAvailableError
    from kafkacore.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic

    ensure_all_running(cluster)
    codes = []
    with conn(cluster, min(cluster.brokers)) as c:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = c.call(3, 9, MetadataRequest(topics=[MetadataRequestTopic(name="auto-made")],
                                             allow_auto_topic_creation=True))
            codes.append(r.topics[0].error_code)
            if codes[-1] == 0:
                break
            time.sleep(0.005)
    assert codes[-1] == 0, codes
    assert set(codes[:-1]) <= {LeaderNotAvailableError.code}, codes
    assert len(codes) > 1  # at least one answer while it was being created


# -- the notifications' purge, and a broker that missed them -------------------------------------------
def test_old_notifications_are_purged_and_a_returning_broker_reads_zookeeper(cluster, monkeypatch):
    """Kafka's brokers delete notifications older than 15 minutes once processed (here a manager
    of the test's own, with the expiry at 0). A broker that was down meanwhile finds no
    notification of the change: it re-reads its topics' overrides from ZooKeeper at start-up."""
    import asyncio
    from types import SimpleNamespace

    from kafkacore.cluster import change_notifications, config_manager
    from kafkacore.cluster.zk_client import KafkaZkClient
    from kafkacore.storage.config import LogConfig

    assert config_manager.entity_of(b'{"version":1,"entity_type":"topics","entity_name":"t1"}') == ("topics", "t1")
    assert config_manager.entity_of(b'{"version":2,"entity_path":"topics/t2"}') == ("topics", "t2")
    ensure_all_running(cluster)
    create_topic(cluster, "missed", partitions=1, rf=3)
    assert cluster.brokers[3].stop() == 0
    zk = KafkaZkClient(cluster.zookeeper.connect_string)
    zk.start()
    try:
        assert incremental(cluster, 1, "missed", [("retention.ms", SET, "123456")]).error_code == 0
        wait_for(lambda: all(local_overrides(cluster, b, "missed") == {"retention.ms": "123456"} for b in (1, 2)),
                 "the running brokers to apply the change", 30)
        monkeypatch.setattr(change_notifications, "CHANGE_EXPIRATION_MS", 0)
        lm = SimpleNamespace(logs={}, topic_overrides={}, default_config=LogConfig())
        reloaded = []  # what the first round hands the broker's dynamic configs: the stored layers
        dynamic = SimpleNamespace(reload=lambda default, own: reloaded.append((default, own)))
        manager = config_manager.ZkConfigManager(SimpleNamespace(node_id=99, log_manager=lm, dynamic_config=dynamic),
                                                 zk)

        async def one_round():
            manager.listener._loop = asyncio.get_running_loop()
            await manager.listener.process()
        asyncio.run(one_round())
        assert manager.listener.last_executed >= 0
        assert reloaded == [({}, {})]  # no dynamic broker config is stored in this cluster
        left = [c for c in zk.get_children("/config/changes")
                if int(c[len(config_manager.PREFIX):]) <= manager.listener.last_executed]
        assert left == []
        assert local_overrides(cluster, 3, "missed") in ({}, None)  # the stopped broker missed it
    finally:
        zk.close()
        cluster.brokers[3].start()
    wait_for(lambda: local_overrides(cluster, 3, "missed") == {"retention.ms": "123456"},
             "the returning broker to read the overrides from ZooKeeper", 30)
    ensure_all_running(cluster)


def test_configs_only_kafka_knows_are_kept_in_zookeeper_and_ignored(cluster):
    """Kafka's tools write topic configs kafkacore has no use for (the reassignment throttles):
    they must not stop a broker from applying the rest, from hosting a
    new partition or from answering DescribeConfigs, and an alter through kafkacore keeps them."""
    ensure_all_running(cluster)
    topic = "kafka-written-configs"
    create_topic(cluster, topic, partitions=1, rf=3)
    kafka_only = {"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"}
    zk = zk_client(cluster)
    try:
        # what kafka-configs.sh --zookeeper --alter does: the overrides, then a change notification
        zk.set(f"/config/topics/{topic}", json.dumps(
            {"version": 1, "config": {**kafka_only, "segment.ms": "3600000"}}).encode())
        zk.create("/config/changes/config_change_", json.dumps(
            {"version": 2, "entity_path": f"topics/{topic}"}).encode(), sequence=True)
        for b in cluster.brokers:
            wait_for(lambda b=b: (local_overrides(cluster, b, topic) or {}).get("segment.ms") == "3600000",
                     f"broker {b} applied segment.ms", 30)
            entries = describe_topic(cluster, b, topic)
            assert entries["segment.ms"].value == "3600000"
            assert not set(kafka_only) & set(entries)
        # partitions added later are hosted with the known overrides
        client = admin(cluster)  # kept alive until the future resolves: its handle owns the request
        client.create_partitions([NewPartitions(topic, 2)])[topic].result(60)
        wait_for(lambda: len(topic_metadata(cluster, topic)) == 2
                 and all(len(p.isrs) == 3 for p in topic_metadata(cluster, topic).values()), "partition 1 online", 30)
        # an alter through kafkacore keeps what only Kafka knows
        assert incremental(cluster, 2, topic, [("retention.ms", SET, "7200000")]).error_code == 0
        stored = json.loads(zk.get(f"/config/topics/{topic}")[0])["config"]
        assert stored == {**kafka_only, "segment.ms": "3600000", "retention.ms": "7200000"}
    finally:
        zk.stop()
