"""The in-process cluster (kafkacore.embedded_cluster): three brokers and their controller on a
metadata store in the process, no ZooKeeper. Real clients (confluent-kafka) over real sockets;
each fault checks a history: every acknowledged record read back exactly once, in order."""
import threading

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from _history import AckedProducer, check_history, produce_in_background, read_all
from _kcutil import wait_for
from kafkacore.embedded_cluster import EmbeddedKafkaCluster

SETTINGS = {"min.insync.replicas": "2", "default.replication.factor": "3", "num.partitions": "3",
            "log.segment.bytes": "1048576"}


@pytest.fixture
def cluster(tmp_path):
    c = EmbeddedKafkaCluster(tmp_path, brokers=3, settings=SETTINGS)
    try:
        yield c.start()
    finally:
        c.stop()


def describe(cluster, topic):
    md = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(topic, timeout=10)
    t = md.topics[topic]
    assert t.error is None, t.error
    return {p: (m.leader, sorted(m.isrs)) for p, m in t.partitions.items()}


def create(cluster, topic, partitions=3):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)
    wait_for(lambda: len(describe(cluster, topic)) == partitions and all(
        leader >= 0 and len(isr) == 3 for leader, isr in describe(cluster, topic).values()),
        f"{topic}'s leaders and full ISRs", tolerate=(Exception,))


def test_killing_a_leader_loses_nothing_acknowledged(cluster):
    create(cluster, "orders")
    producer = AckedProducer(cluster.bootstrap_servers, "orders")
    stop, errors = threading.Event(), []
    thread = produce_in_background(producer, stop, errors)
    wait_for(lambda: len(producer.acked) >= 200, "records acknowledged before the fault")
    victim = describe(cluster, "orders")[0][0]
    cluster.kill(victim)
    # the controller hears the session end at once and moves the leaderships away
    wait_for(lambda: all(leader not in (-1, victim) for leader, _ in describe(cluster, "orders").values()),
             f"leaders other than broker {victim}", tolerate=(Exception,))
    acked_then = len(producer.acked)
    wait_for(lambda: len(producer.acked) >= acked_then + 200, "records acknowledged after the failover")
    cluster.brokers[victim].start()
    # the restarted broker catches up from the new leaders and joins every ISR again
    wait_for(lambda: all(len(isr) == 3 for _, isr in describe(cluster, "orders").values()),
             f"broker {victim} back in every ISR", tolerate=(Exception,))
    stop.set()
    thread.join(60)
    producer.close()
    assert errors == []
    check_history(producer.acked, read_all(cluster.bootstrap_servers, "orders", 3))


def test_the_controller_moves_when_its_broker_dies(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    first = admin.describe_cluster().result(10).controller.id
    cluster.kill(first)
    survivors = [b for b in cluster.brokers if b != first]
    survivor_admin = AdminClient({"bootstrap.servers": ",".join(cluster.brokers[b].address for b in survivors)})

    def new_controller():
        c = survivor_admin.describe_cluster().result(10).controller
        return c is not None and c.id in survivors and c.id

    wait_for(new_controller, "a new controller among the survivors", tolerate=(Exception,))
    # and it controls: a topic created now gets leaders on the live brokers (rf 2 of the 2 left)
    survivor_admin.create_topics([NewTopic("after", 2, 2)])["after"].result(30)
    wait_for(lambda: all(leader in survivors for leader, _ in describe_on(survivor_admin, "after").values()),
             "leaders of a topic created after the failover", tolerate=(Exception,))


def describe_on(admin, topic):
    t = admin.list_topics(topic, timeout=10).topics[topic]
    assert t.error is None, t.error
    return {p: (m.leader, sorted(m.isrs)) for p, m in t.partitions.items()}


def test_a_stopped_cluster_starts_again_with_its_topics_and_records(tmp_path):
    with EmbeddedKafkaCluster(tmp_path, brokers=3, settings=SETTINGS) as c:
        create(c, "kept")
        producer = AckedProducer(c.bootstrap_servers, "kept")
        producer.send(300)
        producer.close()
        before = read_all(c.bootstrap_servers, "kept", 3)
    with EmbeddedKafkaCluster(tmp_path, brokers=3, settings=SETTINGS) as again:
        wait_for(lambda: all(leader > 0 and len(isr) == 3 for leader, isr in describe(again, "kept").values()),
                 "the kept topic led again", tolerate=(Exception,))
        assert read_all(again.bootstrap_servers, "kept", 3) == before
        check_history(producer.acked, before)


def test_an_unclean_election_is_counted_by_the_controller(tmp_path):
    """RF=2 on brokers 1 and 2 with unclean.leader.election.enable: 2 stops (and leaves the ISR),
    1 dies, 2 returns and is elected from outside the ISR; its controller's
    kafka_controller_controllerstats_uncleanleaderelections_total says 1 (Kafka's
    ControllerStats UncleanLeaderElectionsPerSec, read by Strimzi's dashboard)."""
    import asyncio

    from _exposition import parse_exposition, value
    from kafkacore.broker.metrics import BrokerMetrics

    def unclean_elections(broker):
        async def render():
            return BrokerMetrics(broker.server).render()
        text = asyncio.run_coroutine_threadsafe(render(), broker.server.loop).result(10)  # on its loop
        return value(parse_exposition(text)[0], "kafka_controller_controllerstats_uncleanleaderelections_total")

    with EmbeddedKafkaCluster(tmp_path, brokers=2, settings={"min.insync.replicas": "1"}) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic("dirty", num_partitions=1, replica_assignment=[[1, 2]],
                                      config={"unclean.leader.election.enable": "true"})])["dirty"].result(30)
        wait_for(lambda: describe(c, "dirty") == {0: (1, [1, 2])}, "leader 1, ISR [1, 2]", tolerate=(Exception,))
        assert [unclean_elections(b) for b in c.brokers.values()] == [0, 0]
        c.brokers[2].stop()  # a controlled shutdown takes it out of the ISR
        c.kill(1)
        c.brokers[2].start()
        wait_for(lambda: describe(c, "dirty")[0][0] == 2, "broker 2 elected from outside the ISR",
                 tolerate=(Exception,))
        assert unclean_elections(c.brokers[2]) == 1
        del admin  # no client outlives the cluster
