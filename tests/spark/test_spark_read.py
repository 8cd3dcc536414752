"""Batch reads with format("kafkacore") on real local Spark: from a running broker's data
directory (segment files, no broker involved) and from the broker itself, checked record by
record against what was produced."""
import json
import os
import shutil
import struct

import pytest

from _records import BASE_TS, collect, produce, without_headers

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def data(broker):
    """One topic per codec, 3 partitions, 1,500 records each, written through the broker."""
    expected = {}
    for codec in CODECS:
        expected.update(produce(broker.bootstrap, f"read-{codec}", 1500, codec))
    return expected


def _path_read(spark, broker, **opts):
    r = spark.read.format("kafkacore").option("path", broker.data_dir)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _broker_read(spark, broker, **opts):
    r = spark.read.format("kafkacore").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _only(expected, topics, pred=lambda pos: True):
    return {pos: v for pos, v in expected.items() if pos[0] in topics and pred(pos)}


def test_schema_is_spark_kafka_sources(spark, broker, data):
    df = _path_read(spark, broker, subscribe="read-none")
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,timestampType:int>")
    df = _path_read(spark, broker, subscribe="read-none", includeHeaders="true")
    assert df.schema.simpleString().endswith(",headers:array<struct<key:string,value:binary>>>")


@pytest.mark.parametrize("codec", CODECS)
def test_path_read_every_codec_exactly(spark, broker, data, codec):
    topic = f"read-{codec}"
    got = collect(_path_read(spark, broker, subscribe=topic, includeHeaders="true"))
    assert got == _only(data, {topic})


def test_path_read_splits_big_partitions_into_byte_ranges(spark, broker, data):
    """Small maxBytesPerPartition: one partition becomes many tasks (cut at index entries, so
    at batch boundaries), and every record is still read exactly once."""
    topics = {f"read-{c}" for c in CODECS}
    segs = sum(1 for d in os.listdir(broker.data_dir) if d.rsplit("-", 1)[0] in topics
               for f in os.listdir(os.path.join(broker.data_dir, d)) if f.endswith(".log"))
    df = _path_read(spark, broker, subscribePattern="read-.*", maxBytesPerPartition="4096", includeHeaders="true")
    assert df.rdd.getNumPartitions() > segs > 15  # more tasks than segments, more segments than partitions
    assert collect(df) == _only(data, topics)


def _count_batches(log_path):
    raw = open(log_path, "rb").read()
    pos = n = 0
    while pos + 12 <= len(raw):
        pos += 12 + struct.unpack_from(">i", raw, pos + 8)[0]
        n += 1
    return n


def _count_index_entries(index_path):
    """Entries of an offset index in use (a preallocated active index ends in zero slots; no
    entry is ever at position 0)."""
    raw = open(index_path, "rb").read()
    return sum(1 for i in range(0, len(raw) - 7, 8) if struct.unpack_from(">i", raw, i + 4)[0] > 0)


def test_path_read_min_partitions(spark, broker, data):
    """minPartitions shrinks the byte ranges so there are at least that many tasks (and turns
    off the packing of small pieces into shared tasks). Cuts fall on
    index entries, so the finest plan is a task per segment start and per index entry: a batch
    that follows one smaller than log.index.interval.bytes has no entry (the producer's batching
    decides how many there are) and cannot start a task of its own."""
    logs = [os.path.join(broker.data_dir, f"read-none-{p}", f) for p in range(3)
            for f in os.listdir(os.path.join(broker.data_dir, f"read-none-{p}")) if f.endswith(".log")]
    segs = len(logs)
    # without minPartitions these small segments (well under SMALL_SPLIT_BYTES together) share one task
    assert _path_read(spark, broker, subscribe="read-none").rdd.getNumPartitions() == 1
    # with minPartitions nothing is packed: a task per segment at least
    assert _path_read(spark, broker, subscribe="read-none", minPartitions="1").rdd.getNumPartitions() == segs
    batches = sum(_count_batches(path) for path in logs)
    finest = sum(1 + _count_index_entries(path[:-len(".log")] + ".index") for path in logs)
    assert batches >= finest > segs
    df = _path_read(spark, broker, subscribe="read-none", minPartitions=str(batches))
    assert df.rdd.getNumPartitions() == finest  # as fine as it gets: a task per indexed batch
    assert collect(df, with_headers=False) == without_headers(_only(data, {"read-none"}))


def test_broker_read_every_codec_exactly(spark, broker, data):
    topics = {f"read-{c}" for c in CODECS}
    df = _broker_read(spark, broker, subscribe=",".join(sorted(topics)), includeHeaders="true")
    assert df.rdd.getNumPartitions() == 15
    assert collect(df) == _only(data, topics)


def test_broker_read_min_partitions_and_max_records(spark, broker, data):
    df = _broker_read(spark, broker, subscribe="read-zstd", minPartitions="9")
    assert df.rdd.getNumPartitions() >= 9
    assert collect(df, with_headers=False) == without_headers(_only(data, {"read-zstd"}))
    df = _broker_read(spark, broker, subscribe="read-zstd", maxRecordsPerPartition="100")
    assert df.rdd.getNumPartitions() >= 1500 // 100
    assert collect(df, with_headers=False) == without_headers(_only(data, {"read-zstd"}))


def test_path_read_max_records_per_partition(spark, broker, data):
    """Spark's maxRecordsPerPartition from segment files too: every task holds at most that
    many offsets (so records), and together they read each record once."""
    from kafkacore_spark.options import parse_source_options
    from kafkacore_spark.source import KafkacoreBatchReader

    topics = {"read-lz4", "read-none"}
    opts = {"path": broker.data_dir, "subscribe": ",".join(sorted(topics)), "maxRecordsPerPartition": "64"}
    splits = KafkacoreBatchReader(parse_source_options(opts, streaming=False)).partitions()
    assert splits and all(s.end_offset - s.start_offset <= 64 for s in splits)
    assert len(splits) >= 2 * 1500 // 64
    df = _path_read(spark, broker, subscribe=opts["subscribe"], maxRecordsPerPartition="64", includeHeaders="true")
    per_task = df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert max(per_task) <= 64 and sum(per_task) == 3000
    assert collect(df) == _only(data, topics)


@pytest.mark.parametrize("mode", ["path", "broker"])
def test_offset_ranges_json_assign_and_timestamps(spark, broker, data, mode):
    read = _path_read if mode == "path" else _broker_read
    topic = "read-snappy"
    ends = {p: max(o for (t, pp, o) in data if t == topic and pp == p) + 1 for p in range(3)}
    # JSON offsets with -2 (earliest) and an explicit range
    starting = json.dumps({topic: {"0": 5, "1": -2, "2": 10}})
    ending = json.dumps({topic: {"0": 50, "1": -1, "2": 11}})
    df = read(spark, broker, assign=json.dumps({topic: [0, 1, 2]}), startingOffsets=starting, endingOffsets=ending)
    want = {0: (5, 50), 1: (0, ends[1]), 2: (10, 11)}
    assert collect(df, False) == without_headers(
        _only(data, {topic}, lambda pos: want[pos[1]][0] <= pos[2] < want[pos[1]][1]))
    # timestamps: records i have BASE_TS + 10 i; start at record 300, end before record 900
    df = read(spark, broker, subscribe=topic, startingTimestamp=str(BASE_TS + 3000), endingTimestamp=str(BASE_TS + 9000))
    got = collect(df, False)
    assert got and got == {pos: v for pos, v in without_headers(_only(data, {topic})).items()
                           if BASE_TS + 3000 <= v[2] < BASE_TS + 9000}
    # per partition timestamps
    by_ts = json.dumps({topic: {"0": BASE_TS + 14000, "1": BASE_TS, "2": BASE_TS + 10**9}})
    df = read(spark, broker, subscribe=topic, startingOffsetsByTimestamp=by_ts,
              startingOffsetsByTimestampStrategy="latest")
    got = collect(df, False)
    exp = without_headers(_only(data, {topic}, lambda pos: pos[1] == 1 or (pos[1] == 0 and data[pos][2] >= BASE_TS + 14000)))
    assert got == exp


@pytest.mark.parametrize("opts, message", [
    ({"subscribe": "a", "assign": '{"a": [0]}'}, "only one of 'assign', 'subscribe' or 'subscribePattern'"),
    ({}, "one of the options 'assign', 'subscribe' or 'subscribePattern' is required"),
    ({"subscribe": "a", "colour": "blue"}, "unknown option(s) for format('kafkacore'): colour"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "startingOffsets=latest is not allowed for a batch read"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets=earliest is not allowed"),
    ({"subscribe": "a", "startingOffsets": "{bad"}, "option 'startingOffsets' is not valid JSON"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "option 'failOnDataLoss' must be true or false"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset is not supported"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "10"}, "apply to streaming queries only"),
    ({"subscribe": "read-none", "kafka.bootstrap.servers": "127.0.0.1:1"}, "contradict each other"),
    ({"subscribePattern": "read-(none|lz4)", "startingOffsets": json.dumps({"read-none": {"0": 0}})},
     "startingOffsets must name every partition read; missing: read-lz4-0"),
])
def test_bad_options_fail_before_any_task(spark, broker, data, opts, message):
    before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(Exception) as e:
        _path_read(spark, broker, **opts).collect()
    assert message in str(e.value)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == before  # no job was started


def _copy_partition(broker, tmp_path, topic):
    dst = tmp_path / "data"
    dst.mkdir()
    for p in range(3):
        shutil.copytree(os.path.join(broker.data_dir, f"{topic}-{p}"), dst / f"{topic}-{p}")
    return dst


def test_missing_offsets_fail_on_data_loss_or_are_skipped(spark, broker, data, tmp_path):
    """The first segment of partition 0 deleted (as retention does): reading from offset 0 is
    an error naming the lost range, or with failOnDataLoss=false starts at the earliest left."""
    topic = "read-none"
    dst = _copy_partition(broker, tmp_path, topic)
    segs = sorted(f for f in os.listdir(dst / f"{topic}-0") if f.endswith(".log"))
    assert len(segs) > 1
    os.remove(dst / f"{topic}-0" / segs[0])
    earliest = int(segs[1][:-4])
    starting = json.dumps({topic: {"0": 0, "1": 0, "2": 0}})
    reader = (spark.read.format("kafkacore").option("path", str(dst)).option("subscribe", topic)
              .option("startingOffsets", starting))
    with pytest.raises(Exception) as e:
        reader.load().collect()
    assert f"offsets 0..{earliest - 1} of {topic}-0 are gone" in str(e.value)
    got = collect(reader.option("failOnDataLoss", "false").load(), False)
    assert got == without_headers(_only(data, {topic}, lambda pos: pos[1] != 0 or pos[2] >= earliest))


def test_corrupt_batch_is_an_error_naming_partition_and_position(spark, broker, data, tmp_path):
    topic = "read-lz4"
    dst = _copy_partition(broker, tmp_path, topic)
    seg = dst / f"{topic}-1" / "00000000000000000000.log"
    raw = bytearray(seg.read_bytes())
    length = struct.unpack_from(">i", raw, 8)[0]
    second = 12 + length  # the second batch: flip a byte of its records
    raw[second + 70] ^= 0xFF
    seg.write_bytes(bytes(raw))
    df = spark.read.format("kafkacore").option("path", str(dst)).option("subscribe", topic).load()
    with pytest.raises(Exception) as e:
        df.collect()
    text = str(e.value)
    assert f"corrupt data in {topic}-1" in text and f"file position {second}" in text and "CRC" in text.upper()


def test_register_twice_and_read_while_broker_appends(spark, broker, data):
    import kafkacore_spark

    kafkacore_spark.register(spark)
    kafkacore_spark.register(spark)
    df = _path_read(spark, broker, subscribe="read-gzip")
    assert df.count() == 1500
    more = produce(broker.bootstrap, "read-gzip", 100, "gzip", start=1500)
    data.update(more)
    assert _path_read(spark, broker, subscribe="read-gzip").count() == 1600


def test_broker_read_after_delete_records(spark, broker):
    """DeleteRecords moves partition 0's log start offset to 40 on the broker: a read from 0 is
    data loss (an error naming the range), or with failOnDataLoss=false starts at 40."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = "read-deleted"
    expected = produce(broker.bootstrap, topic, 300, "none", partition=0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, 40)])
    for f in futures.values():
        assert f.result(30).low_watermark == 40
    starting = json.dumps({topic: {"0": 0, "1": 0, "2": 0}})
    reader = (spark.read.format("kafkacore").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", starting))
    with pytest.raises(Exception) as e:
        reader.load().collect()
    assert f"offsets 0..39 of {topic}-0 are gone" in str(e.value)
    got = collect(reader.option("failOnDataLoss", "false").load(), False)
    assert got == without_headers({pos: v for pos, v in expected.items() if pos[2] >= 40})


def test_stream_reader_without_admission_control_arguments(broker, data):
    """Spark 4.0/4.1 call latestOffset() with no arguments: the reader then applies
    maxOffsetsPerTrigger itself, from the end of the previous batch."""
    from kafkacore_spark.options import parse_source_options
    from kafkacore_spark.source import KafkacoreStreamReader

    topic = "read-none"
    reader = KafkacoreStreamReader(parse_source_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "startingOffsets": "earliest",
         "maxOffsetsPerTrigger": "400"}, streaming=True))
    ends = {str(p): max(o for (t, pp, o) in data if t == topic and pp == p) + 1 for p in range(3)}
    try:
        start = reader.initialOffset()
        assert start == {topic: {"0": 0, "1": 0, "2": 0}}
        seen, prev, history = 0, start, []
        for _ in range(10):
            end = reader.latestOffset()
            history.append(end[topic])
            step = sum(end[topic][p] - prev[topic][p] for p in end[topic])
            assert 0 <= step <= 400, history
            seen += step
            prev = end
        # on a failure, say what the broker answered then and answers now (CI saw 1499 of 1500
        # here twice on 2026-11-26: the producer had lost a record to a garbage collection
        # mid-append, see test_a_garbage_collection_that_yields_the_gil_mid_append_loses_no_record)
        why = (f"steps {history}; produced up to {ends}; the broker's latest now "
               f"{reader._backend.latest([(topic, p) for p in range(3)])}")
        assert prev[topic] == ends and seen == 1500, why
        assert reader.latestOffset() == prev, why  # then nothing more
    finally:
        reader.stop()
