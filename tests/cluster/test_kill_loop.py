"""The bounded kill loop: three real brokers and a real ZooKeeper, RF=3 with
min.insync.replicas=2, an idempotent acks=all producer (confluent-kafka) writing throughout,
while the test SIGKILLs a broker - often the leader of a partition being written - and restarts
it, again and again, for a bounded wall time. At the end every acknowledged record is read back
exactly once and in per-key order, and every replica's log of every partition is byte-identical.

    KAFKACORE_KILL_LOOP_SECONDS=1800 pytest tests/cluster/test_kill_loop.py -s   # a long soak
    KAFKACORE_KILL_LOOP_SEED=1234 ...              # the same choices again (timing varies)

bench/stress_cluster.sh runs it in a loop for a soak."""
import json
import os
import random
import threading
import time

from confluent_kafka import KafkaError, KafkaException
from kazoo.client import KazooClient

from _cluster import CLUSTER_SETTINGS
from _history import AckedProducer, check_history, produce_in_background, read_all
from _cluster import create_topic, wait_for, wait_replicas_identical

TOPIC = "kill-loop"
PARTITIONS = 3
SESSION_S = int(CLUSTER_SETTINGS["zookeeper.session.timeout.ms"]) / 1000


def loop_seconds():
    return float(os.environ.get("KAFKACORE_KILL_LOOP_SECONDS", "90"))


def partition_states(zk, topic, partitions):
    """The controller's and leaders' truth: {partition: state znode JSON}."""
    return {p: json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0]) for p in range(partitions)}


def registration_replaced(zk, broker_id, old):
    """The killed incarnation's /brokers/ids/N is gone (its session expired) or a newer one
    holds it."""
    st = zk.exists(f"/brokers/ids/{broker_id}")
    return st is None or old is None or st.czxid != old.czxid


def isr_full(zk, brokers):
    states = partition_states(zk, TOPIC, PARTITIONS)
    return all(s["leader"] in brokers and sorted(s["isr"]) == sorted(brokers) for s in states.values())


def test_kill_loop_loses_and_duplicates_nothing(cluster):
    seconds = loop_seconds()
    seed = int(os.environ.get("KAFKACORE_KILL_LOOP_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    print(f"\nkill loop: {seconds:.0f} s, seed {seed} (KAFKACORE_KILL_LOOP_SEED replays the choices)")
    create_topic(cluster, TOPIC, partitions=PARTITIONS, rf=3)
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    # a long message timeout: a partition may be offline for a session timeout and more while
    # two of its replicas restart; a failed delivery here means the cluster stayed unavailable.
    # A short request timeout: writes waiting on a dead follower time out and come back as
    # idempotent retries (the duplicate path) while the ISR shrinks
    p = AckedProducer(cluster.bootstrap_servers, TOPIC, **{"message.timeout.ms": 180000, "request.timeout.ms": 5000})
    stop = threading.Event()
    producer_errors = []

    thread = produce_in_background(p, stop, producer_errors)
    kills = []
    try:
        time.sleep(2)  # pacing: traffic before the first kill (the producer's first ack is in already)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not producer_errors:
            states = partition_states(zk, TOPIC, PARTITIONS)
            leaders = [s["leader"] for s in states.values() if s["leader"] in cluster.brokers]
            if leaders and rng.random() < 0.6:
                victim, why = rng.choice(leaders), "a leader"
            else:
                victim, why = rng.choice(sorted(cluster.brokers)), "any"
            registration = zk.exists(f"/brokers/ids/{victim}")
            killed_at = time.monotonic()
            cluster.brokers[victim].kill()
            time.sleep(rng.uniform(0.5, 4.0))  # pacing: the broker stays down a random while
            # a restart while its old session still holds /brokers/ids/N would be refused
            # (BrokerIdInUseError, as Kafka's): the operator's restart waits the session out
            wait_for(lambda v=victim, r=registration: registration_replaced(zk, v, r),
                     f"broker {victim}'s old registration to expire", SESSION_S * 3)
            cluster.brokers[victim].start()
            down_s = time.monotonic() - killed_at
            waited = rng.random() < 0.7
            if waited:
                # the restarted broker must truncate, catch up and rejoin every ISR
                wait_for(lambda: isr_full(zk, cluster.brokers), f"broker {victim} back in every ISR", 120, 0.25)
            else:
                time.sleep(rng.uniform(0.5, 3.0))  # the next kill may hit a broker still catching up
            kills.append((victim, why, round(down_s, 1), waited))
            print(f"  killed broker {victim} ({why}), down {down_s:.1f} s, "
                  f"{'back in every ISR' if waited else 'not waiting for the ISR'}; {len(p.acked)} acknowledged")
    finally:
        for b in cluster.brokers.values():
            if not b.running:
                b.start()
    try:
        wait_for(lambda: isr_full(zk, cluster.brokers), "every partition led with a full ISR", 120, 0.25)
    finally:
        stop.set()
        thread.join(60)
        zk.stop()
        zk.close()
    try:
        left = p.producer.flush(180)
    except (KafkaException, KafkaError) as e:
        producer_errors.append(e)
        left = None
    # the history first: when something went wrong it says what was lost or doubled
    read = check_history(p.acked, read_all(cluster.bootstrap_servers, TOPIC, PARTITIONS, timeout=120))
    assert not producer_errors, producer_errors
    assert left == 0, f"{left} records still unacknowledged after 180 s"
    assert kills, "the loop killed nothing"
    assert not p.failed, f"{len(p.failed)} deliveries failed: {p.failed[:5]}"
    print(f"kill loop: {len(kills)} kills ({sum(1 for k in kills if k[1] == 'a leader')} of a leader), "
          f"{len(p.acked)} acknowledged, {read} read back")
    wait_replicas_identical(cluster, TOPIC, PARTITIONS, timeout=120)
