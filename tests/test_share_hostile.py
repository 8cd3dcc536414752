"""KIP-932 share groups against WELL-FORMED requests with hostile values, sent to one real
``kafkacore serve`` process (the frame-level fuzz of every decoder is test_protocol_codecs.py;
this is the layer above). Each answer carries the error Kafka answers for the case, or succeeds;
the connection stays open; the broker's log has no traceback; and after the barrage a legitimate
share group gets every record exactly once, while the partition the hostile acknowledgements
targeted still holds exactly the records never settled (its SPSO never moved backwards, nor past
a record not settled).

Kafka's rules the expectations follow (named at each case):
- KafkaApis.validateAcknowledgementBatches: first > last, a batch starting before the previous
  one's last offset, no types, a per-offset type list of the wrong length, a type outside 0-3:
  INVALID_REQUEST for that partition.
- SharePartition.acknowledge: an offset the member does not hold (not acquired, another member's,
  outside the in-flight window) - INVALID_RECORD_STATE, and nothing of the request's batches for
  that partition changes (Kafka rolls the partition's updates back).
- SharePartitionManager.newContext / ShareSessionCache: SHARE_SESSION_NOT_FOUND,
  INVALID_SHARE_SESSION_EPOCH; acknowledgements in an epoch-0 ShareFetch: INVALID_REQUEST.
- GroupMetadataManager.throwIfShareGroupHeartbeatRequestIsInvalid and shareGroupHeartbeat:
  INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH.
- ShareCoordinatorShard.maybeGetWriteStateError: FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH,
  INVALID_REQUEST (negative partition); kafkacore also refuses malformed state batches and a
  start offset below -1 with INVALID_REQUEST (docs/groups.md, "Hostile input").
"""
from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _kcutil import wait_for
from broker_client import BrokerProcess, auto_create, find_coordinators, request
from kafkacore import ShareConsumer
from kafkacore.coordinator.share_state_log import decode, snapshot_key, update_key
from kafkacore.errors import (FencedLeaderEpochError, FencedMemberEpochError, FencedStateEpochError, GroupIdNotFoundError,
                              InvalidRecordStateError, InvalidRequestError, InvalidShareSessionEpochError,
                              ShareSessionNotFoundError, UnknownMemberIdError, UnknownTopicIdError,
                              UnknownTopicOrPartitionError)
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.coordinator.share_snapshot_value import ShareSnapshotValue
from kafkacore.protocol.coordinator.share_snapshot_value import StateBatch as SnapshotBatch
from kafkacore.protocol.coordinator.share_update_value import ShareUpdateValue
from kafkacore.protocol.coordinator.share_update_value import StateBatch as UpdateBatch
from kafkacore.protocol.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource
from kafkacore.protocol.messages.initialize_share_group_state_request import InitializeStateData
from kafkacore.protocol.messages.initialize_share_group_state_request import PartitionData as InitPartition
from kafkacore.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkacore.protocol.messages.read_share_group_state_request import PartitionData as ReadPartition
from kafkacore.protocol.messages.read_share_group_state_request import ReadStateData
from kafkacore.protocol.messages.read_share_group_state_summary_request import PartitionData as SummaryPartition
from kafkacore.protocol.messages.read_share_group_state_summary_request import ReadStateSummaryData
from kafkacore.protocol.messages.share_acknowledge_request import AcknowledgementBatch as AckBatch
from kafkacore.protocol.messages.share_acknowledge_request import AcknowledgePartition, AcknowledgeTopic
from kafkacore.protocol.messages.share_fetch_request import (AcknowledgementBatch, FetchPartition, FetchTopic,
                                                            ForgottenTopic)
from kafkacore.protocol.messages.write_share_group_state_request import PartitionData as WritePartition
from kafkacore.protocol.messages.write_share_group_state_request import StateBatch, WriteStateData
from kafkacore.protocol.wire import ProtocolDecodeError, Writer
from kafkacore.record import RecordBatchBuilder

pytestmark = pytest.mark.timeout(180)

LOCK_MS = 1000  # the broker's lock duration: what the session and heartbeat cases leave expires fast
TARGET_LOCK_MS = 10_000  # the modelled group: a held record must not expire between two requests of an example
DELIVERY_LIMIT = 3
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
INVALID_REQUEST, INVALID_RECORD_STATE = InvalidRequestError.code, InvalidRecordStateError.code
SETTINGS = {"num.partitions": "1", "offsets.topic.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.snapshot.update.records.per.snapshot": "3",
            "group.share.session.timeout.ms": "3000", "group.share.min.session.timeout.ms": "1000",
            "group.share.heartbeat.interval.ms": "200", "group.share.min.heartbeat.interval.ms": "100",
            "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": str(LOCK_MS),
            "group.share.delivery.count.limit": str(DELIVERY_LIMIT)}
HOSTILE = settings(max_examples=40, deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TARGET_RECORDS = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("sharehostile") / "data", settings=SETTINGS)
    b.start()
    yield b
    alive = b.proc.poll() is None
    out = b.output()
    b.stop()
    assert alive, f"the broker died:\n{out[-4000:]}"
    assert "Traceback" not in out and "unhandled" not in out.lower(), out[-8000:]
    assert " ERROR " not in out, out[-8000:]  # hostile input is answered, never a broker error


@pytest.fixture(scope="module")
def conn(broker):
    with broker.client(timeout=20) as c:
        find_coordinators(c)  # the group coordinator's topic exists before the first heartbeat
        yield c


def new_topic(conn, prefix, records, batch):
    """A one-partition topic holding ``records`` records (values "0".."n-1"), ``batch`` a batch; its id."""
    name = f"{prefix}-{time.monotonic_ns()}"
    topic_id = bytes(auto_create(conn, name).topic_id)
    for start in range(0, records, batch):
        b = RecordBatchBuilder("none")
        for i in range(start, min(records, start + batch)):
            b.append(b"%d" % i, timestamp_ms=1_700_000_000_000)
        r = conn.call(ApiKey.PRODUCE, 9, request(ApiKey.PRODUCE, acks=-1, timeout_ms=5000, topic_data=[
            TopicProduceData(name=name, partition_data=[PartitionProduceData(index=0, records=b.build())])]))
        assert r.responses[0].partition_responses[0].error_code == 0
    return name, topic_id


def set_group_configs(conn, group, **configs):
    r = conn.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request(ApiKey.INCREMENTAL_ALTER_CONFIGS, resources=[
        AlterConfigsResource(resource_type=32, resource_name=group, configs=[
            AlterableConfig(name=k.replace("_", "."), config_operation=0, value=str(v)) for k, v in configs.items()])]))
    assert r.responses[0].error_code == 0, r


def share_fetch(conn, group, member, epoch, topic_id, partitions=(0,), acks=None, max_records=8, max_bytes=1 << 20,
                batch_size=0, max_wait_ms=0, min_bytes=1, partition_max_bytes=1 << 20, version=1, forgotten=()):
    acks = acks or {}
    parts = sorted(set(partitions) | set(acks))
    return conn.call(ApiKey.SHARE_FETCH, version, request(
        ApiKey.SHARE_FETCH, group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
        min_bytes=min_bytes, max_bytes=max_bytes, max_records=max_records, batch_size=batch_size,
        topics=[FetchTopic(topic_id=topic_id, partitions=[
            FetchPartition(partition_index=p, partition_max_bytes=partition_max_bytes, acknowledgement_batches=[
                AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=types)
                for f, last, types in acks.get(p, [])]) for p in parts])] if parts else [],
        forgotten_topics_data=[ForgottenTopic(topic_id=topic_id, partitions=list(forgotten))] if forgotten else []))


def share_ack(conn, group, member, epoch, topic_id, acks):
    return conn.call(ApiKey.SHARE_ACKNOWLEDGE, 1, request(
        ApiKey.SHARE_ACKNOWLEDGE, group_id=group, member_id=member, share_session_epoch=epoch,
        topics=[AcknowledgeTopic(topic_id=topic_id, partitions=[
            AcknowledgePartition(partition_index=p, acknowledgement_batches=[
                AckBatch(first_offset=f, last_offset=last, acknowledge_types=types) for f, last, types in batches])
            for p, batches in acks.items()])]))


def partition_of(resp, partition=0, topic_id=None):
    found = [p for t in resp.responses for p in t.partitions
             if p.partition_index == partition and (topic_id is None or bytes(t.topic_id) == topic_id)]
    return found[0] if found else None


def acquired(resp, partition=0):
    p = partition_of(resp, partition)
    if p is None:
        return []
    assert p.error_code == 0, p
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]


def open_session(conn, group, member, topic_id, **kw):
    r = share_fetch(conn, group, member, 0, topic_id, **kw)
    assert r.error_code == 0, r
    return r


def close_session(conn, group, member, topic_id):
    r = share_fetch(conn, group, member, -1, topic_id, partitions=())
    assert r.error_code == 0, r


def state_summary(conn, group, topic_id):
    """(error code, SPSO) of the group's share partition of the topic's partition 0."""
    r = conn.call(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, request(
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, group_id=group, topics=[ReadStateSummaryData(
            topic_id=topic_id, partitions=[SummaryPartition(partition=0, leader_epoch=-1)])]))
    p = r.results[0].partitions[0]
    return p.error_code, p.start_offset


# -- acknowledgements: a model of the one partition they target ----------------------------------------
class Target:
    """The modelled share partition: the offsets settled (accepted, rejected, gapped, or archived at
    the delivery limit) and each offset's last delivery count."""

    def __init__(self, topic, topic_id, group):
        self.topic, self.topic_id, self.group = topic, topic_id, group
        self.settled: set[int] = set()
        self.counts: dict[int, int] = {}
        self.spso = self.speo = 0
        self.examples = self.completed = 0  # an example that failed midway leaves the model behind the broker

    def first_unsettled(self):
        o = 0
        while o in self.settled:
            o += 1
        return o


@pytest.fixture(scope="module")
def target(conn):
    name, topic_id = new_topic(conn, "hostile-target", TARGET_RECORDS, 4)
    group = f"hostile-target-g-{uuid.uuid4().hex[:6]}"
    set_group_configs(conn, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms=TARGET_LOCK_MS)
    return Target(name, topic_id, group)


# offsets named relative to what the member holds, the window and the log, plus the absurd
_ANCHORS = ("held_first", "held_last", "spso", "log_end", "zero", "negative", "huge", "int64_max")
types_st = st.one_of(
    st.lists(st.sampled_from([GAP, ACCEPT, RELEASE, REJECT]), min_size=1, max_size=1),
    st.lists(st.integers(-2, 5), min_size=0, max_size=6),  # unknown types, empty, per-offset lists
)
batch_st = st.tuples(st.sampled_from(_ANCHORS), st.integers(-2, 3), st.integers(-1, 5) | st.just(1 << 62), types_st)


def _resolve(anchor, delta, held, target):
    base = {"held_first": held[0][0] if held else target.spso, "held_last": held[-1][1] if held else target.spso,
            "spso": target.first_unsettled(), "log_end": TARGET_RECORDS, "zero": 0, "negative": -5, "huge": 1 << 62,
            "int64_max": (1 << 63) - 1 - (1 << 62) - 8}[anchor]
    return base + delta


def expected_ack(batches, held_by_me, spso, speo):
    """What Kafka answers for one partition's acknowledgement batches: INVALID_REQUEST (KafkaApis'
    validation of every batch first); then batch by batch (SharePartition.acknowledge, its
    fetchSubMap): nothing in flight or a batch wholly below the SPSO, INVALID_RECORD_STATE; a batch
    ending past the last record handed out, INVALID_REQUEST; an offset from the SPSO on not held by
    the member, or named a second time, INVALID_RECORD_STATE; else 0."""
    prev_last = -1
    for first, last, types in batches:
        if first > last or first < prev_last or not types or (len(types) > 1 and last - first + 1 != len(types)) \
                or any(t < 0 or t > 3 for t in types):
            return INVALID_REQUEST
        prev_last = last
    prev_last = None
    for first, last, _types in batches:
        if first == prev_last:
            return INVALID_RECORD_STATE
        prev_last = last
        if spso == speo or last < spso:
            return INVALID_RECORD_STATE
        if last >= speo:
            return INVALID_REQUEST
        if any(o not in held_by_me for o in range(max(first, spso), last + 1)):
            return INVALID_RECORD_STATE
    return 0


@settings(HOSTILE, max_examples=120)
@given(batches=st.lists(batch_st, min_size=0, max_size=4), piggyback=st.booleans(),
       max_records=st.integers(1, 8), by_other=st.booleans())
def test_hostile_acknowledgement_batches(conn, target, batches, piggyback, max_records, by_other):
    """Acknowledgement batches of every shape, sent by the member holding records or by another
    member of the group (whose session is its own), with an unknown partition beside them."""
    target.examples += 1
    member = uuid.uuid4().hex[:22]
    open_session(conn, target.group, member, target.topic_id, max_records=0)
    r = share_fetch(conn, target.group, member, 1, target.topic_id, max_records=max_records)
    assert r.error_code == 0, r
    held = acquired(r)
    held_by_me = {}
    spso = target.first_unsettled()  # (every offset holds a record: the SPSO is the first not settled)
    for f, last, count in held:
        target.speo = max(target.speo, last + 1)
        for o in range(f, last + 1):
            assert o not in target.settled, f"offset {o} delivered again after it was settled"
            assert count == target.counts.get(o, 0) + 1, (o, count, target.counts.get(o))
            assert count <= DELIVERY_LIMIT
            held_by_me[o] = count
            target.counts[o] = count
    resolved = [(_resolve(a, d, held, target), min(_resolve(a, d, held, target) + span, (1 << 63) - 1), types)
                for a, d, span, types in batches]
    sender, epoch = member, 2
    if by_other:  # another member's acknowledgements of these records: never its to settle
        sender, epoch = uuid.uuid4().hex[:22], 1
        open_session(conn, target.group, sender, target.topic_id, max_records=0)
    want = expected_ack(resolved, {} if by_other else held_by_me, spso, target.speo)  # (no batch at all: 0)
    if piggyback:
        r = share_fetch(conn, target.group, sender, epoch, target.topic_id, acks={0: resolved, 3: [(0, 0, [1])]},
                        max_records=0)
        assert r.error_code == 0, r
        p = partition_of(r)
        code = p.acknowledge_error_code if p is not None else 0
        assert partition_of(r, 3).acknowledge_error_code == UnknownTopicOrPartitionError.code, r
    else:
        r = share_ack(conn, target.group, sender, epoch, target.topic_id, {0: resolved, 3: [(0, 0, [1])]})
        assert r.error_code == 0, r
        code = partition_of(r).error_code
        assert partition_of(r, 3).error_code == UnknownTopicOrPartitionError.code, r
    assert code == want, (resolved, held, r)
    if by_other:
        close_session(conn, target.group, sender, target.topic_id)
    if want == 0:
        for first, last, types in resolved:
            for o in range(max(first, spso), last + 1):  # (below the SPSO: done already, skipped)
                t = types[0] if len(types) == 1 else types[o - first]
                if t == RELEASE:
                    if held_by_me[o] >= DELIVERY_LIMIT:
                        target.settled.add(o)
                else:
                    target.settled.add(o)
                del held_by_me[o]
    close_session(conn, target.group, member, target.topic_id)  # releases the rest
    for o, count in held_by_me.items():
        if count >= DELIVERY_LIMIT:
            target.settled.add(o)
    # the SPSO as the share coordinator has it (the release is written in the background): never
    # backwards, never past a record not settled, and soon the first record not settled
    def spso_written():
        code, spso = state_summary(conn, target.group, target.topic_id)
        assert code == 0
        assert target.spso <= spso <= target.first_unsettled(), (target.spso, spso, target.first_unsettled())
        target.spso = spso
        return spso == target.first_unsettled()
    wait_for(spso_written, timeout=10, what=lambda: f"SPSO {target.spso}, first unsettled {target.first_unsettled()}")
    target.completed += 1


# -- sessions, partitions and limits --------------------------------------------------------------------
@pytest.fixture(scope="module")
def misc(conn):
    name, topic_id = new_topic(conn, "hostile-misc", 60, 5)
    group = f"hostile-misc-g-{uuid.uuid4().hex[:6]}"
    set_group_configs(conn, group, share_auto_offset_reset="earliest")
    return name, topic_id, group


def test_hostile_session_epochs_members_and_partitions(conn, misc):
    _name, topic_id, group = misc
    unknown = uuid.uuid4().hex[:22]
    # SharePartitionManager.newContext: no session for the member
    for epoch in (1, 7, 2**31 - 1, -1):
        assert share_fetch(conn, group, unknown, epoch, topic_id).error_code == ShareSessionNotFoundError.code
    for epoch in (1, -1, 12345):
        assert share_ack(conn, group, unknown, epoch, topic_id, {0: [(0, 0, [ACCEPT])]}).error_code == \
            ShareSessionNotFoundError.code
    # ShareAcknowledge never opens a session; a wrong epoch is INVALID_SHARE_SESSION_EPOCH
    member = uuid.uuid4().hex[:22]
    open_session(conn, group, member, topic_id, max_records=0)
    assert share_ack(conn, group, member, 0, topic_id, {0: []}).error_code == InvalidShareSessionEpochError.code
    for epoch in (0 - 2, 2, 2**31 - 1, -(2**31)):
        assert share_fetch(conn, group, member, epoch, topic_id).error_code == InvalidShareSessionEpochError.code
        assert share_ack(conn, group, member, epoch, topic_id, {}).error_code == InvalidShareSessionEpochError.code
    # acknowledgements in the request that opens a session: INVALID_REQUEST
    assert share_fetch(conn, group, member, 0, topic_id, acks={0: [(0, 0, [ACCEPT])]}).error_code == INVALID_REQUEST
    # an unknown topic id, a partition that does not exist: per partition
    member = uuid.uuid4().hex[:22]
    open_session(conn, group, member, topic_id, max_records=0)
    bogus = uuid.uuid4().bytes
    r = share_fetch(conn, group, member, 1, bogus, acks={0: [(0, 3, [ACCEPT])]})
    assert r.error_code == 0, r
    assert partition_of(r, 0, bogus).error_code == UnknownTopicIdError.code, r
    assert partition_of(r, 0, bogus).acknowledge_error_code == UnknownTopicIdError.code, r
    for p in (1, 7, -1, 2**31 - 1):
        r = share_fetch(conn, group, member, 2 + (1, 7, -1, 2**31 - 1).index(p), topic_id, partitions=(p,))
        assert r.error_code == 0, r
        assert partition_of(r, p, topic_id).error_code == UnknownTopicOrPartitionError.code, r
    r = share_ack(conn, group, member, 6, bogus, {0: [(0, 0, [ACCEPT])]})
    assert r.error_code == 0 and partition_of(r, 0, bogus).error_code == UnknownTopicIdError.code
    r = share_ack(conn, group, member, 7, topic_id, {5: [(0, 0, [ACCEPT])]})
    assert partition_of(r, 5).error_code == UnknownTopicOrPartitionError.code
    # empty ids: INVALID_REQUEST at the top
    assert share_fetch(conn, group, "", 0, topic_id).error_code == INVALID_REQUEST
    assert share_fetch(conn, "", member, 0, topic_id).error_code == INVALID_REQUEST
    assert share_ack(conn, group, "", 1, topic_id, {}).error_code == INVALID_REQUEST
    # a closing request with partitions to forget (librdkafka's mock broker: INVALID_REQUEST); a
    # session closed twice: the second close finds none
    assert share_fetch(conn, group, member, -1, topic_id, partitions=(), forgotten=(0,)).error_code == INVALID_REQUEST
    close_session(conn, group, member, topic_id)
    assert share_fetch(conn, group, member, -1, topic_id, partitions=()).error_code == ShareSessionNotFoundError.code
    assert share_ack(conn, group, member, -1, topic_id, {}).error_code == ShareSessionNotFoundError.code


_SIZES = st.sampled_from([0, -1, -(2**31), 1, 2, 2**31 - 1])


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_records=_SIZES, max_bytes=_SIZES, batch_size=_SIZES, partition_max_bytes=_SIZES,
       min_bytes=_SIZES, max_wait_ms=st.sampled_from([0, -1, -(2**31), 50]), version=st.sampled_from([0, 1]))
def test_hostile_fetch_limits(conn, misc, max_records, max_bytes, batch_size, partition_max_bytes, min_bytes,
                              max_wait_ms, version):
    _name, topic_id, group = misc
    member = uuid.uuid4().hex[:22]
    kw = dict(max_records=max_records, max_bytes=max_bytes, batch_size=batch_size, version=version,
              partition_max_bytes=partition_max_bytes, min_bytes=min_bytes, max_wait_ms=max_wait_ms)
    r = open_session(conn, group, member, topic_id, **kw)
    got = acquired(r)
    r = share_fetch(conn, group, member, 1, topic_id, **kw)
    assert r.error_code == 0, r
    got += acquired(r)
    n = sum(last - f + 1 for f, last, _c in got)
    if max_records <= 0 and version >= 1:
        assert n == 0  # v1: MaxRecords 0 (or less) fetches nothing
    if version == 0 and partition_max_bytes <= 0:
        assert n == 0  # v0: PartitionMaxBytes 0 (or less) fetches nothing from the partition
    if batch_size > 0 and version >= 1:
        assert all(last - f + 1 <= batch_size for f, last, _c in got)
    close_session(conn, group, member, topic_id)


# -- membership --------------------------------------------------------------------------------------------
_EPOCHS = st.sampled_from([0, -1, -2, -3, 1, 5, 2**31 - 1, -(2**31)])
_MEMBER_IDS = st.sampled_from(["", "fresh", "x" * 2000, "ü-member"])
_SUBSCRIPTIONS = st.one_of(st.none(), st.just([]), st.lists(st.sampled_from(["nope-1", "nope-2", "MISC", "", "../x",
                                                                              "n" * 400]), min_size=1, max_size=3),
                           st.just([f"t-{i}" for i in range(500)]))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(epoch=_EPOCHS, member_id=_MEMBER_IDS, subscription=_SUBSCRIPTIONS, version=st.sampled_from([0, 1]),
       rack=st.sampled_from([None, "", "r1"]))
def test_hostile_heartbeats(conn, misc, epoch, member_id, subscription, version, rack):
    name = misc[0]
    group = f"hostile-hb-{uuid.uuid4().hex[:8]}"
    if member_id == "fresh":
        member_id = uuid.uuid4().hex[:22]
    if subscription is not None:
        subscription = [name if s == "MISC" else s for s in subscription]
    r = conn.call(ApiKey.SHARE_GROUP_HEARTBEAT, version, request(
        ApiKey.SHARE_GROUP_HEARTBEAT, group_id=group, member_id=member_id, member_epoch=epoch, rack_id=rack,
        subscribed_topic_names=subscription))
    # GroupMetadataManager.throwIfShareGroupHeartbeatRequestIsInvalid, then shareGroupHeartbeat
    if rack == "" or (not member_id and (version >= 1 or epoch != 0)) or (epoch == 0 and not subscription) \
            or epoch < -1:
        assert r.error_code == INVALID_REQUEST, r
    elif epoch == 0:
        assert r.error_code == 0, r
        assert r.member_epoch >= 1 and r.member_id
        d = conn.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, request(ApiKey.SHARE_GROUP_DESCRIBE, group_ids=[
            group, "", "hostile-never-was"], include_authorized_operations=True))
        mine, empty, unknown = d.groups
        assert mine.error_code == 0 and [m.member_id for m in mine.members] == [r.member_id], d
        assert sorted(mine.members[0].subscribed_topic_names) == sorted(set(subscription))
        assert empty.error_code == unknown.error_code == GroupIdNotFoundError.code, d  # Kafka: unknown or empty
        # a bogus epoch from a known member: fenced, and it leaves cleanly
        bad = conn.call(ApiKey.SHARE_GROUP_HEARTBEAT, version, request(
            ApiKey.SHARE_GROUP_HEARTBEAT, group_id=group, member_id=r.member_id, member_epoch=r.member_epoch + 10,
            rack_id=None, subscribed_topic_names=None))
        assert bad.error_code == FencedMemberEpochError.code, bad
        left = conn.call(ApiKey.SHARE_GROUP_HEARTBEAT, version, request(
            ApiKey.SHARE_GROUP_HEARTBEAT, group_id=group, member_id=r.member_id, member_epoch=-1,
            rack_id=None, subscribed_topic_names=None))
        assert left.error_code == 0, left
    else:  # a heartbeat or a leave of a member the group never had
        assert r.error_code == UnknownMemberIdError.code, r


# -- the share coordinator's inter-broker writes ----------------------------------------------------------
def write_state(conn, group, topic_id, state_epoch, leader_epoch, start_offset, batches, partition=0):
    r = conn.call(ApiKey.WRITE_SHARE_GROUP_STATE, 0, request(
        ApiKey.WRITE_SHARE_GROUP_STATE, group_id=group, topics=[WriteStateData(topic_id=topic_id, partitions=[
            WritePartition(partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                           start_offset=start_offset, state_batches=[
                               StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                               for f, last, s, c in batches])])]))
    return r.results[0].partitions[0].error_code


def read_state(conn, group, topic_id, leader_epoch=-1):
    r = conn.call(ApiKey.READ_SHARE_GROUP_STATE, 0, request(
        ApiKey.READ_SHARE_GROUP_STATE, group_id=group, topics=[ReadStateData(topic_id=topic_id, partitions=[
            ReadPartition(partition=0, leader_epoch=leader_epoch)])]))
    return r.results[0].partitions[0]


state_batch_st = st.tuples(st.sampled_from([-5, 0, 3, 10, 40, 59, 60, 1000, 1 << 62]), st.integers(-3, 30),
                           st.sampled_from([AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED, 3, -1, 7]),
                           st.sampled_from([0, 1, 2, DELIVERY_LIMIT, DELIVERY_LIMIT + 5, -1, 32767]))
write_st = st.tuples(st.integers(-1, 3), st.integers(-1, 3), st.sampled_from([-1, -7, 0, 5, 30, 59, 60, 5000]),
                     st.lists(state_batch_st, max_size=4))


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(write_st, min_size=1, max_size=4))
def test_hostile_share_state_writes(conn, misc, writes):
    """A sequence of WriteShareGroupState for one share partition (out of order, overlapping,
    hostile counts and offsets, epochs going backwards): each answered as the share coordinator
    answers; what is stored stays well formed; the share-partition leader that loads it serves
    the group without delivering a settled record or one at its delivery limit."""
    _name, topic_id, _g = misc
    group = f"hostile-state-{uuid.uuid4().hex[:8]}"
    stored = None  # (state epoch, leader epoch) the coordinator holds
    for state_epoch, leader_epoch, start, batches in writes:
        code = write_state(conn, group, topic_id, state_epoch, leader_epoch, start,
                           [(f, f + span, s, c) for f, span, s, c in batches])
        bad = any(span < 0 or f < 0 or s not in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED) or c < 0
                  for f, span, s, c in batches) or start < -1
        if bad:
            want = INVALID_REQUEST
        elif stored is not None and leader_epoch != -1 and leader_epoch < stored[1]:
            want = FencedLeaderEpochError.code
        elif stored is not None and state_epoch != -1 and state_epoch < stored[0]:
            want = FencedStateEpochError.code
        else:
            want = 0
        assert code == want, (state_epoch, leader_epoch, start, batches, code)
        if code == 0:
            if stored is None:
                stored = (state_epoch, leader_epoch)
            else:
                stored = (stored[0] if state_epoch == -1 else state_epoch,
                          stored[1] if leader_epoch == -1 else leader_epoch)
    state = read_state(conn, group, topic_id)
    if stored is None:
        assert state.error_code == UnknownTopicOrPartitionError.code
        return
    assert state.error_code == 0, state
    prev = -1
    for b in state.state_batches:  # sorted, disjoint, at or after the start offset, well formed
        assert b.first_offset <= b.last_offset and b.first_offset > prev, state
        assert state.start_offset < 0 or b.first_offset >= state.start_offset, state
        assert b.delivery_state in (AVAILABLE, ACKNOWLEDGED, ARCHIVED) and b.delivery_count >= 0
        prev = b.last_offset
    # the leader loads it: a record settled in the state, or at its delivery limit, is never delivered
    member = uuid.uuid4().hex[:22]
    r = open_session(conn, group, member, topic_id, max_records=0)
    r = share_fetch(conn, group, member, 1, topic_id, max_records=100)
    assert r.error_code == 0, r
    if stored[1] > 0:  # the state names a newer leader epoch than the partition's (0): its leader is fenced
        assert partition_of(r).error_code == FencedLeaderEpochError.code, r
    for f, last, count in acquired(r) if stored[1] <= 0 else ():
        for o in range(f, last + 1):
            assert o >= state.start_offset, (o, state)
            for b in state.state_batches:
                if b.first_offset <= o <= b.last_offset:
                    assert b.delivery_state == AVAILABLE and b.delivery_count < DELIVERY_LIMIT, (o, b)
                    assert count == b.delivery_count + 1
    close_session(conn, group, member, topic_id)


def test_share_state_epochs_initialize_and_bad_partitions(conn, misc):
    _name, topic_id, _g = misc
    group = f"hostile-init-{uuid.uuid4().hex[:8]}"

    def initialize(state_epoch, start, partition=0):
        r = conn.call(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, request(
            ApiKey.INITIALIZE_SHARE_GROUP_STATE, group_id=group, topics=[InitializeStateData(
                topic_id=topic_id, partitions=[InitPartition(partition=partition, state_epoch=state_epoch,
                                                             start_offset=start)])]))
        return r.results[0].partitions[0].error_code

    assert initialize(5, 10) == 0
    assert initialize(4, 10) == FencedStateEpochError.code  # ShareCoordinatorShard: an older state epoch
    assert initialize(5, -9) == INVALID_REQUEST
    assert initialize(5, 0, partition=-1) == INVALID_REQUEST  # a negative partition
    assert write_state(conn, group, topic_id, 5, 3, 12, []) == 0
    assert write_state(conn, group, topic_id, 5, 2, 12, []) == FencedLeaderEpochError.code
    assert write_state(conn, group, topic_id, 4, 3, 12, []) == FencedStateEpochError.code
    assert write_state(conn, group, topic_id, 5, 3, 0, [], partition=-1) == INVALID_REQUEST
    assert read_state(conn, group, topic_id, leader_epoch=1).error_code == FencedLeaderEpochError.code
    assert read_state(conn, group, topic_id).start_offset == 12
    for api, data, part in ((ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, ReadStateSummaryData, SummaryPartition),
                            (ApiKey.READ_SHARE_GROUP_STATE, ReadStateData, ReadPartition)):
        r = conn.call(api, 0, request(api, group_id=group, topics=[data(topic_id=topic_id, partitions=[
            part(partition=-1, leader_epoch=-1)])]))
        assert r.results[0].partitions[0].error_code == INVALID_REQUEST, r  # a negative partition


# -- ShareSnapshot / ShareUpdate values as replayed from __share_group_state -------------------------------
def _value(cls, batch_cls, snapshot, start, batches, epochs):
    w = Writer()
    w.int16(0)
    fields = dict(snapshot_epoch=epochs[0], leader_epoch=epochs[1], start_offset=start, state_batches=[
        batch_cls(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c) for f, last, s, c in batches])
    if snapshot:
        fields["state_epoch"] = epochs[2]
    cls(**fields).write(w, 0)
    return w.getvalue()


@settings(max_examples=200, deadline=None, derandomize=True)
@given(snapshot=st.booleans(), start=st.integers(-(2**63), 2**63 - 1) | st.sampled_from([-1, 0, 5]),
       batches=st.lists(st.tuples(st.integers(-10, 100) | st.integers(-(2**63), 2**63 - 1),
                                  st.integers(-10, 100) | st.integers(-(2**63), 2**63 - 1),
                                  st.integers(-128, 127), st.integers(-(2**15), 2**15 - 1)), max_size=4),
       epochs=st.tuples(st.integers(0, 65535), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1)),
       cut=st.none() | st.integers(0, 200), junk=st.binary(max_size=8))
def test_share_state_records_replayed_are_well_formed_or_refused(snapshot, start, batches, epochs, cut, junk):
    """What the share coordinator replays at load (``decode``): a record that decodes carries
    a well-formed state (the coordinator merges and the leader loads it safely); anything else is
    a ProtocolDecodeError with a one-line reason, which the load reports and skips
    (ShareCoordinator._load)."""
    topic_id = uuid.uuid4().bytes
    key = (snapshot_key if snapshot else update_key)("g", topic_id, 0)
    value = _value(ShareSnapshotValue if snapshot else ShareUpdateValue, SnapshotBatch if snapshot else UpdateBatch,
                   snapshot, start, batches, epochs)
    if cut is not None:
        value = value[:cut] + junk
    try:
        rec = decode(key, value)
    except ProtocolDecodeError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert rec is not None and rec.snapshot == snapshot
    v = rec.value
    assert v.start_offset >= -1
    for b in v.batches:
        assert 0 <= b.first_offset <= b.last_offset
        assert b.delivery_state in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED) and b.delivery_count >= 0


# -- after the barrage: legitimate consumers ----------------------------------------------------------------
def test_after_the_barrage_a_share_group_gets_every_record_once(broker, conn, target):
    assert 0 < target.examples == target.completed, "an acknowledgement example failed: the model is off"
    assert 0 < len(target.settled) < TARGET_RECORDS  # both kinds of record are checked below
    name, _topic_id = new_topic(conn, "hostile-after", 120, 7)
    group = f"hostile-after-g-{uuid.uuid4().hex[:6]}"
    set_group_configs(conn, group, share_auto_offset_reset="earliest")
    fresh_got, target_got = [], []
    with ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group}) as a, \
            ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": target.group}) as b:
        a.subscribe([name])
        b.subscribe([target.topic])
        unsettled = TARGET_RECORDS - len(target.settled)

        def everything():
            fresh_got.extend((r.offset, r.delivery_count) for r in a.poll(0.2))
            target_got.extend((r.offset, r.delivery_count) for r in b.poll(0.2))
            return len(fresh_got) >= 120 and len(target_got) >= unsettled
        wait_for(everything, timeout=60, what=lambda: f"{len(fresh_got)}/120 and {len(target_got)}/{unsettled}")
        a.commit_sync(30)
        b.commit_sync(30)
    assert sorted(o for o, _c in fresh_got) == list(range(120))
    assert all(c == 1 for _o, c in fresh_got)
    # the targeted partition: exactly the records never settled, each once, its count one more
    assert sorted(o for o, _c in target_got) == sorted(set(range(TARGET_RECORDS)) - target.settled)
    assert all(c == target.counts.get(o, 0) + 1 for o, c in target_got), target_got
    code, spso = state_summary(conn, target.group, target.topic_id)
    assert code == 0 and spso == TARGET_RECORDS
