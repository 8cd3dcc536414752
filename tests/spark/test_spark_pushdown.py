"""Column pruning (a user schema) and filter pushdown (partition, offset and timestamp
predicates turned into offset ranges) with format("kafkacore") on real local Spark: a pruned,
pushed read returns exactly the rows of the full read filtered by Spark itself, and reads
only a small part of the bytes when the predicates are narrow."""
import datetime
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _records import BASE_TS, collect, produce, without_headers

TOPIC = "push-sorted"  # record i at BASE_TS + 10 i
SHUFFLED = "push-shuffled"  # timestamps out of order within each partition
BIG = "push-big"
N = 3000
BIG_N = 20_000
PRODUCER_BATCH = 8192 + 1024  # _records.produce's batch.size, and the overhead of a batch that tops it
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
TYPES = {"key": "binary", "value": "binary", "topic": "string", "partition": "int", "offset": "bigint",
         "timestamp": "timestamp", "timestampType": "int", "headers": "array<struct<key:string,value:binary>>"}


def _shuffled_ts(i):
    return BASE_TS + ((i * 7919) % N) * 10  # a permutation of the sorted topic's timestamps


@pytest.fixture(scope="module")
def data(broker):
    expected = produce(broker.bootstrap, TOPIC, N, "lz4")
    expected.update(produce(broker.bootstrap, SHUFFLED, N, "none", timestamp=_shuffled_ts))
    return expected


@pytest.fixture(scope="module")
def big(broker):
    return produce(broker.bootstrap, BIG, BIG_N, "none", with_headers=False)


def _read(spark, broker, mode, topic, schema=None, **opts):
    r = spark.read.format("kafkacore").option("subscribe", topic)
    r = r.option("path", broker.data_dir) if mode == "path" else r.option("kafka.bootstrap.servers", broker.bootstrap)
    if schema is not None:
        r = r.schema(schema)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _reader(broker, topic, filters, mode="path", **opts):
    """The batch reader Spark would plan, with these filters pushed: its counters and the
    pieces of its plan (the small ones a task reads together unpacked: PackedSplit)."""
    from kafkacore_spark.options import parse_source_options
    from kafkacore_spark.source import KafkacoreBatchReader

    where = {"path": broker.data_dir} if mode == "path" else {"kafka.bootstrap.servers": broker.bootstrap}
    reader = KafkacoreBatchReader(parse_source_options({"subscribe": topic, **where, **opts}, streaming=False))
    unhandled = reader.pushFilters(filters)
    splits = reader.partitions()
    return reader, [piece for s in splits for piece in getattr(s, "pieces", [s])], unhandled


def _ts(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)


def _keys(df):
    return sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())


# -- column pruning --------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["path", "broker"])
def test_each_single_column(spark, broker, data, mode):
    full = collect(_read(spark, broker, mode, TOPIC, includeHeaders="true"))
    order = sorted(full)
    for name in COLUMNS:
        df = _read(spark, broker, mode, TOPIC, f"{name} {TYPES[name]}", includeHeaders="true")
        assert df.columns == [name]
        rows = df.collect()
        assert len(rows) == N
        if name in ("partition", "offset"):
            got = sorted(r[0] for r in rows)
            assert got == sorted(pos[1 if name == "partition" else 2] for pos in order)
        elif name == "value":
            assert sorted(bytes(r[0]) for r in rows) == sorted(v[1] for v in full.values())


def test_reordered_subset_is_the_same_rows(spark, broker, data):
    df = _read(spark, broker, "path", TOPIC, "offset bigint, value binary, partition int, key binary")
    assert df.columns == ["offset", "value", "partition", "key"]
    got = {(TOPIC, r["partition"], r["offset"]): (None if r["key"] is None else bytes(r["key"]), bytes(r["value"]))
           for r in df.collect()}
    assert got == {pos: (k, v) for pos, (k, v, _ts, _h) in data.items() if pos[0] == TOPIC}


def test_value_only_aggregate(spark, broker, data):
    total = (_read(spark, broker, "path", TOPIC, "value binary").selectExpr("sum(length(value))").collect()[0][0])
    assert total == sum(len(v[1]) for pos, v in data.items() if pos[0] == TOPIC)


def test_stream_with_a_pruned_schema(spark, broker, data, tmp_path):
    df = (spark.readStream.format("kafkacore").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", TOPIC).option("startingOffsets", "earliest").schema("offset bigint, value binary").load())
    out = tmp_path / "out"
    q = (df.writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r["offset"], bytes(r["value"])) for r in rows) == sorted(
        (pos[2], v[1]) for pos, v in data.items() if pos[0] == TOPIC)


@pytest.mark.parametrize("schema, message", [
    ("colour string", "format('kafkacore') has no column 'colour'; its columns are key, value"),
    ("value string", "column 'value' of format('kafkacore') is binary, not string"),
    ("offset int", "column 'offset' of format('kafkacore') is bigint, not int"),
    ("headers array<struct<key:string,value:binary>>", "column 'headers' is read only with the option includeHeaders=true"),
])
def test_bad_schema_is_one_clear_error(spark, broker, data, schema, message):
    with pytest.raises(Exception) as e:
        _read(spark, broker, "path", TOPIC, schema).collect()
    assert message in str(e.value)


# -- filter pushdown -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def full(spark, broker, data):
    """Both topics read whole, unpushed, held by Spark: its own filter runs on this."""
    df = _read(spark, broker, "path", f"{TOPIC},{SHUFFLED}").cache()
    assert df.count() == 2 * N
    yield df
    df.unpersist()


_ts_values = st.integers(BASE_TS - 20, BASE_TS + N * 10 + 20)
_predicates = st.one_of(
    st.tuples(st.sampled_from(["=", "<", "<=", ">", ">="]), st.integers(-1, 3)).map(lambda t: f"partition {t[0]} {t[1]}"),
    st.lists(st.integers(-1, 3), min_size=1, max_size=3).map(lambda ps: f"partition IN ({', '.join(map(str, ps))})"),
    st.tuples(st.sampled_from(["=", "<", "<=", ">", ">="]), st.integers(-2, N // 3 + 50)).map(
        lambda t: f"offset {t[0]} {t[1]}"),
    st.tuples(st.integers(0, N // 3), st.integers(0, 400)).map(lambda t: f"offset BETWEEN {t[0]} AND {t[0] + t[1]}"),
    st.lists(st.integers(0, N // 3 + 5), min_size=1, max_size=4).map(
        lambda os: f"offset IN ({', '.join(map(str, os))})"),
    st.tuples(st.sampled_from(["=", "<", "<=", ">", ">="]), _ts_values).map(
        lambda t: f"timestamp {t[0]} timestamp_millis({t[1]})"),
    st.tuples(st.sampled_from(["<", ">="]), _ts_values, st.integers(1, 999)).map(
        lambda t: f"timestamp {t[0]} timestamp_micros({t[1] * 1000 + t[2]})"),
    st.tuples(_ts_values, st.integers(0, 3000)).map(
        lambda t: f"timestamp BETWEEN timestamp_millis({t[0]}) AND timestamp_millis({t[0] + t[1]})"),
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_predicates, min_size=1, max_size=3), st.sampled_from([TOPIC, SHUFFLED]))
def test_pushed_read_is_spark_filter_of_the_full_read(spark, broker, full, predicates, topic):
    where = " AND ".join(f"({p})" for p in predicates)
    pushed = _read(spark, broker, "path", topic, maxBytesPerPartition="4096").filter(where)
    expected = full.filter(f"topic = '{topic}'").filter(where)
    assert _keys(pushed) == _keys(expected), where


@pytest.mark.parametrize("mode", ["path", "broker"])
def test_pushed_rows_whole_and_exact(spark, broker, data, mode):
    """Every column of the pushed reads, from files and from the broker, record by record."""
    lo, hi = BASE_TS + 10 * 1000, BASE_TS + 10 * 2000
    df = _read(spark, broker, mode, SHUFFLED, includeHeaders="true").filter(
        f"timestamp >= timestamp_millis({lo}) AND timestamp < timestamp_millis({hi}) AND partition IN (0, 2)")
    assert collect(df) == {pos: v for pos, v in data.items()
                           if pos[0] == SHUFFLED and lo <= v[2] < hi and pos[1] in (0, 2)}
    df = _read(spark, broker, mode, TOPIC).filter("partition = 1 AND offset BETWEEN 100 AND 450")
    assert collect(df, False) == without_headers(
        {pos: v for pos, v in data.items() if pos[0] == TOPIC and pos[1] == 1 and 100 <= pos[2] <= 450})


def test_last_percent_by_timestamp_reads_a_few_percent(spark, broker, big):
    from pyspark.sql.datasource import GreaterThanOrEqual

    cut = BASE_TS + 10 * (BIG_N - BIG_N // 100)
    reader, splits, unhandled = _reader(broker, BIG, [f := GreaterThanOrEqual(("timestamp",), _ts(cut))])
    assert unhandled == []  # the reader drops the rows of the batches read that are older
    # the matching 1%, and at most the batch holding the cut before it in each partition (the
    # index's granularity): on a topic of this size that is a few percent, on a big one less
    assert reader.bytes_planned <= 0.01 * reader.bytes_stored + 3 * PRODUCER_BATCH, (
        reader.bytes_planned, reader.bytes_stored)
    df = _read(spark, broker, "path", BIG).filter(f"timestamp >= timestamp_millis({cut})")
    assert _keys(df) == sorted((p, o) for (_t, p, o), v in big.items() if v[2] >= cut)
    # the same from the broker: ListOffsets by timestamp gives the starts
    broker_reader, splits, _ = _reader(broker, BIG, [f], mode="broker")
    assert sum(s.end_offset - s.start_offset for s in splits) == BIG_N // 100


def test_small_pieces_of_several_partitions_share_one_task(spark, broker, big):
    """A pushed range leaves a few batches in each partition: they are read by one task (a
    task's fixed cost is worth more than their decoding), exactly the rows of each."""
    from pyspark.sql.datasource import GreaterThanOrEqual

    from kafkacore_spark.options import parse_source_options
    from kafkacore_spark.source import KafkacoreBatchReader

    cut = BASE_TS + 10 * (BIG_N - BIG_N // 100)
    reader = KafkacoreBatchReader(parse_source_options({"subscribe": BIG, "path": broker.data_dir}, streaming=False))
    reader.pushFilters([GreaterThanOrEqual(("timestamp",), _ts(cut))])
    (task,) = reader.partitions()
    # a partition's range may cross a segment boundary (the segments are 16 KiB and where the
    # producer's batches end depends on its linger): then it is two pieces, still in this task
    assert sorted({p.partition for p in task.pieces}) == [0, 1, 2]
    assert task.bytes == reader.bytes_planned
    df = _read(spark, broker, "path", BIG).filter(f"timestamp >= timestamp_millis({cut})")
    assert df.rdd.getNumPartitions() == 1
    assert _keys(df) == sorted((p, o) for (_t, p, o), v in big.items() if v[2] >= cut)


def test_pack_small_keeps_big_pieces_alone_and_fills_tasks_in_order():
    from kafkacore_spark.backends import SMALL_SPLIT_BYTES, PackedSplit, SegmentSplit, pack_small

    def piece(p, size):
        return SegmentSplit("t", p, f"/{p}.log", 0, size, 0, 1)

    third = SMALL_SPLIT_BYTES // 3
    big_piece, a, b, c, d = piece(0, SMALL_SPLIT_BYTES), piece(1, third), piece(2, third), piece(3, third), piece(4, 3)
    out = pack_small([a, big_piece, b, c, d, piece(5, third)])
    assert out[0] is big_piece  # a big piece goes out as it comes; small ones wait for company
    assert [[x.partition for x in s.pieces] if isinstance(s, PackedSplit) else s.partition for s in out] == \
        [0, [1, 2, 3], [4, 5]]
    assert pack_small([a]) == [a] and pack_small([]) == []


def test_balance_shares_a_small_read_evenly_over_the_tasks():
    from kafkacore_spark.backends import PackedSplit, SegmentSplit, balance

    pieces = [SegmentSplit("t", p, f"/{p}.log", 0, size, 0, 1) for p, size in enumerate([6, 2, 6, 2, 6, 2])]
    out = balance(pieces, 2)
    assert sorted(s.bytes for s in out) == [12, 12]
    assert all(isinstance(s, PackedSplit) for s in out)
    # every piece once, each task's pieces in plan order
    assert sorted(p.partition for s in out for p in s.pieces) == list(range(6))
    assert all([p.partition for p in s.pieces] == sorted(p.partition for p in s.pieces) for s in out)
    assert balance(pieces[:1], 2) == pieces[:1] and balance([], 2) == []


def test_offset_between_on_one_partition(spark, broker, big):
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThanOrEqual

    filters = [EqualTo(("partition",), 2), GreaterThanOrEqual(("offset",), 1000), LessThanOrEqual(("offset",), 1100)]
    reader, splits, unhandled = _reader(broker, BIG, filters)
    assert unhandled == []  # partition and offset comparisons are exact
    assert {s.partition for s in splits} == {2}
    assert reader.bytes_planned <= 2 * PRODUCER_BATCH  # the batches holding offsets 1000..1100
    df = _read(spark, broker, "path", BIG).filter("partition = 2 AND offset BETWEEN 1000 AND 1100")
    assert _keys(df) == [(2, o) for o in range(1000, 1101)]


def test_explain_shows_the_pushed_filters(spark, broker, data, capsys):
    """Every filter the source takes is listed under PushedFilters in the formatted plan
    (pyspark's PythonScan shows the filters a source does not hand back; the one-line plan of
    explain() shows none); the others stay in Spark's Filter."""
    df = _read(spark, broker, "path", TOPIC).filter(
        f"partition IN (0, 2) AND offset BETWEEN 10 AND 20 AND timestamp >= timestamp_millis({BASE_TS + 100}) "
        "AND offset IN (12, 15, 18) AND length(value) > 3")
    df.explain("formatted")
    plan = capsys.readouterr().out
    pushed = plan[plan.index("PushedFilters: ["):].split("\n", 1)[0]
    for f in ("In(partition, [0,2])", "GreaterThanOrEqual(offset,10)", "LessThanOrEqual(offset,20)",
              "GreaterThanOrEqual(timestamp,", "In(offset, [12,15,18])"):
        assert f in pushed, (f, pushed)
    spark_filter = plan[plan.index("Condition : "):].split("\n", 1)[0]
    assert "length(value" in spark_filter and "length" not in pushed
    assert "offset" not in spark_filter.replace("isnotnull(offset", "") and "timestamp" not in spark_filter.replace(
        "isnotnull(timestamp", "")
    assert _keys(df) == sorted((p, o) for (t, p, o), v in data.items() if t == TOPIC and p in (0, 2)
                               and o in (12, 15, 18) and v[2] >= BASE_TS + 100 and len(v[1]) > 3)


def test_in_on_partitions_skips_the_others(spark, broker, data):
    from pyspark.sql.datasource import In

    reader, splits, unhandled = _reader(broker, TOPIC, [In(("partition",), (0, 2, 7))])
    assert unhandled == [] and {s.partition for s in splits} == {0, 2}
    df = _read(spark, broker, "path", TOPIC).filter("partition IN (0, 2, 7)")
    assert _keys(df) == sorted((p, o) for (t, p, o) in data if t == TOPIC and p in (0, 2))


def test_filters_admitting_nothing_plan_nothing(spark, broker, data):
    from pyspark.sql.datasource import GreaterThan, LessThan

    reader, splits, _ = _reader(broker, TOPIC, [GreaterThan(("offset",), 10), LessThan(("offset",), 5)])
    assert splits == [] and reader.bytes_planned == 0
    reader, splits, _ = _reader(broker, TOPIC, [GreaterThan(("timestamp",), _ts(BASE_TS + 10 * N))])
    assert splits == []
    assert _read(spark, broker, "path", TOPIC).filter(f"timestamp > timestamp_millis({BASE_TS + 10 * N})").count() == 0


@pytest.mark.parametrize("mode", ["path", "broker"])
@pytest.mark.parametrize("ms", [-1, -2, -5, 0])
def test_timestamp_bounds_at_and_before_1970_keep_every_record(spark, broker, data, mode, ms):
    """A lower bound of -1 or -2 ms is no time to ask ListOffsets for ("latest", "earliest"):
    such bounds admit every record and must not narrow the read."""
    df = _read(spark, broker, mode, TOPIC).filter(f"timestamp >= timestamp_millis({ms})")
    assert df.count() == N


def test_empty_partitions_and_segments(spark, broker, tmp_path):
    """A topic whose partitions hold nothing (one empty active segment each) is read as no
    rows whatever is pushed."""
    from kafkacore import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.send("push-empty", b"x", partition=0, timestamp_ms=BASE_TS)
    assert p.flush(30) == 0
    p.close()
    df = _read(spark, broker, "path", "push-empty").filter(f"partition = 1 OR timestamp > timestamp_millis({BASE_TS})")
    assert df.count() == 0
    df = _read(spark, broker, "path", "push-empty").filter(f"timestamp >= timestamp_millis({BASE_TS}) AND offset >= 0")
    assert _keys(df) == [(0, 0)]


def test_starting_offsets_and_pushed_filters_combine(spark, broker, data):
    starting = json.dumps({TOPIC: {"0": 200, "1": 0, "2": 0}})
    df = _read(spark, broker, "path", TOPIC, startingOffsets=starting).filter("offset < 300 AND partition < 2")
    assert _keys(df) == sorted((p, o) for (t, p, o) in data if t == TOPIC and p < 2 and o < 300 and
                               (p != 0 or o >= 200))
