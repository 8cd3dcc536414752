"""The requests segmentio/kafka-go v0.4.50 sends in the integration tests kafkacore used to fail
(docs/compat.md), replayed on the wire against the suite's broker, each with Kafka's answer:

- Client.Fetch (TestClientFetch, TestClientFetchCompressed, TestClientPipeline,
  TestClientProduceAndConsume): Fetch v11 with session id -1 and epoch -1 is a full fetch
  without a session;
- Conn.DeleteTopics then Conn.ReadPartitions (TestConn/test_delete_topics): the Metadata v6
  request that auto-creates the deleted topic again answers LEADER_NOT_AVAILABLE, no partitions;
- an API the broker does not serve (kafka-go sends v0 of an API missing from ApiVersions, e.g.
  CreateAcls in TestClientCreateACLs): the connection is closed, never a frame no client can
  parse;
- Produce v8 to a compacted topic with keyless records: record_errors names them (KIP-467);
- Reader.FetchMessage on a compacted topic (TestReaderReadCompactedMessage): kafka-go fetches
  with MinBytes 200 and MaxWait 100 ms from a topic of 200-byte segments; a read that returns
  records of a segment older than the high watermark's is answered at once whatever min_bytes,
  as Kafka's DelayedFetch does (else kafka-go, getting its answer after its deadline, never
  moves past a batch the cleaner emptied of records at or after the fetch offset).

kafka-go itself cannot run here (Debian ships only 0.2.1; the current suite is run by hand, see
docs/compat.md), so these are its requests, built with kafkacore's codecs."""
import struct
import time

import pytest

from _broker import BROKER_KIND, HOST
from broker_client import KafkaConnection, request
from kafkacore.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from kafkacore.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkacore.protocol.messages.metadata_request import MetadataRequestTopic
from kafkacore.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkacore.record import RecordBatchBuilder, iter_batches

PRODUCE, FETCH, METADATA, DELETE_TOPICS, CREATE_TOPICS, CREATE_ACLS = 0, 1, 3, 20, 19, 30

kafkacore_only = pytest.mark.skipif(BROKER_KIND != "kafkacore", reason="kafkacore's fixes (tansu differs)")


@pytest.fixture
def conn(broker):
    with KafkaConnection(HOST, broker.port) as c:
        yield c


def _create(conn, name, configs=()):
    resp = conn.call(CREATE_TOPICS, 2, request(CREATE_TOPICS, timeout_ms=10000, topics=[CreatableTopic(
        name=name, num_partitions=1, replication_factor=1,
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs])]))
    assert resp.topics[0].error_code == 0, resp


def _batch(keys):
    b = RecordBatchBuilder("none")
    for i, key in enumerate(keys):
        b.append(b"value-%d" % i, key=key, timestamp_ms=1_700_000_000_000 + i)
    return b.build()


def _produce(conn, topic, keys, version=8):
    return conn.call(PRODUCE, version, request(PRODUCE, acks=-1, timeout_ms=10000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=0, records=_batch(keys))])])
    ).responses[0].partition_responses[0]


def _fetch_v10(conn, topic, offset, min_bytes, max_wait_ms):
    """Reader's fetch (Conn.ReadBatchWith): v10, session 0 / epoch -1, MaxBytes 200 as in the test."""
    return conn.call(FETCH, 10, request(
        FETCH, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=200, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[FetchTopic(topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=offset, log_start_offset=-1,
                                                                    partition_max_bytes=200)])])).responses[0].partitions[0]


@kafkacore_only
def test_a_fetch_from_an_older_segment_is_answered_at_once_whatever_min_bytes(conn, unique_name):
    topic = unique_name()
    _create(conn, topic, [("segment.bytes", "200")])
    keys = [b"%02d" % n * 20 for n in range(6)]  # 40-byte keys: one batch of two (about 160 bytes) per segment
    for i in range(3):
        assert _produce(conn, topic, keys[2 * i:2 * i + 2]).base_offset == 2 * i
    t0 = time.monotonic()
    p = _fetch_v10(conn, topic, 1, min_bytes=1 << 20, max_wait_ms=10000)
    took = time.monotonic() - t0
    assert p.error_code == 0 and p.high_watermark == 6
    assert [r.key for b in iter_batches(bytes(p.records)) for r in b] == keys[:2]  # its segment's batch
    assert took < 5, f"a fetch behind by whole segments waited {took:.1f}s for min_bytes"
    # the last segment (the high watermark's) still waits for min_bytes, up to max_wait_ms
    t0 = time.monotonic()
    p = _fetch_v10(conn, topic, 4, min_bytes=1 << 20, max_wait_ms=600)
    assert time.monotonic() - t0 >= 0.5
    assert [r.key for b in iter_batches(bytes(p.records)) for r in b] == keys[4:]


def test_fetch_v11_with_session_minus_one_is_a_full_fetch(conn, unique_name):
    topic = unique_name()
    _create(conn, topic)
    assert _produce(conn, topic, [b"k1", b"k2"]).error_code == 0
    resp = conn.call(FETCH, 11, request(
        FETCH, replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=-1, session_epoch=-1, rack_id="",
        topics=[FetchTopic(topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=0, log_start_offset=-1,
                                                                    partition_max_bytes=1 << 20)])]))
    assert (resp.error_code, resp.session_id) == (0, 0)
    [t] = resp.responses
    [p] = t.partitions
    assert t.topic == topic and p.error_code == 0 and p.high_watermark == 2
    assert [r.value for b in iter_batches(bytes(p.records)) for r in b] == [b"value-0", b"value-1"]


@kafkacore_only
def test_metadata_that_recreates_a_deleted_topic_answers_leader_not_available(conn, unique_name):
    topic = unique_name()
    _create(conn, topic)
    resp = conn.call(DELETE_TOPICS, 1, request(DELETE_TOPICS, topic_names=[topic], timeout_ms=10000))
    assert resp.responses[0].error_code == 0
    meta = conn.call(METADATA, 6, request(METADATA, topics=[MetadataRequestTopic(name=topic)],
                                          allow_auto_topic_creation=True)).topics[0]
    assert (meta.name, meta.error_code, meta.partitions) == (topic, 5, [])
    deadline = time.monotonic() + 10
    while True:  # as kafka-go's client retries
        meta = conn.call(METADATA, 6, request(METADATA, topics=[MetadataRequestTopic(name=topic)],
                                              allow_auto_topic_creation=True)).topics[0]
        if meta.error_code != 5 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert meta.error_code == 0 and len(meta.partitions) >= 1


@kafkacore_only
def test_an_api_the_broker_does_not_serve_closes_the_connection(conn):
    # CreateAcls v0 with one creation, exactly the shape kafka-go sends; kafkacore has no ACLs
    body = struct.pack(">i", 1) + struct.pack(">b", 2) + struct.pack(">h", 5) + b"topic" + \
        struct.pack(">h", 9) + b"User:test" + struct.pack(">h", 1) + b"*" + struct.pack(">bb", 2, 3)
    header = struct.pack(">hhi", CREATE_ACLS, 0, 42) + struct.pack(">h", 7) + b"kafkago"
    conn.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
    assert conn.is_closed_by_peer()


@kafkacore_only
def test_produce_v8_names_the_keyless_records_of_a_compacted_topic(conn, unique_name):
    topic = unique_name()
    _create(conn, topic, [("cleanup.policy", "compact")])
    resp = _produce(conn, topic, [b"a", None, b"c", None, b"e"])
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert resp.error_code == 87
    assert [(e.batch_index, e.batch_index_error_message) for e in resp.record_errors] == [(1, message), (3, message)]
    assert resp.error_message.startswith("One or more records have been rejected due to 2 record errors")
    assert _produce(conn, topic, [b"a", b"b"]).base_offset == 0  # nothing of the refused batch was written
