"""KIP-932 share groups' membership against a real ``kafkacore serve`` process: confluent-kafka's
ShareConsumer (librdkafka 2.16, ShareGroupHeartbeat v1) joins, shares a one-partition topic with
the other members, spreads over a four-partition one, leaves when closed and is fenced when
killed; ShareGroupHeartbeat's checks and Kafka's error codes at the wire; the group's records in
``__consumer_offsets`` and their reload after a restart; the other group APIs' answers for a
share group; the ``simple`` assignor's rules. Fetching records is ShareFetch's (not here): the
consumers' polls get nothing, only their membership is asserted."""
import os
import signal
import subprocess
import sys
import textwrap

import confluent_kafka
import pytest

from _kcutil import read_offsets_topic, wait_for
from broker_client import BrokerProcess, auto_create, find_coordinators, free_port, request
from kafkacore.coordinator import share_group_records as sg_records
from kafkacore.coordinator.offset_store import partition_for
from kafkacore.coordinator.share_assignor import assign
from kafkacore.protocol.coordinator.share_group_current_member_assignment_value import \
    ShareGroupCurrentMemberAssignmentValue
from kafkacore.protocol.coordinator.share_group_member_metadata_value import ShareGroupMemberMetadataValue
from kafkacore.protocol.coordinator.share_group_metadata_value import ShareGroupMetadataValue
from kafkacore.protocol.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kafkacore.protocol.wire import Reader

HEARTBEAT, DESCRIBE, API_VERSIONS = 76, 77, 18
NONE = 0
UNKNOWN_MEMBER_ID = 25
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
GROUP_MAX_SIZE_REACHED = 81
FENCED_MEMBER_EPOCH = 110
SESSION_MS = 2000
OFFSETS_PARTITIONS = 3

SETTINGS = {"num.partitions": "1", "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
            "group.share.session.timeout.ms": str(SESSION_MS), "group.share.min.session.timeout.ms": "1000",
            "group.share.heartbeat.interval.ms": "200", "group.share.min.heartbeat.interval.ms": "100",
            "group.share.max.size": "4", "metrics.port": str(free_port())}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("sgroups") / "data", settings=SETTINGS) as b:
        with b.client() as c:
            auto_create(c, "s1")
            c.call(19, 4, request(19, topics=[_new_topic("s4", 4)], timeout_ms=10000, validate_only=False))
            find_coordinators(c)
        yield b


def _new_topic(name, partitions):
    from kafkacore.protocol.messages.create_topics_request import CreatableTopic
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])


@pytest.fixture()
def conn(broker):
    with broker.client() as c:
        yield c


def topic_id(conn, name):
    md = conn.call(3, 12, request(3, topics=None, allow_auto_topic_creation=False))
    return next(t.topic_id for t in md.topics if t.name == name)


def hb(conn, group, member_id, epoch, topics=None, version=1, rack=None):
    return conn.call(HEARTBEAT, version, request(HEARTBEAT, group_id=group, member_id=member_id, member_epoch=epoch,
                                                 rack_id=rack, subscribed_topic_names=topics))


def describe(conn, group):
    return conn.call(DESCRIBE, 1, request(DESCRIBE, group_ids=[group], include_authorized_operations=False)).groups[0]


def assignments(group):
    """{member id: {topic name: set of partitions}} of a described group."""
    return {m.member_id: {t.topic_name: set(t.partitions) for t in m.assignment.topic_partitions}
            for m in group.members}


def share_consumer(broker, group, topics, **conf):
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **conf})
    c.subscribe(topics)
    return c


def members_settled(conn, group, count):
    """The described group once it has ``count`` members, each at the assignment epoch (each has
    its target), else None."""
    d = describe(conn, group)
    if d.error_code != NONE or len(d.members) != count:
        return None
    if any(m.member_epoch != d.assignment_epoch for m in d.members) or d.assignment_epoch != d.group_epoch:
        return None
    return d


# -- confluent-kafka's ShareConsumer ---------------------------------------------------------------------
def test_share_consumers_all_read_a_one_partition_topic_and_a_closed_one_leaves(broker, conn):
    consumers = [share_consumer(broker, "sc-one", ["s1"], **{"client.id": f"sc-{i}"}) for i in range(3)]
    try:
        d = wait_for(lambda: members_settled(conn, "sc-one", 3), "three share consumers in the group")
        assert d.group_state == "Stable" and d.assignor_name == "simple"
        # a share partition is read by every member: all three hold s1-0
        assert list(assignments(d).values()) == [{"s1": {0}}] * 3
        assert sorted(m.client_id for m in d.members) == ["sc-0", "sc-1", "sc-2"]
        assert {m.client_host for m in d.members} == {"/127.0.0.1"}
        assert all(m.subscribed_topic_names == ["s1"] for m in d.members)
        epoch = d.group_epoch
        consumers.pop().close()  # its leave heartbeat (epoch -1)
        d = wait_for(lambda: members_settled(conn, "sc-one", 2), "the closed consumer gone")
        assert d.group_epoch > epoch and list(assignments(d).values()) == [{"s1": {0}}] * 2
    finally:
        for c in consumers:
            c.close()
    d = wait_for(lambda: (lambda g: g if g.group_state == "Empty" else None)(describe(conn, "sc-one")),
                 "the group empty")
    assert d.members == []


def test_share_consumers_spread_over_four_partitions(broker, conn):
    consumers = [share_consumer(broker, "sc-four", ["s4"]) for _ in range(2)]
    try:
        d = wait_for(lambda: members_settled(conn, "sc-four", 2), "two share consumers in the group")
        parts = [a["s4"] for a in assignments(d).values()]
        assert sorted(map(len, parts)) == [2, 2] and parts[0] | parts[1] == {0, 1, 2, 3}
        consumers.append(share_consumer(broker, "sc-four", ["s4"]))
        d = wait_for(lambda: members_settled(conn, "sc-four", 3), "a third share consumer in the group")
        parts = [a["s4"] for a in assignments(d).values()]
        assert sorted(map(len, parts)) == [1, 1, 2] and set().union(*parts) == {0, 1, 2, 3}
    finally:
        for c in consumers:
            c.close()


KILLED_MEMBER = textwrap.dedent("""
    import sys, time, confluent_kafka
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                                       "client.id": "doomed"})
    c.subscribe(["s1"])
    print("subscribed", flush=True)
    time.sleep(600)
""")


def test_a_killed_share_consumer_is_fenced_after_the_session_timeout(broker, conn):
    survivor = share_consumer(broker, "sc-kill", ["s1"], **{"client.id": "survivor"})
    proc = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, broker.bootstrap, "sc-kill"],
                            stdout=subprocess.PIPE, env={**os.environ})
    try:
        d = wait_for(lambda: members_settled(conn, "sc-kill", 2), "two members, one in another process")
        epoch = d.group_epoch
        proc.send_signal(signal.SIGKILL)  # no leave heartbeat: only the session timeout removes it
        proc.wait(10)
        d = wait_for(lambda: members_settled(conn, "sc-kill", 1), "the killed member fenced",
                     timeout=SESSION_MS / 1000 + 15)
        assert [m.client_id for m in d.members] == ["survivor"] and d.group_epoch == epoch + 1
        assert list(assignments(d).values()) == [{"s1": {0}}]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        proc.stdout.close()
        survivor.close()


# -- ShareGroupHeartbeat at the wire -------------------------------------------------------------------
def test_heartbeat_epochs_and_kafkas_errors(conn):
    s4 = topic_id(conn, "s4")
    assert hb(conn, "wire", "", 0, ["s4"]).error_code == INVALID_REQUEST  # v1: the client names itself
    r = hb(conn, "wire", "m", 0, None)
    assert (r.error_code, r.error_message) == (INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    assert hb(conn, "wire", "m", 0, ["s4"], rack="").error_code == INVALID_REQUEST
    assert hb(conn, "wire", "m", -2).error_code == INVALID_REQUEST
    assert hb(conn, "wire", "m", 1).error_code == UNKNOWN_MEMBER_ID  # no such group: the client rejoins
    a = hb(conn, "wire", "a", 0, ["s4"])
    assert (a.error_code, a.member_id, a.member_epoch) == (NONE, "a", 1)
    assert a.heartbeat_interval_ms == 200
    assert {t.topic_id: set(t.partitions) for t in a.assignment.topic_partitions} == {s4: {0, 1, 2, 3}}
    assert hb(conn, "wire", "a", 1).assignment is None  # nothing changed: null
    b = hb(conn, "wire", "b", 0, ["s4"])
    assert b.member_epoch == 2 and len(b.assignment.topic_partitions[0].partitions) == 2
    assert hb(conn, "wire", "a", 3).error_code == FENCED_MEMBER_EPOCH  # ahead of the coordinator
    a = hb(conn, "wire", "a", 1)  # behind: a gets its share of the new target at once, no revocation
    assert a.member_epoch == 2 and len(a.assignment.topic_partitions[0].partitions) == 2
    assert hb(conn, "wire", "a", 1).error_code == NONE  # its previous epoch: a lost response, tolerated
    assert hb(conn, "wire", "a", 0).error_code == INVALID_REQUEST  # a rejoin states its topics
    assert hb(conn, "wire", "nobody", 2).error_code == UNKNOWN_MEMBER_ID
    v0 = hb(conn, "wire", "", 0, ["s4"], version=0)  # Kafka 4.0's early access: the coordinator names it
    assert v0.error_code == NONE and len(v0.member_id) == 22  # Kafka's Uuid, base64
    assert hb(conn, "wire", "d", 0, ["s4"]).error_code == NONE
    assert hb(conn, "wire", "e", 0, ["s4"]).error_code == GROUP_MAX_SIZE_REACHED  # group.share.max.size=4
    for mid in ("a", "b", v0.member_id, "d"):
        r = hb(conn, "wire", mid, -1)
        assert (r.error_code, r.member_epoch) == (NONE, -1)
    d = describe(conn, "wire")
    assert (d.group_state, d.members) == ("Empty", [])
    assert hb(conn, "wire", "a", -1).error_code == UNKNOWN_MEMBER_ID


def test_a_group_id_has_one_type_and_the_other_group_apis_answer_as_kafka(conn):
    assert hb(conn, "typed", "a", 0, ["s1"]).error_code == NONE
    join = conn.call(11, 5, request(11, group_id="typed", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                    member_id="", group_instance_id=None, protocol_type="consumer", protocols=[]))
    assert join.error_code == INCONSISTENT_GROUP_PROTOCOL
    commit = conn.call(8, 8, request(8, group_id="typed", generation_id_or_member_epoch=-1, member_id="",
                                     group_instance_id=None, topics=[OffsetCommitRequestTopic(name="s1", partitions=[
                                         OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                      committed_metadata="")])]))
    assert commit.topics[0].partitions[0].error_code == GROUP_ID_NOT_FOUND
    cg = conn.call(68, 1, request(68, group_id="typed", member_id="x", member_epoch=0, rebalance_timeout_ms=1000,
                                  subscribed_topic_names=["s1"], topic_partitions=[]))
    assert cg.error_code == GROUP_ID_NOT_FOUND
    assert describe(conn, "typed").error_code == NONE
    d = conn.call(77, 1, request(77, group_ids=["no-such-group"], include_authorized_operations=False)).groups[0]
    assert d.error_code == GROUP_ID_NOT_FOUND
    listed = conn.call(16, 5, request(16, states_filter=[], types_filter=["share"])).groups
    assert ("typed", "share", "Stable", "share") in [(g.group_id, g.protocol_type, g.group_state, g.group_type)
                                                      for g in listed]
    assert "typed" not in [g.group_id for g in conn.call(16, 5, request(16, states_filter=[],
                                                                        types_filter=["classic"])).groups]
    classic = conn.call(15, 5, request(15, groups=["typed"], include_authorized_operations=False)).groups[0]
    assert classic.group_state == "Dead"  # DescribeGroups describes classic groups only
    deleted = conn.call(42, 2, request(42, groups_names=["typed"])).results[0]
    assert deleted.error_code == NON_EMPTY_GROUP
    assert hb(conn, "typed", "a", -1).error_code == NONE
    assert conn.call(42, 2, request(42, groups_names=["typed"])).results[0].error_code == NONE
    assert describe(conn, "typed").error_code == GROUP_ID_NOT_FOUND


def test_the_rebalance_counter_and_the_group_count(broker, conn):
    import urllib.request
    assert hb(conn, "metered", "a", 0, ["s1"]).error_code == NONE
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{SETTINGS['metrics.port']}/metrics", timeout=10).read()
    assert b'kafka_server_groupcoordinatormetrics_sharegroupcount{state="stable"}' in metrics
    line = next(ln for ln in metrics.splitlines()
                if ln.startswith(b"kafka_server_groupcoordinatormetrics_sharegrouprebalance_total "))
    assert float(line.split()[1]) >= 1
    assert hb(conn, "metered", "a", -1).error_code == NONE


def test_the_consumer_group_rebalance_counter(broker, conn):
    import urllib.request

    def count():
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{SETTINGS['metrics.port']}/metrics", timeout=10).read()
        line = next(ln for ln in metrics.splitlines()
                    if ln.startswith(b"kafka_server_groupcoordinatormetrics_consumergrouprebalance_total "))
        return float(line.split()[1])

    before = count()
    for member in ("a", "b"):  # each join is a new target assignment
        r = conn.call(68, 0, request(68, group_id="metered-consumer", member_id=member, member_epoch=0,
                                     instance_id=None, rack_id=None, rebalance_timeout_ms=5000,
                                     subscribed_topic_names=["s4"], server_assignor=None, topic_partitions=[]))
        assert r.error_code == NONE
    assert count() == before + 2


def kafkacore_cli(broker, *args):
    import json
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-m", "kafkacore", "-b", broker.bootstrap, *args], capture_output=True,
                       text=True, timeout=60, cwd=str(root), env=dict(os.environ, PYTHONPATH=str(root)))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout) if "json" in args else p.stdout


def test_kafkacore_groups_lists_and_describes_a_share_group(broker, conn):
    consumers = [share_consumer(broker, "sc-cli", ["s1"], **{"client.id": f"cli-{i}"}) for i in range(2)]
    try:
        d = wait_for(lambda: members_settled(conn, "sc-cli", 2), "two share consumers in the group")
        assert {"group": "sc-cli", "type": "share", "protocol": "share", "state": "Stable"} in \
            kafkacore_cli(broker, "groups", "list", "-o", "json")
        out = kafkacore_cli(broker, "groups", "describe", "sc-cli", "-o", "json")
        assert (out["state"], out["protocol_type"], out["protocol"], out["group_epoch"], out["assignment_epoch"]) \
            == ("Stable", "share", "simple", d.group_epoch, d.assignment_epoch)
        assert sorted((m["client_id"], m["member_epoch"], m["assignment"]) for m in out["members"]) == \
            [("cli-0", d.group_epoch, ["s1-0"]), ("cli-1", d.group_epoch, ["s1-0"])]
        # the shared partition is shown once per member reading it
        assert sorted(o["client_id"] for o in out["offsets"] if o["partition"] == 0) == ["cli-0", "cli-1"]
        text = kafkacore_cli(broker, "groups", "describe", "sc-cli")
        assert "type: share" in text and f"group epoch: {d.group_epoch}" in text and "EPOCH" in text
    finally:
        for c in consumers:
            c.close()


def _decode(cls, value):
    r = Reader(bytes(value))
    r.int16()
    return cls.read(r, 0)


def test_records_in_kafkas_format_and_a_restart_reloads_the_group(tmp_path):
    settings = {**SETTINGS, "group.share.session.timeout.ms": "30000", "metrics.port": str(free_port())}
    with BrokerProcess(tmp_path / "data", settings=settings) as b:
        with b.client() as conn:
            auto_create(conn, "s1")
            find_coordinators(conn)
            for mid in ("a", "b"):
                assert hb(conn, "durable", mid, 0, ["s1"]).error_code == NONE
            assert hb(conn, "durable", "a", 1).member_epoch == 2
            before = describe(conn, "durable")
        records = [(sg_records.decode_key(k), v)
                   for k, v in read_offsets_topic(b.bootstrap, partition_for("durable", OFFSETS_PARTITIONS))]
        ours = [(kind, v) for kind, v in records if kind is not None and kind[1] == "durable"]
        kinds = [kind[0] for kind, _v in ours]
        # a member's records before the group epoch that counts it (Kafka's order)
        assert kinds.index(sg_records.MEMBER_METADATA) < kinds.index(sg_records.GROUP_METADATA)
        epochs = [_decode(ShareGroupMetadataValue, v).epoch for kind, v in ours if kind[0] == sg_records.GROUP_METADATA]
        assert epochs == [1, 2]
        meta = [_decode(ShareGroupMemberMetadataValue, v) for kind, v in ours
                if kind[0] == sg_records.MEMBER_METADATA and kind[2] == "b"]
        assert meta[-1].subscribed_topic_names == ["s1"] and meta[-1].client_host == "/127.0.0.1"
        current = [_decode(ShareGroupCurrentMemberAssignmentValue, v) for kind, v in ours
                   if kind[0] == sg_records.CURRENT_MEMBER_ASSIGNMENT and kind[2] == "a"]
        assert [(c.member_epoch, c.previous_member_epoch) for c in current] == [(1, 0), (2, 1)]
        b.restart()
        with b.client() as conn:
            find_coordinators(conn)
            after = describe(conn, "durable")
            assert (after.group_state, after.group_epoch, after.assignment_epoch) == \
                (before.group_state, before.group_epoch, before.assignment_epoch) == ("Stable", 2, 2)
            assert [(m.member_id, m.member_epoch, m.client_host) for m in after.members] == \
                [(m.member_id, m.member_epoch, m.client_host) for m in before.members]
            assert assignments(after) == assignments(before)
            # the members carry on where they were
            assert hb(conn, "durable", "b", 2).error_code == NONE
            assert hb(conn, "durable", "a", 2).error_code == NONE


def _features(resp):
    return ({f.name: (f.min_version, f.max_version) for f in resp.supported_features},
            {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features})


def test_api_versions_announces_the_group_and_share_feature_levels(conn):
    for version, low in ((3, 1), (4, 0)):  # v3's supported minimum is 1 (KAFKA-17011)
        resp = conn.call(API_VERSIONS, version, request(API_VERSIONS, client_software_name="t",
                                                        client_software_version="1"))
        assert {HEARTBEAT, DESCRIBE, 78, 79} <= {k.api_key for k in resp.api_keys}
        assert _features(resp) == ({"group.version": (low, 1), "share.version": (low, 1)},
                                   {"group.version": (1, 1), "share.version": (1, 1)})
        assert resp.finalized_features_epoch >= 0


def test_without_group_share_enable_the_share_apis_are_neither_advertised_nor_served(tmp_path):
    with BrokerProcess(tmp_path / "data", settings={"group.share.enable": "false"}) as b:
        with b.client() as conn:
            resp = conn.call(API_VERSIONS, 3, request(API_VERSIONS, client_software_name="t",
                                                      client_software_version="1"))
            keys = {k.api_key for k in resp.api_keys}
            assert 68 in keys and HEARTBEAT not in keys and DESCRIBE not in keys
            assert _features(resp) == ({"group.version": (1, 1)}, {"group.version": (1, 1)})
            conn.send(HEARTBEAT, 1, request(HEARTBEAT, group_id="g", member_id="m", member_epoch=0,
                                            rack_id=None, subscribed_topic_names=["x"]))
            assert conn.is_closed_by_peer()


# -- the simple assignor -----------------------------------------------------------------------------------
def _random_current(members, partitions, seed):
    import random
    rnd = random.Random(seed)
    return {f"m{i}": {b"T": set(rnd.sample(range(partitions + 2), rnd.randint(0, partitions)))}
            for i in range(members) if rnd.random() < 0.8}


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
@pytest.mark.parametrize("members,partitions", [(1, 1), (3, 1), (2, 4), (3, 4), (4, 4), (5, 4), (7, 3), (3, 10)])
def test_simple_assignor_gives_every_partition_and_every_member_a_share(members, partitions, seed):
    current = None if seed is None else _random_current(members, partitions, seed)  # whatever was before
    out = assign("simple", {f"m{i}": {b"T"} for i in range(members)}, {b"T": partitions}, current)
    held = [out[m].get(b"T", set()) for m in sorted(out)]
    assert set().union(*held) == set(range(partitions))  # every partition read
    assert all(held)  # every member reads something
    counts = sorted(map(len, held))
    assert counts[-1] - counts[0] <= 1
    if members <= partitions:  # enough partitions: none is shared
        assert sum(counts) == partitions
    else:  # more members: each reads one, the partitions shared as evenly as can be
        readers = [sum(p in h for h in held) for p in range(partitions)]
        assert counts == [1] * members and max(readers) - min(readers) <= 1


def test_simple_assignor_spreads_each_topic_over_its_subscribers_and_turns_between_topics():
    out = assign("simple", {"a": {b"X", b"Y"}, "b": {b"X"}, "c": {b"Y"}}, {b"X": 3, b"Y": 3, b"Z": 2})
    assert b"Y" not in out["b"] and b"X" not in out["c"] and all(b"Z" not in a for a in out.values())
    for topic, readers in ((b"X", "ab"), (b"Y", "ac")):
        held = [out[m].get(topic, set()) for m in readers]
        assert set().union(*held) == {0, 1, 2} and sorted(map(len, held)) == [1, 2]
    # the same subscriptions: the next topic's round starts where the last one ended
    out = assign("simple", {m: {b"X", b"Y"} for m in "abc"}, {b"X": 4, b"Y": 4})
    assert sorted(sum(map(len, a.values())) for a in out.values()) == [2, 3, 3]  # not 4, 2, 2
    with pytest.raises(ValueError):
        assign("uniform", {}, {})


def test_simple_assignor_is_sticky():
    two = assign("simple", {"a": {b"T"}, "b": {b"T"}}, {b"T": 4})
    three = assign("simple", {"a": {b"T"}, "b": {b"T"}, "c": {b"T"}}, {b"T": 4}, two)
    moved = sum(len(two[m][b"T"] - three[m][b"T"]) for m in "ab")
    assert moved == 1 and sorted(len(a[b"T"]) for a in three.values()) == [1, 1, 2]  # only one partition moves
    assert assign("simple", {"a": {b"T"}, "c": {b"T"}}, {b"T": 4}, three)["c"][b"T"] >= three["c"][b"T"]
    many = assign("simple", {m: {b"T"} for m in "abcde"}, {b"T": 2})
    more = assign("simple", {m: {b"T"} for m in "abcdef"}, {b"T": 2}, many)
    assert all(more[m] == many[m] for m in "abcde")  # the newcomer takes the partition with fewer readers


def test_the_group_share_configs_have_kafkas_defaults_and_are_checked():
    from kafkacore.broker.config import BrokerConfig, served_group_protocols
    from kafkacore.errors import InvalidConfigurationError

    d = BrokerConfig({})
    assert [d[f"group.share.{k}"] for k in ("session.timeout.ms", "min.session.timeout.ms", "max.session.timeout.ms",
                                            "heartbeat.interval.ms", "min.heartbeat.interval.ms",
                                            "max.heartbeat.interval.ms", "max.size", "assignors", "enable")] == \
        [45000, 45000, 60000, 5000, 5000, 15000, 200, ["simple"], True]
    assert served_group_protocols(d) == ["classic", "consumer", "share"]
    assert served_group_protocols(BrokerConfig({"group.share.enable": "false"})) == ["classic", "consumer"]
    assert served_group_protocols(BrokerConfig({"group.coordinator.rebalance.protocols": "classic"})) == ["classic"]
    cfg = BrokerConfig({"group.share.assignors": "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"})
    assert cfg["group.share.assignors"] == ["simple"]
    for props, words in (({"group.share.session.timeout.ms": "1000"}, "within group.share.min.session"),
                         ({"group.share.heartbeat.interval.ms": "20000"}, "within group.share.min.heartbeat"),
                         ({"group.share.session.timeout.ms": "5000", "group.share.min.session.timeout.ms": "10",
                           "group.share.heartbeat.interval.ms": "5000", "group.share.min.heartbeat.interval.ms": "1"},
                          "less than group.share.session"),
                         ({"group.share.assignors": "uniform"}, "not a share assignor"),
                         ({"group.share.max.size": "1001"}, "group.share.max.size")):
        with pytest.raises(InvalidConfigurationError, match=words):
            BrokerConfig(props)


def test_the_group_config_resource_sets_the_heartbeat_interval_and_session_timeout(broker, conn):
    """share.* / consumer.* heartbeat intervals and session timeouts from the GROUP config resource
    (Kafka 4.1 reads them per group), the broker's group.* values for the other groups."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for group, entries in (("tuned", [("share.heartbeat.interval.ms", "500"), ("share.session.timeout.ms", "1000")]),
                           ("tuned-consumer", [("consumer.heartbeat.interval.ms", "7000")])):
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET) for n, v in entries])
        admin.incremental_alter_configs([res])[res].result(30)
    r = hb(conn, "tuned", "t", 0, ["s1"])
    assert (r.error_code, r.heartbeat_interval_ms) == (NONE, 500)
    assert hb(conn, "untuned", "u", 0, ["s1"]).heartbeat_interval_ms == 200
    # the member stops heartbeating: fenced after the group's session timeout
    wait_for(lambda: not describe(conn, "tuned").members, timeout=SESSION_MS / 1000 + 10,
             what="the silent member fenced")
    assert hb(conn, "tuned", "t", 1).error_code == UNKNOWN_MEMBER_ID
    c = conn.call(68, 0, request(68, group_id="tuned-consumer", member_id="c", member_epoch=0, instance_id=None,
                                 rack_id=None, rebalance_timeout_ms=5000, subscribed_topic_names=["s1"],
                                 server_assignor=None, topic_partitions=[]))
    assert (c.error_code, c.heartbeat_interval_ms) == (NONE, 7000)
