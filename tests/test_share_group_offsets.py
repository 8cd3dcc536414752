"""Kafka 4.1's share-group offsets APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets; KIP-932) on a real ``kafkacore serve`` process, through kafkacore's
AdminClient and the ``kafkacore groups`` commands: the start offsets (SPSO) set and shown, the
state epoch moved on by each alter (fencing the share-partition leader's older writes), the state
deleted, a classic group refused with GROUP_ID_NOT_FOUND, a share group with a member with
NON_EMPTY_GROUP, and the errors the commands print."""
from __future__ import annotations

import pytest

from _cli import fails, kafkacore
from broker_client import BrokerProcess, request
from kafkacore import Consumer, Producer
from kafkacore.client.admin import AdminClient
from kafkacore.errors import GroupIdNotFoundError, UnknownTopicOrPartitionError
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.kafka_uuid import uuid_from_text
from kafkacore.protocol.messages import read_share_group_state_request as read_rq
from kafkacore.protocol.messages import write_share_group_state_request as write_rq
from kafkacore.tools.common import EXIT_FAILED

pytestmark = pytest.mark.timeout(180)

TOPIC = "share-offsets-topic"
FENCED_STATE_EPOCH = 124


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("share-offsets") / "data", settings={
            "share.coordinator.state.topic.num.partitions": "3", "offsets.topic.num.partitions": "1"}) as b:
        with Producer({"bootstrap.servers": b.bootstrap}) as p:
            with AdminClient(b.bootstrap) as a:
                a.create_topic(TOPIC, 2, 1)
            for h in [p.send(TOPIC, b"v%d" % i, partition=i % 2) for i in range(20)]:
                h.result(10)
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    with AdminClient(broker.bootstrap) as a:
        yield a


def _state(broker, admin, group, partition):
    """(error, state epoch, start offset) of the share partition as its coordinator holds it."""
    topic_id = uuid_from_text(admin.describe_topics([TOPIC])[TOPIC].topic_id)
    with broker.client() as conn:
        r = conn.call(ApiKey.READ_SHARE_GROUP_STATE, 0, read_rq.ReadShareGroupStateRequest(
            group_id=group, topics=[read_rq.ReadStateData(topic_id=topic_id, partitions=[
                read_rq.PartitionData(partition=partition, leader_epoch=-1)])]))
    p = r.results[0].partitions[0]
    return p.error_code, p.state_epoch, p.start_offset


def _old_leader_write(broker, admin, group, partition, state_epoch):
    topic_id = uuid_from_text(admin.describe_topics([TOPIC])[TOPIC].topic_id)
    with broker.client() as conn:
        r = conn.call(ApiKey.WRITE_SHARE_GROUP_STATE, 0, write_rq.WriteShareGroupStateRequest(
            group_id=group, topics=[write_rq.WriteStateData(topic_id=topic_id, partitions=[write_rq.PartitionData(
                partition=partition, state_epoch=state_epoch, leader_epoch=-1, start_offset=0, state_batches=[])])]))
    return r.results[0].partitions[0].error_code


def test_admin_client_describe_alter_delete(broker, admin):
    g = "share-admin"
    assert admin.describe_share_group_offsets(g) == {}  # no state yet
    assert admin.describe_share_group_offsets(g, [(TOPIC, 0)]) == {(TOPIC, 0): (-1, -1)}
    admin.alter_share_group_offsets(g, {(TOPIC, 0): 3, (TOPIC, 1): 7})
    assert admin.describe_share_group_offsets(g) == {(TOPIC, 0): (3, -1), (TOPIC, 1): (7, -1)}
    assert _state(broker, admin, g, 0) == (0, 0, 3)
    admin.alter_share_group_offsets(g, {(TOPIC, 0): 5})
    assert _state(broker, admin, g, 0) == (0, 1, 5)  # the next state epoch ...
    assert _old_leader_write(broker, admin, g, 0, 0) == FENCED_STATE_EPOCH  # ... fences the older leader
    assert admin.describe_share_group_offsets(g) == {(TOPIC, 0): (5, -1), (TOPIC, 1): (7, -1)}
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.alter_share_group_offsets(g, {(TOPIC, 9): 0})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_share_group_offsets(g, ["no-such-topic"])
    admin.delete_share_group_offsets(g, [TOPIC])
    assert admin.describe_share_group_offsets(g) == {}
    assert _state(broker, admin, g, 1)[0] == UnknownTopicOrPartitionError.code


def test_a_classic_group_is_not_a_share_group(broker, admin):
    g = "classic-not-share"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": g, "enable.auto.commit": False})
    try:
        c.assign([(TOPIC, 0)])
        c.commit({(TOPIC, 0): 1})
    finally:
        c.close(autocommit=False)
    with pytest.raises(GroupIdNotFoundError):
        admin.alter_share_group_offsets(g, {(TOPIC, 0): 0})
    with pytest.raises(GroupIdNotFoundError):
        admin.describe_share_group_offsets(g)
    assert "is not a share group (GROUP_ID_NOT_FOUND)" in fails(
        "groups", "reset-offsets", g, "--share", "--topic", TOPIC, "--to-earliest", code=EXIT_FAILED,
        bootstrap=broker.bootstrap)


def test_groups_commands_for_share_groups(broker, admin):
    g, b = "share-cli", broker.bootstrap
    r = kafkacore("groups", "reset-offsets", g, "--share", "--topic", TOPIC, "--to-offset", 4, bootstrap=b)
    assert "Dry run" in r.err and admin.describe_share_group_offsets(g) == {}
    out = kafkacore("groups", "reset-offsets", g, "--share", "--topic", TOPIC, "--to-offset", 4, "--execute",
                    "-o", "json", bootstrap=b).json()
    assert [(row["partition"], row["new_offset"]) for row in out["partitions"]] == [(0, 4), (1, 4)]
    out = kafkacore("groups", "reset-offsets", g, "--share", "--topic", f"{TOPIC}:1", "--shift-by", 2, "--execute",
                    "-o", "json", bootstrap=b).json()
    assert [(row["partition"], row["committed_offset"], row["new_offset"]) for row in out["partitions"]] == \
        [(1, 4, 6)]
    assert admin.describe_share_group_offsets(g) == {(TOPIC, 0): (4, -1), (TOPIC, 1): (6, -1)}
    rows = kafkacore("groups", "share-offsets", g, "-o", "json", bootstrap=b).json()["partitions"]
    assert [(r["partition"], r["start_offset"], r["log_end_offset"], r["lag"]) for r in rows] == \
        [(0, 4, 10, 6), (1, 6, 10, 4)]
    assert "START-OFFSET" in kafkacore("groups", "share-offsets", g, bootstrap=b).out
    kafkacore("groups", "reset-offsets", g, "--share", "--all-topics", "--to-latest", "--execute", bootstrap=b)
    assert admin.describe_share_group_offsets(g) == {(TOPIC, 0): (10, -1), (TOPIC, 1): (10, -1)}
    kafkacore("groups", "delete-share-offsets", g, "--topic", TOPIC, bootstrap=b)
    assert admin.describe_share_group_offsets(g) == {}
    assert "no-such-topic" in fails("groups", "delete-share-offsets", g, "--topic", "no-such-topic",
                                    code=EXIT_FAILED, bootstrap=b)


def test_a_share_group_with_a_member_is_not_altered_nor_deleted(broker, admin):
    """A member joined with ShareGroupHeartbeat (v1, as librdkafka 2.16 sends it) makes the group
    Stable: NON_EMPTY_GROUP for alter and delete, describe still answers; once it leaves
    (epoch -1) the group is Empty and the reset goes through."""
    from kafkacore.errors import NonEmptyGroupError
    g = "share-with-member"
    admin.coordinator(g)  # __consumer_offsets exists before the heartbeat (a client asks first too)
    with broker.client() as conn:
        joined = conn.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, request(
            ApiKey.SHARE_GROUP_HEARTBEAT, group_id=g, member_id="m-1", member_epoch=0, rack_id=None,
            subscribed_topic_names=[TOPIC]))
        assert joined.error_code == 0, joined
        with pytest.raises(NonEmptyGroupError):
            admin.alter_share_group_offsets(g, {(TOPIC, 0): 1})
        with pytest.raises(NonEmptyGroupError):
            admin.delete_share_group_offsets(g, [TOPIC])
        assert "has active members (NON_EMPTY_GROUP)" in fails(
            "groups", "reset-offsets", g, "--share", "--topic", TOPIC, "--to-earliest", "--execute",
            code=EXIT_FAILED, bootstrap=broker.bootstrap)
        assert admin.describe_share_group_offsets(g, [(TOPIC, 0)]) == {(TOPIC, 0): (-1, -1)}
        left = conn.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, request(
            ApiKey.SHARE_GROUP_HEARTBEAT, group_id=g, member_id="m-1", member_epoch=-1, rack_id=None,
            subscribed_topic_names=None))
        assert left.error_code == 0, left
    admin.alter_share_group_offsets(g, {(TOPIC, 0): 1})
    assert admin.describe_share_group_offsets(g) == {(TOPIC, 0): (1, -1)}
