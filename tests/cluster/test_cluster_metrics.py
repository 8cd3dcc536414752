"""The cluster's metrics (metrics.port on every broker of a real three-broker cluster): one
active controller, under-replicated partitions while a follower is down, the ISR expanding when
it returns, and replication bytes in and out."""
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer

from _cluster import CLUSTER_SETTINGS, admin, create_topic, topic_metadata, wait_for
from _zookeeper import skip_or_fail_without_zookeeper
from _exposition import parse_exposition, value
from _kcutil import SOURCE_ROOT
from broker_client import free_port
from kafkacore.cluster.local_cluster import LocalCluster


@pytest.fixture(scope="module")
def metrics_cluster(tmp_path_factory):
    skip_or_fail_without_zookeeper()
    c = LocalCluster(tmp_path_factory.mktemp("metrics-cluster"), brokers=3, settings=CLUSTER_SETTINGS)
    for b in c.brokers.values():
        b.settings = dict(b.settings, **{"metrics.port": str(free_port())})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def scrape(broker):
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.settings['metrics.port']}/metrics", timeout=10) as r:
        return parse_exposition(r.read().decode())[0]


def total(cluster, name, **labels):
    return sum(value(scrape(b), name, **labels) or 0 for b in cluster.brokers.values() if b.running)


def test_followers_fetch_in_incremental_sessions_and_idle_partitions_stay_in_sync(metrics_cluster):
    """Followers fetch in KIP-227 sessions, as Kafka's do: each leader holds one session per
    follower, with every partition that follower replicates from it. An incremental fetch leaves
    idle partitions out, and the leader must still count them as caught up: an idle cluster
    keeps full ISRs well past replica.lag.time.max.ms."""
    c = metrics_cluster

    def cached():
        return {i: value(scrape(b), "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
                for i, b in c.brokers.items()}
    create_topic(c, "quiet", partitions=3, rf=3)
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    for i in range(30):
        p.produce("quiet", b"q%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    # the module's first topic: both followers of each of its 3 partitions hold it in their session
    # with its leader (this test runs first: a restarted broker's earlier sessions stay on the
    # others until evicted, as in Kafka, and would be counted too)
    try:
        wait_for(lambda: sum(cached().values()) == 6, "6 partitions in the followers' sessions", 30)
    except AssertionError as e:
        raise AssertionError(f"{e}; by broker: {cached()}") from None
    for b in c.brokers.values():  # each broker leads a partition of "quiet": both others fetch from it
        assert value(scrape(b), "kafka_server_fetchsessioncache_numincrementalfetchsessions") == 2
    shrinks = total(c, "kafka_server_replicamanager_isrshrinks_total")
    lag_s = int(CLUSTER_SETTINGS["replica.lag.time.max.ms"]) / 1000
    time.sleep(2.5 * lag_s)  # nothing written: every fetch is incremental and names no partition
    assert total(c, "kafka_server_replicamanager_isrshrinks_total") == shrinks
    assert total(c, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert all(len(m.isrs) == 3 for m in topic_metadata(c, "quiet").values())
    # and records still flow through the sessions to every replica
    def replication():
        return (total(c, "kafka_server_brokertopicmetrics_replicationbytesin_total"),
                total(c, "kafka_server_brokertopicmetrics_replicationbytesout_total"))
    before_in = total(c, "kafka_server_brokertopicmetrics_bytesin_total", topic="quiet")
    rep_in, rep_out = replication()
    for i in range(30):
        p.produce("quiet", b"r%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    taken = total(c, "kafka_server_brokertopicmetrics_bytesin_total", topic="quiet") - before_in
    assert taken > 0
    wait_for(lambda: replication() == (rep_in + 2 * taken, rep_out + 2 * taken),
             "both followers of each partition appended exactly what its leader took in", 30)
    assert total(c, "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total") == 0


def test_controller_and_under_replicated_partitions(metrics_cluster):
    c = metrics_cluster
    wait_for(lambda: total(c, "kafka_controller_kafkacontroller_activecontrollercount") == 1,
             "exactly one active controller across the brokers")
    create_topic(c, "metered", partitions=3, rf=3)
    rep_in = total(c, "kafka_server_brokertopicmetrics_replicationbytesin_total")
    rep_out = total(c, "kafka_server_brokertopicmetrics_replicationbytesout_total")
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    for i in range(300):
        p.produce("metered", b"v%d" % i, key=b"k%d" % i)
    assert p.flush(30) == 0
    del p
    # followers append exactly the leaders' batches: twice what the leaders took in, read and sent
    taken = total(c, "kafka_server_brokertopicmetrics_bytesin_total", topic="metered")
    assert taken > 300 and total(c, "kafka_server_brokertopicmetrics_messagesin_total", topic="metered") == 300
    wait_for(lambda: total(c, "kafka_server_brokertopicmetrics_replicationbytesin_total") - rep_in == 2 * taken
             == total(c, "kafka_server_brokertopicmetrics_replicationbytesout_total") - rep_out,
             "replication bytes in = out = twice the bytes produced")
    # every replica of this module's topics ("quiet" exists when the test above ran first), once
    # the metadata names each partition's leader (an answer may say LEADER_NOT_AVAILABLE for a
    # moment under load, and the topic then looks empty)
    def module_partitions():
        md = admin(c).list_topics(timeout=10)
        topics = [t for name, t in md.topics.items() if name in ("quiet", "metered")]
        if any(t.error is not None or any(p.leader < 0 for p in t.partitions.values()) for t in topics):
            return None
        return [p for t in topics for p in t.partitions.values()]
    hosted = wait_for(module_partitions, "the metadata of this module's topics")
    assert total(c, "kafka_server_replicamanager_partitioncount") == sum(len(m.replicas) for m in hosted)
    assert total(c, "kafka_server_replicamanager_leadercount") == len(hosted)
    assert total(c, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    controller = next(b for b in c.brokers.values()
                      if value(scrape(b), "kafka_controller_kafkacontroller_activecontrollercount") == 1)
    m = scrape(controller)
    with urllib.request.urlopen(f"http://127.0.0.1:{controller.settings['metrics.port']}/metrics", timeout=10) as r:
        families = parse_exposition(r.read().decode())[1]
    docs = Path(SOURCE_ROOT, "docs", "tools.md").read_text()
    assert [f for f in families if f"`{f}`" not in docs] == []  # the cluster's metrics are documented too
    assert value(m, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(m, "kafka_controller_kafkacontroller_globalpartitioncount") == len(hosted)
    # kafka_exporter's series come once per cluster (a partition's from its leader, the brokers and
    # the topics from the controller), so the dashboards' sums over every broker are right
    assert total(c, "kafka_brokers") == 3 and len(m["kafka_broker_info"]) == 3
    assert total(c, "kafka_topic_partitions", topic="metered") == 3

    def per_partition(name, topic="metered"):
        return sum(total(c, name, topic=topic, partition=str(p)) for p in range(3))
    assert per_partition("kafka_topic_partition_current_offset") == 300
    assert per_partition("kafka_topic_partition_replicas") == 9
    assert per_partition("kafka_cluster_partition_replicascount") == 9
    assert per_partition("kafka_topic_partition_in_sync_replica") == 9

    # a follower stops (controlled shutdown): every partition now misses a replica, whoever leads it
    follower_id = next(r for r in topic_metadata(c, "metered")[0].replicas
                       if r != topic_metadata(c, "metered")[0].leader)
    follower = c.brokers[follower_id]
    expands_before = total(c, "kafka_server_replicamanager_isrexpands_total")
    assert follower.stop() == 0
    wait_for(lambda: total(c, "kafka_server_replicamanager_underreplicatedpartitions") == len(hosted),
             f"{len(hosted)} under-replicated partitions on the live brokers", 60)
    assert per_partition("kafka_topic_partition_under_replicated_partition") == 3
    assert per_partition("kafka_cluster_partition_underreplicated") == 3
    assert total(c, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    # back again: it catches up and the leaders take it into their ISRs
    follower.start()
    wait_for(lambda: total(c, "kafka_server_replicamanager_underreplicatedpartitions") == 0,
             "no under-replicated partition once the follower is back", 60)
    assert total(c, "kafka_server_replicamanager_isrexpands_total") - expands_before >= len(hosted)
    assert total(c, "kafka_controller_kafkacontroller_activecontrollercount") == 1

