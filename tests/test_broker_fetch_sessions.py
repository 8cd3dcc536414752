"""KIP-227 incremental fetch sessions against a real ``kafkacore serve`` process: every
(session id, epoch) combination answered as Kafka's FetchManager.newContext answers it,
incremental responses carrying only changed partitions, forgotten partitions, epoch checks,
closing sessions, a full cache, topic-id sessions, kafka-python's consumer (which uses sessions),
and the session cache's eviction rules (in-process, with a fake clock)."""
import threading
import time

import pytest

from _kcutil import peer_has_read, wait_for
from broker_client import BrokerProcess, auto_create, request
from kafkacore.broker.fetch_session import CachedPartition, FetchSessionCache
from kafkacore.errors import FetchSessionIdNotFoundError, FetchSessionTopicIdError, InvalidFetchSessionEpochError, \
    UnknownTopicIdError
from kafkacore.protocol.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from kafkacore.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkacore.record import RecordBatchBuilder, iter_batches

PRODUCE, FETCH, METADATA = 0, 1, 3
ZERO_ID = b"\0" * 16


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("sessions") / "data", settings={"num.partitions": "3"}) as b:
        yield b


@pytest.fixture
def conn(broker):
    with broker.client() as c:
        yield c


_names = iter(range(1_000_000))


@pytest.fixture
def topic(conn):
    """A fresh 3-partition topic: (name, topic id)."""
    name = f"sess-{next(_names)}-{time.monotonic_ns()}"
    return name, auto_create(conn, name).topic_id


def produce(conn, topic, partition, values):
    b = RecordBatchBuilder("none")
    for v in values:
        b.append(v, timestamp_ms=1_700_000_000_000)
    resp = conn.call(PRODUCE, 9, request(PRODUCE, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=b.build())])]))
    assert resp.responses[0].partition_responses[0].error_code == 0


def body(parts=(), session_id=0, epoch=-1, forgotten=(), max_wait_ms=0, min_bytes=1, max_bytes=50 << 20,
         ids=None, partition_max_bytes=10 << 20, replica_id=-1):
    """parts: [(topic, partition, offset)]; forgotten: [(topic, partition)]; ids: {topic: id} for v13+."""
    ids = ids or {}
    topics, gone = {}, {}
    for t, p, off in parts:
        topics.setdefault(t, []).append(FetchPartition(partition=p, fetch_offset=off,
                                                       partition_max_bytes=partition_max_bytes))
    for t, p in forgotten:
        gone.setdefault(t, []).append(p)
    return request(FETCH, replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                   session_id=session_id, session_epoch=epoch,
                   topics=[FetchTopic(topic=t, topic_id=ids.get(t, ZERO_ID), partitions=ps)
                           for t, ps in topics.items()],
                   forgotten_topics_data=[ForgottenTopic(topic=t, topic_id=ids.get(t, ZERO_ID), partitions=ps)
                                          for t, ps in gone.items()])


def call(conn, version=12, **kw):
    return conn.call(FETCH, version, body(**kw))


def parts_of(resp):
    """{(topic name or topic id, partition): PartitionData}"""
    return {(t.topic or t.topic_id, p.partition_index): p for t in resp.responses for p in t.partitions}


def values_of(pd):
    return [r.value for b in iter_batches(bytes(pd.records or b"")) for r in b]


def all_three(name, offsets=(0, 0, 0)):
    return [(name, p, offsets[p]) for p in range(3)]


def open_session(conn, name, offsets=(0, 0, 0), **kw):
    resp = call(conn, parts=all_three(name, offsets), session_id=0, epoch=0, **kw)
    assert resp.error_code == 0 and resp.session_id > 0, resp
    return resp


def assert_session_error(resp, code):
    # Kafka's SessionErrorContext: the top-level error, session id 0 (INVALID_SESSION_ID), no partitions
    assert (resp.error_code, resp.session_id, resp.responses) == (code, 0, [])


# -- sessionless fetches ------------------------------------------------------------------------
def test_kafka_go_client_fetch_session_minus_one_epoch_minus_one_is_a_sessionless_full_fetch(conn, topic):
    # segmentio/kafka-go's Client.Fetch (fetch.go) sends a v11 request with SessionID -1 and
    # SessionEpoch -1. Epoch -1 (FINAL_EPOCH) is a full fetch in Kafka: the named session is
    # closed if it exists (-1 never does) and the partitions are served without a session.
    name, _ = topic
    produce(conn, name, 0, [b"a", b"b"])
    req = body(parts=[(name, 0, 0)], session_id=-1, epoch=-1)
    for p in req.topics[0].partitions:
        p.current_leader_epoch, p.log_start_offset = -1, -1
    resp = conn.call(FETCH, 11, req)
    assert (resp.error_code, resp.session_id) == (0, 0)
    pd = parts_of(resp)[(name, 0)]
    assert pd.error_code == 0 and pd.high_watermark == 2 and values_of(pd) == [b"a", b"b"]


@pytest.mark.parametrize("version", [7, 11, 12, 16])
def test_session_zero_epoch_minus_one_is_sessionless_and_returns_data(conn, topic, version):
    name, tid = topic
    produce(conn, name, 1, [b"x"])
    resp = call(conn, version, parts=[(name, 1, 0)], session_id=0, epoch=-1, ids={name: tid} if version >= 13 else None)
    assert (resp.error_code, resp.session_id) == (0, 0)
    assert [values_of(p) for p in parts_of(resp).values()] == [[b"x"]]


def test_final_epoch_with_an_unknown_session_id_is_a_sessionless_full_fetch(conn, topic):
    name, _ = topic
    produce(conn, name, 0, [b"v"])
    resp = call(conn, parts=[(name, 0, 0)], session_id=987654, epoch=-1)
    assert (resp.error_code, resp.session_id) == (0, 0)
    assert values_of(parts_of(resp)[(name, 0)]) == [b"v"]


# -- creating, continuing and closing sessions ----------------------------------------------------
def test_initial_epoch_creates_a_session_and_returns_every_partition(conn, topic):
    name, _ = topic
    produce(conn, name, 0, [b"a"])
    resp = open_session(conn, name)
    got = parts_of(resp)
    assert sorted(got) == [(name, 0), (name, 1), (name, 2)]
    assert values_of(got[(name, 0)]) == [b"a"] and got[(name, 1)].high_watermark == 0
    again = open_session(conn, name)
    assert again.session_id != resp.session_id  # each full fetch with epoch 0 gets a new session


def test_incremental_fetch_returns_only_changed_partitions(conn, topic):
    name, _ = topic
    produce(conn, name, 0, [b"a", b"b", b"c"])
    produce(conn, name, 1, [b"d", b"e"])
    sid = open_session(conn, name).session_id
    # offsets moved on past what was read: nothing changed, so no partitions at all
    resp = call(conn, parts=[(name, 0, 3), (name, 1, 2)], session_id=sid, epoch=1)
    assert (resp.error_code, resp.session_id, resp.responses) == (0, sid, [])
    # new data in a partition the request does not name: only that partition comes back
    produce(conn, name, 2, [b"f"])
    resp = call(conn, session_id=sid, epoch=2)
    got = parts_of(resp)
    assert list(got) == [(name, 2)] and values_of(got[(name, 2)]) == [b"f"] and got[(name, 2)].high_watermark == 1
    # the session remembered partition 0's offset: a high watermark change alone is a change too
    produce(conn, name, 0, [b"g"])
    resp = call(conn, parts=[(name, 2, 1)], session_id=sid, epoch=3)
    got = parts_of(resp)
    assert list(got) == [(name, 0)] and values_of(got[(name, 0)]) == [b"g"]
    resp = call(conn, parts=[(name, 0, 4)], session_id=sid, epoch=4)
    assert (resp.error_code, resp.session_id, resp.responses) == (0, sid, [])


def test_incremental_long_poll_wakes_on_a_partition_the_request_does_not_name(conn, broker, topic):
    name, _ = topic
    sid = open_session(conn, name).session_id

    def produce_once_parked():  # once the broker has taken the long poll (sent below)
        wait_for(lambda: conn.inflight and peer_has_read(conn.sock), "the broker to take the long poll", 10, 0.005)
        _produce_on_new_connection(broker, name, 1, [b"late"])
    t = threading.Thread(target=produce_once_parked)
    t.start()
    start = time.monotonic()
    resp = call(conn, session_id=sid, epoch=1, max_wait_ms=10_000, min_bytes=1)
    t.join()
    assert time.monotonic() - start < 5
    got = parts_of(resp)
    assert list(got) == [(name, 1)] and values_of(got[(name, 1)]) == [b"late"]
    # nothing new: the long poll times out and answers with no partitions
    start = time.monotonic()
    resp = call(conn, parts=[(name, 1, 1)], session_id=sid, epoch=2, max_wait_ms=300, min_bytes=1)
    assert time.monotonic() - start >= 0.25
    assert (resp.error_code, resp.session_id, resp.responses) == (0, sid, [])


def _produce_on_new_connection(broker, topic, partition, values):
    with broker.client() as c:
        produce(c, topic, partition, values)


def test_forgotten_partitions_leave_the_session(conn, topic):
    name, _ = topic
    sid = open_session(conn, name).session_id
    resp = call(conn, session_id=sid, epoch=1, forgotten=[(name, 1)])
    assert (resp.error_code, resp.session_id, resp.responses) == (0, sid, [])
    produce(conn, name, 1, [b"ignored"])
    produce(conn, name, 2, [b"seen"])
    got = parts_of(call(conn, session_id=sid, epoch=2))
    assert list(got) == [(name, 2)] and values_of(got[(name, 2)]) == [b"seen"]
    # a forgotten partition named again is added back, from the offset given
    got = parts_of(call(conn, parts=[(name, 1, 0), (name, 2, 1)], session_id=sid, epoch=3))
    assert list(got) == [(name, 1)] and values_of(got[(name, 1)]) == [b"ignored"]
    # forgetting every partition closes the session: a sessionless answer, and the id is gone
    resp = call(conn, session_id=sid, epoch=4, forgotten=[(name, 0), (name, 1), (name, 2)])
    assert (resp.error_code, resp.session_id, resp.responses) == (0, 0, [])
    assert_session_error(call(conn, session_id=sid, epoch=5), FetchSessionIdNotFoundError.code)


def test_epoch_mismatch_and_a_repeated_epoch_are_invalid_fetch_session_epoch(conn, topic):
    name, _ = topic
    sid = open_session(conn, name).session_id
    assert_session_error(call(conn, session_id=sid, epoch=2), InvalidFetchSessionEpochError.code)
    assert_session_error(call(conn, session_id=sid, epoch=-7), InvalidFetchSessionEpochError.code)
    assert call(conn, session_id=sid, epoch=1).error_code == 0  # the session survives a bad epoch
    assert_session_error(call(conn, session_id=sid, epoch=1), InvalidFetchSessionEpochError.code)
    assert call(conn, session_id=sid, epoch=2).session_id == sid


def test_unknown_session_ids_are_fetch_session_id_not_found(conn, topic):
    name, _ = topic
    for sid, epoch in ((1234, 5), (1234, 1), (0, 1), (0, 7), (-1, 3), (4321, -2)):
        resp = call(conn, parts=[(name, 0, 0)], session_id=sid, epoch=epoch)
        assert_session_error(resp, FetchSessionIdNotFoundError.code)


def test_final_epoch_closes_the_session_and_answers_without_one(conn, topic):
    name, _ = topic
    produce(conn, name, 0, [b"z"])
    sid = open_session(conn, name).session_id
    resp = call(conn, parts=[(name, 0, 0)], session_id=sid, epoch=-1)
    assert (resp.error_code, resp.session_id) == (0, 0)
    assert list(parts_of(resp)) == [(name, 0)] and values_of(parts_of(resp)[(name, 0)]) == [b"z"]
    assert_session_error(call(conn, session_id=sid, epoch=1), FetchSessionIdNotFoundError.code)


def test_initial_epoch_with_a_session_id_replaces_that_session(conn, topic):
    name, _ = topic
    sid = open_session(conn, name).session_id
    resp = call(conn, parts=all_three(name), session_id=sid, epoch=0)
    assert resp.error_code == 0 and resp.session_id not in (0, sid) and len(parts_of(resp)) == 3
    assert_session_error(call(conn, session_id=sid, epoch=1), FetchSessionIdNotFoundError.code)
    assert call(conn, session_id=resp.session_id, epoch=1).session_id == resp.session_id


def test_partitions_that_returned_records_move_to_the_back_of_the_session(conn, topic):
    # As Kafka: with max_bytes too small for everyone, a partition that got records yields the
    # front of the next incremental fetch to the others (the first batch is returned whole, KIP-74)
    name, _ = topic
    for i in range(3):
        produce(conn, name, 0, [b"p0-%d" % i])
    produce(conn, name, 1, [b"p1-0"])
    resp = call(conn, parts=[(name, 0, 0), (name, 1, 0)], session_id=0, epoch=0, max_bytes=1)
    sid = resp.session_id
    assert values_of(parts_of(resp)[(name, 0)]) == [b"p0-0"] and values_of(parts_of(resp)[(name, 1)]) == []
    got = parts_of(call(conn, parts=[(name, 0, 1)], session_id=sid, epoch=1, max_bytes=1))
    assert list(got) == [(name, 0)] and values_of(got[(name, 0)]) == [b"p0-1"]
    # partition 0 returned records last time, so partition 1 reads first now
    got = parts_of(call(conn, parts=[(name, 0, 2)], session_id=sid, epoch=2, max_bytes=1))
    assert list(got) == [(name, 1)] and values_of(got[(name, 1)]) == [b"p1-0"]


def test_partition_errors_are_in_every_incremental_response(conn, topic):
    name, _ = topic
    resp = call(conn, parts=[(name, 0, 0), (name, 9, 0)], session_id=0, epoch=0)
    sid = resp.session_id
    assert sid > 0 and parts_of(resp)[(name, 9)].error_code == 3
    for epoch in (1, 2):
        got = parts_of(call(conn, session_id=sid, epoch=epoch))
        assert list(got) == [(name, 9)] and got[(name, 9)].error_code == 3


# -- topic ids (v13+) ---------------------------------------------------------------------------
def test_topic_id_sessions(conn, topic):
    name, tid = topic
    ids = {name: tid}
    produce(conn, name, 0, [b"i"])
    resp = call(conn, 16, parts=all_three(name), session_id=0, epoch=0, ids=ids)
    sid = resp.session_id
    assert sid > 0 and sorted(parts_of(resp)) == [(tid, 0), (tid, 1), (tid, 2)]
    produce(conn, name, 2, [b"j"])
    got = parts_of(call(conn, 16, parts=[(name, 0, 1)], session_id=sid, epoch=1, ids=ids))
    assert list(got) == [(tid, 2)] and values_of(got[(tid, 2)]) == [b"j"]
    resp = call(conn, 16, session_id=sid, epoch=2, forgotten=[(name, 2)], ids=ids)
    assert (resp.error_code, resp.session_id, resp.responses) == (0, sid, [])
    # a session made with topic ids cannot be continued by names, nor the other way round
    assert_session_error(call(conn, 12, session_id=sid, epoch=3), FetchSessionTopicIdError.code)
    by_name = open_session(conn, name).session_id
    assert_session_error(call(conn, 16, session_id=by_name, epoch=1), FetchSessionTopicIdError.code)
    # an unknown topic id stays in the session and is reported in every response
    bogus = b"\x07" * 16
    resp = call(conn, 16, parts=[("bogus", 0, 0)], session_id=0, epoch=0, ids={"bogus": bogus})
    assert resp.session_id > 0 and parts_of(resp)[(bogus, 0)].error_code == UnknownTopicIdError.code
    got = parts_of(call(conn, 16, session_id=resp.session_id, epoch=1))
    assert list(got) == [(bogus, 0)] and got[(bogus, 0)].error_code == UnknownTopicIdError.code


# -- a full cache -------------------------------------------------------------------------------
def test_a_full_cache_answers_session_id_zero_and_still_serves_the_fetch(tmp_path):
    with BrokerProcess(tmp_path / "data", settings={"max.incremental.fetch.session.cache.slots": "1"}) as b, \
            b.client() as c:
        auto_create(c, "full")
        produce(c, "full", 0, [b"q"])
        first = call(c, parts=[("full", 0, 0)], session_id=0, epoch=0)
        assert first.session_id > 0
        # the only slot is taken by a session used moments ago and as large: no eviction
        second = call(c, parts=[("full", 0, 0)], session_id=0, epoch=0)
        assert (second.error_code, second.session_id) == (0, 0)
        assert values_of(parts_of(second)[("full", 0)]) == [b"q"]
        # closing the first session frees the slot
        assert call(c, parts=[("full", 0, 0)], session_id=first.session_id, epoch=-1).session_id == 0
        assert call(c, parts=[("full", 0, 0)], session_id=0, epoch=0).session_id > 0


def test_zero_slots_never_create_sessions(tmp_path):
    with BrokerProcess(tmp_path / "data", settings={"max.incremental.fetch.session.cache.slots": "0"}) as b, \
            b.client() as c:
        auto_create(c, "none")
        resp = call(c, parts=[("none", 0, 0)], session_id=0, epoch=0)
        assert (resp.error_code, resp.session_id, len(parts_of(resp))) == (0, 0, 1)


# -- kafka-python (which uses incremental fetch sessions) ------------------------------------------
def test_kafka_python_consumer_reads_every_partition_exactly_through_a_session(conn, broker, topic):
    kafka = pytest.importorskip("kafka", minversion="3.0")
    name, _ = topic
    expected = {p: [] for p in range(3)}

    def put(p, n, tag):
        values = [b"%s-%d-%d" % (tag, p, i) for i in range(n)]
        produce(conn, name, p, values)
        expected[p].extend(values)

    for p in range(3):
        put(p, 5 + p, b"a")
    c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        tps = [kafka.TopicPartition(name, p) for p in range(3)]
        c.assign(tps)
        c.seek_to_beginning()
        got = {p: [] for p in range(3)}
        deadline = time.monotonic() + 30
        rounds = 0
        while sum(map(len, got.values())) < sum(map(len, expected.values())) or rounds < 3:
            assert time.monotonic() < deadline, (got, expected)
            for tp, records in c.poll(timeout_ms=200).items():
                got[tp.partition].extend(r.value for r in records)
            if sum(map(len, got.values())) == sum(map(len, expected.values())) and rounds < 3:
                rounds += 1  # more data while the session runs: one partition at a time
                put(rounds % 3, 4, b"r%d" % rounds)
        assert got == expected
        handlers = c._fetcher._session_handlers
        assert handlers and all(h.next_metadata.session_id > 0 and h.next_metadata.epoch > 1
                                for h in handlers.values())
    finally:
        c.close()


# -- the session cache's eviction rules (Kafka's FetchSessionCacheShard), with a fake clock --------
def _create(cache, now, size, privileged=False):
    parts = [CachedPartition("t", ZERO_ID, FetchPartition(partition=i)) for i in range(size)]
    return cache.maybe_create(now, privileged, False, size, lambda: parts)


def test_cache_evicts_stale_then_smaller_then_unprivileged_sessions():
    cache = FetchSessionCache(max_slots=3, eviction_ms=100)
    s1, s2, s3 = _create(cache, 0, 10), _create(cache, 10, 20), _create(cache, 20, 30)
    assert all(s.id > 0 for s in (s1, s2, s3)) and len({s1.id, s2.id, s3.id}) == 3
    # full, nobody stale or old enough to be displaced: no session, whatever the size
    assert _create(cache, 30, 40) is None and _create(cache, 40, 5) is None
    cache.touch(s1, 200)
    s4 = _create(cache, 210, 11)  # s2, unused since 10, is stale
    assert s4 is not None and cache.get(s2.id) is None
    cache.touch(s1, 400)
    cache.touch(s3, 390)
    cache.touch(s4, 400)
    s5 = _create(cache, 410, 50)  # nobody stale: the smallest session older than 100 ms goes (s1)
    assert s5 is not None and cache.get(s1.id) is None
    assert _create(cache, 410, 5) is None  # smaller than every candidate
    s6 = _create(cache, 410, 5, privileged=True)  # a follower's session displaces a consumer's (s4)
    assert s6 is not None and cache.get(s4.id) is None
    assert {s.id for s in cache.sessions.values()} == {s3.id, s5.id, s6.id}


def test_cache_keeps_privileged_sessions_from_unprivileged_newcomers():
    cache = FetchSessionCache(max_slots=1, eviction_ms=100)
    leader = _create(cache, 0, 1, privileged=True)
    cache.touch(leader, 150)
    assert _create(cache, 160, 500) is None  # privileged beats any size
    assert _create(cache, 251, 1) is not None and cache.get(leader.id) is None  # unless it is stale
