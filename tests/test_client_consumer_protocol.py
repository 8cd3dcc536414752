"""kafkacore's Consumer with ``group.protocol=consumer`` (KIP-848), beyond the cases
tests/test_client_groups.py runs with both protocols: a group mixing kafkacore and
confluent-kafka (librdkafka) members, a member fenced for not heartbeating (stopped with
SIGSTOP) that gives up its partitions and rejoins, the member id the client makes (KIP-1082),
group.remote.assignor, broker-side and client-side regex subscriptions, Java's config rules,
a commit answered STALE_MEMBER_EPOCH (a proxy holds the heartbeat answer that moved the epoch),
and the embedded broker following group.coordinator.rebalance.protocols; the CLI consumer
with -X group.protocol=consumer."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import confluent_kafka
import pytest

from _kafka_proxy import KafkaProxy
from _kcutil import wait_for
from broker_client import BrokerProcess, find_coordinators, free_port, request
from kafkacore import Broker, Consumer, Producer
from kafkacore.broker.handlers import api_versions
from kafkacore.errors import CommitFailedError, KafkaConfigError, StaleMemberEpochError, UnsupportedVersionError
from test_client_groups import CONSUMER_GROUP_SETTINGS, _events, _fill, _topic

HERE = os.path.dirname(os.path.abspath(__file__))
HEARTBEAT, DESCRIBE, OFFSET_COMMIT = 68, 69, 8


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("cp-broker"), settings=CONSUMER_GROUP_SETTINGS) as b:
        with b.client() as c:
            find_coordinators(c)
        yield b


def _consumer(broker, group, **conf):
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", **conf})


def _describe(broker, group):
    with broker.client() as c:
        return c.call(DESCRIBE, 0, request(DESCRIBE, group_ids=[group], include_authorized_operations=False)).groups[0]


# -- configuration ------------------------------------------------------------------------------
@pytest.mark.parametrize("key, value", [("session.timeout.ms", 10000), ("heartbeat.interval.ms", 1000),
                                        ("partition.assignment.strategy", "range")])
def test_classic_only_settings_are_refused_as_javas_consumer_refuses_them(key, value):
    with pytest.raises(KafkaConfigError, match=f"^{re.escape(key)} cannot be set when group.protocol=CONSUMER$"):
        Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "group.protocol": "consumer", key: value})


def test_group_remote_assignor_belongs_to_the_consumer_protocol():
    with pytest.raises(KafkaConfigError, match="^group.remote.assignor cannot be set when group.protocol=CLASSIC$"):
        Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "group.remote.assignor": "range"})
    with pytest.raises(KafkaConfigError, match="group.protocol='share': must be one of classic, consumer"):
        Consumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "group.protocol": "share"})


# -- membership ---------------------------------------------------------------------------------
def test_member_id_epochs_assignor_and_leaving(broker):
    """The member id is the client's (KIP-1082: 22 characters of URL-safe base64), the group
    uses the assignor the member names, and close() leaves the group at once (-1)."""
    topic, group = _topic("cp-id"), _topic("g")
    _fill(broker, topic, 4, 1)
    a = _consumer(broker, group, **{"group.remote.assignor": "range"})
    b = _consumer(broker, group, **{"group.remote.assignor": "range"})
    try:
        member_a = a._group.member_id
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", member_a)
        a.subscribe([topic])
        b.subscribe([topic])
        wait_for(lambda: [c.poll(0.05) for c in (a, b)] and len(a.assignment()) == 2 and len(b.assignment()) == 2,
                 "two partitions each")
        g = _describe(broker, group)
        assert g.assignor_name == "range" and g.group_state == "Stable"
        assert {m.member_id for m in g.members} == {member_a, b._group.member_id}
        assert {m.member_epoch for m in g.members} == {g.group_epoch} and a._group.generation == g.group_epoch
        # range: contiguous partitions per member
        assert sorted(sorted(p for _t, p in c.assignment()) for c in (a, b)) == [[0, 1], [2, 3]]
    finally:
        a.close()
    wait_for(lambda: b.poll(0.05) is not None and len(b.assignment()) == 4, "b takes all four after a left")
    assert [m.member_id for m in _describe(broker, group).members] == [b._group.member_id]
    b.close()
    assert _describe(broker, group).group_state == "Empty"


def test_a_member_that_stops_heartbeating_is_fenced_and_rejoins(broker, tmp_path):
    """A member process stopped (SIGSTOP) past the session timeout is fenced: the other member
    takes its partitions; resumed, it learns it was fenced (UNKNOWN_MEMBER_ID), gives up its
    partitions (on_lost) and joins again with epoch 0, and the two share the topic again."""
    topic, group = _topic("cp-fence"), _topic("g")
    _fill(broker, topic, 4, 20)
    stop, out = str(tmp_path / "stop"), str(tmp_path / "member.jsonl")
    a = _consumer(broker, group)
    a.subscribe([topic])
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "client_member.py"), broker.bootstrap, group,
                             topic, "consumer", out, stop])
    try:
        def owned_by_member():
            owned = set()
            for e in _events(out):
                if e["event"] == "assigned":
                    owned |= {tuple(p) for p in e["partitions"]}
                elif e["event"] in ("revoked", "lost"):
                    owned -= {tuple(p) for p in e["partitions"]}
            return owned

        wait_for(lambda: a.poll(0.05) is not None and len(a.assignment()) == 2 and len(owned_by_member()) == 2,
                 lambda: f"shared: {a.assignment()} / {_events(out)}")
        theirs = owned_by_member()
        proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: a.poll(0.05) is not None and len(a.assignment()) == 4, "a takes the silent member's share")
        proc.send_signal(signal.SIGCONT)
        wait_for(lambda: any(e["event"] == "lost" for e in _events(out)), lambda: _events(out))
        lost = next(e for e in _events(out) if e["event"] == "lost")
        assert {tuple(p) for p in lost["partitions"]} == theirs
        wait_for(lambda: a.poll(0.05) is not None and len(a.assignment()) == 2 and len(owned_by_member()) == 2
                 and owned_by_member() | a.assignment() == {(topic, p) for p in range(4)},
                 lambda: f"shared again: {a.assignment()} / {_events(out)}")
    finally:
        proc.send_signal(signal.SIGCONT)
        open(stop, "w").close()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        a.close()


def test_static_member_leaves_for_now_and_its_successor_gets_its_partitions(broker):
    """close() of a static member sends -2: the group keeps its partitions for it; a new
    process with the same group.instance.id (a new member id) takes them over, the other
    member seeing no revocation."""
    topic, group = _topic("cp-static"), _topic("g")
    _fill(broker, topic, 4, 1)
    events = []
    a = _consumer(broker, group, **{"group.instance.id": "a"})
    b = _consumer(broker, group, **{"group.instance.id": "b"})
    try:
        a.subscribe([topic], on_revoke=lambda _c, tps: events.append(tps))
        b.subscribe([topic])
        wait_for(lambda: [c.poll(0.05) for c in (a, b)] and len(a.assignment()) == 2 and len(b.assignment()) == 2,
                 "two partitions each")
        owned_b, old_id = b.assignment(), b._group.member_id
        events.clear()  # a may have held all four before b joined
        b.close()
        g = _describe(broker, group)
        assert {m.instance_id for m in g.members} == {"a", "b"}  # still there, for its successor
        b = _consumer(broker, group, **{"group.instance.id": "b"})
        b.subscribe([topic])
        wait_for(lambda: [c.poll(0.05) for c in (a, b)] and b.assignment() == owned_b, "b's partitions come back")
        assert b._group.member_id != old_id and events == []
    finally:
        a.close()
        b.close()


def test_regex_subscriptions_broker_side_and_client_side(broker):
    """A "^" string goes to the coordinator as SubscribedTopicRegex (as librdkafka sends it); a
    compiled pattern is matched by the client, which sends topic names (Java's
    subscribe(Pattern))."""
    prefix = _topic("cp-rx").replace("-", "_")
    _fill(broker, prefix + "_a", 1, 1)
    group_r, group_p = _topic("g"), _topic("g")
    r = _consumer(broker, group_r)
    p = _consumer(broker, group_p, **{"metadata.max.age.ms": 500})
    try:
        r.subscribe("^" + prefix + "_.*")
        p.subscribe(re.compile(re.escape(prefix) + "_.*"))
        wait_for(lambda: [c.poll(0.05) for c in (r, p)] and r.assignment() == p.assignment() == {(prefix + "_a", 0)},
                 "both read the first topic")
        mr, mp = _describe(broker, group_r).members[0], _describe(broker, group_p).members[0]
        assert (mr.subscribed_topic_regex, mr.subscribed_topic_names) == ("^" + prefix + "_.*", [])
        assert (mp.subscribed_topic_regex, mp.subscribed_topic_names) in ((None, [prefix + "_a"]), ("", [prefix + "_a"]))
        _fill(broker, prefix + "_b", 1, 1)
        both = {(prefix + "_a", 0), (prefix + "_b", 0)}
        wait_for(lambda: [c.poll(0.05) for c in (r, p)] and r.assignment() == p.assignment() == both,
                 lambda: f"both read the new topic: {r.assignment()} {p.assignment()}")
    finally:
        r.close()
        p.close()


def test_mixed_group_of_kafkacore_and_confluent_kafka_consumers(broker):
    """Two kafkacore and two confluent-kafka consumers (group.protocol=consumer) in one group,
    each polling in its own thread, records flowing: they share the six partitions, no
    partition is owned by two at once (their own callbacks, one clock), every record is read,
    and when one of each leaves the other two take everything."""
    topic, group = _topic("cp-mixed"), _topic("g")
    _fill(broker, topic, 6, 50)
    history = []  # (time, member, "assign"|"revoke", {partitions})
    lock = threading.Lock()

    class Member(threading.Thread):
        def __init__(self, name, kind):
            super().__init__(daemon=True)
            self.name, self.kind = name, kind
            self.owned, self.records, self.stop, self.error = set(), [], threading.Event(), None

        def note(self, event, parts):
            with lock:
                history.append((time.monotonic(), self.name, event, set(parts)))
                self.owned = self.owned | set(parts) if event == "assign" else self.owned - set(parts)

        def run(self):
            try:
                self.kafkacore() if self.kind == "kafkacore" else self.librdkafka()
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.error = e

        def kafkacore(self):
            c = _consumer(broker, group, **{"auto.commit.interval.ms": 200, "client.id": self.name})
            c.subscribe([topic], on_assign=lambda _c, tps: self.note("assign", {p for _t, p in tps}),
                        on_revoke=lambda _c, tps: self.note("revoke", {p for _t, p in tps}))
            while not self.stop.is_set():
                self.records += [(r.partition, r.offset) for r in c.poll(0.05)]
            c.close()
            self.note("revoke", self.owned)  # closed: owns nothing from here on

        def librdkafka(self):
            c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                          "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                          "auto.commit.interval.ms": 200, "client.id": self.name})
            c.subscribe([topic], on_assign=lambda _c, ps: self.note("assign", {p.partition for p in ps}),
                        on_revoke=lambda _c, ps: self.note("revoke", {p.partition for p in ps}))
            while not self.stop.is_set():
                m = c.poll(0.05)
                if m is not None and not m.error():
                    self.records.append((m.partition(), m.offset()))
            c.close()
            self.note("revoke", self.owned)

    members = [Member("kc-1", "kafkacore"), Member("rd-1", "librdkafka"), Member("kc-2", "kafkacore"),
               Member("rd-2", "librdkafka")]
    try:
        for m in members:
            m.start()

        def shared(ms):
            with lock:
                owned = [m.owned for m in ms]
            return all(owned) and sum(map(len, owned)) == 6 and set().union(*owned) == set(range(6))
        wait_for(lambda: shared(members), lambda: f"all four share: {[(m.name, m.owned, m.error) for m in members]}")
        wait_for(lambda: len({r for m in members for r in m.records}) == 300, "every record read")
        with Producer({"bootstrap.servers": broker.bootstrap}) as p:
            for part in range(6):
                p.send_many(topic, [b"more"] * 10, partition=part).result(20)
        members[0].stop.set()
        members[1].stop.set()
        members[0].join(20)
        members[1].join(20)
        wait_for(lambda: shared(members[2:]), lambda: f"two take all: {[(m.name, m.owned) for m in members]}")
        wait_for(lambda: len({r for m in members for r in m.records}) == 360, "the later records read too")
        assert all(m.error is None for m in members), [m.error for m in members]
        # no partition owned by two members at any moment
        owners = {}
        for _t, name, event, parts in sorted(history, key=lambda h: h[0]):
            for p in parts:
                if event == "assign":
                    assert owners.get(p) in (None, name), f"partition {p} owned by {owners[p]} and {name}"
                    owners[p] = name
                elif owners.get(p) == name:
                    del owners[p]
        assert {m.name for m in members[2:]} == set(owners.values())
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(20)


# -- the embedded broker ------------------------------------------------------------------------
# -- offsets ------------------------------------------------------------------------------------
def test_a_commit_with_a_stale_member_epoch_is_retried_for_the_partitions_still_owned(tmp_path):
    """OffsetCommit answered STALE_MEMBER_EPOCH: member A revoked a partition for B and its
    heartbeat saying so moved its epoch on the coordinator, but the answer is held back (a proxy
    the broker advertises delays it), so A commits with the epoch before. A commit of the
    partition it gave up fails at once with CommitFailedError (Java's CommitFailedException) and
    writes nothing; a commit of the partition it kept is sent again with the new epoch once the
    heartbeat answer arrives, and is stored."""
    port = free_port()
    proxy = KafkaProxy(port)
    # a session long enough for the held heartbeat answer
    settings = {**CONSUMER_GROUP_SETTINGS, "group.consumer.session.timeout.ms": "10000",
                "advertised.listeners": proxy.advertised}
    try:
        with BrokerProcess(tmp_path / "data", settings=settings, port=port) as broker:
            topic, group = _topic("stale"), _topic("g")
            _fill(broker, topic, 2, 5)
            conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                    "auto.offset.reset": "earliest", "enable.auto.commit": False}
            a = Consumer({**conf, "client.id": "member-a"})
            b = Consumer({**conf, "client.id": "member-b"})
            try:
                a.subscribe([topic])
                wait_for(lambda: a.poll(0.05) is not None and len(a.assignment()) == 2, "A owns both partitions")
                epoch_1 = _describe(broker, group).members[0].member_epoch
                b.subscribe([topic])  # the group epoch goes up; A's target keeps one partition
                wait_for(lambda: _describe(broker, group).group_epoch > epoch_1, "B joined")
                # two heartbeats of A after that: the first brought its new target, which A has read
                # before it sent the second
                seen = len(proxy.sent("member-a", HEARTBEAT))
                wait_for(lambda: len(proxy.sent("member-a", HEARTBEAT)) >= seen + 2, "A heard of its target")
                proxy.hold(lambda client, api_key, req: client == "member-a" and api_key == HEARTBEAT
                           and req.topic_partitions is not None)  # the heartbeat saying what A owns now
                wait_for(lambda: a.poll(0.05) is not None and len(a.assignment()) == 1, "A revoked one partition")
                [kept] = a.assignment()
                [gone] = {(topic, 0), (topic, 1)} - {kept}

                def coordinator_moved_a():
                    [m] = [m for m in _describe(broker, group).members if m.member_id == a._group.member_id]
                    return m.member_epoch > epoch_1 and m.member_epoch
                epoch_2 = wait_for(coordinator_moved_a, "A's epoch moved on the coordinator")

                with pytest.raises(CommitFailedError, match=f"no longer owns {gone[0]}-{gone[1]}$") as failed:
                    a.commit({gone: 4})
                assert isinstance(failed.value.__cause__, StaleMemberEpochError)
                outcome = {}
                committing = threading.Thread(target=lambda: outcome.update(result=a.commit({kept: 3})))
                committing.start()
                wait_for(lambda: len(proxy.answered("member-a", OFFSET_COMMIT)) == 2, "the second commit answered")
                assert committing.is_alive()  # waiting for the heartbeat answer
                proxy.release()
                committing.join(15)
                assert outcome == {"result": {kept: 3}}
                sent = [(c.generation_id_or_member_epoch, [(t.name, p.partition_index) for t in c.topics
                                                           for p in t.partitions])
                        for c in proxy.sent("member-a", OFFSET_COMMIT)]
                assert sent == [(epoch_1, [gone]), (epoch_1, [kept]), (epoch_2, [kept])]
                answers = [p.error_code for r in proxy.answered("member-a", OFFSET_COMMIT) for t in r.topics
                           for p in t.partitions]
                assert answers == [StaleMemberEpochError.code, StaleMemberEpochError.code, 0]
            finally:
                proxy.release()
                a.close()
                b.close()
            with Consumer({**conf, "client.id": "reader"}) as fresh:  # OffsetFetch, outside the group
                assert fresh.committed([kept, gone]) == {kept: 3, gone: None}
    finally:
        proxy.close()


def test_the_embedded_broker_follows_group_coordinator_rebalance_protocols(tmp_path):
    """The embedded broker's connections offer exactly what its ApiVersions advertises: without
    ``consumer`` in group.coordinator.rebalance.protocols no KIP-848 API, and a
    group.protocol=consumer consumer fails with UNSUPPORTED_VERSION instead of joining."""
    small = {"offsets.topic.num.partitions": "1"}
    with Broker(str(tmp_path / "classic"), {"group.coordinator.rebalance.protocols": "classic", **small}) as b:
        conn = b.cluster_view().connect(b.core.node_id)
        answer = conn.call(api_versions.API_KEY, request(api_versions.API_KEY, client_software_name="t",
                                                         client_software_version="1"))
        advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert conn.versions == advertised and HEARTBEAT not in conn.versions and DESCRIBE not in conn.versions
        b.create_topic("t", 1)
        c = b.consumer({"group.id": "g", "group.protocol": "consumer"})
        c.subscribe(["t"])
        with pytest.raises(UnsupportedVersionError, match="ConsumerGroupHeartbeat"):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                c.poll(0.1)
        c.close()
    with Broker(str(tmp_path / "both"), small) as b:
        b.create_topic("t", 2)
        with b.producer() as p:
            p.send_many("t", [b"x"] * 5, partition=1).result(10)
        c = b.consumer({"group.id": "g", "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        c.subscribe(["t"])
        got = []
        wait_for(lambda: got.extend(c.poll(0.1)) or len(got) == 5, "the embedded consumer-protocol member reads")
        c.commit()
        assert c.committed([("t", 1)]) == {("t", 1): 5}
        c.close()


def test_kafkacore_consume_joins_a_consumer_group_with_X_group_protocol(broker):
    """The CLI's consumer is kafkacore's Consumer: ``-X group.protocol=consumer`` makes
    ``kafkacore consume --group`` a KIP-848 member, which reads the topic, commits and leaves."""
    from _cli import kafkacore
    from kafkacore.client.admin import AdminClient
    topic, group = _topic("cp-cli"), _topic("g")
    _fill(broker, topic, 2, 3)
    r = kafkacore("consume", topic, "--group", group, "--from-beginning", "-X", "group.protocol=consumer",
                  bootstrap=broker.bootstrap)
    assert sorted(r.out.split()) == sorted(f"{p}-{i}" for p in range(2) for i in range(3))
    with AdminClient(broker.bootstrap) as admin:
        assert admin.list_group_offsets(group) == {(topic, 0): 3, (topic, 1): 3}
        info = admin.describe_group(group)
        assert (info.protocol_type, info.state, info.members) == ("consumer", "Empty", [])
