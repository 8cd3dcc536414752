"""The UDF pack on real local Spark: decode_batches over binaryFile and over batch bytes from
elsewhere, the Confluent wire-format and JSON value helpers, and the header helpers."""
import json
import os
import struct

import pytest
from pyspark.sql import functions as F

from _records import collect, produce

import kafkacore_spark as ks
from kafkacore.record import RecordBatchBuilder


@pytest.fixture(scope="module")
def udf_data(broker):
    return produce(broker.bootstrap, "udf-src", 900, "zstd")


def test_decode_batches_over_binary_file_equals_the_source(spark, broker, udf_data):
    files = spark.read.format("binaryFile").option("pathGlobFilter", "*.log").load(
        [os.path.join(broker.data_dir, f"udf-src-{p}") for p in range(3)])
    decoded = ks.decode_batches(files, "content", path_column="path", include_headers=True)
    assert collect(decoded) == udf_data


def test_decode_batches_of_batch_bytes_from_elsewhere(spark):
    """Batches built in memory (as another store would hold them), one per row, with topic and
    partition from columns; a control batch is skipped; a null row gives nothing."""
    rows, want = [], {}
    for i in range(4):
        b = RecordBatchBuilder(base_offset=100 * i, compression="lz4" if i % 2 else "none")
        for j in range(5):
            b.append(b"v%d-%d" % (i, j), key=b"k%d" % j, timestamp_ms=1000 + j, headers=[("h", b"%d" % j)])
            want[("elsewhere", i, 100 * i + j)] = (b"k%d" % j, b"v%d-%d" % (i, j), 1000 + j, (("h", b"%d" % j),))
        raw = bytes(b.build())
        if i == 2:  # a transaction marker (control batch) after the data: skipped
            marker = RecordBatchBuilder(base_offset=205, control=True, transactional=True, producer_id=7,
                                        producer_epoch=0)
            marker.append(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x01")
            raw += bytes(marker.build())
        rows.append(("elsewhere", i, raw))
    rows.append(("elsewhere", 9, None))
    df = spark.createDataFrame(rows, "t string, p int, raw binary")
    got = collect(ks.decode_batches(df, "raw", topic_column="t", partition_column="p", include_headers=True))
    assert got == want


def test_decode_batches_reports_a_corrupt_batch(spark):
    b = RecordBatchBuilder()
    b.append(b"value", key=b"key")
    raw = bytearray(b.build())
    raw[-1] ^= 0x55  # the CRC covers it
    df = spark.createDataFrame([(bytes(raw),)], "raw binary")
    with pytest.raises(Exception) as e:
        ks.decode_batches(df, "raw").collect()
    assert "corrupt record batch in row 0" in str(e.value) and "CRC" in str(e.value).upper()
    with pytest.raises(ValueError, match="no column 'nope'"):
        ks.decode_batches(df, "nope")


def _confluent(schema_id, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + payload


def test_confluent_wire_format_and_json_values(spark):
    docs = [{"id": i, "name": f"n{i}"} for i in range(3)]
    df = spark.createDataFrame([(_confluent(40 + i, json.dumps(d).encode()),) for i, d in enumerate(docs)]
                               + [(None,)], "value binary")
    out = df.select(ks.confluent_schema_id("value").alias("sid"),
                    ks.strip_confluent_header("value").alias("payload"),
                    ks.value_from_json("value", "id int, name string", confluent=True).alias("doc")).collect()
    assert [r["sid"] for r in out] == [40, 41, 42, None]
    assert [None if r["payload"] is None else bytes(r["payload"]) for r in out] == (
        [json.dumps(d).encode() for d in docs] + [None])
    assert [r["doc"] and (r["doc"]["id"], r["doc"]["name"]) for r in out] == [(0, "n0"), (1, "n1"), (2, "n2"), None]
    # plain JSON values, no prefix
    plain = spark.createDataFrame([(json.dumps(docs[1]).encode(),)], "value binary")
    assert plain.select(ks.value_from_json("value", "id int, name string").alias("d")).first()["d"]["name"] == "n1"
    # a value without the prefix is an error, not garbage
    assert plain.select(ks.confluent_schema_id("value")).first()[0] is None
    with pytest.raises(Exception, match="does not start with the Confluent wire-format prefix"):
        plain.select(ks.strip_confluent_header("value")).collect()


def test_header_helpers(spark):
    df = spark.createDataFrame(
        [([("a", b"1"), ("b", b"2"), ("a", b"3")],), ([("b", b"x")],), ([],), (None,)],
        "headers array<struct<key:string,value:binary>>")
    out = df.select(ks.header_value("headers", "a").alias("a"), ks.headers_map("headers").alias("m")).collect()
    assert [None if r["a"] is None else bytes(r["a"]) for r in out] == [b"3", None, None, None]
    assert [{k: bytes(v) for k, v in r["m"].items()} for r in out] == [{"a": b"3", "b": b"2"}, {"b": b"x"}, {}, {}]


def test_helpers_on_records_read_from_the_source(spark, broker, udf_data):
    df = (spark.read.format("kafkacore").option("path", broker.data_dir).option("subscribe", "udf-src")
          .option("includeHeaders", "true").load())
    got = {(r["partition"], r["offset"]): (bytes(r["src"]), bytes(r["n"]))
           for r in df.select("partition", "offset", ks.header_value("headers", "src").alias("src"),
                              F.element_at(ks.headers_map("headers"), "n").alias("n")).collect()}
    # produce() writes headers src, n, src: the last src wins, as Kafka's lastHeader gives
    assert got == {(pos[1], pos[2]): (h[2][1], h[1][1]) for pos, (_k, _v, _ts, h) in udf_data.items()}
