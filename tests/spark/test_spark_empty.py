"""Reads with nothing to read, on real local Spark against real `kafkacore serve` processes: a
topic that exists with no records, a topic whose records were all deleted, an empty offset
range, and a topic that does not exist. Each gives an empty DataFrame with the source's schema
(or, for `assign` of a missing topic, an error naming the partition), from the data directory
(`path`) and from the broker, in batch and streaming queries."""
import json

import pytest

from _records import collect, produce, without_headers
from broker_client import BrokerProcess

from kafkacore import Consumer

SCHEMA = ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
          "timestamp:timestamp,timestampType:int>")
HEADERS = ",headers:array<struct<key:string,value:binary>>>"


def _read(spark, where, location, **opts):
    r = spark.read.format("kafkacore").option("path" if where == "path" else "kafka.bootstrap.servers", location)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _location(broker, where):
    return broker.data_dir if where == "path" else broker.bootstrap


def _create_topic(broker, name, partitions=3):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10).values():
        assert f.result(30) is None


def _topics(broker) -> dict:
    c = Consumer({"bootstrap.servers": broker.bootstrap})
    try:
        return c.list_topics()
    finally:
        c.close()


def _assert_empty(df, headers=False):
    assert df.schema.simpleString() == (SCHEMA[:-1] + HEADERS if headers else SCHEMA)
    assert df.collect() == []
    assert df.count() == 0
    assert df.groupBy("partition").count().collect() == []  # and through a shuffle


@pytest.fixture(scope="module")
def empty_topic(broker):
    """A topic created with 3 partitions and never written to."""
    _create_topic(broker, "empty-created")
    return "empty-created"


@pytest.mark.parametrize("where", ["path", "broker"])
def test_existing_topic_without_records_reads_empty(spark, broker, empty_topic, where):
    loc = _location(broker, where)
    _assert_empty(_read(spark, where, loc, subscribe=empty_topic))
    _assert_empty(_read(spark, where, loc, subscribe=empty_topic, includeHeaders="true"), headers=True)
    _assert_empty(_read(spark, where, loc, subscribePattern="empty-creat.*"))
    _assert_empty(_read(spark, where, loc, assign=json.dumps({empty_topic: [0, 2]})))
    _assert_empty(_read(spark, where, loc, subscribe=empty_topic, minPartitions="4"))


@pytest.mark.parametrize("where", ["path", "broker"])
def test_empty_offset_range_reads_empty(spark, broker, where):
    """A topic with records, read over ranges that hold none (start == end in every partition)."""
    topic = f"empty-range-{where}"
    expected = produce(broker.bootstrap, topic, 60, "none")
    same = json.dumps({topic: {"0": 5, "1": 7, "2": 0}})
    _assert_empty(_read(spark, where, _location(broker, where), subscribe=topic, startingOffsets=same,
                        endingOffsets=same))
    # one range with records among empty ones: only those records
    df = _read(spark, where, _location(broker, where), subscribe=topic, startingOffsets=same,
               endingOffsets=json.dumps({topic: {"0": 5, "1": 9, "2": 0}}))
    assert collect(df, False) == without_headers({pos: v for pos, v in expected.items()
                                                  if pos[1] == 1 and 7 <= pos[2] < 9})


def test_topic_whose_records_were_all_deleted_reads_empty(spark, tmp_path):
    """DeleteRecords up to the high watermark of every partition: the broker then reports
    earliest == latest > 0, and so does the data directory once the broker checkpointed its
    log start offsets (at its clean stop)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = "empty-deleted"
    with BrokerProcess(tmp_path / "data", {"num.partitions": "3"}) as b:
        expected = produce(b.bootstrap, topic, 90, "none")
        ends = {p: max(o for (_t, pp, o) in expected if pp == p) + 1 for p in range(3)}
        assert all(ends.values())
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.delete_records([TopicPartition(topic, p, -1) for p in range(3)]).values():
            assert f.result(30).low_watermark > 0
        _assert_empty(_read(spark, "broker", b.bootstrap, subscribe=topic))
        _assert_empty(_read(spark, "broker", b.bootstrap, subscribe=topic, failOnDataLoss="false"))
        assert b.stop() == 0
    _assert_empty(_read(spark, "path", b.data_dir, subscribe=topic))
    _assert_empty(_read(spark, "path", b.data_dir, assign=json.dumps({topic: [0, 1, 2]})))


@pytest.mark.parametrize("where", ["path", "broker"])
def test_subscribe_to_missing_topic_reads_empty(spark, broker, empty_topic, where):
    """As Spark's Kafka source with consumer-based offset fetching: the partitions of a missing
    topic are none, so there is nothing to read. Reading does not create the topic."""
    loc = _location(broker, where)
    _assert_empty(_read(spark, where, loc, subscribe="no-such-topic"))
    _assert_empty(_read(spark, where, loc, subscribe="no-such-topic", includeHeaders="true"), headers=True)
    _assert_empty(_read(spark, where, loc, subscribePattern="no-such-.*"))
    # a missing topic next to an empty one
    _assert_empty(_read(spark, where, loc, subscribe=f"no-such-topic,{empty_topic}"))
    assert "no-such-topic" not in _topics(broker)


@pytest.mark.parametrize("where", ["path", "broker"])
def test_assign_of_missing_topic_fails_naming_the_partition(spark, broker, empty_topic, where):
    loc = _location(broker, where)
    for assign, missing in [({"no-such-topic": [0, 1]}, "no-such-topic-0, no-such-topic-1"),
                            ({empty_topic: [1, 3]}, f"{empty_topic}-3")]:
        with pytest.raises(Exception) as e:
            _read(spark, where, loc, assign=json.dumps(assign)).collect()
        assert "assigned partitions" in str(e.value) and missing in str(e.value)


def test_path_read_of_a_data_directory_without_topics(spark, tmp_path):
    empty = tmp_path / "empty-data"
    empty.mkdir()
    _assert_empty(_read(spark, "path", str(empty), subscribePattern=".*"))
    with pytest.raises(Exception, match="does not exist"):
        _read(spark, "path", str(tmp_path / "nowhere"), subscribe="t").collect()


@pytest.mark.parametrize("where", ["path", "broker"])
def test_stream_of_empty_then_filled_topic(spark, broker, tmp_path, where):
    """A stream over a topic with no records runs empty micro-batches without failing, then
    reads the records that arrive, once each."""
    topic = f"empty-stream-{where}"
    _create_topic(broker, topic)
    df = (spark.readStream.format("kafkacore").option("path" if where == "path" else "kafka.bootstrap.servers",
                                                      _location(broker, where))
          .option("subscribe", topic).option("startingOffsets", "earliest").load())
    name = f"empty_stream_{where}"
    q = (df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="200 milliseconds").start())
    try:
        q.processAllAvailable()
        assert q.exception() is None
        assert spark.table(name).count() == 0
        expected = produce(broker.bootstrap, topic, 45, "none")
        q.processAllAvailable()
        assert collect(spark.table(name), with_headers=False) == without_headers(expected)
    finally:
        q.stop()


def test_stream_of_missing_topic_waits_for_it(spark, broker, tmp_path):
    """subscribe to a topic that does not exist yet: empty until it is created, then its records
    from the earliest offset."""
    topic = "empty-stream-later"
    df = (spark.readStream.format("kafkacore").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).load())
    q = (df.writeStream.format("memory").queryName("empty_stream_later")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start())
    try:
        q.processAllAvailable()
        assert q.exception() is None
        assert spark.table("empty_stream_later").count() == 0
        assert topic not in _topics(broker)
        expected = produce(broker.bootstrap, topic, 30, "none")
        q.processAllAvailable()
        assert collect(spark.table("empty_stream_later"), with_headers=False) == without_headers(expected)
    finally:
        q.stop()
