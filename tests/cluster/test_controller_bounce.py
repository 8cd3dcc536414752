"""Bouncing the controller under acks=all load (issue 26): three real brokers and a real
ZooKeeper, RF=3 with min.insync.replicas=2, an idempotent acks=all producer (confluent-kafka)
writing throughout. Again and again the test SIGKILLs the controller - after a preferred-leader
election, so that it also leads a partition - and restarts it 4-7 s later, which is when the
other brokers elect a new controller: the restarted broker re-registers in the same moment.

After every bounce each partition must acknowledge new acks=all writes within the ZooKeeper
session timeout plus a few seconds, and at the end every acknowledged record is read back once,
in per-key order. Before the fix a leader that restarted between two controllers kept its leader
epoch and its followers never fetched from it again: the partition refused acks=all for good.

    KAFKACORE_CONTROLLER_BOUNCES=20 pytest tests/cluster/test_controller_bounce.py -s   # longer
"""
import json
import os
import random
import threading
import time

from confluent_kafka import ElectionType, TopicPartition
from kazoo.client import KazooClient

from _cluster import CLUSTER_SETTINGS, admin, create_topic, wait_for
from _history import AckedProducer, check_history, produce_in_background, read_all

TOPIC = "controller-bounce"
PARTITIONS = 3
SESSION_S = int(CLUSTER_SETTINGS["zookeeper.session.timeout.ms"]) / 1000
# writable again within the session timeout (the dead broker's partitions move only then) plus
# this much: elections, LeaderAndIsr, the followers' truncation and catch-up, the producer's retry
AVAILABLE_WITHIN_S = SESSION_S + 12


def controller_id(zk):
    data, _stat = zk.get("/controller")
    return json.loads(data)["brokerid"]


def acked_ends(producer):
    """{partition: the highest acknowledged offset}."""
    with producer._lock:
        ends = {}
        for partition, offset in producer.acked.values():
            ends[partition] = max(ends.get(partition, -1), offset)
    return ends


def test_controller_bounces_leave_every_partition_writable(cluster):
    bounces = int(os.environ.get("KAFKACORE_CONTROLLER_BOUNCES", "5"))
    rng = random.Random(int(os.environ.get("KAFKACORE_CONTROLLER_BOUNCE_SEED", time.time_ns() % 1_000_000)))
    create_topic(cluster, TOPIC, partitions=PARTITIONS, rf=3)
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    p = AckedProducer(cluster.bootstrap_servers, TOPIC, **{"message.timeout.ms": 120000, "request.timeout.ms": 5000})
    stop = threading.Event()
    producer_errors = []

    thread = produce_in_background(p, stop, producer_errors)
    recoveries = []
    try:
        wait_for(lambda: len(acked_ends(p)) == PARTITIONS, "acknowledgements from every partition", 60)
        for i in range(bounces):
            # the preferred leaders back (one partition each), so the controller leads one too
            client = admin(cluster)  # kept alive until the future resolves: its handle owns the request
            client.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, n) for n in range(PARTITIONS)]).result(30)
            victim = controller_id(zk)
            killed = time.monotonic()
            cluster.brokers[victim].kill()
            time.sleep(rng.uniform(4.0, 7.0))  # the controller stays down a random while
            cluster.brokers[victim].start()  # registers once its old session has expired
            restarted = time.monotonic()
            before = acked_ends(p)
            wait_for(lambda b=before: all(acked_ends(p).get(n, -1) > b.get(n, -1) for n in range(PARTITIONS)),
                     f"bounce {i + 1} (broker {victim}): new acks=all writes acknowledged on every partition",
                     AVAILABLE_WITHIN_S, 0.05)
            recoveries.append(time.monotonic() - restarted)
            print(f"  bounce {i + 1}: controller {victim} killed, restarted {restarted - killed:.1f} s later; every "
                  f"partition writable {recoveries[-1]:.1f} s after the restart, {time.monotonic() - killed:.1f} s "
                  f"after the kill (new controller {controller_id(zk)})")
            assert not producer_errors, producer_errors
    finally:
        stop.set()
        thread.join(60)
        for b in cluster.brokers.values():
            if not b.running:
                b.start()
        zk.stop()
        zk.close()
    p.flush(120)
    check_history(p.acked, read_all(cluster.bootstrap_servers, TOPIC, PARTITIONS, timeout=120))
    assert not p.failed, p.failed[:5]
    print(f"controller bounces: {bounces}, writable again within {max(recoveries):.1f} s at worst "
          f"(limit {AVAILABLE_WITHIN_S:.0f} s), {len(p.acked)} acknowledged")
