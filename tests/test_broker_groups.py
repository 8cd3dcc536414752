"""The classic group coordinator against a real ``kafkacore serve`` process: FindCoordinator,
JoinGroup/SyncGroup/Heartbeat/LeaveGroup rebalances (1-3 members, the MEMBER_ID_REQUIRED dance,
rebalance and session timeouts, static membership, protocol selection), committed offsets
(commit, fetch, delete, expiry), ListGroups/DescribeGroups/DeleteGroups, every version of each
API, persistence in __consumer_offsets (Kafka's record format and partitioning, a restart), and
kafka-python consumers in a group."""
import struct
import time

import pytest

from _kcutil import peer_has_read, read_offsets_topic, wait_for
from broker_client import BrokerProcess, auto_create, find_coordinators, request
from kafkacore.coordinator.offset_store import java_string_hash, partition_for
from kafkacore.protocol.coordinator.group_metadata_key import GroupMetadataKey
from kafkacore.protocol.coordinator.group_metadata_value import GroupMetadataValue
from kafkacore.protocol.coordinator.offset_commit_key import OffsetCommitKey
from kafkacore.protocol.coordinator.offset_commit_value import OffsetCommitValue
from kafkacore.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from kafkacore.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkacore.protocol.messages.leave_group_request import MemberIdentity
from kafkacore.protocol.messages.metadata_request import MetadataRequestTopic
from kafkacore.protocol.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kafkacore.protocol.messages.offset_delete_request import OffsetDeleteRequestPartition, OffsetDeleteRequestTopic
from kafkacore.protocol.messages.offset_fetch_request import (OffsetFetchRequestGroup, OffsetFetchRequestTopic,
                                                               OffsetFetchRequestTopics)
from kafkacore.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from kafkacore.protocol.wire import Reader, Writer

# Kafka 4's supported group operations (groups have configs since KIP-848): READ, DELETE, DESCRIBE,
# DESCRIBE_CONFIGS, ALTER_CONFIGS - all of them answered without an authorizer
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 8, 9, 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE, METADATA, DELETE_TOPICS = 15, 16, 42, 47, 3, 20

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86

SETTINGS = {"group.min.session.timeout.ms": "500", "group.max.size": "3", "num.partitions": "2"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("groups") / "data", settings=SETTINGS) as b:
        with b.client() as c:
            for topic in ("t1", "t2", "t3"):
                auto_create(c, topic)
            find_coordinators(c)  # as a client does first; the tests' members then talk to the coordinator
        yield b


def subscription(*topics, user_data=None):
    w = Writer()
    w.int16(0)
    ConsumerProtocolSubscription(topics=list(topics), user_data=user_data).write(w, 0)
    return w.getvalue()


SUB = subscription("t1")


class Member:
    """One group member on its own connection (JoinGroup blocks until the rebalance ends)."""

    def __init__(self, broker, group, client_id="member", protocols=(("range", SUB),), session=10000,
                 rebalance=5000, instance=None, protocol_type="consumer", version=9):
        self.broker = broker
        self.conn = broker.client(client_id=client_id)
        self.group = group
        self.protocols = list(protocols)
        self.session = session
        self.rebalance = rebalance
        self.instance = instance
        self.protocol_type = protocol_type
        self.version = version
        self.member_id = ""
        self.generation = -1
        self.join_resp = None
        self._cid = None

    def close(self):
        self.conn.close()

    def join_request(self):
        return request(JOIN, group_id=self.group, session_timeout_ms=self.session, rebalance_timeout_ms=self.rebalance,
                       member_id=self.member_id, group_instance_id=self.instance, protocol_type=self.protocol_type,
                       protocols=[JoinGroupRequestProtocol(name=n, metadata=m) for n, m in self.protocols])

    def get_member_id(self, expect=True):
        """The v4+ first join: MEMBER_ID_REQUIRED with the id to use (static members skip it).
        Returns the response (None when skipped)."""
        if self.member_id or self.instance is not None or self.version < 4:
            return None
        r = self.conn.call(JOIN, self.version, self.join_request())
        if expect:
            assert r.error_code == MEMBER_ID_REQUIRED, r
        if r.error_code == MEMBER_ID_REQUIRED:
            assert r.member_id.startswith(self.conn.client_id + "-")
            self.member_id = r.member_id
        return r

    def send_join(self):
        self.get_member_id()
        self._cid = self.conn.send(JOIN, self.version, self.join_request())

    def recv_join(self):
        r = self.conn.receive(self._cid)
        self._cid = None
        self.join_resp = r
        if r.error_code == NONE:
            self.member_id = r.member_id
            self.generation = r.generation_id
        return r

    def join(self):
        first = self.get_member_id(expect=False)
        if first is not None and first.error_code != MEMBER_ID_REQUIRED:
            self.join_resp = first
            return first
        self.send_join()
        return self.recv_join()

    @property
    def is_leader(self):
        return self.join_resp.leader == self.member_id

    def send_sync(self, assignments=None, version=5):
        assignments = assignments or {}
        return self.conn.send(SYNC, version, request(
            SYNC, group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance, protocol_type=self.protocol_type if version >= 5 else None,
            protocol_name=self.join_resp.protocol_name if version >= 5 else None,
            assignments=[SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments.items()]))

    def sync(self, assignments=None, version=5):
        return self.conn.receive(self.send_sync(assignments, version))

    def heartbeat(self, version=4, generation=None, member_id=None):
        return self.conn.call(HEARTBEAT, version, request(
            HEARTBEAT, group_id=self.group, generation_id=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id, group_instance_id=self.instance)).error_code

    def leave(self, version=5):
        if version < 3:
            return self.conn.call(LEAVE, version, request(LEAVE, group_id=self.group, member_id=self.member_id))
        return self.conn.call(LEAVE, version, request(LEAVE, group_id=self.group, members=[
            MemberIdentity(member_id=self.member_id, group_instance_id=self.instance)]))


def rebalance(*members):
    """All members (re)join one generation; returns their join responses. Deterministic:
    a new group is founded by the first member alone (the initial rebalance delay is 0 here,
    so its join completes at once, as in Kafka); then a newcomer (else the leader) joins first,
    which starts the rebalance that every other member's join then waits for (a lone leader's
    rejoin would complete one at once)."""
    first = members[0]
    if first.generation < 0 and first.join_resp is None:
        r = first.join()
        if len(members) == 1:
            return [r]
        assert r.error_code == NONE
        assert first.sync({first.member_id: b""}).error_code == NONE
    for m in members:
        m.get_member_id()
    newcomers = [m for m in members if m.generation < 0]
    trigger = newcomers[0] if newcomers else next(m for m in members if m.is_leader)
    trigger.send_join()
    for m in newcomers[1:]:
        m.send_join()
    with trigger.broker.client() as c:
        def started():
            [g] = describe(c, trigger.group)
            if g.group_state == "CompletingRebalance":
                return True  # (a lone leader's rejoin)
            return g.group_state == "PreparingRebalance" and len(g.members) >= (len(members) if newcomers else 1)
        wait_for(started)
    for m in members:
        if m is not trigger and m not in newcomers:
            m.send_join()
    return [m.recv_join() for m in members]


def stabilize(*members, assignments=None):
    """Join everyone, sync (leader last so followers wait), return {member: assignment}."""
    resps = rebalance(*members)
    assert all(r.error_code == NONE for r in resps), resps
    assert len({r.generation_id for r in resps}) == 1
    leader = [m for m in members if m.is_leader]
    assert len(leader) == 1
    leader = leader[0]
    assert sorted(x.member_id for x in leader.join_resp.members) == sorted(m.member_id for m in members)
    if assignments is None:
        assignments = {m.member_id: b"assign-" + m.member_id.encode() for m in members}
    followers = [m for m in members if m is not leader]
    cids = [(m, m.send_sync()) for m in followers]
    out = {leader: leader.sync(assignments)}
    for m, cid in cids:
        out[m] = m.conn.receive(cid)
    for m, r in out.items():
        assert r.error_code == NONE, r
        assert r.assignment == assignments.get(m.member_id, b"")
        assert r.protocol_name == leader.join_resp.protocol_name
    return out


def describe(conn, *groups, version=5):
    return conn.call(DESCRIBE_GROUPS, version, request(DESCRIBE_GROUPS, groups=list(groups),
                                                       include_authorized_operations=True)).groups


def commit(conn, group, offsets, generation=-1, member_id="", instance=None, version=8, metadata="m"):
    """offsets: {(topic, partition): offset}; returns {(topic, partition): error}"""
    topics = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=3, committed_metadata=metadata))
    resp = conn.call(OFFSET_COMMIT, version, request(
        OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance,
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch(conn, group, partitions=None, version=8):
    """{(topic, partition): (offset, leader epoch, metadata, error)}"""
    if partitions is None:
        topics = None
    else:
        by_topic = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = list(by_topic.items())
    if version >= 8:
        resp = conn.call(OFFSET_FETCH, version, request(OFFSET_FETCH, groups=[OffsetFetchRequestGroup(
            group_id=group, topics=None if topics is None else [
                OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics])]))
        assert resp.groups[0].group_id == group and resp.groups[0].error_code == NONE
        topics_out = resp.groups[0].topics
    else:
        resp = conn.call(OFFSET_FETCH, version, request(
            OFFSET_FETCH, group_id=group,
            topics=None if topics is None else [
                OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics]))
        assert resp.error_code == NONE
        topics_out = resp.topics
    return {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
            for t in topics_out for p in t.partitions}


def list_groups(conn, version=5, states=None, types=None):
    resp = conn.call(LIST_GROUPS, version, request(LIST_GROUPS, states_filter=states or [], types_filter=types or []))
    assert resp.error_code == NONE
    return {g.group_id: g for g in resp.groups}


# -- FindCoordinator --------------------------------------------------------------------------------------
def test_find_coordinator_every_version_creates_the_offsets_topic(broker):
    with broker.client() as c:
        for v in range(0, 4):
            body = request(FIND_COORDINATOR, key="some-group", key_type=0)
            r = c.call(FIND_COORDINATOR, v, body)
            assert (r.error_code, r.node_id, r.host, r.port) == (NONE, 1, "127.0.0.1", broker.port), (v, r)
        for v in (4, 5, 6):
            r = c.call(FIND_COORDINATOR, v, request(FIND_COORDINATOR, key_type=0, coordinator_keys=["a", "b", "c"]))
            assert [(x.key, x.error_code, x.node_id, x.port) for x in r.coordinators] == [
                (k, NONE, 1, broker.port) for k in "abc"]
        r = c.call(FIND_COORDINATOR, 4, request(FIND_COORDINATOR, key_type=1, coordinator_keys=["txn"]))
        assert [(x.error_code, x.node_id, x.port) for x in r.coordinators] == [(NONE, 1, broker.port)]
        r = c.call(FIND_COORDINATOR, 3, request(FIND_COORDINATOR, key="x", key_type=7))
        assert r.error_code == INVALID_REQUEST
        md = c.call(METADATA, 12, request(METADATA, topics=[MetadataRequestTopic(name="__consumer_offsets")],
                                          allow_auto_topic_creation=False))
        topic = md.topics[0]
        assert topic.error_code == NONE and topic.is_internal and len(topic.partitions) == 50


# -- membership ---------------------------------------------------------------------------------------------
def test_one_member_every_join_sync_heartbeat_leave_version(broker):
    for v in range(0, 10):
        group = f"versions-{v}"
        m = Member(broker, group, client_id=f"client-v{v}", version=v)
        if v >= 4:
            first = m.conn.call(JOIN, v, m.join_request())
            assert first.error_code == MEMBER_ID_REQUIRED and first.generation_id == -1
            m.member_id = first.member_id
        r = m.join()
        assert r.error_code == NONE, (v, r)
        assert r.generation_id == 1 and r.leader == r.member_id and r.protocol_name == "range"
        assert r.member_id.startswith(f"client-v{v}-")
        assert [(x.member_id, x.metadata) for x in r.members] == [(r.member_id, SUB)]
        if v >= 7:
            assert r.protocol_type == "consumer"
        sv = min(v, 5)
        s = m.sync({m.member_id: b"A%d" % v}, version=sv)
        assert (s.error_code, s.assignment) == (NONE, b"A%d" % v)
        if sv >= 5:
            assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
        assert m.heartbeat(version=min(v, 4)) == NONE
        lv = min(v, 5)
        resp = m.leave(version=lv)
        assert resp.error_code == NONE
        if lv >= 3:
            assert [(x.member_id, x.error_code) for x in resp.members] == [(m.member_id, NONE)]
        [g] = describe(m.conn, group)
        assert (g.group_state, g.members) == ("Empty", [])
        assert m.heartbeat(version=min(v, 4)) == UNKNOWN_MEMBER_ID
        m.close()


def test_two_members_rebalance_on_join_and_leave(broker):
    a, b = Member(broker, "two", "a"), Member(broker, "two", "b")
    stabilize(a)
    assert a.generation == 1 and a.heartbeat() == NONE
    b.get_member_id()  # a pending member does not disturb the group
    assert a.heartbeat() == NONE
    b.send_join()
    assert wait_for(lambda: a.heartbeat() == REBALANCE_IN_PROGRESS)
    [g] = describe(a.conn, "two")
    assert g.group_state == "PreparingRebalance" and g.protocol_data == "" and g.members[0].member_metadata == b""
    a.send_join()
    ra, rb = a.recv_join(), b.recv_join()
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader == rb.leader == a.member_id  # the leader stays
    assert len(ra.members) == 2 and rb.members == []
    [g] = describe(a.conn, "two")
    assert g.group_state == "CompletingRebalance"
    assert b.heartbeat() == NONE  # alive while waiting for its assignment
    cid = b.send_sync()
    assert a.sync({a.member_id: b"pa", b.member_id: b"pb"}).assignment == b"pa"
    assert b.conn.receive(cid).assignment == b"pb"
    [g] = describe(a.conn, "two")
    assert g.group_state == "Stable" and g.protocol_type == "consumer" and g.protocol_data == "range"
    assert sorted((x.member_id, x.member_assignment, x.member_metadata, x.client_id, x.client_host)
                  for x in g.members) == sorted([(a.member_id, b"pa", SUB, "a", "/127.0.0.1"),
                                                 (b.member_id, b"pb", SUB, "b", "/127.0.0.1")])
    assert g.authorized_operations == GROUP_OPERATIONS
    # a leaves: b must rejoin and becomes the leader of generation 3
    assert a.leave().error_code == NONE
    assert b.heartbeat() == REBALANCE_IN_PROGRESS
    rb = b.join()
    assert (rb.generation_id, rb.leader, len(rb.members)) == (3, b.member_id, 1)
    assert b.sync({b.member_id: b"all"}).assignment == b"all"
    assert a.heartbeat() == UNKNOWN_MEMBER_ID
    for m in (a, b):
        m.close()


def test_three_members_followers_wait_for_the_leader(broker):
    members = [Member(broker, "three", f"c{i}") for i in range(3)]
    out = stabilize(*members)
    assert len(out) == 3 and len({m.generation for m in members}) == 1
    gen = members[0].generation
    leader = next(m for m in members if m.is_leader)
    # the leader rejoins (a rebalance; a follower rejoining a Stable group unchanged would just
    # get the current generation back), then the followers
    followers = [m for m in members if m is not leader]
    leader.send_join()
    assert wait_for(lambda: followers[0].heartbeat() == REBALANCE_IN_PROGRESS)
    for m in followers:
        m.send_join()
    for m in members:
        assert m.recv_join().generation_id == gen + 1
    assert leader.is_leader
    # the leader may leave some member out: it gets an empty assignment
    cids = [m.send_sync() for m in followers]
    # the broker has taken both followers' SyncGroups: they are parked until the leader syncs
    wait_for(lambda: all(peer_has_read(m.conn.sock) for m in followers), "the broker to take the followers' SyncGroups",
             10, 0.005)
    assert leader.sync({leader.member_id: b"L", followers[0].member_id: b"F0"}).assignment == b"L"
    assert followers[0].conn.receive(cids[0]).assignment == b"F0"
    r = followers[1].conn.receive(cids[1])
    assert (r.error_code, r.assignment) == (NONE, b"")
    for m in members:
        m.close()


def test_rebalance_timeout_removes_members_that_do_not_rejoin(broker):
    a = Member(broker, "rebalance-timeout", "a", rebalance=800)
    b = Member(broker, "rebalance-timeout", "b", rebalance=800)
    stabilize(a, b)
    gen = a.generation
    c = Member(broker, "rebalance-timeout", "c", rebalance=800)
    c.send_join()
    assert wait_for(lambda: a.heartbeat() == REBALANCE_IN_PROGRESS)
    start = time.monotonic()
    a.send_join()  # b never rejoins
    ra, rc = a.recv_join(), c.recv_join()
    assert 0.5 < time.monotonic() - start < 5
    assert ra.generation_id == rc.generation_id == gen + 1
    leader = a if a.is_leader else c
    assert sorted(x.member_id for x in leader.join_resp.members) == sorted([a.member_id, c.member_id])
    assert b.heartbeat() == UNKNOWN_MEMBER_ID
    for m in (a, b, c):
        m.close()


def test_session_timeout_expires_a_silent_member(broker):
    a = Member(broker, "session", "a", session=1000)
    b = Member(broker, "session", "b", session=1000)
    stabilize(a, b)
    gen = a.generation
    start = time.monotonic()

    def a_sees_rebalance():
        return a.heartbeat() == REBALANCE_IN_PROGRESS

    wait_for(a_sees_rebalance, timeout=5, interval=0.2)  # a heartbeats, b stays silent
    assert time.monotonic() - start > 0.8
    r = a.join()
    assert (r.generation_id, [x.member_id for x in r.members]) == (gen + 1, [a.member_id])
    assert b.heartbeat() == UNKNOWN_MEMBER_ID
    assert b.sync().error_code == UNKNOWN_MEMBER_ID
    for m in (a, b):
        m.close()


def test_a_member_that_never_sends_sync_group_is_dropped(broker):
    a = Member(broker, "no-sync", "a", rebalance=600, session=5000)
    b = Member(broker, "no-sync", "b", rebalance=600, session=5000)
    rebalance(a, b)
    leader, follower = (a, b) if a.is_leader else (b, a)
    assert leader.sync({leader.member_id: b"x", follower.member_id: b"y"}).error_code == NONE
    # the follower never syncs: after the rebalance timeout the group rebalances without it
    assert wait_for(lambda: leader.heartbeat() == REBALANCE_IN_PROGRESS, timeout=5)
    gen = leader.generation
    r = leader.join()
    assert [x.member_id for x in r.members] == [leader.member_id] and r.generation_id == gen + 1
    for m in (a, b):
        m.close()


def test_static_membership(broker):
    both = [("range", SUB), ("roundrobin", SUB)]
    a = Member(broker, "static", "a", instance="inst-a", version=5, protocols=both)
    b = Member(broker, "static", "b", instance="inst-b", version=5, protocols=both)
    stabilize(a, b)
    gen = a.generation
    assert a.join_resp.members[0].group_instance_id in ("inst-a", "inst-b")
    assert a.member_id.startswith("inst-a-")  # Kafka prefixes a static member's id with its instance id
    leader, follower = (a, b) if a.is_leader else (b, a)
    # the follower restarts: unknown member id, same instance id and protocols -> new member id, no rebalance
    old_id = follower.member_id
    follower.member_id = ""
    r = follower.join()
    assert r.error_code == NONE and r.member_id != old_id and r.generation_id == gen
    assert r.leader == leader.member_id and r.members == []
    assert follower.sync().assignment == b"assign-" + old_id.encode()  # keeps its assignment
    assert leader.heartbeat() == NONE and follower.heartbeat() == NONE
    assert follower.heartbeat(member_id=old_id) == FENCED_INSTANCE_ID
    assert follower.conn.call(SYNC, 5, request(SYNC, group_id="static", generation_id=gen, member_id=old_id,
                                               group_instance_id=follower.instance)).error_code == FENCED_INSTANCE_ID
    # the leader restarts: before v9 the old leader id is returned (no assignment to compute) ...
    old_leader = leader.member_id
    leader.member_id = ""
    r = leader.join()
    assert (r.error_code, r.generation_id, r.leader, r.skip_assignment) == (NONE, gen, old_leader, False)
    # ... from v9 the new id, skip_assignment and the members
    leader.version = 9
    old_leader = leader.member_id
    leader.member_id = ""
    r = leader.join()
    assert (r.error_code, r.generation_id, r.leader, r.skip_assignment) == (NONE, gen, r.member_id, True)
    assert sorted(x.group_instance_id for x in r.members) == ["inst-a", "inst-b"]
    [g] = describe(a.conn, "static")
    assert g.group_state == "Stable" and sorted(x.group_instance_id for x in g.members) == ["inst-a", "inst-b"]
    # a restart with protocols that change the selection (range -> roundrobin) rebalances; one
    # with no protocol in common with the group is refused
    follower.member_id = ""
    follower.protocols = [("sticky", SUB)]
    assert follower.join().error_code == INCONSISTENT_GROUP_PROTOCOL
    follower.protocols = [("roundrobin", SUB)]
    follower.send_join()
    assert wait_for(lambda: leader.heartbeat() == REBALANCE_IN_PROGRESS)
    leader.send_join()
    rf, rl = follower.recv_join(), leader.recv_join()
    assert rf.generation_id == rl.generation_id == gen + 1 and rl.protocol_name == "roundrobin"
    # administrative removal by instance id (LeaveGroup v3+ with no member id)
    resp = a.conn.call(LEAVE, 4, request(LEAVE, group_id="static", members=[
        MemberIdentity(member_id="", group_instance_id="inst-b"),
        MemberIdentity(member_id="", group_instance_id="nope")]))
    assert [(x.group_instance_id, x.error_code) for x in resp.members] == [
        ("inst-b", NONE), ("nope", UNKNOWN_MEMBER_ID)]
    [g] = describe(a.conn, "static")
    assert [x.group_instance_id for x in g.members] == ["inst-a"]
    for m in (a, b):
        m.close()


def test_protocol_selection_by_votes_and_inconsistent_protocols(broker):
    a = Member(broker, "protocols", "a", protocols=[("range", SUB), ("roundrobin", SUB), ("sticky", SUB)])
    b = Member(broker, "protocols", "b", protocols=[("roundrobin", SUB), ("range", SUB)])
    c = Member(broker, "protocols", "c", protocols=[("sticky", SUB), ("roundrobin", SUB), ("range", SUB)])
    rebalance(a, b, c)
    # candidates {range, roundrobin}; votes: a range, b roundrobin, c roundrobin
    assert {m.join_resp.protocol_name for m in (a, b, c)} == {"roundrobin"}
    leader = next(m for m in (a, b, c) if m.is_leader)
    by_id = {x.member_id: x.metadata for x in leader.join_resp.members}
    assert set(by_id) == {a.member_id, b.member_id, c.member_id}
    # no protocol in common, or another protocol type
    d = Member(broker, "protocols-2", "d", protocols=[("range", SUB)])
    stabilize(d)
    e = Member(broker, "protocols-2", "e", protocols=[("sticky", SUB)], version=3)
    assert e.join().error_code == INCONSISTENT_GROUP_PROTOCOL
    f = Member(broker, "protocols-2", "f", protocols=[("range", SUB)], protocol_type="connect", version=3)
    assert f.join().error_code == INCONSISTENT_GROUP_PROTOCOL
    g = Member(broker, "protocols-3", "g", protocols=[], version=3)
    assert g.join().error_code == INCONSISTENT_GROUP_PROTOCOL
    # SyncGroup v5 with another protocol name
    assert d.conn.call(SYNC, 5, request(SYNC, group_id="protocols-2", generation_id=d.generation, member_id=d.member_id,
                                        protocol_type="consumer", protocol_name="sticky")).error_code == \
        INCONSISTENT_GROUP_PROTOCOL
    for m in (a, b, c, d, e, f, g):
        m.close()


def test_join_sync_heartbeat_leave_errors(broker):
    m = Member(broker, "errors", "m", session=100)
    assert m.join().error_code == INVALID_SESSION_TIMEOUT  # below group.min.session.timeout.ms=500
    m.session = 1800001
    assert m.join().error_code == INVALID_SESSION_TIMEOUT
    m.session = 10000
    nameless = Member(broker, "", "x", version=5)
    assert nameless.join().error_code == INVALID_GROUP_ID
    assert nameless.heartbeat(generation=1, member_id="x") == INVALID_GROUP_ID
    nameless.close()
    ghost = Member(broker, "no-such-group", "ghost")
    ghost.member_id = "ghost-1"
    assert ghost.join().error_code == UNKNOWN_MEMBER_ID
    assert ghost.heartbeat(generation=1) == UNKNOWN_MEMBER_ID
    assert ghost.sync().error_code == UNKNOWN_MEMBER_ID
    resp = ghost.leave(version=1)
    assert resp.error_code == UNKNOWN_MEMBER_ID
    resp = ghost.leave(version=3)
    assert resp.error_code == NONE and resp.members[0].error_code == UNKNOWN_MEMBER_ID
    stabilize(m)
    assert m.heartbeat(generation=m.generation + 1) == ILLEGAL_GENERATION
    assert m.heartbeat(member_id="unknown") == UNKNOWN_MEMBER_ID
    resp = m.conn.call(SYNC, 3, request(SYNC, group_id="errors", generation_id=7, member_id=m.member_id))
    assert resp.error_code == ILLEGAL_GENERATION
    stranger = Member(broker, "errors", "s")
    stranger.member_id = "made-up"
    assert stranger.join().error_code == UNKNOWN_MEMBER_ID
    # a SyncGroup during PreparingRebalance: REBALANCE_IN_PROGRESS
    n = Member(broker, "errors", "n")
    n.send_join()
    assert wait_for(lambda: m.heartbeat() == REBALANCE_IN_PROGRESS)
    assert m.sync().error_code == REBALANCE_IN_PROGRESS
    # a leaving pending member (MEMBER_ID_REQUIRED but never rejoined) is just dropped
    p = Member(broker, "errors", "p")
    p.get_member_id()
    assert p.leave().members[0].error_code == NONE
    m.send_join()
    assert m.recv_join().generation_id == n.recv_join().generation_id == 2
    for x in (m, ghost, stranger, n, p):
        x.close()


def test_group_max_size(broker):
    members = [Member(broker, "max-size", f"c{i}") for i in range(3)]
    stabilize(*members)
    fourth = Member(broker, "max-size", "c3")
    r = fourth.conn.call(JOIN, 9, fourth.join_request())
    assert (r.error_code, r.member_id) == (GROUP_MAX_SIZE_REACHED, "")
    assert all(m.heartbeat() == NONE for m in members)
    # a static member restarting into a full group takes its own place
    statics = [Member(broker, "max-size-static", f"s{i}", instance=f"i{i}", version=5) for i in range(3)]
    stabilize(*statics)
    gen = statics[0].generation
    statics[1].member_id = ""
    r = statics[1].join()
    assert (r.error_code, r.generation_id) == (NONE, gen)
    for m in members + [fourth] + statics:
        m.close()


def test_pending_member_that_never_rejoins_expires(broker):
    a = Member(broker, "pending", "a")
    stabilize(a)
    p = Member(broker, "pending", "p", session=600)
    p.get_member_id()
    a.send_join()  # the leader rejoins: the rebalance waits for the pending member ...
    start = time.monotonic()
    r = a.recv_join()  # ... until its session timeout drops it
    assert r.error_code == NONE and 0.4 < time.monotonic() - start < 5
    assert [x.member_id for x in r.members] == [a.member_id]
    for m in (a, p):
        m.close()


# -- offsets -------------------------------------------------------------------------------------------
def test_offset_commit_and_fetch_every_version(broker):
    with broker.client() as c:
        for v in range(0, 10):
            group = f"simple-{v}"
            errors = commit(c, group, {("t1", 0): 10 + v, ("t1", 1): 20 + v}, version=v)
            assert errors == {("t1", 0): NONE, ("t1", 1): NONE}, (v, errors)
        for v in range(0, 10):
            got = fetch(c, f"simple-{v}", [("t1", 0), ("t1", 1), ("t2", 0)], version=v)
            e = 3 if v >= 6 else -1  # committed from v6, returned from v5
            assert got == {("t1", 0): (10 + v, e, "m", NONE), ("t1", 1): (20 + v, e, "m", NONE),
                           ("t2", 0): (-1, -1, "", NONE)}, (v, got)
        # null topics: everything (v2+), and v8's several groups at once
        assert fetch(c, "simple-9", None, version=2) == {("t1", 0): (19, -1, "m", NONE), ("t1", 1): (29, -1, "m", NONE)}
        resp = c.call(OFFSET_FETCH, 8, request(OFFSET_FETCH, groups=[
            OffsetFetchRequestGroup(group_id="simple-8", topics=None),
            OffsetFetchRequestGroup(group_id="nobody",
                                    topics=[OffsetFetchRequestTopics(name="t1", partition_indexes=[0])])]))
        assert [(g.group_id, [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                              for t in g.topics])
                for g in resp.groups] == [("simple-8", [("t1", [(0, 18), (1, 28)])]), ("nobody", [("t1", [(0, -1)])])]
        assert fetch(c, "simple-0", [("t1", 0)], version=0)[("t1", 0)][0] == 10
        # per-partition errors: unknown topic/partition, metadata above offset.metadata.max.bytes
        errors = commit(c, "simple-9", {("t1", 0): 99, ("nope", 0): 1, ("t1", 9): 1})
        assert errors == {("t1", 0): NONE, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION,
                          ("t1", 9): UNKNOWN_TOPIC_OR_PARTITION}
        assert commit(c, "simple-9", {("t1", 1): 5}, metadata="x" * 4097) == {("t1", 1): OFFSET_METADATA_TOO_LARGE}
        assert commit(c, "simple-9", {("t1", 1): 5}, metadata=None) == {("t1", 1): NONE}
        assert fetch(c, "simple-9", [("t1", 0), ("t1", 1)]) == {
            ("t1", 0): (99, 3, "m", NONE), ("t1", 1): (5, 3, "", NONE)}
        # a generation for a group that does not exist
        assert commit(c, "ghost-group", {("t1", 0): 1}, generation=1, member_id="m", version=8) == {
            ("t1", 0): ILLEGAL_GENERATION}
        assert commit(c, "ghost-group", {("t1", 0): 1}, generation=1, member_id="m", version=9) == {
            ("t1", 0): GROUP_ID_NOT_FOUND}


def test_offset_commit_generation_and_member_checks(broker):
    a = Member(broker, "committers", "a")
    b = Member(broker, "committers", "b")
    rebalance(a, b)
    # CompletingRebalance: REBALANCE_IN_PROGRESS for a valid member
    assert commit(a.conn, "committers", {("t1", 0): 1}, a.generation, a.member_id) == {("t1", 0): REBALANCE_IN_PROGRESS}
    leader, follower = (a, b) if a.is_leader else (b, a)
    cid = follower.send_sync()
    leader.sync({a.member_id: b"1", b.member_id: b"2"})
    follower.conn.receive(cid)
    assert commit(a.conn, "committers", {("t1", 0): 5}, a.generation, a.member_id) == {("t1", 0): NONE}
    assert commit(a.conn, "committers", {("t1", 0): 6}, a.generation + 1, a.member_id) == {
        ("t1", 0): ILLEGAL_GENERATION}
    assert commit(a.conn, "committers", {("t1", 0): 6}, a.generation, "stranger") == {("t1", 0): UNKNOWN_MEMBER_ID}
    # a free consumer may not commit to a group that has members
    assert commit(a.conn, "committers", {("t1", 0): 6}) == {("t1", 0): UNKNOWN_MEMBER_ID}
    # during PreparingRebalance commits are still accepted
    c = Member(broker, "committers", "c")
    c.send_join()
    assert wait_for(lambda: a.heartbeat() == REBALANCE_IN_PROGRESS)
    assert commit(b.conn, "committers", {("t1", 1): 7}, b.generation, b.member_id) == {("t1", 1): NONE}
    assert fetch(a.conn, "committers", [("t1", 0), ("t1", 1)]) == {
        ("t1", 0): (5, 3, "m", NONE), ("t1", 1): (7, 3, "m", NONE)}
    a.send_join()
    b.send_join()
    for m in (a, b, c):
        assert m.recv_join().error_code == NONE
    # static members: a commit naming another member id for the instance is fenced
    s = Member(broker, "static-commit", "s", instance="i1", version=5)
    stabilize(s)
    assert commit(s.conn, "static-commit", {("t1", 0): 1}, s.generation, "other", instance="i1", version=8) == {
        ("t1", 0): FENCED_INSTANCE_ID}
    assert commit(s.conn, "static-commit", {("t1", 0): 1}, s.generation, s.member_id, instance="i1", version=8) == {
        ("t1", 0): NONE}
    for m in (a, b, c, s):
        m.close()


def test_offset_delete(broker):
    with broker.client() as c:
        commit(c, "od-empty", {("t1", 0): 1, ("t1", 1): 2, ("t2", 0): 3})
        resp = c.call(OFFSET_DELETE, 0, request(OFFSET_DELETE, group_id="od-empty", topics=[
            OffsetDeleteRequestTopic(name="t1", partitions=[OffsetDeleteRequestPartition(partition_index=0)]),
            OffsetDeleteRequestTopic(name="nope", partitions=[OffsetDeleteRequestPartition(partition_index=0)])]))
        assert resp.error_code == NONE
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
            ("t1", [(0, NONE)]), ("nope", [(0, UNKNOWN_TOPIC_OR_PARTITION)])]
        assert fetch(c, "od-empty", None) == {("t1", 1): (2, 3, "m", NONE), ("t2", 0): (3, 3, "m", NONE)}
        resp = c.call(OFFSET_DELETE, 0, request(OFFSET_DELETE, group_id="no-such-group", topics=[]))
        assert resp.error_code == GROUP_ID_NOT_FOUND
    # a consumer group subscribed to t1: its t1 offsets stay, t2's may go
    m = Member(broker, "od-active", "m", protocols=[("range", subscription("t1"))])
    stabilize(m)
    commit(m.conn, "od-active", {("t1", 0): 1, ("t2", 0): 2}, m.generation, m.member_id)
    resp = m.conn.call(OFFSET_DELETE, 0, request(OFFSET_DELETE, group_id="od-active", topics=[
        OffsetDeleteRequestTopic(name=t, partitions=[OffsetDeleteRequestPartition(partition_index=0)])
        for t in ("t1", "t2")]))
    assert resp.error_code == NONE
    assert [(t.name, t.partitions[0].error_code) for t in resp.topics] == [
        ("t1", GROUP_SUBSCRIBED_TO_TOPIC), ("t2", NONE)]
    assert fetch(m.conn, "od-active", None) == {("t1", 0): (1, 3, "m", NONE)}
    # a group with members of another protocol type: NON_EMPTY_GROUP
    n = Member(broker, "od-connect", "n", protocol_type="connect")
    stabilize(n)
    resp = n.conn.call(OFFSET_DELETE, 0, request(OFFSET_DELETE, group_id="od-connect", topics=[
        OffsetDeleteRequestTopic(name="t1", partitions=[OffsetDeleteRequestPartition(partition_index=0)])]))
    assert (resp.error_code, resp.topics) == (NON_EMPTY_GROUP, [])
    for x in (m, n):
        x.close()


# -- ListGroups, DescribeGroups, DeleteGroups -----------------------------------------------------------
def test_list_describe_and_delete_groups(broker):
    a = Member(broker, "lister-stable", "a")
    stabilize(a)
    commit(a.conn, "lister-empty", {("t1", 0): 4})
    with broker.client() as c:
        for v in range(0, 6):
            groups = list_groups(c, version=v)
            assert groups["lister-stable"].protocol_type == "consumer"
            assert groups["lister-empty"].protocol_type == ""
            if v >= 4:
                assert (groups["lister-stable"].group_state, groups["lister-empty"].group_state) == ("Stable", "Empty")
            if v >= 5:
                assert groups["lister-stable"].group_type == "classic"
        stable = list_groups(c, version=4, states=["stable"])
        assert "lister-stable" in stable and "lister-empty" not in stable
        assert all(g.group_state == "Stable" for g in stable.values())
        assert "lister-empty" in list_groups(c, version=5, states=["Empty"], types=["classic"])
        assert list_groups(c, version=5, types=["consumer"]) == {}
        for v in range(0, 6):
            gs = describe(c, "lister-stable", "lister-empty", "lister-unknown", version=v)
            assert [(g.group_id, g.error_code, g.group_state) for g in gs] == [
                ("lister-stable", NONE, "Stable"), ("lister-empty", NONE, "Empty"), ("lister-unknown", NONE, "Dead")]
            assert gs[0].members[0].member_id == a.member_id
            assert gs[0].members[0].member_assignment.startswith(b"assign-")
            assert gs[0].authorized_operations == (GROUP_OPERATIONS if v >= 3 else -2147483648)
        resp = c.call(DELETE_GROUPS, 2, request(DELETE_GROUPS, groups_names=["lister-stable", "lister-empty",
                                                                            "lister-unknown"]))
        assert [(r.group_id, r.error_code) for r in resp.results] == [
            ("lister-stable", NON_EMPTY_GROUP), ("lister-empty", NONE), ("lister-unknown", GROUP_ID_NOT_FOUND)]
        assert "lister-empty" not in list_groups(c)
        assert fetch(c, "lister-empty", [("t1", 0)]) == {("t1", 0): (-1, -1, "", NONE)}
        a.leave()
        for v in (0, 1):
            commit(c, f"deleted-{v}", {("t1", 0): 1})
            resp = c.call(DELETE_GROUPS, v, request(DELETE_GROUPS, groups_names=[f"deleted-{v}"]))
            assert resp.results[0].error_code == NONE
        resp = c.call(DELETE_GROUPS, 1, request(DELETE_GROUPS, groups_names=["lister-stable"]))
        assert resp.results[0].error_code == NONE  # Empty once its member left
    a.close()


def test_deleting_a_topic_removes_its_committed_offsets(broker):
    with broker.client() as c:
        auto_create(c, "doomed")
        assert commit(c, "doomed-group", {("doomed", 0): 7, ("t1", 0): 8}) == {("doomed", 0): NONE, ("t1", 0): NONE}
        resp = c.call(DELETE_TOPICS, 4, request(DELETE_TOPICS, topic_names=["doomed"], timeout_ms=5000))
        assert resp.responses[0].error_code == NONE
        assert wait_for(lambda: fetch(c, "doomed-group", None) == {("t1", 0): (8, 3, "m", NONE)})


# -- persistence ---------------------------------------------------------------------------------------
def _java_hash_by_formula(s):
    units = [int.from_bytes(s.encode("utf-16-be", "surrogatepass")[i:i + 2], "big")
             for i in range(0, len(s.encode("utf-16-be", "surrogatepass")), 2)]
    n = len(units)
    h = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def test_group_to_partition_follows_java_string_hash_code():
    # values of Java's "...".hashCode()
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE: Utils.abs gives 0
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash("\u00e9") == 233
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair
    for s in ["my-group", "console-consumer-12345", "a" * 100, "grüße", "🙂 group", "x\u0000y"]:
        h = _java_hash_by_formula(s)
        assert java_string_hash(s) == h
        assert partition_for(s, 50) == abs(h) % 50
        assert partition_for(s, 7) == abs(h) % 7


def _decode_key_by_hand(data):
    version = struct.unpack_from(">h", data)[0]
    pos = 2

    def string():
        nonlocal pos
        n = struct.unpack_from(">h", data, pos)[0]
        pos += 2
        if n < 0:
            return None
        s = data[pos:pos + n].decode()
        pos += n
        return s

    if version == 1:
        group, topic = string(), string()
        return ("offset", group, topic, struct.unpack_from(">i", data, pos)[0])
    assert version == 2
    return ("group", string())


def _decode_group_value_v2_by_hand(data):
    """GroupMetadataValue version 2 as a ZooKeeper-era reader walks it: protocol type,
    generation, protocol, leader, current state timestamp, then members of member id, client
    id, client host, rebalance timeout, session timeout, subscription, assignment. The value
    must end exactly there."""
    pos = 0

    def take(fmt):
        nonlocal pos
        out = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return out[0]

    def string():
        nonlocal pos
        n = take(">h")
        s = data[pos:pos + n].decode() if n >= 0 else None
        pos += max(n, 0)
        return s

    def blob():
        nonlocal pos
        n = take(">i")
        b = bytes(data[pos:pos + n])
        pos += n
        return b

    assert take(">h") == 2
    protocol_type, generation, protocol, leader = string(), take(">i"), string(), string()
    take(">q")
    members = [(string(), string(), string(), take(">i"), take(">i"), blob(), blob()) for _ in range(take(">i"))]
    assert pos == len(data)
    return protocol_type, generation, protocol, leader, members


def test_a_static_member_makes_the_group_record_version_3(broker):
    group = "format-static"
    m = Member(broker, group, "fmt-static", protocols=[("range", SUB)], instance="instance-7")
    stabilize(m, assignments={})
    records = read_offsets_topic(broker.bootstrap, partition_for(group, 50))
    values = [v for k, v in records if _decode_key_by_hand(k) == ("group", group) and v is not None]
    assert values
    for value in values:
        assert struct.unpack_from(">h", value)[0] == 3
        [mm] = GroupMetadataValue.read(Reader(value, 2), 3).members
        assert (mm.member_id, mm.group_instance_id, mm.client_id) == (m.member_id, "instance-7", "fmt-static")
    m.leave()
    m.close()


def test_offsets_topic_records_are_kafkas_format(broker):
    group = "format-check"
    m = Member(broker, group, "fmt", protocols=[("range", SUB)], session=7000, rebalance=9000)
    stabilize(m, assignments={})
    assert commit(m.conn, group, {("t1", 1): 42}, m.generation, m.member_id, metadata="meta") == {("t1", 1): NONE}
    partition = partition_for(group, 50)
    assert partition == abs(_java_hash_by_formula(group)) % 50
    records = read_offsets_topic(broker.bootstrap, partition)
    mine = [(k, v) for k, v in records if _decode_key_by_hand(k)[1] == group]
    kinds = [_decode_key_by_hand(k) for k, _v in mine]
    assert ("group", group) in kinds and ("offset", group, "t1", 1) in kinds
    for key, value in mine:
        kind = _decode_key_by_hand(key)
        version = struct.unpack_from(">h", value)[0]
        if kind[0] == "offset":
            assert OffsetCommitKey.read(Reader(key, 2), 1).topic == "t1"
            assert version == 3
            # by hand: offset int64, leader epoch int32, metadata string, commit timestamp int64
            offset, epoch, n = struct.unpack_from(">qih", value, 2)
            assert (offset, epoch, value[16:16 + n]) == (42, 3, b"meta")
            (ts,) = struct.unpack_from(">q", value, 16 + n)
            assert abs(ts - time.time() * 1000) < 60000 and len(value) == 16 + n + 8
            v = OffsetCommitValue.read(Reader(value, 2), 3)
            assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (42, 3, "meta", ts)
        else:
            assert GroupMetadataKey.read(Reader(key, 2), 2).group == group
            # no static member: version 2, the lowest that carries the data (older readers such
            # as Burrow 1.2 misread version 3's members)
            assert version == 2
            v = GroupMetadataValue.read(Reader(value, 2), 2)
            assert (v.protocol_type, v.protocol, v.leader) == ("consumer", "range", m.member_id)
            assert v.generation == m.generation
            [mm] = v.members
            assert (mm.member_id, mm.client_id, mm.client_host, mm.rebalance_timeout, mm.session_timeout,
                    mm.subscription, mm.assignment) == (m.member_id, "fmt", "/127.0.0.1", 9000, 7000, SUB, b"")
            assert _decode_group_value_v2_by_hand(value) == (
                "consumer", m.generation, "range", m.member_id,
                [(m.member_id, "fmt", "/127.0.0.1", 9000, 7000, SUB, b"")])
    # no other partition holds this group's records
    other = (partition + 1) % 50
    assert all(_decode_key_by_hand(k)[1] != group for k, _v in read_offsets_topic(broker.bootstrap, other))
    # deleting the group writes tombstones (null values) for the group and its offsets
    m.leave()
    resp = m.conn.call(DELETE_GROUPS, 2, request(DELETE_GROUPS, groups_names=[group]))
    assert resp.results[0].error_code == NONE
    records = read_offsets_topic(broker.bootstrap, partition)
    last = {}
    for k, v in records:
        if _decode_key_by_hand(k)[1] == group:
            last[_decode_key_by_hand(k)] = v
    assert last == {("group", group): None, ("offset", group, "t1", 1): None}
    m.close()


def test_restart_keeps_offsets_groups_and_generations(tmp_path):
    with BrokerProcess(tmp_path / "data", settings=SETTINGS) as b:
        with b.client() as c:
            auto_create(c, "t1")
            find_coordinators(c)
        m = Member(b, "durable", "m", session=30000)
        stabilize(m)
        m.send_join()  # generation 2
        m.recv_join()
        m.sync({m.member_id: b"gen2"})
        assert commit(m.conn, "durable", {("t1", 0): 100, ("t1", 1): 200}, m.generation, m.member_id) == {
            ("t1", 0): NONE, ("t1", 1): NONE}
        with b.client() as c:
            commit(c, "free", {("t1", 0): 7})
            commit(c, "gone", {("t1", 0): 8})
            c.call(DELETE_GROUPS, 2, request(DELETE_GROUPS, groups_names=["gone"]))
        m.close()
        b.restart()
        with b.client() as c:
            assert fetch(c, "durable", None) == {("t1", 0): (100, 3, "m", NONE), ("t1", 1): (200, 3, "m", NONE)}
            assert fetch(c, "free", None) == {("t1", 0): (7, 3, "m", NONE)}
            assert fetch(c, "gone", None) == {}
            groups = list_groups(c)
            assert set(groups) == {"durable", "free"}
            [g] = describe(c, "durable")
            assert (g.group_state, g.protocol_data, [(x.member_id, x.member_assignment) for x in g.members]) == (
                "Stable", "range", [(m.member_id, b"gen2")])
        # the member carries on with its generation, as with Kafka after a coordinator move
        m.conn = b.client(client_id="m")
        assert m.heartbeat() == NONE and m.generation == 2
        assert m.sync().assignment == b"gen2"
        # a new member: generation 3
        n = Member(b, "durable", "n")
        n.send_join()
        assert wait_for(lambda: m.heartbeat() == REBALANCE_IN_PROGRESS)
        m.send_join()
        assert m.recv_join().generation_id == n.recv_join().generation_id == 3
        m.close()
        n.close()



def test_a_member_read_back_after_a_restart_expires_when_it_stays_silent(tmp_path):
    """Kafka's onGroupLoaded: every member restored from __consumer_offsets gets its session
    timer at load. A member that died with the old coordinator is then dropped after its
    session timeout, so a newcomer's join completes then, not after the dead member's (much
    longer) rebalance timeout: a consumer resuming after a coordinator failover is not stuck."""
    with BrokerProcess(tmp_path / "data", settings=SETTINGS) as b:
        with b.client() as c:
            auto_create(c, "t1")
            find_coordinators(c)
        dead = Member(b, "loaded", "dead", session=6000, rebalance=120_000)
        stabilize(dead)
        dead.conn.close()  # gone without a LeaveGroup, with the coordinator killed under it
        b.kill()
        b.start()
        with b.client() as c:
            [g] = describe(c, "loaded")
            assert (g.group_state, [x.member_id for x in g.members]) == ("Stable", [dead.member_id])
        n = Member(b, "loaded", "n", session=30_000, rebalance=120_000)
        r = n.join()  # waits for the rebalance: it completes once the silent member expired
        assert r.error_code == NONE
        assert (r.generation_id, [x.member_id for x in r.members]) == (dead.generation + 1, [n.member_id])
        n.close()

# -- timers of a broker with non-default settings -----------------------------------------------------------
def test_initial_rebalance_delay_and_offset_expiry(tmp_path):
    settings = {**SETTINGS, "group.initial.rebalance.delay.ms": "500", "offsets.retention.check.interval.ms": "200"}
    with BrokerProcess(tmp_path / "data", settings=settings) as b:
        with b.client() as c:
            auto_create(c, "t1")
            # creates the offsets topic
            c.call(FIND_COORDINATOR, 3, request(FIND_COORDINATOR, key="delayed", key_type=0))
        a, bb = Member(b, "delayed", "a"), Member(b, "delayed", "b")
        a.get_member_id()
        bb.get_member_id()
        # several retention checks pass while the members hold their ids: an Empty group without
        # offsets is removed by them, unless members are about to join it
        time.sleep(0.5)
        start = time.monotonic()
        a.send_join()
        with b.client() as c:  # a's join started the delay
            wait_for(lambda: describe(c, "delayed")[0].group_state == "PreparingRebalance",
                     "a's join to start the initial rebalance delay", 10, 0.01)
        bb.send_join()  # arrives during the delay: both are in the first generation
        ra, rb = a.recv_join(), bb.recv_join()
        elapsed = time.monotonic() - start
        assert (ra.error_code, rb.error_code) == (NONE, NONE), (ra, rb)
        assert elapsed >= 0.45, (elapsed, ra, rb)
        assert ra.generation_id == rb.generation_id == 1
        leader = a if a.is_leader else bb
        assert len(leader.join_resp.members) == 2
        # an OffsetCommit v2 retention time sets an expire timestamp (OffsetCommitValue v1)
        with b.client() as c:
            resp = c.call(OFFSET_COMMIT, 2, request(OFFSET_COMMIT, group_id="expiring", retention_time_ms=1000, topics=[
                OffsetCommitRequestTopic(name="t1", partitions=[OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=5, committed_metadata="")])]))
            assert resp.topics[0].partitions[0].error_code == NONE
            commit(c, "kept", {("t1", 0): 6})
            assert fetch(c, "expiring", [("t1", 0)])[("t1", 0)][0] == 5
            wait_for(lambda: fetch(c, "expiring", [("t1", 0)])[("t1", 0)][0] == -1, timeout=5)
            assert "expiring" not in list_groups(c)  # an Empty group without offsets goes
            assert fetch(c, "kept", [("t1", 0)])[("t1", 0)][0] == 6
            records = read_offsets_topic(b.bootstrap, partition_for("expiring", 50))
            values = [(k, v) for k, v in records if _decode_key_by_hand(k)[1] == "expiring"]
            assert struct.unpack_from(">h", values[0][1])[0] == 1  # value version 1 carries the expire time
            assert OffsetCommitValue.read(Reader(values[0][1], 2), 1).expire_timestamp > 0
            assert values[-1][1] is None
        a.close()
        bb.close()


# -- a real client ----------------------------------------------------------------------------------------
def test_kafka_python_consumers_resume_from_committed_offsets(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

    topic = "kp-topic"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(20):
        producer.send(topic, key=b"k%d" % (i % 2), value=b"v%d" % i, partition=i % 2)
    producer.flush()
    producer.close()

    def consumer():
        return KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id="kp-group",
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=3000,
                             session_timeout_ms=6000, heartbeat_interval_ms=500)

    first = consumer()
    seen = []
    for rec in first:
        seen.append(rec.value)
        if len(seen) == 12:
            break
    first.commit()
    committed = {tp.partition: first.committed(tp) for tp in first.assignment()}
    first.close()
    assert sum(committed.values()) == 12

    second = consumer()
    rest = [rec.value for rec in second]
    second.close()
    assert len(rest) == 8
    assert sorted(seen + rest) == sorted(b"v%d" % i for i in range(20))

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (listed["kp-group"]["protocol_type"], listed["kp-group"]["group_state"]) == ("consumer", "Empty")
        offsets = admin.list_group_offsets({"kp-group": None})["kp-group"]
        assert {tp: om.offset for tp, om in offsets.items()} == {
            TopicPartition(topic, p): o for p, o in committed.items()}
        described = admin.describe_groups(["kp-group"])["kp-group"]
        assert (described["group_state"], described["protocol_type"], described["members"]) == ("Empty", "consumer", [])
    finally:
        admin.close()


# -- retention rules, in process (offsets.retention.minutes is at least a minute) ---------------------------
def test_offset_retention_rules(tmp_path):
    import asyncio

    from broker_client import create_topic_and_wait, internal_topic_ready, start_single_node
    from kafkacore.coordinator.offset_store import make_offset

    def new_broker():
        return start_single_node(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0",
                                                     "offsets.topic.num.partitions": "5"})

    async def scenario():
        broker = await new_broker()
        try:
            await steps(broker)
        finally:
            broker.shutdown()

    async def steps(broker):
        gc = broker.group_coordinator
        for t in ("t1", "t2"):
            await create_topic_and_wait(broker, t, 1)
        await internal_topic_ready(broker, gc.store)
        retention = gc.group_manager.offsets_retention_ms
        now = int(time.time() * 1000)
        old = now - retention - 1000
        r = await gc.join_group("ret", "", None, "c", "/h", 10000, 5000, "consumer", [("range", subscription("t1"))],
                                require_known_member_id=False)
        s = await gc.sync_group("ret", r.generation, r.member_id, None, None, None, {r.member_id: b"x"})
        assert s.error == NONE
        errors = gc.commit_offsets("ret", r.member_id, None, r.generation, {
            ("t1", 0): make_offset(1, commit_timestamp=old), ("t2", 0): make_offset(2, commit_timestamp=old)})
        assert set(errors.values()) == {NONE}
        assert gc.commit_offsets("simple", "", None, -1, {("t1", 0): make_offset(3, commit_timestamp=old)}) == {
            ("t1", 0): NONE}
        assert gc.commit_offsets("simple-new", "", None, -1, {("t1", 0): make_offset(4)}) == {("t1", 0): NONE}
        # a Stable consumer group loses old offsets of topics it no longer subscribes to; a group
        # that only stores offsets loses old ones (and goes once it has none)
        assert gc.group_manager.expire_offsets(now) == 2
        assert set(gc.groups["ret"].offsets) == {("t1", 0)}
        assert "simple" not in gc.groups and "simple-new" in gc.groups
        # an Empty group's offsets expire a retention period after it became Empty
        assert gc.leave_group("ret", [(r.member_id, None)]) == (NONE, [NONE])
        assert gc.groups["ret"].state == "Empty"
        assert gc.group_manager.expire_offsets(now) == 0
        assert gc.group_manager.expire_offsets(now + retention + 60000) == 2  # ret's t1 and simple-new's
        assert gc.groups == {}

    asyncio.run(scenario())

    # and the log agrees after a restart: the tombstones win
    async def reload():
        broker = await new_broker()
        try:
            gc = broker.group_coordinator
            await internal_topic_ready(broker, gc.store)
            assert gc.groups == {}
        finally:
            broker.shutdown()
    asyncio.run(reload())
