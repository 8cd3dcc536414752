"""Issue 29: a KIP-932 share group's state across a broker kill and a leader failover, on three
`kafkacore serve` brokers and a real ZooKeeper, read by two confluent-kafka ShareConsumers
(implicit acknowledgement, each poll's records accepted by commit_sync).

Midway the leader of the topic's one partition (the share-partition's leader) is killed with
SIGKILL; the consumers carry on at the new leader, which reads the share state back from the
share coordinator. The history of every delivery then says: every offset was delivered; none was
delivered again after its acknowledgement was confirmed; a record delivered again (held, not
acknowledged, when its leader died) came with a higher delivery count; no delivery count passed
``group.share.delivery.count.limit``. After the killed broker is back, a new member of the group
receives only a record produced after everything was acknowledged."""
import time
from collections import Counter

import pytest

from _cluster import CLUSTER_SETTINGS, admin, client_conf, create_topic, ensure_all_running, new_cluster, \
    topic_metadata, wait_for
from _zookeeper import skip_or_fail_without_zookeeper

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType  # noqa: E402

if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

pytestmark = pytest.mark.timeout(240)

LOCK_MS, DELIVERY_LIMIT = 2000, 5
SHARE_SETTINGS = {
    "group.share.session.timeout.ms": "4000", "group.share.min.session.timeout.ms": "1000",
    "group.share.heartbeat.interval.ms": "300", "group.share.min.heartbeat.interval.ms": "100",
    "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(DELIVERY_LIMIT)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    skip_or_fail_without_zookeeper()
    c = new_cluster(tmp_path_factory.mktemp("share-history"), brokers=3, protocol="plaintext",
                    settings={**CLUSTER_SETTINGS, **SHARE_SETTINGS})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def produce(cluster, topic, values):
    """acks=all, in batches of 10: the broker hands out whole batches (KIP-932), so with
    max.poll.records 10 a poll takes one batch and the kill falls between polls."""
    p = confluent_kafka.Producer({**client_conf(cluster), "acks": "all", "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, b"%d" % v, partition=0)
        if i % 10 == 9:
            assert p.flush(60) == 0
    assert p.flush(60) == 0


def earliest(cluster, group):
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    client = admin(cluster)  # kept alive until the future resolves: its handle owns the request
    client.incremental_alter_configs([res])[res].result(30)


def share_consumer(cluster, group, topic, name):
    c = confluent_kafka.ShareConsumer({**client_conf(cluster), "group.id": group, "client.id": name,
                                       "max.poll.records": 10})
    c.subscribe([topic])
    return c


class History:
    """Every delivery (offset, delivery count, member) in order, and the offsets whose
    acceptance a commit_sync confirmed; each delivery is checked as it comes."""

    def __init__(self):
        self.deliveries = []
        self.acknowledged = set()
        self.violations = []
        # records a member held (acquired, unacknowledged) when the partition's leader died: the
        # new leader knows only the persisted state, and acquisitions are not written (Kafka's
        # SharePartition writes after acknowledgements and lock expiries), so they come again
        # with their count started afresh
        self.held_at_leader_change = set()

    def delivered(self, member, m):
        offset, count = m.offset(), m.delivery_count()
        before = [k for o, k, _ in self.deliveries if o == offset]
        if offset in self.acknowledged:
            self.violations.append(f"offset {offset} delivered to {member} (count {count}) after its acknowledgement")
        if before and count <= max(before) and not (offset in self.held_at_leader_change and count == 1):
            self.violations.append(f"offset {offset} delivered again to {member} with count {count}, "
                                   f"not above its earlier {before}")
        if not 1 <= count <= DELIVERY_LIMIT:
            self.violations.append(f"offset {offset}: delivery count {count} outside 1..{DELIVERY_LIMIT}")
        self.deliveries.append((offset, count, member))

    def offsets(self):
        return {o for o, _, _ in self.deliveries}


def consume_round(history, consumers):
    """One poll of each member, each poll's records then accepted by commit_sync (implicit mode);
    only a commit_sync answered without error makes them acknowledged - one failing across the
    failover leaves them to come again."""
    for name, c in consumers.items():
        got = []
        for m in c.poll(0.3):
            if m.error() is None:
                history.delivered(name, m)
                got.append(m.offset())
        if not got:
            continue
        try:
            results = c.commit_sync(15)
        except confluent_kafka.KafkaException:
            continue
        if results and all(e is None for e in results.values()):
            history.acknowledged.update(got)


def hold(history, consumer, name):
    """A poll whose records the member holds, not yet acknowledged, when the kill comes."""
    got = []

    def polled():
        for m in consumer.poll(0.3):
            if m.error() is None:
                history.delivered(name, m)
                got.append(m.offset())
        return got
    return set(wait_for(polled, f"{name} to hold records", 30))


def new_share_topic(cluster, topic, group, n):
    ensure_all_running(cluster)
    create_topic(cluster, topic, partitions=1, rf=3)
    earliest(cluster, group)
    produce(cluster, topic, range(n))


def consume_across(cluster, topic, group, n, kill):
    """Two members read ``topic`` to its end; once a third is delivered, m1 takes a poll of
    records and holds them while ``kill()`` SIGKILLs a broker. The History, checked."""
    history = History()
    consumers = {name: share_consumer(cluster, group, topic, name) for name in ("m1", "m2")}
    try:
        wait_for(lambda: consume_round(history, consumers) or len(history.offsets()) >= n // 3,
                 "a third of the records delivered before the kill", 60)
        held = hold(history, consumers["m1"], "m1")
        killed_at = len(history.offsets())
        kill(held, history)
        wait_for(lambda: consume_round(history, consumers) or len(history.offsets()) == n,
                 lambda: f"every offset delivered, missing {sorted(set(range(n)) - history.offsets())[:20]}", 90)
        for c in consumers.values():  # the last polls' records accepted
            wait_for(lambda: c.commit_sync(15) is not None, "the last acknowledgements", 30)
    finally:
        for c in consumers.values():
            c.close()
    assert history.violations == [], (f"{history.violations[:5]}; held at the kill: {sorted(held)}; "
                                      f"deliveries (offset, count, member): {history.deliveries}")
    assert killed_at < n, "the kill came midway"
    assert {m for _, _, m in history.deliveries} == {"m1", "m2"}, "both members read"
    return history


def nothing_left(cluster, topic, group, n):
    """A new member of the group receives only a record produced now (offset ``n``, its first
    delivery): every earlier one was acknowledged, and stays so."""
    produce(cluster, topic, [n])
    late = share_consumer(cluster, group, topic, "late")
    seen = []
    try:
        def polled():
            seen.extend((m.offset(), m.delivery_count()) for m in late.poll(0.3) if m.error() is None)
            return seen
        wait_for(polled, "the record produced last", 60)
        late.commit_sync(15)
        # a lock's length more: a record still held by a closed member would be free by then
        deadline = time.monotonic() + LOCK_MS / 1000 + 1
        while time.monotonic() < deadline:
            polled()
    finally:
        late.close()
    assert seen == [(n, 1)]


def test_each_record_accepted_once_across_a_leader_kill(cluster):
    topic, group, n = "share-history", "share-history-group", 200
    new_share_topic(cluster, topic, group, n)
    leader = topic_metadata(cluster, topic)[0].leader

    def kill(held, history):
        history.held_at_leader_change |= held
        cluster.brokers[leader].kill()
    try:
        history = consume_across(cluster, topic, group, n, kill)
        assert topic_metadata(cluster, topic)[0].leader not in (leader, -1)
        # what m1 held came again (count afresh at the new leader, see History); nothing else did
        again = {o for o, times in Counter(o for o, _, _ in history.deliveries).items() if times > 1}
        assert again <= history.held_at_leader_change
    finally:
        cluster.brokers[leader].kill()
        cluster.brokers[leader].start()
    ensure_all_running(cluster)
    nothing_left(cluster, topic, group, n)


def test_share_state_kept_across_a_share_coordinator_kill(cluster):
    """The same history when the broker killed is the share coordinator of the share-partition
    (the leader of its __share_group_state partition) and not the partition's leader: a group is
    chosen whose share coordinator is another broker, so the partition's leader stays."""
    from _cluster import java_conf
    from kafkacore.client.admin import AdminClient
    from kafkacore.coordinator.share_state_log import coordinator_key
    from kafkacore.protocol.kafka_uuid import uuid_from_text
    from test_share_state_failover import _coordinator

    topic, n = "share-history-sc", 200
    ensure_all_running(cluster)
    create_topic(cluster, topic, partitions=1, rf=3)
    produce(cluster, topic, range(n))
    with AdminClient(java_conf(cluster)["bootstrap.servers"]) as kc_admin:
        topic_id = uuid_from_text(kc_admin.describe_topics([topic])[topic].topic_id)
    leader = topic_metadata(cluster, topic)[0].leader

    def coordinator_of(group):
        return wait_for(lambda: (lambda b: b if b > 0 else None)(_coordinator(cluster, leader, coordinator_key(
            group, topic_id, 0))), f"the share coordinator of {group}", 30)
    group, coordinator = next((g, c) for g, c in ((g, coordinator_of(g)) for g in (
        f"share-history-sc-{i}" for i in range(30))) if c != leader)
    earliest(cluster, group)

    def kill(held, history):
        cluster.brokers[coordinator].kill()
    try:
        consume_across(cluster, topic, group, n, kill)
    finally:
        cluster.brokers[coordinator].kill()
        cluster.brokers[coordinator].start()
    ensure_all_running(cluster)
    nothing_left(cluster, topic, group, n)
