"""KIP-932 share partitions through ShareFetch / ShareAcknowledge: raw requests made with
kafkacore's codecs to the embedded broker serving a real socket, on real logs. Membership lives
in the share group coordinator; ShareFetch does not check it, so members here are ids of the
test's choice. The share partitions' state (SPSO, in-flight records) is read on the broker's
own thread."""
import uuid

import pytest

from _kcutil import wait_for
from broker_client import KafkaConnection, request
from kafkacore import Broker
from kafkacore.errors import (InvalidRecordStateError, InvalidRequestError,
                              InvalidShareSessionEpochError, ShareSessionNotFoundError, UnknownTopicIdError)
from kafkacore.protocol.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource
from kafkacore.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkacore.protocol.messages.share_acknowledge_request import AcknowledgePartition, AcknowledgeTopic
from kafkacore.protocol.messages.share_acknowledge_request import AcknowledgementBatch as AckBatch2
from kafkacore.protocol.messages.share_fetch_request import AcknowledgementBatch, FetchPartition, FetchTopic, \
    ForgottenTopic
from kafkacore.record import RecordBatchBuilder, iter_batches

PRODUCE, INCREMENTAL_ALTER_CONFIGS, SHARE_FETCH, SHARE_ACK = 0, 44, 78, 79
RESOURCE_GROUP = 32
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
LOCK_MS = 1500
DELIVERY_LIMIT = 3
MAX_LOCKS = 100


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("share") / "data", config={
            "num.partitions": 1, "group.share.min.record.lock.duration.ms": 1000,
            "group.share.record.lock.duration.ms": LOCK_MS, "group.share.delivery.count.limit": DELIVERY_LIMIT,
            "group.share.partition.max.record.locks": MAX_LOCKS, "group.share.max.share.sessions": 50}) as b:
        b.addr = b.serve("127.0.0.1", 0)
        yield b


@pytest.fixture
def conn(broker):
    with KafkaConnection(*broker.addr) as c:
        yield c


_n = iter(range(1_000_000))


@pytest.fixture
def topic(broker):
    name = f"share-{next(_n)}-{uuid.uuid4().hex[:6]}"
    broker.create_topic(name, 1)
    topic_id = broker.call(lambda: broker.core.topics[name].topic_id)
    return name, topic_id


def produce(conn, topic, values, partition=0):
    b = RecordBatchBuilder("none")
    for v in values:
        b.append(v, timestamp_ms=1_700_000_000_000)
    resp = conn.call(PRODUCE, 9, request(PRODUCE, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=b.build())])]))
    assert resp.responses[0].partition_responses[0].error_code == 0


class Member:
    """One share consumer's requests: its session epoch kept as a client keeps it."""

    def __init__(self, conn, group, member_id=None, version=1):
        self.conn = conn
        self.group = group
        self.member_id = member_id or uuid.uuid4().hex[:22]
        self.epoch = 0
        self.version = version

    def fetch(self, topic_id, partitions=(0,), acks=None, max_wait_ms=0, max_records=500, batch_size=0,
              epoch=None, forgotten=(), min_bytes=1):
        """acks: {partition: [(first, last, [types])]}"""
        acks = acks or {}
        parts = sorted(set(partitions) | set(acks))
        req = request(SHARE_FETCH, group_id=self.group, member_id=self.member_id,
                      share_session_epoch=self.epoch if epoch is None else epoch, max_wait_ms=max_wait_ms,
                      min_bytes=min_bytes, max_bytes=1 << 20, max_records=max_records, batch_size=batch_size,
                      topics=[FetchTopic(topic_id=topic_id, partitions=[
                          FetchPartition(partition_index=p, partition_max_bytes=1 << 20, acknowledgement_batches=[
                              AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=types)
                              for f, last, types in acks.get(p, [])]) for p in parts])] if parts else [],
                      forgotten_topics_data=[ForgottenTopic(topic_id=topic_id, partitions=list(forgotten))]
                      if forgotten else [])
        resp = self.conn.call(SHARE_FETCH, self.version, req)
        if resp.error_code == 0 and epoch is None:
            self.epoch = -1 if self.epoch == -1 else self.epoch + 1
        return resp

    def ack(self, topic_id, acks, epoch=None):
        req = request(SHARE_ACK, group_id=self.group, member_id=self.member_id,
                      share_session_epoch=self.epoch if epoch is None else epoch,
                      topics=[AcknowledgeTopic(topic_id=topic_id, partitions=[
                          AcknowledgePartition(partition_index=p, acknowledgement_batches=[
                              AckBatch2(first_offset=f, last_offset=last, acknowledge_types=types)
                              for f, last, types in batches]) for p, batches in acks.items()])])
        resp = self.conn.call(SHARE_ACK, self.version, req)
        if resp.error_code == 0 and epoch is None:
            self.epoch += 1
        return resp

    def open(self, topic_id, partitions=(0,)):
        resp = self.fetch(topic_id, partitions)
        assert resp.error_code == 0, resp
        return resp


def acquired(resp, partition=0):
    """[(first, last, delivery count)] of a partition's answer."""
    for t in resp.responses:
        for p in t.partitions:
            if p.partition_index == partition:
                assert p.error_code == 0, p
                return [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
    return []


def partition_data(resp, partition=0):
    return next(p for t in resp.responses for p in t.partitions if p.partition_index == partition)


def values(resp, partition=0):
    """The values of the acquired records in the answer's batches (as a share consumer filters)."""
    ranges = acquired(resp, partition)
    out = []
    for batch in iter_batches(partition_data(resp, partition).records or b""):
        for rec in batch:
            if any(f <= rec.offset <= last for f, last, _c in ranges):
                out.append(rec.value)
    return out


def share_state(broker, group, topic):
    """(SPSO, SPEO, {state name: count}) of the group's share partition of topic-0."""
    def read():
        sp = broker.core.share_partition_manager.partitions.get((group, topic, 0))
        return None if sp is None else (sp.start_offset, sp.end_offset, sp.counts())
    return broker.call(read)


def test_v1_answers_with_the_lock_duration_and_acquires_what_was_produced(conn, broker, topic):
    name, tid = topic
    m = Member(conn, "g-basic")
    first = m.open(tid)
    assert first.acquisition_lock_timeout_ms == LOCK_MS
    assert acquired(first) == []  # share.auto.offset.reset=latest: the SPSO starts at the high watermark
    produce(conn, name, [b"a", b"b", b"c"])
    resp = m.fetch(tid, max_wait_ms=5000)
    assert acquired(resp) == [(0, 2, 1)]
    assert values(resp) == [b"a", b"b", b"c"]
    assert share_state(broker, "g-basic", name) == (0, 3, {"AVAILABLE": 0, "ACQUIRED": 3, "ACKNOWLEDGED": 0,
                                                           "ARCHIVED": 0})
    # accepted: the SPSO moves past them and nothing is delivered again
    ack = m.ack(tid, {0: [(0, 2, [ACCEPT])]})
    assert ack.error_code == 0 and ack.responses[0].partitions[0].error_code == 0
    assert share_state(broker, "g-basic", name)[:2] == (3, 3)
    assert acquired(m.fetch(tid)) == []


def test_release_redelivers_with_the_delivery_count_raised_and_reject_archives(conn, broker, topic):
    name, tid = topic
    m = Member(conn, "g-release")
    m.open(tid)
    produce(conn, name, [b"r0", b"r1", b"r2", b"r3"])
    assert acquired(m.fetch(tid, max_wait_ms=5000)) == [(0, 3, 1)]
    # piggy-backed on the next ShareFetch: 0 accepted, 1 released, 2 rejected, 3 released
    resp = m.fetch(tid, acks={0: [(0, 3, [ACCEPT, RELEASE, REJECT, RELEASE])]})
    assert partition_data(resp).acknowledge_error_code == 0
    assert acquired(resp) == [(1, 1, 2), (3, 3, 2)]  # applied before acquiring: redelivered at once
    assert values(resp) == [b"r1", b"r3"]
    assert share_state(broker, "g-release", name) == (1, 4, {"AVAILABLE": 0, "ACQUIRED": 2, "ACKNOWLEDGED": 0,
                                                             "ARCHIVED": 1})
    m.ack(tid, {0: [(1, 1, [ACCEPT]), (3, 3, [ACCEPT])]})
    assert share_state(broker, "g-release", name)[:2] == (4, 4)


def test_acknowledging_records_not_held_is_invalid_record_state_and_changes_nothing(conn, broker, topic):
    name, tid = topic
    a, b = Member(conn, "g-invalid"), Member(conn, "g-invalid")
    a.open(tid)
    b.open(tid)
    produce(conn, name, [b"x", b"y"])
    assert acquired(a.fetch(tid, max_wait_ms=5000)) == [(0, 1, 1)]
    resp = b.ack(tid, {0: [(0, 1, [ACCEPT])]})  # b holds none of them
    assert resp.responses[0].partitions[0].error_code == InvalidRecordStateError.code
    # 2..5 were never handed out: none of 0..5 is accepted (Kafka's SharePartition.fetchSubMap:
    # INVALID_REQUEST for a batch past the last record handed out)
    resp = a.ack(tid, {0: [(0, 5, [ACCEPT])]})
    assert resp.responses[0].partitions[0].error_code == InvalidRequestError.code
    resp = a.ack(tid, {0: [(0, (1 << 62), [ACCEPT])]})  # answered at once, nothing built for the range
    assert resp.responses[0].partitions[0].error_code == InvalidRequestError.code
    resp = a.ack(tid, {0: [(0, 0, [ACCEPT]), (1, 1, [REJECT]), (2, 2, [GAP])]})  # the last batch spoils all
    assert resp.responses[0].partitions[0].error_code == InvalidRequestError.code
    resp = a.ack(tid, {0: [(0, 1, [9])]})
    assert resp.responses[0].partitions[0].error_code == InvalidRequestError.code
    assert share_state(broker, "g-invalid", name)[2]["ACQUIRED"] == 2
    assert a.ack(tid, {0: [(0, 1, [ACCEPT])]}).responses[0].partitions[0].error_code == 0


def test_an_expired_lock_redelivers_and_the_delivery_count_limit_archives(conn, broker, topic):
    name, tid = topic
    a, b = Member(conn, "g-expiry"), Member(conn, "g-expiry")
    a.open(tid)
    b.open(tid)
    produce(conn, name, [b"slow"])
    assert acquired(a.fetch(tid, max_wait_ms=5000)) == [(0, 0, 1)]
    assert acquired(b.fetch(tid)) == []  # held by a
    # a never acknowledges: its lock expires and b's waiting fetch is woken with the record
    assert acquired(b.fetch(tid, max_wait_ms=LOCK_MS * 4)) == [(0, 0, 2)]
    assert acquired(a.fetch(tid, max_wait_ms=LOCK_MS * 4)) == [(0, 0, DELIVERY_LIMIT)]
    # the third delivery's lock expires: delivered group.share.delivery.count.limit times, archived
    wait_for(lambda: share_state(broker, "g-expiry", name)[:2] == (1, 1), timeout=LOCK_MS * 4 / 1000,
             what="the record archived at the delivery count limit")
    assert acquired(b.fetch(tid, max_wait_ms=200)) == []


def test_a_batch_split_by_an_acknowledgement_expires_only_its_unacknowledged_part(conn, broker, topic):
    name, tid = topic
    m = Member(conn, "g-split")
    m.open(tid)
    produce(conn, name, [b"%d" % i for i in range(10)])  # one batch: one in-flight batch range
    assert acquired(m.fetch(tid, max_wait_ms=5000)) == [(0, 9, 1)]
    m.ack(tid, {0: [(2, 3, [ACCEPT]), (6, 6, [REJECT])]})  # cut into five ranges
    assert share_state(broker, "g-split", name) == (0, 10, {"AVAILABLE": 0, "ACQUIRED": 7, "ACKNOWLEDGED": 2,
                                                           "ARCHIVED": 1})
    # the acquisition's lock expires: the seven still held come back, each range with delivery count 2
    resp = m.fetch(tid, max_wait_ms=LOCK_MS * 4)
    assert acquired(resp) == [(0, 1, 2), (4, 5, 2), (7, 9, 2)]
    assert values(resp) == [b"0", b"1", b"4", b"5", b"7", b"8", b"9"]
    m.ack(tid, {0: [(0, 1, [ACCEPT]), (4, 5, [ACCEPT]), (7, 9, [ACCEPT])]})
    assert share_state(broker, "g-split", name)[:2] == (10, 10)


def test_two_sessions_on_one_partition_never_get_the_same_record(conn, broker, topic):
    name, tid = topic
    members = [Member(conn, "g-two") for _ in range(2)]
    for m in members:
        m.open(tid)
    for i in range(6):
        produce(conn, name, [b"%d" % i])
    seen = []
    for m in members * 3:
        for first, last, count in acquired(m.fetch(tid, max_records=1)):
            assert count == 1
            seen += range(first, last + 1)
    assert sorted(seen) == list(range(6)), seen


def test_max_records_and_batch_size(conn, broker, topic):
    name, tid = topic
    m = Member(conn, "g-max")
    m.open(tid)
    produce(conn, name, [b"%d" % i for i in range(10)])  # one batch of 10
    produce(conn, name, [b"%d" % i for i in range(10, 15)])  # one batch of 5
    # max_records 3: whole batches (KIP-932's alignment), then nothing more; batch_size cuts ranges
    resp = m.fetch(tid, max_wait_ms=5000, max_records=3, batch_size=4)
    assert acquired(resp) == [(0, 3, 1), (4, 7, 1), (8, 9, 1)]
    # the answer carries the batches that hold the acquired records, not the whole read
    assert [r.offset for b in iter_batches(partition_data(resp).records) for r in b] == list(range(10))
    assert acquired(m.fetch(tid, max_records=100)) == [(10, 14, 1)]


def test_partition_max_record_locks_caps_acquisition(conn, broker, topic):
    name, tid = topic
    m = Member(conn, "g-cap")
    m.open(tid)
    produce(conn, name, [b"%d" % i for i in range(MAX_LOCKS + 30)])
    assert acquired(m.fetch(tid, max_wait_ms=5000, max_records=1000)) == [(0, MAX_LOCKS - 1, 1)]
    assert acquired(m.fetch(tid, max_records=1000)) == []  # the in-flight window is full
    m.ack(tid, {0: [(0, 9, [ACCEPT])]})  # the SPSO moves by 10: room for 10 more
    assert acquired(m.fetch(tid, max_records=1000)) == [(MAX_LOCKS, MAX_LOCKS + 9, 1)]


def test_closing_the_session_releases_what_the_member_holds(conn, broker, topic):
    name, tid = topic
    a, b = Member(conn, "g-close"), Member(conn, "g-close")
    a.open(tid)
    b.open(tid)
    produce(conn, name, [b"p", b"q"])
    assert acquired(a.fetch(tid, max_wait_ms=5000)) == [(0, 1, 1)]
    resp = a.fetch(tid, acks={0: [(0, 0, [ACCEPT])]}, epoch=-1)  # acks applied, then the session closed
    assert resp.error_code == 0 and partition_data(resp).acknowledge_error_code == 0
    assert acquired(b.fetch(tid)) == [(1, 1, 2)]
    assert a.fetch(tid, epoch=3).error_code == ShareSessionNotFoundError.code


def test_a_closed_connection_releases_its_members_records(broker, topic):
    name, tid = topic
    with KafkaConnection(*broker.addr) as c1, KafkaConnection(*broker.addr) as c2:
        a, b = Member(c1, "g-conn"), Member(c2, "g-conn")
        a.open(tid)
        b.open(tid)
        produce(c2, name, [b"held"])
        assert acquired(a.fetch(tid, max_wait_ms=5000)) == [(0, 0, 1)]
        c1.close()
        # long before the lock would expire, the record is b's
        assert acquired(b.fetch(tid, max_wait_ms=LOCK_MS // 2)) == [(0, 0, 2)]


def test_session_epochs(conn, broker, topic):
    name, tid = topic
    m = Member(conn, "g-epochs")
    assert m.fetch(tid, epoch=1).error_code == ShareSessionNotFoundError.code
    m.open(tid)
    assert m.fetch(tid, epoch=5).error_code == InvalidShareSessionEpochError.code
    assert m.ack(tid, {}, epoch=0).error_code == InvalidShareSessionEpochError.code
    assert m.fetch(tid, acks={0: [(0, 0, [ACCEPT])]}, epoch=0).error_code == InvalidRequestError.code
    assert m.fetch(tid).error_code == 0  # epoch 1 still expected
    # forgotten partitions leave the session: an incremental fetch no longer names them
    resp = m.fetch(tid, partitions=(), forgotten=(0,))
    assert resp.error_code == 0 and resp.responses == []


def test_request_level_and_partition_errors(conn, broker, topic):
    name, tid = topic
    m = Member(conn, "")
    assert m.fetch(tid).error_code == InvalidRequestError.code
    m = Member(conn, "g-errors")
    resp = m.fetch(b"\x01" * 16)
    assert resp.error_code == 0
    assert partition_data(resp).error_code == UnknownTopicIdError.code
    # GROUP_AUTHORIZATION_FAILED / TOPIC_AUTHORIZATION_FAILED: tests/test_security_acl_enforced.py's rows


def test_v0_speaks_the_early_access_fields(conn, broker, topic):
    name, tid = topic
    m = Member(conn, "g-v0", version=0)
    m.open(tid)
    produce(conn, name, [b"v0"])
    resp = m.fetch(tid, max_wait_ms=5000)
    assert acquired(resp) == [(0, 0, 1)] and values(resp) == [b"v0"]


def set_group_configs(conn, group, **configs):
    """IncrementalAlterConfigs SET on the GROUP resource (names with '_' for '.')."""
    resp = conn.call(INCREMENTAL_ALTER_CONFIGS, 1, request(INCREMENTAL_ALTER_CONFIGS, resources=[
        AlterConfigsResource(resource_type=RESOURCE_GROUP, resource_name=group, configs=[
            AlterableConfig(name=k.replace("_", "."), config_operation=0, value=str(v)) for k, v in configs.items()])]))
    assert resp.responses[0].error_code == 0, resp


def test_share_auto_offset_reset_earliest_and_by_duration(conn, broker, topic):
    name, tid = topic
    produce(conn, name, [b"old0", b"old1"])
    set_group_configs(conn, "g-earliest", share_auto_offset_reset="earliest")
    m = Member(conn, "g-earliest")
    assert values(m.open(tid)) == [b"old0", b"old1"]  # the SPSO starts at the log start
    # by_duration: the first record at or after now minus the duration (these are from 2023)
    set_group_configs(conn, "g-duration", share_auto_offset_reset="by_duration:P10000D")
    assert values(Member(conn, "g-duration").open(tid)) == [b"old0", b"old1"]
    set_group_configs(conn, "g-duration2", share_auto_offset_reset="by_duration:PT1H")
    assert acquired(Member(conn, "g-duration2").open(tid)) == []  # none so recent: the high watermark


def test_read_committed_never_acquires_aborted_records_nor_past_the_lso(conn, broker, topic):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    name, tid = topic
    set_group_configs(conn, "g-rc", share_isolation_level="read_committed", share_auto_offset_reset="earliest")
    set_group_configs(conn, "g-ru", share_auto_offset_reset="earliest")
    bootstrap = "%s:%d" % broker.addr
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{name}"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(name, b"aborted", partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(name, b"committed", partition=0)
    p.flush(30)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(name, b"open", partition=0)  # left open: the LSO stays before it
    p.flush(30)
    rc = Member(conn, "g-rc")
    resp = rc.open(tid)
    assert values(resp) == [b"committed"]
    # 0 aborted, 1 its ABORT marker, 2 committed, 3 its COMMIT marker, 4 open: the record and the
    # markers archived, never delivered; the SPSO moved over 0-1, the marker after 2 waits for it
    assert share_state(broker, "g-rc", name) == (2, 4, {"AVAILABLE": 0, "ACQUIRED": 1, "ACKNOWLEDGED": 0,
                                                        "ARCHIVED": 1})
    assert acquired(rc.fetch(tid, max_wait_ms=100)) == []  # the open transaction is past the LSO
    ru = Member(conn, "g-ru")
    assert values(ru.open(tid)) == [b"aborted", b"committed", b"open"]  # read_uncommitted: everything
    p.abort_transaction(30)


def test_metrics_count_acquisitions_redeliveries_acknowledgements_archives_and_expiries(conn, broker, topic):
    from _exposition import parse_exposition, value
    from kafkacore.broker.metrics import BrokerMetrics

    def scrape():
        samples, _types = parse_exposition(broker.call(lambda: BrokerMetrics(broker.core).render()))
        names = ["kafkacore_share_records_acquired_total", "kafkacore_share_records_redelivered_total",
                 "kafkacore_share_records_archived_total",
                 "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total"]
        got = {n: value(samples, n) for n in names}
        for t in ("accept", "release", "reject"):
            got[t] = value(samples, "kafka_server_sharegroupmetrics_recordacknowledgement_total", ack_type=t)
        return got, samples

    name, tid = topic
    m = Member(conn, "g-metrics")
    m.open(tid)
    before, _ = scrape()
    produce(conn, name, [b"0", b"1", b"2", b"3"])
    assert acquired(m.fetch(tid, max_wait_ms=5000)) == [(0, 3, 1)]
    m.ack(tid, {0: [(0, 0, [ACCEPT]), (1, 1, [REJECT]), (2, 2, [RELEASE])]})  # 3 left to expire
    assert acquired(m.fetch(tid, max_records=10)) == [(2, 2, 2)]  # released: at once
    resp = m.fetch(tid, acks={0: [(2, 2, [ACCEPT])]}, max_wait_ms=LOCK_MS * 4, max_records=10)
    assert acquired(resp) == [(3, 3, 2)]  # once its lock expired
    after, samples = scrape()
    delta = {k: after[k] - before[k] for k in after}
    assert delta == {"kafkacore_share_records_acquired_total": 6, "kafkacore_share_records_redelivered_total": 2,
                     "kafkacore_share_records_archived_total": 1,
                     "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total": 1,
                     "accept": 2, "release": 1, "reject": 1}
    assert value(samples, "kafka_server_sharepartitionmetrics_inflightmessagecount", group="g-metrics", topic=name,
                 partition="0") == 1  # 0-2 are done, behind the SPSO; 3 is held


class MemoryPersister:
    """The Persister interface (coordinator/share_state.py) over a dict, with the share
    coordinator's merge of updates: what a share-partition leader writes and reads back."""

    def __init__(self):
        self.states = {}
        self.writes = []

    async def initialize_state(self, group_id, topic_id, partition, state_epoch, start_offset):
        from kafkacore.coordinator.share_state import ShareState
        self.states[(group_id, topic_id, partition)] = ShareState(state_epoch, start_offset, -1, ())

    async def read_state(self, group_id, topic_id, partition, leader_epoch):
        return self.states.get((group_id, topic_id, partition))

    async def write_state(self, group_id, topic_id, partition, state):
        self.writes.append(state)
        self.states[(group_id, topic_id, partition)] = state

    async def delete_state(self, group_id, topic_id, partition):
        self.states.pop((group_id, topic_id, partition), None)

    async def read_summary(self, group_id, topic_id, partition):
        return self.states.get((group_id, topic_id, partition))


def test_state_goes_through_the_persister_and_a_new_leadership_loads_it_back(conn, broker, topic):
    from kafkacore.coordinator.share_state import ACKNOWLEDGED, ARCHIVED, AVAILABLE, ShareState, StateBatch

    name, tid = topic
    persister = MemoryPersister()
    old = broker.call(lambda: broker.core.share_persister)
    broker.call(setattr, broker.core, "share_persister", persister)
    try:
        m = Member(conn, "g-persist")
        m.open(tid)  # initialized at the high watermark: 0
        produce(conn, name, [b"0", b"1", b"2", b"3", b"4"])
        assert acquired(m.fetch(tid, max_wait_ms=5000)) == [(0, 4, 1)]
        m.ack(tid, {0: [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 2, [REJECT]), (3, 3, [ACCEPT])]})
        # written before the answer: the SPSO past 0, 1 AVAILABLE (delivered once), 2 archived,
        # 3 acknowledged, 4 still ACQUIRED - written AVAILABLE, a lock does not outlive its leader
        assert persister.writes[-1] == ShareState(0, 1, persister.writes[-1].leader_epoch, (
            StateBatch(1, 1, AVAILABLE, 1), StateBatch(2, 2, ARCHIVED, 1), StateBatch(3, 3, ACKNOWLEDGED, 1),
            StateBatch(4, 4, AVAILABLE, 1)))
        # a new leadership (here: the share partition dropped) starts from what was written
        broker.call(broker.core.share_partition_manager.drop, ("g-persist", name, 0))
        m2 = Member(conn, "g-persist")
        resp = m2.open(tid)
        assert acquired(resp) == [(1, 1, 2), (4, 4, 2)]  # the AVAILABLE ones, their delivery counted on
        assert share_state(broker, "g-persist", name)[:2] == (1, 5)
    finally:
        broker.call(setattr, broker.core, "share_persister", old)


def test_a_loaded_state_delivers_the_records_it_has_no_entry_for(conn, broker, topic):
    """KIP-932's state: at or above the SPSO a record without a state batch is AVAILABLE and was
    never delivered."""
    from kafkacore.coordinator.share_state import ACKNOWLEDGED, ARCHIVED, ShareState, StateBatch

    name, tid = topic
    produce(conn, name, [b"0", b"1", b"2", b"3", b"4", b"5"])
    persister = MemoryPersister()
    topic_uuid = uuid.UUID(bytes=bytes(tid))
    persister.states[("g-holes", topic_uuid, 0)] = ShareState(
        3, 1, -1, (StateBatch(2, 2, ACKNOWLEDGED, 1), StateBatch(4, 4, ARCHIVED, 2)))
    old = broker.call(lambda: broker.core.share_persister)
    broker.call(setattr, broker.core, "share_persister", persister)
    try:
        resp = Member(conn, "g-holes").open(tid)
        assert acquired(resp) == [(1, 1, 1), (3, 3, 1), (5, 5, 1)]
        assert values(resp) == [b"1", b"3", b"5"]
    finally:
        broker.call(setattr, broker.core, "share_persister", old)
