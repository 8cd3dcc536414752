"""confluent-kafka's ShareConsumer (librdkafka 2.16: ShareGroupHeartbeat, ShareFetch and
ShareAcknowledge v1) against a real ``kafkacore serve`` process, several members on one
partition: every record delivered and accepted once when nothing fails; a member killed
(SIGKILL) while it holds records loses them to the others (its connection's close releases
them, as in Kafka 4.1) and none is lost; released records come back with their delivery count
raised; a rejected record, or one delivered ``group.share.delivery.count.limit`` times, is never
delivered again."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from _kcutil import wait_for
from broker_client import BrokerProcess, auto_create

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

LOCK_MS = 2000
DELIVERY_LIMIT = 3
SETTINGS = {"num.partitions": "1", "offsets.topic.num.partitions": "1",
            "group.share.session.timeout.ms": "3000", "group.share.min.session.timeout.ms": "1000",
            "group.share.heartbeat.interval.ms": "200", "group.share.min.heartbeat.interval.ms": "100",
            "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": str(LOCK_MS),
            "group.share.delivery.count.limit": str(DELIVERY_LIMIT)}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("sharec") / "data", settings=SETTINGS) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    return confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})


_n = iter(range(1000))


def fresh(broker, admin, count, batch=10):
    """A new one-partition topic holding ``count`` records in batches of ``batch``, and a group
    reading it from the start (share.auto.offset.reset=earliest, set on the GROUP resource)."""
    topic, group = f"sc-{next(_n)}-{time.monotonic_ns()}", f"scg-{next(_n)}"
    with broker.client() as c:
        auto_create(c, topic)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, b"%d" % i, partition=0)
        if i % batch == batch - 1:
            assert p.flush(30) == 0
    assert p.flush(30) == 0
    res = confluent_kafka.admin.ConfigResource(
        confluent_kafka.admin.ResourceType.GROUP, group, incremental_configs=[confluent_kafka.admin.ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    return topic, group


def share_consumer(broker, group, topic, **conf):
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    return c


def poll(c, timeout=0.5):
    out = []
    for m in c.poll(timeout):
        assert m.error() is None, m.error()
        out.append(m)
    return out


def test_several_members_on_one_partition_get_every_record_once(broker, admin):
    n = 300
    topic, group = fresh(broker, admin, n)
    # max.poll.records: the broker acquires whole batches up to it (KIP-932), 10 records here
    consumers = [share_consumer(broker, group, topic, **{"client.id": f"m{i}", "max.poll.records": 10})
                 for i in range(3)]
    got = {i: [] for i in range(3)}
    try:
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < n and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for m in poll(c, 0.2):
                    assert m.delivery_count() == 1
                    got[i].append(int(m.value()))
        for c in consumers:
            c.commit_sync(30)  # the last poll's records accepted (implicit mode)
    finally:
        for c in consumers:
            c.close()
    every = sorted(v for vs in got.values() for v in vs)
    assert every == list(range(n))  # each exactly once
    assert sum(1 for vs in got.values() if vs) >= 2, {i: len(v) for i, v in got.items()}  # shared, not one reader


def test_release_raises_the_delivery_count_and_reject_and_the_limit_archive(broker, admin):
    topic, group = fresh(broker, admin, 3)  # 0: accepted, 1: rejected, 2: released until archived
    c = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    deliveries = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            batch = poll(c)
            for m in batch:
                v = int(m.value())
                deliveries.append((v, m.delivery_count()))
                kind = {0: confluent_kafka.AcknowledgeType.ACCEPT, 1: confluent_kafka.AcknowledgeType.REJECT}.get(
                    v, confluent_kafka.AcknowledgeType.RELEASE)
                c.acknowledge(m, kind)
            if batch:
                c.commit_sync(30)
            if deliveries.count((2, DELIVERY_LIMIT)) and not batch:
                break
        # nothing more comes: 2 was archived at its third delivery
        assert poll(c, 1.0) == []
    finally:
        c.close()
    assert [d for d in deliveries if d[0] != 2] == [(0, 1), (1, 1)]
    assert [d for d in deliveries if d[0] == 2] == [(2, k) for k in range(1, DELIVERY_LIMIT + 1)]


HOLDER = textwrap.dedent("""
    import sys, time, confluent_kafka
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                                       "share.acknowledgement.mode": "explicit", "client.id": "doomed"})
    c.subscribe([sys.argv[3]])
    while True:
        got = [m for m in c.poll(0.5) if m.error() is None]
        if got:
            print("holding", ",".join(m.value().decode() for m in got), flush=True)
            time.sleep(600)  # never acknowledged
""")


def test_a_killed_member_holding_records_loses_them_to_the_others(broker, admin):
    n = 50
    topic, group = fresh(broker, admin, n)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, broker.bootstrap, group, topic], stdout=subprocess.PIPE,
                            env={**os.environ}, text=True)
    survivor = None
    try:
        line = proc.stdout.readline()
        assert line.startswith("holding "), line
        held = {int(v) for v in line.split()[1].split(",")}
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        survivor = share_consumer(broker, group, topic)
        seen = {}

        def all_seen():
            for m in poll(survivor, 0.3):
                seen[int(m.value())] = m.delivery_count()
            return len(seen) == n
        wait_for(all_seen, what=lambda: f"every record delivered to the survivor, missing "
                                        f"{sorted(set(range(n)) - set(seen))}", timeout=30)
        survivor.commit_sync(30)
        # the dead member's records came again, their second delivery; the rest once
        assert {v for v, k in seen.items() if k == 2} == held
        assert all(k == 1 for v, k in seen.items() if v not in held)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        proc.stdout.close()
        if survivor is not None:
            survivor.close()
