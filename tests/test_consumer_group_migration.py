"""KIP-848 online migration with real clients: confluent-kafka (librdkafka 2.16) consumers
against a ``kafkacore serve`` process while a producer writes.

A rolling upgrade restarts three classic consumers (cooperative-sticky, then the eager range)
one at a time with ``group.protocol=consumer``: the classic group becomes a consumer group at
the first ConsumerGroupHeartbeat and serves the classic members that remain through
JoinGroup/SyncGroup/Heartbeat. Then the reverse: the consumers are restarted as classic ones and
the group becomes classic again when the last consumer-protocol member leaves. All along every
record is consumed, the commits are kept and no partition has two owners at any moment (from
the clients' own assign/revoke callbacks). With ``group.consumer.migration.policy=disabled`` the
mixed join is refused with Kafka's error and the group keeps its type. At the wire: a classic
member's requests to a consumer group, its records, and the group read back after a restart."""
import threading
import time

import confluent_kafka
import pytest

from _kcutil import read_offsets_topic, wait_for
from broker_client import BrokerProcess, auto_create, find_coordinators, request

TOPIC, PARTITIONS = "migrating", 6
SETTINGS = {"num.partitions": str(PARTITIONS), "offsets.topic.num.partitions": "2",
            "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
            "group.consumer.session.timeout.ms": "3000", "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "300", "group.consumer.min.heartbeat.interval.ms": "100"}


class Member:
    """A consumer polling in its own thread, recording its assign/revoke history and records."""

    def __init__(self, bootstrap, group, name, protocol, history, strategy="cooperative-sticky"):
        self.name, self.history = name, history
        self.owned, self.records = set(), set()
        self.errors = []
        self.stop = threading.Event()
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "group.protocol": protocol,
                "auto.offset.reset": "earliest", "auto.commit.interval.ms": 200, "error_cb": self.errors.append}
        if protocol == "classic":
            conf.update({"partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 300})
        self.consumer = confluent_kafka.Consumer(conf)
        self.consumer.subscribe([TOPIC], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assign(self, consumer, parts):
        self.history.append((time.time(), self.name, "assign", {p.partition for p in parts}))
        self.owned |= {p.partition for p in parts}

    def _revoke(self, consumer, parts):
        revoked = {p.partition for p in parts}
        self.owned -= revoked
        self.history.append((time.time(), self.name, "revoke", revoked))

    def _run(self):
        while not self.stop.is_set():
            m = self.consumer.poll(0.05)
            if m is None:
                continue
            if m.error():
                self.errors.append(m.error())
            else:
                self.records.add(m.value().decode())
        self.consumer.close()  # commits, revokes what it owns and leaves

    def close(self):
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), f"{self.name} did not close"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("migration") / "data", settings=SETTINGS) as b:
        with b.client() as c:
            auto_create(c, TOPIC)
            find_coordinators(c)
        yield b


def group_type(broker, group):
    with broker.client() as conn:
        groups = conn.call(16, 5, request(16, states_filter=[], types_filter=[])).groups
    return next((x.group_type for x in groups if x.group_id == group), None)


def fatal_errors(member):
    return [e for e in member.errors if e.code() == confluent_kafka.KafkaError._FATAL]


def assert_one_owner_at_a_time(history):
    owner = {}
    for at, member, kind, parts in sorted(history, key=lambda h: h[0]):
        for p in parts:
            if kind == "assign":
                assert owner.get(p) in (None, member), f"partition {p} given to {member} at {at} while " \
                                                        f"{owner[p]} held it"
                owner[p] = member
            elif owner.get(p) == member:
                del owner[p]


class Producing:
    def __init__(self, bootstrap):
        self.produced = []
        self.done = threading.Event()
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        i = 0
        while not self.done.is_set():
            for _ in range(10):
                self.producer.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
                self.produced.append(str(i))
                i += 1
            self.producer.poll(0)
            time.sleep(0.02)
        self.producer.flush(30)

    def finish(self):
        self.done.set()
        self.thread.join(30)


def settled(members):
    """Every partition owned, each by one of ``members``, each member with some."""
    owned = [m.owned for m in members]
    return all(owned) and sorted(p for o in owned for p in o) == list(range(PARTITIONS))


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_rolling_upgrade_then_downgrade_keeps_offsets_and_single_owners(broker, strategy):
    group = f"rolling-{strategy}"
    history, everyone = [], []
    producing = Producing(broker.bootstrap)

    def start(name, protocol):
        m = Member(broker.bootstrap, group, name, protocol, history, strategy)
        everyone.append(m)
        return m
    members = [start(f"classic-{i}", "classic") for i in range(3)]
    try:
        wait_for(lambda: settled(members), "three classic members to share the partitions", timeout=30)
        assert group_type(broker, group) == "classic"
        for direction, protocol in (("upgrade", "consumer"), ("downgrade", "classic")):
            for i in range(3):
                members[i].close()
                rest = members[:i] + members[i + 1:]
                wait_for(lambda: settled(rest), f"{direction} {i}: the others to take over", timeout=30)
                members[i] = start(f"{protocol}-{direction}-{i}", protocol)
                wait_for(lambda: settled(members), f"{direction} {i}: the restarted member to take its share",
                         timeout=30)
                if direction == "upgrade":
                    assert group_type(broker, group) == "consumer"  # from the first consumer-protocol member on
            assert group_type(broker, group) == ("consumer" if direction == "upgrade" else "classic")
        producing.finish()
        wait_for(lambda: set(producing.produced) <= set().union(*(m.records for m in everyone)),
                 lambda: f"every record consumed: "
                         f"{len(set(producing.produced) - set().union(*(m.records for m in everyone)))} missing",
                 timeout=30)
    finally:
        producing.done.set()
        for m in everyone:
            m.close()
    assert not [e for m in everyone for e in fatal_errors(m)]
    assert_one_owner_at_a_time(history)
    probe = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        parts = [confluent_kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        committed = {tp.partition: tp.offset for tp in probe.committed(parts, timeout=10)}
        ends = {p: probe.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        probe.close()
    assert committed == ends  # the last commits, made by the classic members at their close


def test_disabled_policy_refuses_the_upgrade_and_keeps_the_types(tmp_path):
    """group.consumer.migration.policy=disabled: a consumer-protocol member cannot join a
    classic group with members (GROUP_ID_NOT_FOUND, fatal to librdkafka), and a consumer group
    whose last consumer-protocol member leaves stays a consumer group serving its classic
    members (classic members may always join one, as in Kafka)."""
    with BrokerProcess(tmp_path / "data", settings={**SETTINGS, "group.consumer.migration.policy": "disabled"}) as b:
        with b.client() as c:
            auto_create(c, TOPIC)
            find_coordinators(c)
        history = []
        classic = Member(b.bootstrap, "stays-classic", "classic", "classic", history)
        refused = None
        try:
            wait_for(lambda: len(classic.owned) == PARTITIONS, "the classic member to own every partition")
            refused = Member(b.bootstrap, "stays-classic", "refused", "consumer", history)
            fatal = wait_for(lambda: fatal_errors(refused), "the consumer-protocol member's fatal error")
            # (librdkafka reports GROUP_ID_NOT_FOUND, fatal to a ConsumerGroupHeartbeat, as _FATAL)
            assert "The group id does not exist" in fatal[0].str(), fatal
            assert group_type(b, "stays-classic") == "classic" and len(classic.owned) == PARTITIONS
        finally:
            classic.close()
            if refused is not None:
                refused.stop.set()
                refused.thread.join(30)

        modern = Member(b.bootstrap, "stays-consumer", "modern", "consumer", history)
        old = None
        try:
            wait_for(lambda: len(modern.owned) == PARTITIONS, "the consumer-protocol member to own every partition")
            old = Member(b.bootstrap, "stays-consumer", "old", "classic", history)
            wait_for(lambda: settled([modern, old]), "the classic member to join the consumer group")
            modern.close()
            wait_for(lambda: len(old.owned) == PARTITIONS, "the classic member to take every partition")
            assert group_type(b, "stays-consumer") == "consumer"
        finally:
            modern.close()
            if old is not None:
                old.close()
        assert_one_owner_at_a_time(history)


# -- at the wire: a classic member in a consumer group, its records, a restart -------------------------
JOIN, SYNC, HEARTBEAT, LEAVE, OFFSET_COMMIT, CG_HEARTBEAT, CG_DESCRIBE = 11, 14, 12, 13, 8, 68, 69
NONE, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED = 0, 22, 27, 25, 79
FENCED_INSTANCE_ID = 82


def test_a_classic_member_that_does_not_sync_or_rejoin_in_time_is_fenced(broker):
    """Kafka's join and sync timeouts of classic members in a consumer group: a member answered
    its JoinGroup must sync, and one told to rejoin must rejoin, within its rebalance timeout -
    heartbeating does not keep it in the group."""
    from kafkacore.client.assignors import Subscription, encode_subscription
    from kafkacore.protocol.messages.join_group_request import JoinGroupRequestProtocol

    group = "wire-timeouts"
    protocols = [JoinGroupRequestProtocol(name="range", metadata=encode_subscription(Subscription(topics=[TOPIC])))]

    def consumer_join(conn, member_id):
        r = conn.call(CG_HEARTBEAT, 1, request(CG_HEARTBEAT, group_id=group, member_id=member_id, member_epoch=0,
                                               rebalance_timeout_ms=10000, subscribed_topic_names=[TOPIC],
                                               topic_partitions=[]))
        assert r.error_code == NONE, r
        return r

    def classic_join(conn):
        def join(member_id=""):
            return conn.call(JOIN, 7, request(JOIN, group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=1000,
                                              member_id=member_id, protocol_type="consumer", protocols=protocols))
        joined = join(join().member_id)
        assert joined.error_code == NONE, joined
        return joined.member_id, joined.generation_id

    def members(conn):
        g = conn.call(CG_DESCRIBE, 0, request(CG_DESCRIBE, group_ids=[group], include_authorized_operations=False))
        return set(m.member_id for m in g.groups[0].members)

    with broker.client() as conn:
        consumer_join(conn, "modern")
        silent, _generation = classic_join(conn)  # never syncs
        assert members(conn) == {"modern", silent}
        wait_for(lambda: members(conn) == {"modern"}, "the member that did not sync fenced", timeout=10)

        mid, generation = classic_join(conn)
        assert conn.call(SYNC, 5, request(SYNC, group_id=group, generation_id=generation, member_id=mid,
                                          protocol_type="consumer", protocol_name="range",
                                          assignments=[])).error_code == NONE
        consumer_join(conn, "modern-2")  # the group epoch moves: the classic member must rejoin

        def beat():
            return conn.call(HEARTBEAT, 4, request(HEARTBEAT, group_id=group, generation_id=generation,
                                                   member_id=mid)).error_code
        assert wait_for(lambda: beat() == REBALANCE_IN_PROGRESS, "the classic member told to rejoin")
        # it heartbeats on (every 100 ms) but does not rejoin: fenced after its rebalance timeout
        assert wait_for(lambda: beat() == UNKNOWN_MEMBER_ID, "the member that did not rejoin fenced",
                        interval=0.1, timeout=10)
        assert mid not in members(conn)


def test_a_static_classic_member_replaces_its_previous_instance_at_once(broker):
    """A static classic member restarting (an unknown member id, its instance id) takes over its
    previous instance in a consumer group without waiting for it to leave (Kafka's rule where
    either instance speaks the classic protocol); the old member id is fenced."""
    from kafkacore.client.assignors import Subscription, encode_subscription
    from kafkacore.protocol.messages.join_group_request import JoinGroupRequestProtocol

    group = "wire-static"
    protocols = [JoinGroupRequestProtocol(name="range", metadata=encode_subscription(Subscription(topics=[TOPIC])))]
    with broker.client() as conn:
        def join():
            r = conn.call(JOIN, 7, request(JOIN, group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=10000,
                                           member_id="", group_instance_id="static-one", protocol_type="consumer",
                                           protocols=protocols))
            assert r.error_code == NONE, r
            return r.member_id

        modern = conn.call(CG_HEARTBEAT, 1, request(CG_HEARTBEAT, group_id=group, member_id="modern", member_epoch=0,
                                                    rebalance_timeout_ms=10000, subscribed_topic_names=[TOPIC],
                                                    topic_partitions=[]))
        assert modern.error_code == NONE
        first = join()  # a static member needs no MEMBER_ID_REQUIRED round
        second = join()
        assert first != second
        g = conn.call(CG_DESCRIBE, 0, request(CG_DESCRIBE, group_ids=[group], include_authorized_operations=False))
        assert sorted((m.member_id, m.instance_id) for m in g.groups[0].members) == sorted(
            [("modern", None), (second, "static-one")])
        assert conn.call(HEARTBEAT, 4, request(HEARTBEAT, group_id=group, generation_id=0, member_id=first,
                                               group_instance_id="static-one")).error_code == FENCED_INSTANCE_ID


def test_a_classic_member_at_the_wire_and_its_records_across_a_restart(broker):
    """(last in the module: it restarts the module's broker)"""
    from kafkacore.client.assignors import Subscription, decode_assignment, encode_subscription
    from kafkacore.coordinator import consumer_group_records as cg_records
    from kafkacore.coordinator.offset_store import partition_for
    from kafkacore.protocol.coordinator.consumer_group_member_metadata_value import ConsumerGroupMemberMetadataValue
    from kafkacore.protocol.messages.join_group_request import JoinGroupRequestProtocol
    from kafkacore.protocol.messages.leave_group_request import MemberIdentity
    from kafkacore.protocol.messages.offset_commit_request import (OffsetCommitRequestPartition,
                                                                   OffsetCommitRequestTopic)
    from kafkacore.protocol.wire import Reader

    group = "wire-mixed"
    metadata = encode_subscription(Subscription(topics=[TOPIC]))
    protocols = [JoinGroupRequestProtocol(name="range", metadata=metadata)]

    def join(conn, member_id=""):
        return conn.call(JOIN, 7, request(JOIN, group_id=group, session_timeout_ms=4000, rebalance_timeout_ms=10000,
                                          member_id=member_id, protocol_type="consumer", protocols=protocols))

    def commit(conn, member_id, generation):
        return conn.call(OFFSET_COMMIT, 8, request(
            OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
            topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[OffsetCommitRequestPartition(
                partition_index=0, committed_offset=0)])])).topics[0].partitions[0].error_code

    def members(conn):
        g = conn.call(CG_DESCRIBE, 0, request(CG_DESCRIBE, group_ids=[group], include_authorized_operations=False))
        return {m.member_id: m.member_epoch for m in g.groups[0].members}

    with broker.client() as conn:
        modern = conn.call(CG_HEARTBEAT, 1, request(
            CG_HEARTBEAT, group_id=group, member_id="modern", member_epoch=0, rebalance_timeout_ms=10000,
            subscribed_topic_names=[TOPIC], topic_partitions=[]))
        assert modern.error_code == NONE and modern.member_epoch == 1
        required = join(conn)
        assert required.error_code == MEMBER_ID_REQUIRED and required.member_id
        joined = join(conn, required.member_id)
        # the member's own epoch is its generation; nobody leads (the coordinator assigns)
        assert (joined.error_code, joined.protocol_type, joined.protocol_name, joined.leader, joined.members) == \
            (NONE, "consumer", "range", "", [])
        mid, generation = joined.member_id, joined.generation_id
        assert members(conn) == {"modern": 1, mid: generation} and generation == 2
        synced = conn.call(SYNC, 5, request(SYNC, group_id=group, generation_id=generation, member_id=mid,
                                            protocol_type="consumer", protocol_name="range", assignments=[]))
        assert synced.error_code == NONE
        # modern still owns every partition: the classic member waits for them (unreleased)
        assert decode_assignment(synced.assignment).partitions == []
        assert commit(conn, mid, generation) == NONE
        assert commit(conn, mid, generation + 1) == ILLEGAL_GENERATION
        assert conn.call(HEARTBEAT, 4, request(HEARTBEAT, group_id=group, generation_id=generation + 1,
                                               member_id=mid)).error_code == ILLEGAL_GENERATION

        # the records: the classic member's metadata carries its session timeout and protocols
        records = [(cg_records.decode_key(k), v) for k, v in read_offsets_topic(broker.bootstrap,
                                                                                  partition_for(group, 2))]
        metadata_values = [v for k, v in records if k and k[0] == 5 and k[1:] == (group, mid) and v]
        classic = ConsumerGroupMemberMetadataValue.read(Reader(metadata_values[-1], 2), 0).classic_member_metadata
        assert classic.session_timeout_ms == 4000
        assert [(p.name, bytes(p.metadata)) for p in classic.supported_protocols] == [("range", metadata)]

        # modern revokes (its heartbeat lists what it keeps): the classic member is told to rejoin
        owned = {tp.topic_id: list(tp.partitions) for tp in modern.assignment.topic_partitions}
        keep = conn.call(CG_HEARTBEAT, 1, request(CG_HEARTBEAT, group_id=group, member_id="modern",
                                                  member_epoch=1, topic_partitions=[]))
        assert keep.error_code == NONE and owned
        assert wait_for(lambda: conn.call(HEARTBEAT, 4, request(
            HEARTBEAT, group_id=group, generation_id=generation, member_id=mid)).error_code ==
            REBALANCE_IN_PROGRESS, "the classic member told to rejoin")
    broker.restart()
    with broker.client() as conn:
        find_coordinators(conn)
        # the group came back from its records, the classic member at its epoch
        assert wait_for(lambda: members(conn), "the group loaded", tolerate=(Exception,)) == \
            {"modern": members(conn)["modern"], mid: generation}
        rejoined = join(conn, mid)  # at the same epoch: it only takes what was released for it
        assert (rejoined.error_code, rejoined.generation_id) == (NONE, generation)
        synced = conn.call(SYNC, 5, request(SYNC, group_id=group, generation_id=rejoined.generation_id,
                                            member_id=mid, protocol_type="consumer", protocol_name="range",
                                            assignments=[]))
        assert synced.error_code == NONE and len(decode_assignment(synced.assignment).partitions) == 3
        left = conn.call(LEAVE, 4, request(LEAVE, group_id=group, members=[MemberIdentity(member_id=mid)]))
        assert [m.error_code for m in left.members] == [NONE]
        assert set(members(conn)) == {"modern"}
