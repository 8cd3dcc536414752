"""KIP-848 consumer groups with real clients: confluent-kafka (librdkafka 2.16) consumers with
``group.protocol=consumer`` against a ``kafkacore serve`` process, records flowing all along.

Two consumers share a topic, a third (another process) joins, is killed with SIGKILL and its
partitions move to the others after its session timeout, then one leaves. The history is
checked: every produced record is consumed, no partition is owned by two consumers at any
moment (from the clients' own assign/revoke callbacks, and from ConsumerGroupDescribe sampled
all along), and the consumers that stay never lose their whole assignment (no stop-the-world).
Then the group's records in __consumer_offsets bring it back after a broker restart."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import confluent_kafka
import pytest

from _cli import kafkacore
from _kcutil import wait_for
from broker_client import BrokerProcess, auto_create, find_coordinators, request

TOPIC, GROUP, PARTITIONS = "flow", "flowing", 6
SESSION_MS = 3000
SETTINGS = {"num.partitions": str(PARTITIONS), "offsets.topic.num.partitions": "3",
            "group.consumer.session.timeout.ms": str(SESSION_MS), "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "300", "group.consumer.min.heartbeat.interval.ms": "100"}

# the third member: another process, so that it can be killed; it reports on stdout
MEMBER = textwrap.dedent("""
    import sys, time, confluent_kafka
    out = sys.stdout
    def say(*a):
        out.write(" ".join(map(str, a)) + "\\n"); out.flush()
    c = confluent_kafka.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                  "auto.commit.interval.ms": 200})
    c.subscribe([sys.argv[3]], on_assign=lambda c, ps: say("assign", time.time(), *[p.partition for p in ps]),
                on_revoke=lambda c, ps: say("revoke", time.time(), *[p.partition for p in ps]))
    while True:
        m = c.poll(0.1)
        if m is not None and not m.error():
            say("record", m.value().decode())
""")


class Member:
    """An in-process consumer polling in its own thread, with its assign/revoke history."""

    def __init__(self, bootstrap, name, history):
        self.name = name
        self.history = history  # shared: [(time, member, "assign"|"revoke", partitions)]
        self.owned = set()
        self.records = set()
        self.emptied = False  # lost its whole assignment while in the group
        self.stop = threading.Event()
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer", "client.id": name,
            "auto.offset.reset": "earliest", "auto.commit.interval.ms": 200})
        self.consumer.subscribe([TOPIC], on_assign=self._assign, on_revoke=self._revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assign(self, _c, parts):
        self.history.append((time.time(), self.name, "assign", {p.partition for p in parts}))
        self.owned |= {p.partition for p in parts}

    def _revoke(self, _c, parts):
        revoked = {p.partition for p in parts}
        self.history.append((time.time(), self.name, "revoke", revoked))
        if self.owned and revoked >= self.owned and not self.stop.is_set():
            self.emptied = True
        self.owned -= revoked

    def _run(self):
        while not self.stop.is_set():
            m = self.consumer.poll(0.05)
            if m is not None and not m.error():
                self.records.add(m.value().decode())
        self.consumer.close()  # leaves the group (epoch -1), revoking what it owns

    def close(self):
        self.stop.set()
        self.thread.join(30)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("cgclients") / "data", settings=SETTINGS) as b:
        with b.client() as c:
            auto_create(c, TOPIC)
            find_coordinators(c)
        yield b


def describe(conn):
    return conn.call(69, 0, request(69, group_ids=[GROUP], include_authorized_operations=False)).groups[0]


def test_members_come_and_go_while_records_flow(broker):
    produced, history, overlaps = [], [], []
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    done = threading.Event()

    def produce():
        i = 0
        while not done.is_set():
            for _ in range(20):
                producer.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
                produced.append(str(i))
                i += 1
            producer.poll(0)
            time.sleep(0.02)
        producer.flush(30)

    def sample():  # the coordinator's view: no partition in two members' assignments
        with broker.client() as conn:
            while not done.is_set():
                seen = {}
                for m in describe(conn).members:
                    for tp in m.assignment.topic_partitions:
                        for p in tp.partitions:
                            if p in seen:
                                overlaps.append((p, seen[p], m.member_id))
                            seen[p] = m.member_id
                time.sleep(0.05)

    threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=sample, daemon=True)]
    for t in threads:
        t.start()
    a = Member(broker.bootstrap, "a", history)
    b = Member(broker.bootstrap, "b", history)
    third = None
    try:
        wait_for(lambda: len(a.owned) == 3 and len(b.owned) == 3, "a and b to share the partitions", timeout=20)
        # the operator's view: `kafkacore groups describe` finds the consumer group through ConsumerGroupDescribe
        d = kafkacore("groups", "describe", GROUP, "-o", "json", bootstrap=broker.bootstrap).json()
        assert (d["state"], d["protocol_type"], d["protocol"]) == ("Stable", "consumer", "uniform")
        assert sorted(m["client_id"] for m in d["members"]) == ["a", "b"]
        assert sorted(tp for m in d["members"] for tp in m["assignment"]) == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]
        third = subprocess.Popen([sys.executable, "-c", MEMBER, broker.bootstrap, GROUP, TOPIC],
                                 stdout=subprocess.PIPE, text=True, env={**os.environ})
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(third.stdout), daemon=True)
        reader.start()
        wait_for(lambda: len(a.owned) == 2 and len(b.owned) == 2, "a third member to take two partitions",
                 timeout=20)
        wait_for(lambda: any(line.startswith("record") for line in lines), "the third member to consume")
        third.send_signal(signal.SIGKILL)
        killed_at = time.time()
        third.wait(10)
        reader.join(10)
        # its session times out and the two take its partitions over
        wait_for(lambda: len(a.owned) == 3 and len(b.owned) == 3, "a and b to take over after the kill",
                 timeout=SESSION_MS / 1000 + 15)
        assert time.time() - killed_at >= SESSION_MS / 1000 * 0.8
        b.close()
        wait_for(lambda: len(a.owned) == PARTITIONS, "a to own every partition after b left", timeout=20)
        done.set()
        threads[0].join(30)
        wait_for(lambda: set(produced) <= a.records | b.records | _third_records(lines),
                 lambda: f"every record consumed: {len(set(produced) - a.records - b.records)} missing", timeout=30)
    finally:
        done.set()
        a.close()
        b.close()
        if third is not None and third.poll() is None:
            third.kill()
    for t in threads:
        t.join(10)
    # the members committed with their epochs (OffsetCommit v9): a's last commit, at its leave, is at the end
    probe = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP})
    try:
        parts = [confluent_kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        committed = {tp.partition: tp.offset for tp in probe.committed(parts, timeout=10)}
        ends = {p: probe.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        probe.close()
    assert committed == ends
    assert not overlaps, overlaps[:5]
    assert not a.emptied and not b.emptied, "a member that stayed lost its whole assignment (stop-the-world)"
    history.extend(_third_history(lines, killed_at))
    _assert_one_owner_at_a_time(history)


def _third_records(lines):
    return {line.split()[1] for line in lines if line.startswith("record")}


def _third_history(lines, killed_at):
    out = []
    owned = set()
    for line in lines:
        kind, *rest = line.split()
        if kind in ("assign", "revoke"):
            parts = set(map(int, rest[1:]))
            out.append((float(rest[0]), "c", kind, parts))
            owned = owned | parts if kind == "assign" else owned - parts
    out.append((killed_at, "c", "revoke", owned))  # it owned them until it died
    return out


def _assert_one_owner_at_a_time(history):
    owner = {}  # partition -> member holding it
    for at, member, kind, parts in sorted(history, key=lambda h: h[0]):
        for p in parts:
            if kind == "assign":
                assert owner.get(p) in (None, member), f"partition {p} given to {member} at {at} while " \
                                                        f"{owner[p]} held it"
                owner[p] = member
            elif owner.get(p) == member:
                del owner[p]


def test_a_regex_subscription_picks_up_a_new_topic(broker):
    with broker.client() as c:
        auto_create(c, "rx-first")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("rx-first", b"one")
    producer.flush(10)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "regex-group",
                                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                         "topic.metadata.refresh.interval.ms": 500})
    got = []
    try:
        consumer.subscribe(["^rx-.*"])

        def consumed(n):
            m = consumer.poll(0.1)
            if m is not None and not m.error():
                got.append((m.topic(), m.value()))
            return len(got) >= n
        wait_for(lambda: consumed(1), "the record of the first matching topic", timeout=20)
        with broker.client() as c:
            auto_create(c, "rx-second")  # created after the subscription: the coordinator resolves it
        producer.produce("rx-second", b"two")
        producer.flush(10)
        wait_for(lambda: consumed(2), "the record of the topic created later", timeout=20)
    finally:
        consumer.close()
    assert sorted(got) == [("rx-first", b"one"), ("rx-second", b"two")]


def test_a_static_member_comes_back_to_its_partitions(broker):
    """group.instance.id: a closing static member leaves for now (epoch -2) and keeps its
    partitions; the same instance under a new member id gets them back, the other member's
    stay where they are."""
    with broker.client() as c:
        auto_create(c, "static-flow")

    def member(instance):
        owned = set()
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "static-group",
                                             "group.protocol": "consumer", "group.instance.id": instance})
        consumer.subscribe(["static-flow"], on_assign=lambda _c, ps: owned.update(p.partition for p in ps),
                           on_revoke=lambda _c, ps: owned.difference_update(p.partition for p in ps))
        return consumer, owned

    def settle(*pairs, want):
        def done():
            for consumer, _owned in pairs:
                consumer.poll(0.05)
            return [len(o) for _c, o in pairs] == want
        wait_for(done, f"assignments of {want}", timeout=20)

    one, one_owned = member("one")
    two, two_owned = member("two")
    try:
        settle((one, one_owned), (two, two_owned), want=[3, 3])
        before = (set(one_owned), set(two_owned))
        members_before = {m.member_id: m.instance_id for m in _describe_group(broker, "static-group").members}
        one.close()
        away = [m for m in _describe_group(broker, "static-group").members if m.instance_id == "one"]
        assert [m.member_epoch for m in away] == [-2]  # still there, left for now
        one, one_owned = member("one")
        settle((one, one_owned), (two, two_owned), want=[3, 3])
        assert (one_owned, two_owned) == before
        members_after = {m.member_id: m.instance_id for m in _describe_group(broker, "static-group").members}
        assert sorted(members_after.values()) == ["one", "two"] and members_after != members_before
    finally:
        one.close()
        two.close()


def _describe_group(broker, group):
    with broker.client() as conn:
        return conn.call(69, 0, request(69, group_ids=[group], include_authorized_operations=False)).groups[0]
