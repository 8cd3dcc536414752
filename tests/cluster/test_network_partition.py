"""A network partition against real processes: ZooKeeper and three `kafkacore serve` brokers,
each on a host of its own (a network namespace, tests/cluster/_netns.py), and the test's
confluent-kafka clients on the root namespace, which reaches every host.

The leader of a topic's partitions (also the controller) is cut off from ZooKeeper and from its
followers - packets dropped silently both ways - while the producer still reaches it, for longer
than zookeeper.session.timeout.ms. ZooKeeper expires its session, a new controller elects new
leaders among the followers; the old leader cannot shrink its ISR (the write needs ZooKeeper),
so its high watermark stays put and no acks=all write it takes is acknowledged. After the heal it
learns it was deposed, truncates what only it had, and follows. Every acknowledged record is
read back exactly once and every replica's log is byte-identical.

Needs root and iproute2 (`ip netns`, veth, bridge): skipped without them, except in CI (CI set),
where it fails instead."""
import json
import os
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from _cluster import CLUSTER_SETTINGS
from _zookeeper import skip_or_fail_without_zookeeper
from _history import AckedProducer, check_history, read_all
from _netns import Network, NetnsUnavailable
from kafkacore.cluster.local_cluster import LocalBroker, LocalZooKeeper
from _cluster import client_conf, new_cluster, register_broker, wait_for, wait_replicas_identical

TOPIC = "cut-off"
PARTITIONS = 2
SESSION_S = int(CLUSTER_SETTINGS["zookeeper.session.timeout.ms"]) / 1000
CUT_S = 2.5 * SESSION_S  # well past the session: the cluster must give up on the leader


@pytest.fixture(scope="module")
def net():
    n = Network(["zk", "b1", "b2", "b3"])
    try:
        n.create()
    except NetnsUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"network namespaces unavailable in CI: {e}")
        pytest.skip(f"network namespaces unavailable: {e}")
    try:
        yield n
    finally:
        n.destroy()


@pytest.fixture(scope="module")
def ns_cluster(net, tmp_path_factory):
    skip_or_fail_without_zookeeper()
    root = str(tmp_path_factory.mktemp("netns-cluster"))
    hosts = {i: net.address(f"b{i}") for i in (1, 2, 3)}
    c = new_cluster(root, brokers=3, hosts=hosts.values())
    # every process on its own host; the well-known ports, since every host has its own address
    c.zookeeper = LocalZooKeeper(os.path.join(root, "zookeeper"), port=2181, host=net.address("zk"),
                                 prefix=net.exec_prefix("zk"))
    c.brokers = {i: LocalBroker(i, root, c.zookeeper.connect_string, port=9092, settings=CLUSTER_SETTINGS,
                                host=hosts[i], prefix=net.exec_prefix(f"b{i}")) for i in (1, 2, 3)}
    for b in c.brokers.values():
        if c.security is not None:
            c.secure(b, 9093)
        register_broker(c, b)
    try:
        c.start()
        yield c
    finally:
        net.heal()  # a controlled shutdown needs the controller
        c.stop()
        if os.environ.get("KAFKACORE_CLUSTER_LOGS"):
            for path in [b.log_path for b in c.brokers.values()] + [c.zookeeper.log_path]:
                with open(path, errors="replace") as f:
                    print(f"--- {path}\n" + "".join(f.readlines()[-80:]))


def partition_states(zk):
    return {p: json.loads(zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")[0]) for p in range(PARTITIONS)}


def test_a_leader_cut_off_from_zookeeper_and_followers_acknowledges_nothing_that_is_lost(ns_cluster, net):
    c = ns_cluster
    zk = KazooClient(c.zookeeper.connect_string)
    zk.start(10)
    try:
        # both partitions led by the controller: the cut then moves the controller too
        old = json.loads(zk.get("/controller")[0])["brokerid"]
        others = [b for b in sorted(c.brokers) if b != old]
        admin = AdminClient(client_conf(c))
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS,
                                      replica_assignment=[[old] + others, [old] + others[::-1]])],
                            operation_timeout=30)[TOPIC].result(60)
        wait_for(lambda: all(s["leader"] == old and len(s["isr"]) == 3 for s in partition_states(zk).values()),
                 f"broker {old} leading {TOPIC} with a full ISR", 60)
        # a short request timeout: the old leader answers REQUEST_TIMED_OUT for the writes it
        # cannot commit, and the producer sends the same batches again (same producer id and
        # sequences) to the broker its metadata names - the old leader itself, whose metadata
        # is stale - so the cut exercises the leader's answer to an idempotent retry of a batch
        # it holds but has not committed
        p = AckedProducer(c.bootstrap_servers, TOPIC, **{"message.timeout.ms": 120000, "request.timeout.ms": 5000})
        fatal = []

        def produce_for(seconds):
            # a fatal producer error (e.g. OUT_OF_ORDER_SEQUENCE_NUMBER after an acknowledged
            # write vanished) stops the sending; the history below then says what was lost
            if fatal:
                time.sleep(seconds)  # the scenario keeps its timing without a producer
                return
            try:
                p.run_for(seconds, rate=300)
            except (KafkaException, KafkaError) as e:
                fatal.append(e)

        produce_for(2.0)
        p.flush(30)
        before = partition_states(zk)
        acked_before = len(p.acked)

        net.isolate(f"b{old}", ["zk"] + [f"b{o}" for o in others])
        cut_at = time.monotonic()
        elected_s = None
        try:
            # the producer keeps writing through the cut: it still reaches the old leader
            while time.monotonic() - cut_at < CUT_S:
                produce_for(0.5)
                states = partition_states(zk)
                if elected_s is None and all(s["leader"] in others and s["leader_epoch"] > before[n]["leader_epoch"]
                                             for n, s in states.items()):
                    elected_s = time.monotonic() - cut_at
            controller = json.loads(zk.get("/controller")[0])["brokerid"]
            old_registered = zk.exists(f"/brokers/ids/{old}") is not None
            acked_during = len(p.acked) - acked_before
        finally:
            net.heal()
        assert elected_s is not None, f"no new leader {CUT_S:.0f} s after the cut: {states}"
        assert all(old not in s["isr"] for s in states.values()), states
        assert controller in others and not old_registered, (controller, old_registered)

        produce_for(3.0)
        try:
            p.producer.flush(120)
        except (KafkaException, KafkaError) as e:  # fatal: what is queued fails, the acked stays
            fatal.append(e)
        # the old leader comes back with a new session, truncates and rejoins every ISR
        wait_for(lambda: all(len(s["isr"]) == 3 for s in partition_states(zk).values()),
                 f"broker {old} back in every ISR", 90, 0.25)
        read = check_history(p.acked, read_all(c.bootstrap_servers, TOPIC, PARTITIONS))
        assert not fatal, fatal
        assert not p.failed, p.failed[:5]
        wait_replicas_identical(c, TOPIC, PARTITIONS)
        print(f"\nnetwork partition: new leaders {elected_s:.1f} s after the cut; {acked_during} acknowledged "
              f"during the {CUT_S:.0f} s cut, {len(p.acked)} in all, {read} read back")
    finally:
        zk.stop()
        zk.close()
