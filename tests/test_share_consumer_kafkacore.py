"""kafkacore's own ShareConsumer (client/share_consumer.py) against a real ``kafkacore serve``
process, several members on one partition: every record delivered and accepted once (members in
this process and in child processes decoding with the other implementation - the native decoder
or its twin - and through poll_arrow); a mixed group of kafkacore and confluent-kafka members; a
member that holds records without acknowledging loses them when their lock expires, one killed
with SIGKILL loses them at once; released records come back with their delivery count raised; a
rejected record, or one delivered ``group.share.delivery.count.limit`` times, never comes again;
explicit mode's rules."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from _kcutil import NATIVE, SOURCE_ROOT, wait_for
from broker_client import BrokerProcess, auto_create

from kafkacore import AcknowledgeType, ShareConsumer
from kafkacore.client.share_consumer import IllegalStateError
from kafkacore.errors import KafkaConfigError, KafkaError

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

LOCK_MS = 2000
# the lock of the groups whose test is not about locks: a member stalled for a few seconds on a
# loaded 2-core machine must not lose its records there (that would be a redelivery, rightly)
SAFE_LOCK_MS = 20000
DELIVERY_LIMIT = 3
SETTINGS = {"num.partitions": "1", "offsets.topic.num.partitions": "1",
            "group.share.session.timeout.ms": "3000", "group.share.min.session.timeout.ms": "1000",
            "group.share.heartbeat.interval.ms": "200", "group.share.min.heartbeat.interval.ms": "100",
            "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": str(LOCK_MS),
            "group.share.delivery.count.limit": str(DELIVERY_LIMIT)}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("kcshare") / "data", settings=SETTINGS) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    return confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})


_n = iter(range(1000))


def fresh(broker, admin, count, batch=10, lock_ms=None):
    """A new one-partition topic holding ``count`` records (values "0".."count-1") in batches of
    ``batch``, and a group reading it from the start (share.auto.offset.reset=earliest), with
    ``lock_ms`` as its share.record.lock.duration.ms when given (else the broker's LOCK_MS)."""
    topic, group = f"kcs-{next(_n)}-{time.monotonic_ns()}", f"kcsg-{next(_n)}"
    with broker.client() as c:
        auto_create(c, topic)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, b"%d" % i, partition=0)
        if i % batch == batch - 1:
            assert p.flush(30) == 0
    assert p.flush(30) == 0
    configs = {"share.auto.offset.reset": "earliest"}
    if lock_ms is not None:
        configs["share.record.lock.duration.ms"] = str(lock_ms)
    res = confluent_kafka.admin.ConfigResource(
        confluent_kafka.admin.ResourceType.GROUP, group, incremental_configs=[confluent_kafka.admin.ConfigEntry(
            k, v, incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(30)
    return topic, group


def member(broker, group, topic, **conf):
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    return c


# A kafkacore member in a child process: prints "v delivery_count" per record it accepts,
# "holding v,v,..." and never acknowledges with "hold", stops (commit, close) when argv[4] exists.
CHILD = textwrap.dedent("""
    import os, sys, time
    import pyarrow  # noqa: F401 - imported before records are held: its import outlasts a test's short lock
    from kafkacore import ShareConsumer
    bootstrap, group, topic, stop, how = sys.argv[1:6]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 10,
                       "share.acknowledgement.mode": "explicit" if how == "hold" else "implicit"})
    c.subscribe([topic])
    while not os.path.exists(stop):
        if how == "arrow":
            t = c.poll_arrow(0.2, 10)
            rows = list(zip(t.column("value").to_pylist(), t.column("delivery_count").to_pylist()))
        else:
            rows = [(r.value, r.delivery_count) for r in c.poll(0.2)]
        if how == "hold" and rows:
            print("holding", ",".join(v.decode() for v, _ in rows), flush=True)
            time.sleep(600)
        for v, dc in rows:
            print(v.decode(), dc, flush=True)
    c.commit_sync(30)
    c.close()
""")


class Child:
    def __init__(self, broker, group, topic, tmp_path, how="poll", twin=None):
        self.stop = tmp_path / f"stop-{next(_n)}"
        env = dict(os.environ, PYTHONPATH=SOURCE_ROOT)
        if twin if twin is not None else NATIVE:  # the other decoder than this process's
            env["KAFKACORE_NO_EXTENSIONS"] = "1"
        else:
            env.pop("KAFKACORE_NO_EXTENSIONS", None)
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, broker.bootstrap, group, topic, str(self.stop), how],
                                     stdout=subprocess.PIPE, env=env, text=True)
        self.got = []
        self.lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            if not line.startswith("holding"):
                v, dc = line.split()
                self.got.append((int(v), int(dc)))

    def finish(self):
        self.stop.touch()
        assert self.proc.wait(30) == 0
        self._reader.join(10)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)


def test_members_in_and_out_of_process_get_every_record_once(broker, admin, tmp_path):
    n = 300
    topic, group = fresh(broker, admin, n, lock_ms=SAFE_LOCK_MS)
    children = [Child(broker, group, topic, tmp_path), Child(broker, group, topic, tmp_path, how="arrow")]
    here = member(broker, group, topic, **{"max.poll.records": 10})
    got = []
    try:
        def all_delivered():
            got.extend((int(r.value), r.delivery_count) for r in here.poll(0.2))
            return len(got) + sum(len(ch.got) for ch in children) >= n
        wait_for(all_delivered, what=lambda: f"{n} records delivered, got {len(got)} here and "
                                             f"{[len(ch.got) for ch in children]} in the children", timeout=60)
        assert here.commit_sync(30) in ({}, {(topic, 0): None})
        for ch in children:
            ch.finish()
    finally:
        here.close()
        for ch in children:
            ch.kill()
    every = got + [g for ch in children for g in ch.got]
    assert sorted(v for v, _ in every) == list(range(n)), sorted(every)  # each exactly once
    assert all(dc == 1 for _, dc in every)
    assert sum(1 for part in [got] + [ch.got for ch in children] if part) >= 2  # shared, not one reader
    # all accepted: a new member finds nothing
    with member(broker, group, topic) as late:
        assert late.poll(1.0) == []


def test_a_mixed_group_of_kafkacore_and_confluent_members(broker, admin):
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer")
    n = 200
    topic, group = fresh(broker, admin, n, lock_ms=SAFE_LOCK_MS)
    ours = [member(broker, group, topic, **{"max.poll.records": 10}) for _ in range(2)]
    theirs = [confluent_kafka.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                             "max.poll.records": 10}) for _ in range(2)]
    for c in theirs:
        c.subscribe([topic])
    got = {"ours": [], "theirs": []}
    try:
        def all_delivered():
            for c in ours:
                got["ours"].extend(int(r.value) for r in c.poll(0.1))
            for c in theirs:
                for m in c.poll(0.1):
                    assert m.error() is None, m.error()
                    got["theirs"].append(int(m.value()))
            return len(got["ours"]) + len(got["theirs"]) >= n
        wait_for(all_delivered, what=lambda: f"{n} records, got {got}", timeout=60)
        for c in ours + theirs:
            c.commit_sync(30)
    finally:
        for c in ours + theirs:
            c.close()
    assert sorted(got["ours"] + got["theirs"]) == list(range(n))
    assert got["ours"] and got["theirs"], {k: len(v) for k, v in got.items()}


def test_records_held_past_their_lock_go_to_another_member(broker, admin):
    topic, group = fresh(broker, admin, 20, batch=20)
    holder = member(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    other = None
    try:
        held = wait_for(lambda: holder.poll(0.5), what="the holder's records")
        assert all(r.delivery_count == 1 for r in held)
        other = member(broker, group, topic)
        start = time.monotonic()
        again = wait_for(lambda: other.poll(0.5), what="the held records again after their lock", timeout=20)
        # the lock (share.record.lock.duration.ms) expired: the holder is alive but too slow
        assert time.monotonic() - start >= LOCK_MS / 1000.0 - 0.5
        assert {r.offset for r in again} == {r.offset for r in held}
        assert all(r.delivery_count == 2 for r in again)
        other.commit_sync(30)
        # the holder's acknowledgements now fail: the records are not its any more
        for r in held:
            holder.acknowledge(r, AcknowledgeType.ACCEPT)
        results = holder.commit_sync(30)
        assert results[(topic, 0)] is not None and results[(topic, 0)].name == "INVALID_RECORD_STATE"
    finally:
        holder.close()
        if other is not None:
            other.close()


def test_a_killed_member_loses_its_records_to_the_others(broker, admin, tmp_path):
    n = 50
    topic, group = fresh(broker, admin, n)
    doomed = Child(broker, group, topic, tmp_path, how="hold", twin=not NATIVE)
    survivor = None
    try:
        wait_for(lambda: doomed.lines, what="the doomed member's records", timeout=30)
        held = {int(v) for v in doomed.lines[0].split()[1].split(",")}
        doomed.proc.send_signal(signal.SIGKILL)
        doomed.proc.wait(10)
        survivor = member(broker, group, topic)
        seen = {}

        def all_seen():
            for r in survivor.poll(0.3):
                seen[int(r.value)] = r.delivery_count
            return len(seen) == n
        wait_for(all_seen, what=lambda: f"every record at the survivor, missing {sorted(set(range(n)) - set(seen))}",
                 timeout=30)
        survivor.commit_sync(30)
        assert {v for v, k in seen.items() if k == 2} == held
        assert all(k == 1 for v, k in seen.items() if v not in held)
    finally:
        doomed.kill()
        if survivor is not None:
            survivor.close()


@pytest.mark.parametrize("arrow", [False, True], ids=["poll", "poll_arrow"])
def test_release_raises_the_delivery_count_and_reject_and_the_limit_archive(broker, admin, arrow):
    topic, group = fresh(broker, admin, 3)  # 0: accepted, 1: rejected, 2: released until archived
    c = member(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    verdict = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.REJECT}
    deliveries = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if arrow:
                t = c.poll_arrow(0.5)
                assert t.schema.names[-1] == "delivery_count"
                rows = list(zip(t.column("offset").to_pylist(), t.column("value").to_pylist(),
                                t.column("delivery_count").to_pylist()))
            else:
                rows = [(r.offset, r.value, r.delivery_count) for r in c.poll(0.5)]
            for off, value, dc in rows:
                v = int(value)
                deliveries.append((v, dc))
                c.acknowledge_offset(topic, 0, off, verdict.get(v, AcknowledgeType.RELEASE))
            if rows:
                assert c.commit_sync(30) == {(topic, 0): None}
            if (2, DELIVERY_LIMIT) in deliveries and not rows:
                break
        assert c.poll(1.0) == []  # 2 was archived at its last delivery, 1 at its rejection
    finally:
        c.close()
    assert [d for d in deliveries if d[0] != 2] == [(0, 1), (1, 1)]
    assert [d for d in deliveries if d[0] == 2] == [(2, k) for k in range(1, DELIVERY_LIMIT + 1)]


def test_explicit_mode_needs_every_record_acknowledged(broker, admin):
    topic, group = fresh(broker, admin, 5, batch=5)
    with member(broker, group, topic, **{"share.acknowledgement.mode": "explicit"}) as c:
        recs = wait_for(lambda: c.poll(0.5), what="records")
        c.acknowledge(recs[0])
        with pytest.raises(IllegalStateError, match="not acknowledged"):
            c.poll(0.1)
        with pytest.raises(IllegalStateError, match="not a record of the last poll"):
            c.acknowledge(recs[0])  # twice
        for r in recs[1:]:
            c.acknowledge(r, AcknowledgeType.RELEASE)
        again = wait_for(lambda: c.poll(0.5), what="the released records")
        assert [(r.offset, r.delivery_count) for r in again] == [(r.offset, 2) for r in recs[1:]]
        for r in again:
            c.acknowledge(r)
        result = {}
        c.commit_async(result.update)
        assert c.poll(0.3) == []  # the async commit's answer is read here
        assert result == {(topic, 0): None}


def test_implicit_mode_refuses_acknowledge_and_accepts_at_close(broker, admin):
    topic, group = fresh(broker, admin, 5, batch=5)
    c = member(broker, group, topic)
    recs = wait_for(lambda: c.poll(0.5), what="records")
    with pytest.raises(IllegalStateError, match="explicit"):
        c.acknowledge(recs[0])
    assert c.subscription() == [topic] and c.assignment() == {(topic, 0)}
    c.close()  # accepts them
    with pytest.raises(IllegalStateError, match="closed"):
        c.poll(0.1)
    with member(broker, group, topic) as late:
        assert late.poll(1.0) == []


def test_bad_configs_are_refused():
    with pytest.raises(KafkaConfigError, match="group.id"):
        ShareConsumer({"bootstrap.servers": "127.0.0.1:9"})
    with pytest.raises(KafkaConfigError, match="share.acknowledgement.mode"):
        ShareConsumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "share.acknowledgement.mode": "auto"})
    with pytest.raises(KafkaConfigError, match="enable.auto.commit"):
        ShareConsumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "enable.auto.commit": True})


def test_state_and_the_consumer_survive_a_broker_restart(tmp_path):
    """Accepted records stay accepted and released ones keep their delivery count across a
    restart (the share coordinator's __share_group_state, read back by the share partition),
    and a ShareConsumer open across it goes on: its share session is reopened, its membership
    kept or rejoined, and the records written after the restart reach it."""
    with BrokerProcess(tmp_path / "data", settings=SETTINGS) as b:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": b.bootstrap})
        topic, group = fresh(b, admin, 30)
        with member(b, group, topic, **{"share.acknowledgement.mode": "explicit", "max.poll.records": 10}) as c:
            seen = []
            while len(seen) < 30:
                recs = wait_for(lambda: c.poll(0.5), what="records before the restart")
                for r in recs:
                    seen.append(int(r.value))
                    c.acknowledge(r, AcknowledgeType.ACCEPT if int(r.value) < 20 else AcknowledgeType.RELEASE)
                assert set(c.commit_sync(30).values()) == {None}
            b.restart()
            p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
            for i in range(30, 60):
                p.produce(topic, b"%d" % i, partition=0)
            assert p.flush(30) == 0
            got = {}

            def all_back():
                for r in c.poll(0.5):
                    got[int(r.value)] = r.delivery_count
                    c.acknowledge(r)
                return len(got) >= 40
            wait_for(all_back, what=lambda: f"the 40 records not accepted, got {sorted(got)}", timeout=60,
                     tolerate=(KafkaError,))
            assert c.poll(0.5) == []
    assert sorted(got) == list(range(20, 60))  # the accepted ones never again
    assert {v for v, dc in got.items() if dc == 2} == set(range(20, 30))  # released once before
    assert all(dc == 1 for v, dc in got.items() if v >= 30)


def test_the_consumer_follows_its_partition_to_a_new_leader(tmp_path):
    """A two-broker cluster (in process): the partition's leader dies; the ShareConsumer's
    session there is lost, it refreshes its metadata, opens a session with the new leader and
    reads on; what it accepted before stays accepted (the state's replicas on the survivor)."""
    from kafkacore.embedded_cluster import EmbeddedKafkaCluster
    with EmbeddedKafkaCluster(tmp_path, brokers=2, settings={
            "offsets.topic.replication.factor": 2, "share.coordinator.state.topic.replication.factor": 2,
            "share.coordinator.state.topic.min.isr": 1, "group.share.heartbeat.interval.ms": 200,
            "group.share.min.heartbeat.interval.ms": 100}) as cluster:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([confluent_kafka.admin.NewTopic("moving", 1, 2)])["moving"].result(30)
        res = confluent_kafka.admin.ConfigResource(
            confluent_kafka.admin.ResourceType.GROUP, "g-moving", incremental_configs=[
                confluent_kafka.admin.ConfigEntry("share.auto.offset.reset", "earliest",
                                                  incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(20):
            p.produce("moving", b"%d" % i, partition=0)
        assert p.flush(30) == 0
        got = {}
        with ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g-moving"}) as c:
            c.subscribe(["moving"])

            def take(n):
                for r in c.poll(0.5):
                    got[int(r.value)] = r.delivery_count
                return len(got) >= n
            wait_for(lambda: take(20), what="the records before the failover")
            assert c.commit_sync(30) == {("moving", 0): None}
            leader = c._cluster.leader("moving", 0)
            cluster.kill(leader)
            for i in range(20, 40):
                p.produce("moving", b"%d" % i, partition=0)
            assert p.flush(30) == 0
            wait_for(lambda: take(40), what=lambda: f"the records after the failover, got {sorted(got)}",
                     timeout=60, tolerate=(KafkaError,))
            assert c._cluster.leader("moving", 0) != leader
            assert c.poll(0.5) == []
    assert sorted(got) == list(range(40)) and set(got.values()) == {1}
