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
import signal
import time

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

    def delivered(self, member, m):
        offset, count = m.offset(), m.delivery_count()
        before = [k for o, k, _ in self.deliveries if o == offset]
        if offset in self.acknowledged:
            self.violations.append(f"offset {offset} delivered to {member} (count {count}) after its acknowledgement")
        if before and count <= max(before):
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


def test_each_record_accepted_once_across_a_leader_kill(cluster):
    ensure_all_running(cluster)
    topic, group, n = "share-history", "share-history-group", 200
    create_topic(cluster, topic, partitions=1, rf=3)
    earliest(cluster, group)
    produce(cluster, topic, range(n))
    leader = topic_metadata(cluster, topic)[0].leader
    history = History()
    consumers = {name: share_consumer(cluster, group, topic, name) for name in ("m1", "m2")}
    try:
        wait_for(lambda: consume_round(history, consumers) or len(history.offsets()) >= n // 3,
                 "a third of the records delivered before the kill", 60)
        killed_at = len(history.offsets())
        cluster.brokers[leader].kill()
        wait_for(lambda: consume_round(history, consumers) or len(history.offsets()) == n,
                 lambda: f"every offset delivered, missing {sorted(set(range(n)) - history.offsets())[:20]}", 90)
        # what the last rounds delivered is accepted too
        wait_for(lambda: consume_round(history, consumers) or history.acknowledged == set(range(n)),
                 lambda: f"every offset acknowledged, not {sorted(set(range(n)) - history.acknowledged)[:20]}", 60)
    finally:
        for c in consumers.values():
            c.close()
    assert history.violations == []
    assert killed_at < n, "the kill came midway"
    assert topic_metadata(cluster, topic)[0].leader not in (leader, -1)
    assert {m for _, _, m in history.deliveries} == {"m1", "m2"}, "both members read"

    cluster.brokers[leader].start()
    ensure_all_running(cluster)
    produce(cluster, topic, [n])  # the one record not yet acknowledged
    late = share_consumer(cluster, group, topic, "late")
    seen = []
    try:
        def next_record():
            seen.extend((m.offset(), m.delivery_count()) for m in late.poll(0.3) if m.error() is None)
            return seen
        wait_for(next_record, "the record produced after the restart", 60)
        late.commit_sync(15)
        # a lock's length more: anything else still in the group would have come by now
        deadline = time.monotonic() + LOCK_MS / 1000 + 1
        while time.monotonic() < deadline:
            next_record()
    finally:
        late.close()
    assert seen == [(n, 1)]


def test_share_state_kept_across_a_share_coordinator_kill(cluster):
    """The same history when the broker killed is the leader of the share-partition's
    __share_group_state partition (its share coordinator) instead."""
    from _cluster import java_conf
    from kafkacore.client.admin import AdminClient
    from test_share_state_failover import _coordinator
    from kafkacore.coordinator.share_state_log import coordinator_key
    from kafkacore.protocol.kafka_uuid import uuid_from_text

    ensure_all_running(cluster)
    topic, group, n = "share-history-sc", "share-history-sc-group", 200
    create_topic(cluster, topic, partitions=1, rf=3)
    earliest(cluster, group)
    produce(cluster, topic, range(n))
    with AdminClient(java_conf(cluster)["bootstrap.servers"]) as kc_admin:
        topic_id = uuid_from_text(kc_admin.describe_topics([topic])[topic].topic_id)
    key = coordinator_key(group, topic_id, 0)
    history = History()
    consumers = {name: share_consumer(cluster, group, topic, name) for name in ("m1", "m2")}
    killed = None
    try:
        wait_for(lambda: consume_round(history, consumers) or len(history.offsets()) >= n // 3,
                 "a third of the records delivered before the kill", 60)
        killed = wait_for(lambda: (lambda b: b if b > 0 else None)(_coordinator(cluster, 1, key)),
                          "the share coordinator", 30)
        cluster.brokers[killed].signal(signal.SIGKILL)
        wait_for(lambda: consume_round(history, consumers) or len(history.offsets()) == n,
                 lambda: f"every offset delivered, missing {sorted(set(range(n)) - history.offsets())[:20]}", 90)
        wait_for(lambda: consume_round(history, consumers) or history.acknowledged == set(range(n)),
                 lambda: f"every offset acknowledged, not {sorted(set(range(n)) - history.acknowledged)[:20]}", 60)
    finally:
        for c in consumers.values():
            c.close()
        if killed is not None:
            cluster.brokers[killed].kill()
            cluster.brokers[killed].start()
    assert history.violations == []
