"""Per-record produce errors (KIP-467) against a real ``kafkacore serve`` process: a batch that
holds keyless records for a compacted topic is refused as Kafka's LogValidator refuses it,
INVALID_RECORD with ``record_errors`` naming each culprit's index in the batch and Kafka's
summary as ``error_message`` (Produce v8+; v3-7 carry only the code), nothing appended.
librdkafka then fails the culprits with INVALID_RECORD and the rest of the batch with its local
_INVALID_DIFFERENT_RECORD."""
import struct

import pytest

from broker_client import BrokerProcess, request
from kafkacore.checksum import crc32c
from kafkacore.errors import InvalidRecordError
from kafkacore.protocol.messages.create_topics_request import (CreatableTopic, CreatableTopicConfig,
                                                               CreateTopicsRequest)
from kafkacore.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkacore.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkacore.protocol.messages.produce_response import BatchIndexAndErrorMessage
from kafkacore.record import RecordBatchBuilder
from kafkacore.storage.config import LogConfig
from kafkacore.storage.log import Log

PRODUCE, LIST_OFFSETS, CREATE_TOPICS = 0, 2, 19
INVALID_RECORD = 87
CODECS = ("gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("record-errors") / "data") as b:
        yield b


@pytest.fixture()
def conn(broker):
    with broker.client() as c:
        yield c


def create_compacted(conn, topic):
    req = CreateTopicsRequest(timeout_ms=10000, topics=[CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1,
        configs=[CreatableTopicConfig(name="cleanup.policy", value="compact")])])
    r = conn.call(CREATE_TOPICS, 7, req).topics[0]
    assert r.error_code == 0, r


def batch(keys, compression="none"):
    b = RecordBatchBuilder(compression)
    for i, key in enumerate(keys):
        b.append(b"value-%d" % i, key=key, timestamp_ms=1_700_000_000_000 + i)
    return b.build()


def with_count(records, count):
    """The batch with another record count (bytes 57-60) and its CRC-32C made right again."""
    buf = bytearray(records)
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def produce(conn, topic, records, version):
    body = request(PRODUCE, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])])
    return conn.call(PRODUCE, version, body).responses[0].partition_responses[0]


def log_end_offset(conn, topic):
    resp = conn.call(LIST_OFFSETS, 7, request(LIST_OFFSETS, replica_id=-1, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def key_message(topic):
    # Kafka's LogValidator.validateKey (3.5+, no trailing period), with TopicPartition's "topic-0"
    return f"Compacted topic cannot accept message without key in topic partition {topic}-0"


def summary(topic, indexes):
    # Kafka's LogValidator.processRecordErrors: a count, then at most three RecordError(...)s
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{key_message(topic)}')" for i in indexes[:3])
    return (f"One or more records have been rejected due to {len(indexes)} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]")


def assert_refused(conn, topic, resp, indexes, end):
    assert resp.error_code == INVALID_RECORD, resp
    assert resp.record_errors == [BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=key_message(topic))
                                  for i in indexes]
    assert resp.error_message == summary(topic, indexes)
    assert resp.base_offset == -1
    assert log_end_offset(conn, topic) == end  # nothing of the batch was appended


# -- raw Produce -----------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [8, 9, 11])
def test_keyless_records_of_a_batch_are_named_in_record_errors(conn, version):
    topic = f"compact-v{version}"
    create_compacted(conn, topic)
    assert produce(conn, topic, batch([b"a", b"b"]), version).error_code == 0
    resp = produce(conn, topic, batch([b"k0", None, b"k2", None, b"k4"]), version)
    assert_refused(conn, topic, resp, [1, 3], end=2)
    # the log takes the next keyed batch at the offset the refused one would have had
    ok = produce(conn, topic, batch([b"k0", b"k1"]), version)
    assert (ok.error_code, ok.base_offset, ok.record_errors, ok.error_message) == (0, 2, [], None)


def test_produce_v7_carries_only_the_error_code(conn):
    topic = "compact-v7"
    create_compacted(conn, topic)
    resp = produce(conn, topic, batch([b"k0", None, b"k2", None, b"k4"]), 7)
    assert resp.error_code == INVALID_RECORD
    assert (resp.record_errors, resp.error_message) == ([], None)  # fields Produce v7 does not have
    assert log_end_offset(conn, topic) == 0


@pytest.mark.parametrize("codec", CODECS)
def test_compression_does_not_change_the_record_errors(conn, codec):
    topic = f"compact-{codec}"
    create_compacted(conn, topic)
    resp = produce(conn, topic, batch([b"k0", None, b"k2", None, b"k4"], codec), 9)
    assert_refused(conn, topic, resp, [1, 3], end=0)


def test_more_than_three_culprits_are_all_listed_and_three_are_summarised(conn):
    topic = "compact-many"
    create_compacted(conn, topic)
    resp = produce(conn, topic, batch([None, b"k1", None, None, None, b"k5", None], "lz4"), 9)
    assert_refused(conn, topic, resp, [0, 2, 3, 4, 6], end=0)
    assert resp.error_message.count("RecordError(") == 3


def test_a_single_keyless_record(conn):
    topic = "compact-one"
    create_compacted(conn, topic)
    assert_refused(conn, topic, produce(conn, topic, batch([None]), 8), [0], end=0)


# -- the storage engine ------------------------------------------------------------------------
def test_log_append_raises_invalid_record_with_the_record_errors(tmp_path):
    lg = Log(str(tmp_path / "events-3"), LogConfig({"cleanup.policy": "compact,delete"}))
    try:
        with pytest.raises(InvalidRecordError) as e:
            lg.append(batch([b"k0", None, b"k2"], "zstd"))
        msg = "Compacted topic cannot accept message without key in topic partition events-3"
        assert e.value.record_errors == [(1, msg)]
        assert e.value.message == (
            "One or more records have been rejected due to 1 record errors in total, and only showing the first "
            f"three errors at most: [RecordError(batchIndex=1, message='{msg}')]")
        assert lg.log_end_offset == 0
        # an invalid batch as a whole (its record count disagrees with its offsets) names no record
        with pytest.raises(InvalidRecordError) as e:
            lg.append(with_count(batch([b"k0", None]), 3))
        assert e.value.record_errors == []
    finally:
        lg.close()


# -- librdkafka ----------------------------------------------------------------------------------
DIFFERENT = -138  # librdkafka's local _INVALID_DIFFERENT_RECORD


@pytest.mark.parametrize("compression", ["none", "lz4"])
@pytest.mark.parametrize("keys, expected", [
    # two or more record errors: the records named get INVALID_RECORD, the others of the batch
    # librdkafka's _INVALID_DIFFERENT_RECORD
    ([b"k0", None, b"k2", None, b"k4"], [DIFFERENT, INVALID_RECORD, DIFFERENT, INVALID_RECORD, DIFFERENT]),
    # a single record error: librdkafka (2.16.0) fails the whole batch with the partition's code
    ([b"k0", None, b"k2"], [INVALID_RECORD] * 3),
], ids=["two-culprits", "one-culprit"])
def test_librdkafka_delivery_reports(broker, conn, compression, keys, expected):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"compact-rdkafka-{compression}-{len(keys)}"
    create_compacted(conn, topic)
    reports = {}

    def on_delivery(err, msg):
        reports[int(msg.value())] = err

    # the records must share one batch (one Produce): the partition's leader known before the
    # first record, and a linger longer than the loop (flush() sends at once, not after it)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 10000,
                                  "compression.type": compression, "enable.idempotence": False})
    try:
        assert p.list_topics(topic, timeout=30).topics[topic].partitions[0].leader >= 0
        for i, key in enumerate(keys):
            p.produce(topic, value=b"%d" % i, key=key, partition=0, on_delivery=on_delivery)
        assert p.flush(30) == 0
    finally:
        del p  # its threads go now, not after the module's broker has stopped
    assert sorted(reports) == list(range(len(keys)))
    assert [reports[i].code() if reports[i] is not None else 0 for i in range(len(keys))] == expected
    # neither is retried by librdkafka; the record error's text is not in the Python delivery
    # report (confluent-kafka gives librdkafka's generic text for the code)
    assert not any(e.retriable() for e in reports.values())
    assert log_end_offset(conn, topic) == 0
