"""KIP-932's share coordinator and ``__share_group_state`` (docs/groups.md, "Share state").

On a real ``kafkacore serve`` process, over the wire: FindCoordinator key type 2, the inter-broker
share-state APIs (Initialize/Read/Write/Delete ShareGroupState, ReadShareGroupStateSummary) with
their fencing, a ShareSnapshot every ``share.coordinator.snapshot.update.records.per.snapshot``
updates, the records in the log exactly KIP-932's (read back with kafka-python and decoded with
the generated codecs), and the state replayed after a restart. In-process: the default persister
(the share-partition leader's view) on an embedded broker, and its restart."""
from __future__ import annotations

import uuid

import pytest

from _kcutil import wait_for
from broker_client import BrokerProcess, request
from kafkacore.coordinator.internal_topic import partition_for
from kafkacore.coordinator.share_state import ACKNOWLEDGED, ARCHIVED, AVAILABLE, ShareState, StateBatch
from kafkacore.coordinator.share_state_log import SHARE_GROUP_STATE_TOPIC, coordinator_key
from kafkacore.errors import FencedLeaderEpochError, FencedStateEpochError
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.coordinator.share_snapshot_key import ShareSnapshotKey
from kafkacore.protocol.coordinator.share_snapshot_value import ShareSnapshotValue
from kafkacore.protocol.coordinator.share_update_key import ShareUpdateKey
from kafkacore.protocol.coordinator.share_update_value import ShareUpdateValue
from kafkacore.protocol.messages import delete_share_group_state_request as delete_rq
from kafkacore.protocol.messages import initialize_share_group_state_request as init_rq
from kafkacore.protocol.messages import read_share_group_state_request as read_rq
from kafkacore.protocol.messages import read_share_group_state_summary_request as summary_rq
from kafkacore.protocol.messages import write_share_group_state_request as write_rq
from kafkacore.protocol.wire import Reader

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3  # of __share_group_state
PER_SNAPSHOT = 2
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH = 0, 3, 42, 74, 124


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share-state") / "data", settings={
        "share.coordinator.state.topic.num.partitions": str(PARTITIONS),
        "share.coordinator.snapshot.update.records.per.snapshot": str(PER_SNAPSHOT),
        "offsets.topic.num.partitions": "1"})
    b.start()
    # the share state topic exists once a share coordinator is looked up: every test may run alone
    with b.client() as c:
        wait_for(lambda: c.call(ApiKey.FIND_COORDINATOR, 6, request(
            ApiKey.FIND_COORDINATOR, key_type=2, coordinator_keys=[coordinator_key("any", bytes(16), 0)]))
            .coordinators[0].error_code == NONE, what="a share coordinator")
    yield b
    b.stop()


@pytest.fixture
def conn(broker):
    c = broker.client()
    yield c
    c.close()


def _init(conn, group, topic_id, state_epoch, start):
    r = conn.call(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, init_rq.InitializeShareGroupStateRequest(
        group_id=group, topics=[init_rq.InitializeStateData(topic_id=topic_id, partitions=[
            init_rq.PartitionData(partition=0, state_epoch=state_epoch, start_offset=start)])]))
    return r.results[0].partitions[0].error_code


def _write(conn, group, topic_id, state_epoch, leader_epoch, start, batches):
    r = conn.call(ApiKey.WRITE_SHARE_GROUP_STATE, 0, write_rq.WriteShareGroupStateRequest(
        group_id=group, topics=[write_rq.WriteStateData(topic_id=topic_id, partitions=[write_rq.PartitionData(
            partition=0, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
            state_batches=[write_rq.StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                           for f, last, s, c in batches])])]))
    return r.results[0].partitions[0].error_code


def _read(conn, group, topic_id, leader_epoch):
    r = conn.call(ApiKey.READ_SHARE_GROUP_STATE, 0, read_rq.ReadShareGroupStateRequest(
        group_id=group, topics=[read_rq.ReadStateData(topic_id=topic_id, partitions=[
            read_rq.PartitionData(partition=0, leader_epoch=leader_epoch)])]))
    p = r.results[0].partitions[0]
    return p.error_code, p.state_epoch, p.start_offset, [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]


def _summary(conn, group, topic_id):
    r = conn.call(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, summary_rq.ReadShareGroupStateSummaryRequest(
        group_id=group, topics=[summary_rq.ReadStateSummaryData(topic_id=topic_id, partitions=[
            summary_rq.PartitionData(partition=0, leader_epoch=-1)])]))
    p = r.results[0].partitions[0]
    return p.error_code, p.state_epoch, p.start_offset


def _delete(conn, group, topic_id):
    r = conn.call(ApiKey.DELETE_SHARE_GROUP_STATE, 0, delete_rq.DeleteShareGroupStateRequest(
        group_id=group, topics=[delete_rq.DeleteStateData(topic_id=topic_id, partitions=[
            delete_rq.PartitionData(partition=0)])]))
    return r.results[0].partitions[0].error_code


def _records(bootstrap, partition):
    """Every (key, value) of one __share_group_state partition, read with kafka-python."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(SHARE_GROUP_STATE_TOPIC, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out = []
        wait_for(lambda: out.extend((r.key, r.value) for rs in consumer.poll(timeout_ms=100).values() for r in rs)
                 or consumer.position(tp) >= end, "the whole partition read", timeout=15)
        return out
    finally:
        consumer.close()


def _decode(key, value):
    r = Reader(key)
    version = r.int16()
    k = (ShareSnapshotKey if version == 0 else ShareUpdateKey).read(r, version)
    if value is None:
        return version, k, None
    r = Reader(value)
    assert r.int16() == 0
    v = (ShareSnapshotValue if version == 0 else ShareUpdateValue).read(r, 0)
    return version, k, v


def test_find_coordinator_share_key(conn, broker):
    key = coordinator_key("fc-group", uuid.uuid4().bytes, 0)
    r = conn.call(ApiKey.FIND_COORDINATOR, 6, request(ApiKey.FIND_COORDINATOR, key_type=2,
                                                      coordinator_keys=[key, "no-topic-id:0", "g:AAAAAAAAAAAAAAAAAAAAAA:x"]))
    good, *bad = r.coordinators
    assert (good.error_code, good.node_id, good.port) == (NONE, 1, broker.port)
    assert [c.error_code for c in bad] == [INVALID_REQUEST, INVALID_REQUEST]
    r = conn.call(ApiKey.FIND_COORDINATOR, 5, request(ApiKey.FIND_COORDINATOR, key_type=2, coordinator_keys=[key]))
    assert r.coordinators[0].error_code == INVALID_REQUEST  # the share key type is v6+


def test_write_read_fence_and_the_records_in_the_log(conn, broker):
    group, topic_id = "g-records", uuid.uuid4().bytes
    assert _read(conn, group, topic_id, 0)[0] == UNKNOWN_TOPIC_OR_PARTITION  # never initialized
    assert _init(conn, group, topic_id, 1, 10) == NONE  # snapshot, epoch 0
    assert _write(conn, group, topic_id, 1, 5, 10, [(10, 14, AVAILABLE, 1), (15, 19, ACKNOWLEDGED, 1)]) == NONE
    assert _write(conn, group, topic_id, 1, 5, 12, [(13, 16, ARCHIVED, 2)]) == NONE  # updates 1, 2
    assert _write(conn, group, topic_id, 1, 5, -1, [(20, 20, AVAILABLE, 3)]) == NONE  # a snapshot again
    expected = [(12, 12, AVAILABLE, 1), (13, 16, ARCHIVED, 2), (17, 19, ACKNOWLEDGED, 1), (20, 20, AVAILABLE, 3)]
    assert _read(conn, group, topic_id, 5) == (NONE, 1, 12, expected)
    assert _summary(conn, group, topic_id) == (NONE, 1, 12)
    # an older state epoch, an older leader epoch: refused, nothing written
    assert _write(conn, group, topic_id, 0, 5, 30, []) == FENCED_STATE_EPOCH
    assert _write(conn, group, topic_id, 1, 4, 30, []) == FENCED_LEADER_EPOCH
    assert _read(conn, group, topic_id, 4)[0] == FENCED_LEADER_EPOCH
    assert _init(conn, group, topic_id, 0, 0) == FENCED_STATE_EPOCH
    for bad in ([(20, 10, AVAILABLE, 1)], [(-1, 3, AVAILABLE, 1)], [(30, 31, 3, 1)], [(30, 31, AVAILABLE, -1)]):
        assert _write(conn, group, topic_id, 1, 5, -1, bad) == INVALID_REQUEST  # nothing written
    assert _read(conn, group, topic_id, 5) == (NONE, 1, 12, expected)

    partition = partition_for(coordinator_key(group, topic_id, 0), PARTITIONS)
    mine = [_decode(k, v) for k, v in _records(broker.bootstrap, partition)]
    mine = [(version, v) for version, k, v in mine if (k.group_id, k.topic_id, k.partition) == (group, topic_id, 0)]
    assert [version for version, _v in mine] == [0, 1, 1, 0]
    init, first, second, snap = (v for _version, v in mine)
    assert (init.snapshot_epoch, init.state_epoch, init.leader_epoch, init.start_offset, init.state_batches) == \
        (0, 1, -1, 10, [])
    assert (first.snapshot_epoch, first.leader_epoch, first.start_offset) == (0, 5, 10)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in first.state_batches] == \
        [(10, 14, AVAILABLE, 1), (15, 19, ACKNOWLEDGED, 1)]
    assert (second.start_offset, len(second.state_batches)) == (12, 1)
    assert (snap.snapshot_epoch, snap.state_epoch, snap.leader_epoch, snap.start_offset) == (1, 1, 5, 12)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in snap.state_batches] == \
        expected


def test_state_replayed_after_restart_and_deleted_with_tombstones(broker):
    group, topic_id = "g-restart", uuid.uuid4().bytes
    with broker.client() as c:
        assert _init(c, group, topic_id, 2, 100) == NONE
        assert _write(c, group, topic_id, 2, 7, 101, [(101, 105, ACKNOWLEDGED, 1)]) == NONE
        assert _write(c, group, topic_id, 2, 7, -1, [(106, 110, AVAILABLE, 2)]) == NONE
        before = _read(c, group, topic_id, 7)
    assert before == (NONE, 2, 101, [(101, 105, ACKNOWLEDGED, 1), (106, 110, AVAILABLE, 2)])
    broker.restart()
    with broker.client() as c:
        assert _read(c, group, topic_id, 7) == before
        assert _write(c, group, topic_id, 1, 7, 200, []) == FENCED_STATE_EPOCH  # fencing survives too
        assert _delete(c, group, topic_id) == NONE
        assert _read(c, group, topic_id, 7)[0] == UNKNOWN_TOPIC_OR_PARTITION
        assert _delete(c, group, topic_id) == NONE  # nothing left: no error
    partition = partition_for(coordinator_key(group, topic_id, 0), PARTITIONS)
    mine = [_decode(k, v) for k, v in _records(broker.bootstrap, partition)]
    tail = [(version, v) for version, k, v in mine if k.group_id == group][-2:]
    assert tail == [(0, None), (1, None)]  # tombstones of both keys
    broker.restart()
    with broker.client() as c:
        assert _read(c, group, topic_id, 7)[0] == UNKNOWN_TOPIC_OR_PARTITION


def test_a_write_of_deleted_state_is_fenced_until_the_state_is_initialized_again(broker):
    """A leader still holding a deleted share partition's state (its group deleted through
    another broker) writes at the deleted state's epoch or below: FENCED_STATE_EPOCH, nothing
    written, also after the coordinator replayed its log; InitializeShareGroupState starts the
    key anew, after which writes at its epoch are accepted."""
    group, topic_id = "g-deleted", uuid.uuid4().bytes
    with broker.client() as c:
        assert _init(c, group, topic_id, 3, 0) == NONE
        assert _write(c, group, topic_id, 3, 1, 10, [(10, 12, ACKNOWLEDGED, 1)]) == NONE
        assert _delete(c, group, topic_id) == NONE
        for state_epoch in (3, 2, -1):
            assert _write(c, group, topic_id, state_epoch, 1, 20, []) == FENCED_STATE_EPOCH
        assert _summary(c, group, topic_id)[0] == UNKNOWN_TOPIC_OR_PARTITION  # not brought back
    broker.restart()  # the tombstones replayed: the deleted state's epoch is known again
    with broker.client() as c:
        assert _write(c, group, topic_id, 3, 1, 20, []) == FENCED_STATE_EPOCH
        assert _read(c, group, topic_id, 1)[0] == UNKNOWN_TOPIC_OR_PARTITION
        assert _init(c, group, topic_id, 0, 5) == NONE  # a new group of that id starts
        assert _write(c, group, topic_id, 0, 1, 6, []) == NONE
        assert _summary(c, group, topic_id) == (NONE, 0, 6)


def test_default_persister_on_an_embedded_broker(tmp_path):
    """The share-partition leader's side: broker.share_persister, calling its own share
    coordinator through the local channel; the state back after the broker restarts."""
    from kafkacore.embedded import Broker
    config = {"share.coordinator.state.topic.num.partitions": 2,
              "share.coordinator.snapshot.update.records.per.snapshot": 1}
    topic_id = uuid.uuid4()
    with Broker(tmp_path, config) as b:
        p = b.core.share_persister
        run = b._run
        assert run(p.read_state("pg", topic_id, 3, 0)) is None
        assert run(p.read_summary("pg", topic_id, 3)) is None
        run(p.initialize_state("pg", topic_id, 3, 1, 0))
        assert run(p.read_state("pg", topic_id, 3, 2)) == ShareState(1, 0, 2, ())
        for i in range(4):  # snapshot, update, snapshot, update
            run(p.write_state("pg", topic_id, 3, ShareState(1, i, 2, (StateBatch(i, i + 1, ACKNOWLEDGED, 1),))))
        assert b.core.share_coordinator.metrics["snapshots"] == 3  # initialize + 2
        with pytest.raises(FencedStateEpochError):
            run(p.write_state("pg", topic_id, 3, ShareState(0, 9, 2, ())))
        with pytest.raises(FencedLeaderEpochError):
            run(p.write_state("pg", topic_id, 3, ShareState(1, 9, 1, ())))
        assert b.core.share_coordinator.metrics["fenced"] == 2
        state = run(p.read_state("pg", topic_id, 3, 2))
        assert state == ShareState(1, 3, 2, (StateBatch(3, 4, ACKNOWLEDGED, 1),))
    with Broker(tmp_path, config) as b:
        p = b.core.share_persister
        assert b._run(p.read_state("pg", topic_id, 3, 2)) == state
        assert b._run(p.read_summary("pg", topic_id, 3)) == ShareState(1, 3, -1)
        b._run(p.delete_state("pg", topic_id, 3))
        assert b._run(p.read_state("pg", topic_id, 3, 2)) is None


def test_deleting_a_topic_deletes_every_groups_share_state_on_it(broker):
    """Kafka's rule: a deleted topic's share state goes for every share group on it (tombstones);
    a state of another topic stays."""
    from broker_client import auto_create
    other = uuid.uuid4().bytes
    with broker.client() as c:
        auto_create(c, "doomed")
        md = c.call(3, 12, request(3, topics=None, allow_auto_topic_creation=False))
        doomed = next(t.topic_id for t in md.topics if t.name == "doomed")
        # the share state topic exists once a coordinator is looked up (this test may run alone)
        wait_for(lambda: c.call(ApiKey.FIND_COORDINATOR, 6, request(
            ApiKey.FIND_COORDINATOR, key_type=2, coordinator_keys=[coordinator_key("g-doomed-1", doomed, 0)]))
            .coordinators[0].error_code == NONE, what="a share coordinator")
        for group in ("g-doomed-1", "g-doomed-2"):
            wait_for(lambda group=group: _init(c, group, doomed, 1, 5) == NONE, what=f"{group} initialized")
        assert _init(c, "g-doomed-1", other, 1, 5) == NONE
        r = c.call(20, 5, request(20, topic_names=["doomed"], timeout_ms=10000))
        assert r.responses[0].error_code == NONE
        for group in ("g-doomed-1", "g-doomed-2"):
            wait_for(lambda group=group: _read(c, group, doomed, 1)[0] == UNKNOWN_TOPIC_OR_PARTITION,
                     what=f"the share state of {group} on the deleted topic deleted")
        assert _read(c, "g-doomed-1", other, 1)[:3] == (NONE, 1, 5)
    broker.restart()
    with broker.client() as c:
        assert _read(c, "g-doomed-2", doomed, 1)[0] == UNKNOWN_TOPIC_OR_PARTITION
