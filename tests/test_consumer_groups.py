"""KIP-848 consumer groups against a real ``kafkacore serve`` process, at the wire:
ConsumerGroupHeartbeat's checks and Kafka's error codes, member and group epochs, the
revoke-before-assign reconciliation (a partition never has two owners), static members
(leave with -2, rejoin under a new member id), the assignors, and the server-side assignors'
own rules. The confluent-kafka clients' side is tests/test_consumer_groups_clients.py."""
import threading
import urllib.request

import pytest

from _kcutil import read_offsets_topic, wait_for
from broker_client import BrokerProcess, auto_create, find_coordinators, free_port, request
from kafkacore.coordinator import consumer_group_records as cg_records
from kafkacore.coordinator.assignors import MemberSpec, assign
from kafkacore.coordinator.offset_store import partition_for
from kafkacore.protocol.coordinator.consumer_group_current_member_assignment_value import \
    ConsumerGroupCurrentMemberAssignmentValue
from kafkacore.protocol.coordinator.consumer_group_member_metadata_value import ConsumerGroupMemberMetadataValue
from kafkacore.protocol.coordinator.consumer_group_metadata_value import ConsumerGroupMetadataValue
from kafkacore.protocol.messages.consumer_group_heartbeat_request import TopicPartitions
from kafkacore.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkacore.protocol.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kafkacore.protocol.messages.offset_fetch_request import OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kafkacore.protocol.wire import Reader

HEARTBEAT, DESCRIBE, API_VERSIONS, JOIN = 68, 69, 18, 11
NONE = 0
FENCED_INSTANCE_ID = 82
GROUP_ID_NOT_FOUND = 69
GROUP_MAX_SIZE_REACHED = 81
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_REQUEST = 42
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
MEMBER_ID_REQUIRED = 79
NON_EMPTY_GROUP = 68
UNSUPPORTED_VERSION = 35
INVALID_REGULAR_EXPRESSION = 128

SETTINGS = {"num.partitions": "4", "offsets.topic.num.partitions": "3",
            "group.consumer.session.timeout.ms": "5000", "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "250", "group.consumer.min.heartbeat.interval.ms": "100",
            "group.consumer.max.size": "3", "metrics.port": str(free_port())}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("cgroups") / "data", settings=SETTINGS) as b:
        with b.client() as c:
            for topic in ("t4", "u2"):
                auto_create(c, topic)
            find_coordinators(c)
        yield b


@pytest.fixture()
def conn(broker):
    with broker.client() as c:
        yield c


def topic_id(conn, name):
    md = conn.call(3, 12, request(3, topics=None, allow_auto_topic_creation=False))
    return next(t.topic_id for t in md.topics if t.name == name)


def hb(conn, group, member_id, epoch, topics=None, owned=None, instance=None, assignor=None, timeout=30000,
       regex=None, version=1):
    """One heartbeat; ``owned`` {topic id: [partitions]} or None (not sent)."""
    return conn.call(HEARTBEAT, version, request(
        HEARTBEAT, group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance,
        rebalance_timeout_ms=timeout if epoch == 0 else -1, subscribed_topic_names=topics,
        subscribed_topic_regex=regex, server_assignor=assignor,
        topic_partitions=None if owned is None else [TopicPartitions(topic_id=t, partitions=sorted(p))
                                                     for t, p in owned.items()]))


def assigned(resp):
    return {tp.topic_id: set(tp.partitions) for tp in resp.assignment.topic_partitions}


def describe(conn, group):
    return conn.call(DESCRIBE, 0, request(DESCRIBE, group_ids=[group], include_authorized_operations=False)).groups[0]


def assert_no_partition_twice(group):
    seen = set()
    for m in group.members:
        for tp in m.assignment.topic_partitions:
            for p in tp.partitions:
                assert (tp.topic_name, p) not in seen, f"{tp.topic_name}-{p} owned twice: {group}"
                seen.add((tp.topic_name, p))
    return seen


def test_api_versions_advertise_the_consumer_group_apis(conn):
    keys = {k.api_key: (k.min_version, k.max_version)
            for k in conn.call(API_VERSIONS, 3, request(API_VERSIONS, client_software_name="t",
                                                        client_software_version="1")).api_keys}
    assert keys[HEARTBEAT] == (0, 1) and keys[DESCRIBE] == (0, 0)


def test_heartbeat_request_checks_and_errors(conn):
    t4 = topic_id(conn, "t4")
    checks = [
        (dict(group="", member_id="m", epoch=0, topics=["t4"], owned={}), INVALID_REQUEST, "GroupId"),
        (dict(group="e", member_id="", epoch=0, topics=["t4"], owned={}), INVALID_REQUEST, "MemberId"),
        (dict(group="e", member_id="m", epoch=0, topics=["t4"], owned=None), INVALID_REQUEST, "TopicPartitions"),
        (dict(group="e", member_id="m", epoch=0, topics=["t4"], owned={t4: [0]}), INVALID_REQUEST,
         "TopicPartitions"),
        (dict(group="e", member_id="m", epoch=0, topics=None, owned={}), INVALID_REQUEST, "SubscribedTopicNames"),
        (dict(group="e", member_id="m", epoch=0, topics=[], owned={}, regex="t(?=4)"), INVALID_REGULAR_EXPRESSION,
         "RE2/J"),
        (dict(group="e", member_id="m", epoch=0, topics=[], owned={}, regex="t[4"), INVALID_REGULAR_EXPRESSION,
         "not a valid regular expression"),
        (dict(group="e", member_id="m", epoch=-3), INVALID_REQUEST, "MemberEpoch"),
        (dict(group="e", member_id="m", epoch=-2), INVALID_REQUEST, "InstanceId"),
        (dict(group="e", member_id="m", epoch=0, topics=["t4"], owned={}, instance=""), INVALID_REQUEST,
         "InstanceId"),
        (dict(group="e", member_id="m", epoch=0, topics=["t4"], owned={}, assignor="sticky"),
         UNSUPPORTED_ASSIGNOR, "uniform, range"),
        (dict(group="nobody-here", member_id="m", epoch=3, owned={}), UNKNOWN_MEMBER_ID, "not found"),
    ]
    for kw, code, words in checks:
        r = hb(conn, **kw)
        assert r.error_code == code and words in (r.error_message or ""), (kw, r)
    # librdkafka's empty regex means none
    r = hb(conn, "e", "m", 0, topics=["t4"], owned={}, regex="")
    assert r.error_code == NONE and r.member_epoch == 1
    assert hb(conn, "e", "other", 1, owned={}).error_code == UNKNOWN_MEMBER_ID
    assert hb(conn, "e", "m", 2, owned={}).error_code == FENCED_MEMBER_EPOCH  # ahead of the coordinator
    assert hb(conn, "e", "m", -1).error_code == NONE
    assert hb(conn, "e", "m", 1, owned={}).error_code == UNKNOWN_MEMBER_ID  # it left


def test_v0_names_the_joining_member(conn):
    r = hb(conn, "v0-group", "", 0, topics=["u2"], owned={}, version=0)
    assert r.error_code == NONE and r.member_id and r.member_epoch == 1
    assert hb(conn, "v0-group", r.member_id, -1, version=0).error_code == NONE


def test_group_max_size_and_other_group_types(conn, broker):
    members = [f"max-{i}" for i in range(3)]
    for m in members:
        assert hb(conn, "full", m, 0, topics=["u2"], owned={}).error_code == NONE
    r = hb(conn, "full", "max-3", 0, topics=["u2"], owned={})
    assert r.error_code == GROUP_MAX_SIZE_REACHED, r
    # a classic JoinGroup cannot join a consumer group with members (no migration yet)
    join = conn.call(JOIN, 5, request(JOIN, group_id="full", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                      member_id="", protocol_type="consumer",
                                      protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert join.error_code == INCONSISTENT_GROUP_PROTOCOL
    for m in members:
        assert hb(conn, "full", m, -1).error_code == NONE
    # ... and a consumer group cannot take over a classic group with members
    with broker.client() as classic:
        classic.call(JOIN, 3, request(JOIN, group_id="classic-one", session_timeout_ms=10000,
                                      rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
                                      protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")]))
        r = hb(conn, "classic-one", "m", 0, topics=["u2"], owned={})
        assert r.error_code == GROUP_ID_NOT_FOUND, r


def test_revocation_comes_before_assignment(conn):
    t4 = topic_id(conn, "t4")
    a = hb(conn, "rec", "a", 0, topics=["t4"], owned={})
    assert a.member_epoch == 1 and assigned(a) == {t4: {0, 1, 2, 3}}
    assert hb(conn, "rec", "a", 1, owned={t4: [0, 1, 2, 3]}).assignment is None  # nothing changed
    b = hb(conn, "rec", "b", 0, topics=["t4"], owned={})
    # the target gives b half, but a still owns it: b is at the new epoch with nothing yet
    assert b.member_epoch == 2 and assigned(b) == {}
    g = describe(conn, "rec")
    assert g.group_state == "Reconciling" and g.group_epoch == 2 and g.assignment_epoch == 2
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{SETTINGS['metrics.port']}/metrics", timeout=10).read()
    assert b'kafka_server_groupcoordinatormetrics_consumergroupcount{state="reconciling"} 1' in metrics
    targets = {m.member_id: {p for tp in m.target_assignment.topic_partitions for p in tp.partitions}
               for m in g.members}
    assert sorted(map(len, targets.values())) == [2, 2] and targets["a"] | targets["b"] == {0, 1, 2, 3}
    # a is asked to give up b's half and stays at epoch 1 while it owns them
    a = hb(conn, "rec", "a", 1, owned={t4: [0, 1, 2, 3]})
    assert a.member_epoch == 1 and assigned(a) == {t4: targets["a"]}
    assert_no_partition_twice(describe(conn, "rec"))
    b = hb(conn, "rec", "b", 2, owned={})
    assert b.assignment is None and b.member_epoch == 2  # still unreleased
    a = hb(conn, "rec", "a", 1, owned={t4: sorted(targets["a"])})  # revoked: a moves to epoch 2
    assert a.member_epoch == 2
    b = hb(conn, "rec", "b", 2, owned={})
    assert assigned(b) == {t4: targets["b"]}
    g = describe(conn, "rec")
    assert g.group_state == "Stable" and len(assert_no_partition_twice(g)) == 4
    # a lost response: the previous epoch with partitions within the assignment is accepted
    assert hb(conn, "rec", "a", 1, owned={t4: sorted(targets["a"])}).error_code == NONE
    assert hb(conn, "rec", "a", 1, owned={t4: [0, 1, 2, 3]}).error_code == FENCED_MEMBER_EPOCH
    # b leaves: a gets everything at the next epoch
    assert hb(conn, "rec", "b", -1).member_epoch == -1
    a = hb(conn, "rec", "a", 2, owned={t4: sorted(targets["a"])})
    assert a.member_epoch == 3 and assigned(a) == {t4: {0, 1, 2, 3}}
    hb(conn, "rec", "a", -1)


def test_session_timeout_fences_a_silent_member(conn):
    t4 = topic_id(conn, "t4")
    hb(conn, "silent", "a", 0, topics=["t4"], owned={})
    b = hb(conn, "silent", "b", 0, topics=["t4"], owned={})
    # b heartbeats, a stays silent: after the session timeout (5 s) b owns every partition
    def b_has_all():
        nonlocal b
        b = hb(conn, "silent", "b", b.member_epoch, owned={t4: sorted(assigned_b)})
        if b.assignment is not None:
            assigned_b.clear()
            assigned_b.update(assigned(b).get(t4, set()))
        return assigned_b == {0, 1, 2, 3}
    assigned_b = set(assigned(b).get(t4, set()))
    wait_for(b_has_all, "b to take over the silent member's partitions", timeout=15, interval=0.2)
    assert [m.member_id for m in describe(conn, "silent").members] == ["b"]
    hb(conn, "silent", "b", -1)


def test_static_member_leaves_for_now_and_comes_back(conn):
    u2 = topic_id(conn, "u2")
    s1 = hb(conn, "static", "s1", 0, topics=["u2"], owned={}, instance="i1")
    s2 = hb(conn, "static", "s2", 0, topics=["u2"], owned={}, instance="i2")
    half = assigned(hb(conn, "static", "s1", s1.member_epoch, owned={u2: [0, 1, 2, 3]}))  # revoke s2's half
    s1 = hb(conn, "static", "s1", s1.member_epoch, owned={u2: sorted(half[u2])})
    s2 = hb(conn, "static", "s2", s2.member_epoch, owned={})
    mine = assigned(s2)[u2]
    assert len(mine) == 2
    # another member id with the same instance id while s2 is there: not released
    assert hb(conn, "static", "s2-new", 0, topics=["u2"], owned={}, instance="i2").error_code == \
        UNRELEASED_INSTANCE_ID
    assert hb(conn, "static", "s1", s1.member_epoch, owned={}, instance="i2").error_code == FENCED_INSTANCE_ID
    # leave for now (-2): the partition stays with the instance, nobody else gets it
    r = hb(conn, "static", "s2", -2, instance="i2")
    assert r.error_code == NONE and r.member_epoch == -2
    s1 = hb(conn, "static", "s1", s1.member_epoch, owned={u2: sorted(half[u2])}, instance="i1")
    assert s1.error_code == NONE and s1.assignment is None  # nothing new for s1
    back = hb(conn, "static", "s2-new", 0, topics=["u2"], owned={}, instance="i2")
    assert back.error_code == NONE and assigned(back) == {u2: mine}
    assert sorted(m.member_id for m in describe(conn, "static").members) == ["s1", "s2-new"]
    assert hb(conn, "static", "s2", 1, owned={}, instance="i2").error_code == FENCED_INSTANCE_ID
    for mid, iid in (("s1", "i1"), ("s2-new", "i2")):
        assert hb(conn, "static", mid, -1, instance=iid).error_code == NONE


def test_range_assignor_by_member_choice(conn):
    t4, u2 = topic_id(conn, "t4"), topic_id(conn, "u2")
    a = hb(conn, "ranged", "a", 0, topics=["t4", "u2"], owned={}, assignor="range")
    assert hb(conn, "ranged", "b", 0, topics=["t4", "u2"], owned={}, assignor="range").error_code == NONE
    a = hb(conn, "ranged", "a", a.member_epoch, owned={t: sorted(p) for t, p in assigned(a).items()})
    g = describe(conn, "ranged")
    assert g.assignor_name == "range"
    targets = {m.member_id: {tp.topic_id: set(tp.partitions) for tp in m.target_assignment.topic_partitions}
               for m in g.members}
    # co-partitioned ranges: a the first half of each topic, b the second
    assert targets == {"a": {t4: {0, 1}, u2: {0, 1}}, "b": {t4: {2, 3}, u2: {2, 3}}}
    for m in ("a", "b"):
        hb(conn, "ranged", m, -1)


def test_uniform_assignor_balances_and_sticks():
    t1, t2 = b"\1" * 16, b"\2" * 16
    topics = {t1: 6, t2: 3}
    first = assign("uniform", {m: MemberSpec({t1, t2}, {}) for m in "ab"}, topics)
    assert sorted(sum(map(len, a.values())) for a in first.values()) == [4, 5]
    # a third member joins: only what it needs moves, the others keep the rest
    second = assign("uniform", {**{m: MemberSpec({t1, t2}, first[m]) for m in "ab"}, "c": MemberSpec({t1, t2}, {})},
                    topics)
    assert sorted(sum(map(len, a.values())) for a in second.values()) == [3, 3, 3]
    kept = sum(len(second[m].get(t, set()) & first[m].get(t, set())) for m in "ab" for t in topics)
    assert kept == 6
    # subscriptions differ: each partition goes to a member subscribed to its topic
    mixed = assign("uniform", {"a": MemberSpec({t1}, {}), "b": MemberSpec({t1, t2}, {})}, topics)
    assert t2 not in mixed["a"] and mixed["b"][t2] == {0, 1, 2}
    counts = sorted(sum(map(len, a.values())) for a in mixed.values())
    assert counts in ([4, 5],)


def commit(conn, group, member_id, epoch, version=9, partition=0, offset=5):
    r = conn.call(8, version, request(8, group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
                                      group_instance_id=None, topics=[OffsetCommitRequestTopic(name="u2", partitions=[
                                          OffsetCommitRequestPartition(partition_index=partition,
                                                                       committed_offset=offset,
                                                                       committed_metadata="")])]))
    return r.topics[0].partitions[0].error_code


def fetch(conn, group, member_id, epoch):
    r = conn.call(9, 9, request(9, require_stable=False, groups=[OffsetFetchRequestGroup(
        group_id=group, member_id=member_id, member_epoch=epoch,
        topics=[OffsetFetchRequestTopics(name="u2", partition_indexes=[0])])]))
    g = r.groups[0]
    return g.error_code, [p.committed_offset for t in g.topics for p in t.partitions]


def test_offsets_carry_the_member_epoch(conn):
    m = hb(conn, "commits", "m", 0, topics=["u2"], owned={})
    epoch = m.member_epoch
    assert commit(conn, "commits", "m", epoch, offset=7) == NONE
    assert fetch(conn, "commits", "m", epoch) == (NONE, [7])
    assert fetch(conn, "commits", None, -1) == (NONE, [7])  # an admin's fetch
    assert commit(conn, "commits", "m", epoch + 1) == STALE_MEMBER_EPOCH
    assert commit(conn, "commits", "m", epoch - 1) == STALE_MEMBER_EPOCH
    assert fetch(conn, "commits", "m", epoch - 1)[0] == STALE_MEMBER_EPOCH
    assert commit(conn, "commits", "ghost", epoch) == UNKNOWN_MEMBER_ID
    assert fetch(conn, "commits", "ghost", epoch)[0] == UNKNOWN_MEMBER_ID
    assert commit(conn, "commits", "m", epoch, version=8) == UNSUPPORTED_VERSION  # members commit with v9+
    assert commit(conn, "commits", "", -1) == UNKNOWN_MEMBER_ID  # an admin commit needs an empty group
    assert hb(conn, "commits", "m", -1).error_code == NONE
    assert commit(conn, "commits", "", -1, offset=9) == NONE
    assert fetch(conn, "commits", None, -1) == (NONE, [9])


def test_list_and_describe_report_the_group_type(conn):
    hb(conn, "typed", "m", 0, topics=["u2"], owned={})
    listed = conn.call(16, 5, request(16, states_filter=[], types_filter=[])).groups
    row = next(g for g in listed if g.group_id == "typed")
    assert (row.group_type, row.protocol_type, row.group_state) == ("consumer", "consumer", "Stable")
    consumers = conn.call(16, 5, request(16, states_filter=[], types_filter=["Consumer"])).groups
    classics = conn.call(16, 5, request(16, states_filter=[], types_filter=["classic"])).groups
    assert "typed" in {g.group_id for g in consumers} and "typed" not in {g.group_id for g in classics}
    assert {g.group_type for g in consumers} == {"consumer"}
    # DescribeGroups (the classic API) does not describe it, as Kafka: Dead
    assert conn.call(15, 5, request(15, groups=["typed"], include_authorized_operations=False)).groups[0]\
        .group_state == "Dead"
    g = describe(conn, "typed")
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == \
        (NONE, "Stable", 1, 1, "uniform")
    (m,) = g.members
    assert (m.member_id, m.member_epoch, m.subscribed_topic_names, m.client_id) == ("m", 1, ["u2"], "kafkacore-tests")
    assert [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == [("u2", [0, 1, 2, 3])]
    assert m.target_assignment == m.assignment
    for gid in ("no-such-group", "classic-one"):  # unknown, and a classic group
        r = describe(conn, gid)
        assert r.error_code == GROUP_ID_NOT_FOUND and r.error_message, r
    hb(conn, "typed", "m", -1)


def test_a_topic_created_after_the_subscription_is_assigned(conn):
    m = hb(conn, "waiting", "m", 0, topics=["later"], owned={})
    assert m.error_code == NONE and assigned(m) == {}
    auto_create(conn, "later")
    later = topic_id(conn, "later")
    # the next heartbeat sees the topic: the group epoch goes up and the member gets its partitions
    m2 = hb(conn, "waiting", "m", m.member_epoch, owned={})
    assert m2.member_epoch == m.member_epoch + 1 and assigned(m2) == {later: {0, 1, 2, 3}}
    assert hb(conn, "waiting", "m", -1).error_code == NONE


def test_a_regex_subscription_follows_the_topics(conn):
    t4 = topic_id(conn, "t4")
    m = hb(conn, "regexed", "m", 0, topics=[], regex="(^t4)|(^rx-.*)", owned={})
    assert m.error_code == NONE and assigned(m) == {t4: {0, 1, 2, 3}}
    auto_create(conn, "rx-new")
    rx = topic_id(conn, "rx-new")
    m2 = hb(conn, "regexed", "m", m.member_epoch, owned={t4: [0, 1, 2, 3]})
    assert m2.member_epoch == m.member_epoch + 1 and assigned(m2) == {t4: {0, 1, 2, 3}, rx: {0, 1, 2, 3}}
    (member,) = describe(conn, "regexed").members
    assert (member.subscribed_topic_names, member.subscribed_topic_regex) == ([], "(^t4)|(^rx-.*)")
    # a new regex: only what it matches (never an internal topic)
    m3 = hb(conn, "regexed", "m", m2.member_epoch, regex=".*offsets|rx-.*", owned={t4: [0, 1, 2, 3], rx: [0, 1, 2, 3]})
    assert assigned(m3) == {rx: {0, 1, 2, 3}}
    assert hb(conn, "regexed", "m", -1).error_code == NONE


def test_empty_groups_change_type_and_keep_their_offsets(conn):
    assert commit(conn, "convert", "", -1, offset=11) == NONE  # a classic group holding offsets
    m = hb(conn, "convert", "m", 0, topics=["u2"], owned={})
    assert m.error_code == NONE and describe(conn, "convert").group_state == "Stable"
    assert fetch(conn, "convert", "m", m.member_epoch) == (NONE, [11])
    assert hb(conn, "convert", "m", -1).error_code == NONE
    # the empty consumer group gives way to a classic JoinGroup, the offsets stay
    join = conn.call(JOIN, 5, request(JOIN, group_id="convert", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                      member_id="", protocol_type="consumer",
                                      protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert join.error_code == MEMBER_ID_REQUIRED
    assert describe(conn, "convert").error_code == GROUP_ID_NOT_FOUND
    assert fetch(conn, "convert", None, -1) == (NONE, [11])


def test_delete_an_empty_consumer_group(conn):
    m = hb(conn, "doomed", "m", 0, topics=["u2"], owned={})
    assert commit(conn, "doomed", "m", m.member_epoch, offset=3) == NONE
    delete = conn.call(42, 2, request(42, groups_names=["doomed"])).results[0]
    assert delete.error_code == NON_EMPTY_GROUP
    assert hb(conn, "doomed", "m", -1).error_code == NONE
    assert conn.call(42, 2, request(42, groups_names=["doomed"])).results[0].error_code == NONE
    assert describe(conn, "doomed").error_code == GROUP_ID_NOT_FOUND
    assert fetch(conn, "doomed", None, -1) == (NONE, [-1])


def test_records_in_kafkas_format_and_a_restart_reloads_the_group(broker):
    """Last in this module: it restarts the broker."""
    with broker.client() as conn:
        t4 = topic_id(conn, "t4")
        a = hb(conn, "durable", "a", 0, topics=["t4"], owned={}, instance="ia")
        b = hb(conn, "durable", "b", 0, topics=["t4"], owned={})
        half = assigned(hb(conn, "durable", "a", a.member_epoch, owned={t4: [0, 1, 2, 3]}))[t4]
        a = hb(conn, "durable", "a", a.member_epoch, owned={t4: sorted(half)})
        b = hb(conn, "durable", "b", b.member_epoch, owned={})
        assert a.member_epoch == b.member_epoch == 2 and assigned(b)[t4] == {0, 1, 2, 3} - half
        assert hb(conn, "durable", "c", 0, topics=["u2"], owned={}).error_code == NONE
        assert hb(conn, "durable", "c", -1).error_code == NONE  # c's records are deleted
        assert describe(conn, "durable").group_state == "Assigning"  # until a heartbeat computes the target
        previous = a.member_epoch
        a = hb(conn, "durable", "a", a.member_epoch, owned={t4: sorted(half)})
        b = hb(conn, "durable", "b", b.member_epoch, owned={t4: sorted({0, 1, 2, 3} - half)})
        assert a.member_epoch == b.member_epoch == 4 and a.assignment is b.assignment is None
        assert commit(conn, "durable", "a", a.member_epoch, offset=42) == NONE
        before = describe(conn, "durable")
        assert before.group_state == "Stable"
    stop = threading.Event()

    def keep_alive():  # both members heartbeat until the restart
        with broker.client() as c:
            while not stop.wait(0.25):
                for mid, parts in (("a", half), ("b", {0, 1, 2, 3} - half)):
                    assert hb(c, "durable", mid, 4, owned={t4: sorted(parts)}).error_code == NONE
    keeper = threading.Thread(target=keep_alive, daemon=True)
    keeper.start()
    try:
        partition = partition_for("durable", 3)  # Kafka's group -> partition
        records = [(cg_records.decode_key(k), v) for k, v in read_offsets_topic(broker.bootstrap, partition)]
    finally:
        stop.set()
        keeper.join(10)
    mine = [(kind, member, v) for (kind, gid, member), v in ((k, v) for k, v in records if k) if gid == "durable"]
    assert {kind for kind, _m, _v in mine} == {3, 4, 5, 6, 7, 8}
    # c left: its current assignment, target and metadata are tombstoned, in Kafka's order
    assert [kind for kind, member, v in mine if member == "c" and v is None] == [8, 7, 5]
    values = {(kind, member): v for kind, member, v in mine}  # the last value of each key
    current = ConsumerGroupCurrentMemberAssignmentValue.read(Reader(values[(8, "a")], 2), 0)
    assert Reader(values[(8, "a")]).int16() == 0  # value version 0
    assert (current.member_epoch, current.previous_member_epoch, current.state) == (4, previous, 0)
    assert [(tp.topic_id, set(tp.partitions)) for tp in current.assigned_partitions] == [(t4, half)]
    member = ConsumerGroupMemberMetadataValue.read(Reader(values[(5, "a")], 2), 0)
    assert (member.instance_id, member.subscribed_topic_names, member.rebalance_timeout_ms) == ("ia", ["t4"], 30000)
    assert ConsumerGroupMetadataValue.read(Reader(values[(3, None)], 2), 0).epoch == before.group_epoch

    broker.restart()
    with broker.client() as conn:
        after = wait_for(lambda: describe(conn, "durable"), "the group loaded", tolerate=(OSError,))
        assert (after.group_state, after.group_epoch, after.assignment_epoch) == \
            (before.group_state, before.group_epoch, before.assignment_epoch)
        assert sorted((m.member_id, m.instance_id, m.member_epoch, str(m.assignment)) for m in after.members) == \
            sorted((m.member_id, m.instance_id, m.member_epoch, str(m.assignment)) for m in before.members)
        assert fetch(conn, "durable", "a", 4) == (NONE, [42])
        # a carries on at its epoch; b stays silent and is fenced after its session, loaded or not
        def a_has_all():
            r = hb(conn, "durable", "a", state["epoch"], owned={t4: sorted(state["owned"])})
            assert r.error_code == NONE, r
            state["epoch"] = r.member_epoch
            if r.assignment is not None:
                state["owned"] = assigned(r).get(t4, set())
            return state["owned"] == {0, 1, 2, 3}
        state = {"epoch": 4, "owned": half}
        wait_for(a_has_all, "a to take b's partitions once b's session expired", timeout=15, interval=0.2)
        assert [m.member_id for m in describe(conn, "durable").members] == ["a"]


def test_the_group_consumer_configs_are_checked():
    from kafkacore.broker.config import BrokerConfig
    from kafkacore.errors import InvalidConfigurationError

    defaults = BrokerConfig({})
    assert (defaults["group.consumer.session.timeout.ms"], defaults["group.consumer.heartbeat.interval.ms"],
            defaults["group.consumer.assignors"]) == (45000, 5000, ["uniform", "range"])
    cfg = BrokerConfig({"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor"})
    assert cfg["group.consumer.assignors"] == ["range"]
    for props, words in (({"group.consumer.session.timeout.ms": "1000"}, "within group.consumer.min.session"),
                         ({"group.consumer.heartbeat.interval.ms": "20000"}, "within group.consumer.min.heartbeat"),
                         ({"group.consumer.session.timeout.ms": "5000", "group.consumer.min.session.timeout.ms": "10",
                           "group.consumer.heartbeat.interval.ms": "5000"}, "less than group.consumer.session"),
                         ({"group.consumer.assignors": "sticky"}, "not an assignor"),
                         ({"group.coordinator.rebalance.protocols": "consumer"}, "must include classic"),
                         ({"group.coordinator.rebalance.protocols": "classic,streams"}, "streams not served")):
        with pytest.raises(InvalidConfigurationError, match=words):
            BrokerConfig(props)


def test_the_consumer_protocol_can_be_switched_off(tmp_path):
    """group.coordinator.rebalance.protocols=classic (Kafka's name): the KIP-848 APIs are neither
    advertised nor served (an API outside ApiVersions closes the connection, as in Kafka)."""
    with BrokerProcess(tmp_path / "data", settings={"group.coordinator.rebalance.protocols": "classic"}) as b:
        with b.client() as c:
            keys = {k.api_key for k in c.call(API_VERSIONS, 3, request(API_VERSIONS, client_software_name="t",
                                                                       client_software_version="1")).api_keys}
            assert HEARTBEAT not in keys and DESCRIBE not in keys and JOIN in keys
            c.send(HEARTBEAT, 1, request(HEARTBEAT, group_id="g", member_id="m", member_epoch=0,
                                         rebalance_timeout_ms=1000, subscribed_topic_names=[], topic_partitions=[]))
            assert c.is_closed_by_peer()
