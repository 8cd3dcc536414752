"""Batch writes with df.write.format("kafkacore") on real local Spark, read back with
kafkacore's consumer and compared record by record."""
from collections import Counter

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from test_spark_stream import _consume_all

from kafkacore.partitioner import murmur2


def _write(df, broker, **opts):
    w = df.write.format("kafkacore").option("kafka.bootstrap.servers", broker.bootstrap).mode("append")
    for k, v in opts.items():
        w = w.option(k, v)
    w.save()


def test_bulk_write_of_key_value_columns(spark, broker):
    """Only key and value, one topic: the send_many path over the Arrow columns."""
    n = 20_000
    df = spark.range(n).select(
        F.when(F.col("id") % 9 == 0, F.lit(None)).otherwise(F.concat(F.lit("k"), (F.col("id") % 97).cast("string")))
        .cast("binary").alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).alias("value"))  # a string value column
    _write(df.repartition(4), broker, topic="write-bulk")
    got = _consume_all(broker, "write-bulk", n)
    assert len(got) == n
    want = Counter((None if i % 9 == 0 else b"k%d" % (i % 97), b"value-%d" % i) for i in range(n))
    assert Counter((k, v) for (_p, k, v, _h) in got) == want
    # keyed records are placed by murmur2, as Kafka's Java client places them
    assert all(p == (murmur2(k) & 0x7FFFFFFF) % 3 for (p, k, _v, _h) in got if k is not None)


def test_write_with_topic_partition_and_header_columns(spark, broker):
    schema = StructType([
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                     StructField("value", BinaryType())])))])
    rows = []
    for i in range(300):
        topic = "write-a" if i % 2 else "write-b"
        part = i % 3 if i % 4 else None
        headers = [("i", str(i).encode()), ("kind", b"odd" if i % 2 else b"even")] if i % 5 else None
        rows.append((topic, part, b"k%d" % i, b"v%d" % i, headers))
    _write(spark.createDataFrame(rows, schema), broker)
    for topic in ("write-a", "write-b"):
        mine = [r for r in rows if r[0] == topic]
        got = _consume_all(broker, topic, len(mine))
        assert Counter((k, v, h) for (_p, k, v, h) in got) == Counter(
            (k, v, tuple(hs or ())) for (_t, _p, k, v, hs) in mine)
        placed = {(k, v): p for (p, k, v, _h) in got}
        for (_t, part, k, v, _h) in mine:
            assert placed[(k, v)] == (part if part is not None else (murmur2(k) & 0x7FFFFFFF) % 3)


def test_topic_option_overrides_the_column(spark, broker):
    df = spark.createDataFrame([("elsewhere", b"x%d" % i) for i in range(10)], "topic string, value binary")
    _write(df, broker, topic="write-override")
    assert sorted(v for (_p, _k, v, _h) in _consume_all(broker, "write-override", 10)) == sorted(
        b"x%d" % i for i in range(10))


@pytest.mark.parametrize("ddl, opts, message", [
    ("key binary", {"topic": "t"}, "needs a 'value' column"),
    ("value int", {"topic": "t"}, "column 'value' must be binary or string, not int"),
    ("value binary", {}, "option 'topic' or a 'topic' column"),
    ("value binary, partition string", {"topic": "t"}, "column 'partition' must be an int"),
    ("value binary", {"topic": "t", "colour": "red"}, "unknown option(s) for writing format('kafkacore'): colour"),
])
def test_bad_input_fails_before_any_task(spark, broker, ddl, opts, message):
    df = spark.createDataFrame([], ddl)
    with pytest.raises(Exception) as e:
        _write(df, broker, **opts)
    assert message in str(e.value)


def test_a_failed_send_fails_the_write(spark, broker):
    """A record over max.request.size: the task fails with the producer's error, not silently."""
    df = spark.createDataFrame([(b"x" * 5000,)], "value binary")
    with pytest.raises(Exception) as e:
        _write(df, broker, topic="write-too-big", **{"kafka.max.request.size": "1024"})
    assert "max.request.size" in str(e.value) or "too large" in str(e.value).lower()
