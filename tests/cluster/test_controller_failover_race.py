"""KIP-380's race, forced (issue 26): the controller, which also leads partitions, is SIGKILLed;
another broker wins the election; the killed broker restarts and re-registers *before* the new
controller reads the live brokers. The new controller then has no earlier view in which the
broker was dead, so only broker epochs can tell it that the broker restarted: the leader's
registration (czxid) is newer than the partition state (mzxid) it leads under.

The gap is made wide and certain by the controller's test hook
(KAFKACORE_TEST_CONTROLLER_FAILOVER_DELAY_S): every new controller waits that long between
winning and reading /brokers/ids, and the test restarts the broker inside the wait. Before the
fix the restarted broker kept leading with the same leader epoch, its followers never fetched
from it again, the ISR shrank to the leader alone and min.insync.replicas=2 refused every
acks=all write, indefinitely."""
import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from _cluster import CLUSTER_SETTINGS, client_conf, new_cluster, wait_for
from _zookeeper import skip_or_fail_without_zookeeper
from kafkacore.cluster.controller import FAILOVER_DELAY_ENV

FAILOVER_DELAY_S = 12.0  # far longer than a broker's restart takes to register (1-3 s here)
SESSION_S = int(CLUSTER_SETTINGS["zookeeper.session.timeout.ms"]) / 1000
TOPIC = "failover-race"


@pytest.fixture
def slow_failover_cluster(tmp_path):
    skip_or_fail_without_zookeeper()
    cluster = new_cluster(tmp_path / "c", brokers=3)
    for b in cluster.brokers.values():
        b.prefix = ["env", f"{FAILOVER_DELAY_ENV}={FAILOVER_DELAY_S}"]
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def state(zk, partition):
    return json.loads(zk.get(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")[0])


def controller(zk):
    got = zk.exists("/controller")
    return json.loads(zk.get("/controller")[0])["brokerid"] if got else None


def produce_acks_all(cluster, partitions, timeout_s):
    """One acks=all record to each partition; the delivery errors (none: every one written to
    min.insync.replicas replicas within timeout_s)."""
    errors = []
    p = Producer({**client_conf(cluster), "acks": "all",
                  "message.timeout.ms": int(timeout_s * 1000), "retry.backoff.ms": 100})
    for n in range(partitions):
        p.produce(TOPIC, value=b"probe", partition=n, on_delivery=lambda err, _m: err and errors.append(err))
    left = p.flush(timeout_s + 10)
    return errors + ([f"{left} undelivered"] if left else [])


def test_leader_restarted_between_two_controllers_gets_a_new_epoch(slow_failover_cluster):
    cluster = slow_failover_cluster
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    try:
        old = wait_for(lambda: controller(zk), "a controller", 60)
        others = [b for b in sorted(cluster.brokers) if b != old]
        client = AdminClient(client_conf(cluster))
        client.create_topics([NewTopic(TOPIC, num_partitions=2, replica_assignment=[[old] + others,
                                                                                    [old] + others[::-1]])],
                             operation_timeout=30)[TOPIC].result(60)
        wait_for(lambda: all(state(zk, n)["leader"] == old and len(state(zk, n)["isr"]) == 3 for n in (0, 1)),
                 f"broker {old} leading both partitions with a full ISR", 60)
        assert produce_acks_all(cluster, 2, 30) == []
        epochs = {n: state(zk, n)["leader_epoch"] for n in (0, 1)}

        cluster.brokers[old].kill()
        new = wait_for(lambda: (c := controller(zk)) is not None and c != old and c,
                       "another broker to win the election", SESSION_S * 4, 0.02)
        elected = time.monotonic()
        cluster.brokers[old].start()  # returns once registered again
        registered = time.monotonic() - elected
        assert registered < FAILOVER_DELAY_S - 2, (
            f"broker {old} took {registered:.1f} s to register: the race was not forced (the new controller "
            f"read the live brokers after {FAILOVER_DELAY_S} s)")

        # the new controller saw the restart through the broker epoch: a new leader epoch for
        # both partitions, and every replica back in the ISR
        wait_for(lambda: all(state(zk, n)["leader_epoch"] > epochs[n] for n in (0, 1)),
                 "a new leader epoch for the partitions the restarted broker led", FAILOVER_DELAY_S + 15)
        with open(cluster.brokers[new].log_path, errors="replace") as f:
            assert f"brokers [{old}] restarted unseen" in f.read()
        start = time.monotonic()
        assert produce_acks_all(cluster, 2, SESSION_S + 10) == []
        wait_for(lambda: all(len(state(zk, n)["isr"]) == 3 for n in (0, 1)), "every replica back in the ISR",
                 SESSION_S + 10)
        print(f"\nrace forced: broker {old} registered {registered:.1f} s after broker {new} was elected; "
              f"acks=all accepted {time.monotonic() - start:.1f} s after the new epoch")
        log_text = Path(cluster.brokers[others[0]].log_path).read_text(errors="replace")
        assert "Traceback" not in log_text and "never retrieved" not in log_text
    finally:
        zk.stop()
        zk.close()
