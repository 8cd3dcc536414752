#!/usr/bin/env python3
"""Decoding Kafka-format segment files into Spark DataFrames: kafkacore's data source against a
plain Python UDF built on kafka-python's record reader, and against kafkacore's own
``decode_batches`` over ``binaryFile``, side by side on the same files in one Spark session.

    python bench/bench_spark_decode.py [--records N] [--quick] [--codecs none,lz4] [--rounds N]
                                       [--baseline-rounds N] [--workdir DIR]

For each codec, N records (default 10M, ``--quick`` 1M) of 100-byte values with 8-byte keys
are written by kafkacore's embedded producer into a data directory (3 partitions, 64 MiB
segments). Then, in one ``local[2]`` session, each reader runs two queries on the same files:
``count()`` and an aggregate (``groupBy(partition)`` with count, sum of value lengths, max
offset, collected). Rows:

- ``kafkacore``: ``spark.read.format("kafkacore").option("path", dir)``: tasks per segment
  byte range, native decode to Arrow, Arrow into Spark.
- ``decode_batches``: ``spark.read.format("binaryFile")`` over the ``.log`` files, then
  ``kafkacore_spark.decode_batches`` (``mapInArrow`` + the native decoder). Reported only.
- ``kafka-python UDF``: the same ``binaryFile`` rows through a regular Python ``@udf`` that
  walks each file with kafka-python's ``MemoryRecords`` and returns
  ``array<struct<key, value, offset, timestamp>>``, then ``explode``: what a user without
  kafkacore writes. Target: kafkacore >= 20x.

Every reader must give the same count and the same aggregate, or the run fails.

Reading less: ``sum(length(value))`` with ``.schema("value binary")`` (only that column
reaches Spark) against the same sum through the UDF (target >= 20x); and the aggregate over the
last 1% of the topic by timestamp, and over an ``offset BETWEEN`` of 1% of the records on one
partition, against the aggregate over the whole topic, with the bytes of segment files each
plan reads (targets: <= 2% of the bytes; >= 20x on 20M records, >= 6x on 2M). Each pushed
answer is checked against the same filter written so that Spark cannot push it.

Also measured: Spark's floor for any Python data source (tasks yielding one prebuilt Arrow batch
of the same schema and sizes, no decoding), and the native decoder alone in this process (one thread, the same read path the
tasks use: 16 MiB preads + ``decode_to_arrow`` + the Spark column conversion), so the report can
say which share of the query's core-seconds (wall x 2 cores) is our decoder and which is Spark
(task scheduling, the Python worker, Arrow into the JVM, the aggregation).

``--targets``: only issue 30's target rows, interleaved round by round (each round runs every
row once, in the same order) so that a machine whose load drifts (other jobs) weighs on every
row alike: the seven-column count against the floor source, the value-only sum against the
UDF, and the whole-topic aggregate against the two pushed ones and against a pushed range that
holds nothing (the ceiling). Best of ``--rounds`` per row. ``--pushdown-only`` leaves out the
column rows (the UDF takes minutes on 20M records).

Timing: one warm-up run per reader, then the best of ``--rounds`` (3; ``--baseline-rounds`` 1
for the slow UDF). Prints a markdown table for bench/RESULTS.md.
"""
import argparse
import datetime as dt
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "spark_ext"))

TOPIC = "events"
PARTITIONS = 3
VALUE_BYTES = 100


# ----------------------------------------------------------------------------- data
def generate(data_dir: str, n: int, codec: str) -> float:
    """n records into data_dir through the embedded producer; returns the seconds it took."""
    import numpy as np

    from kafkacore import Broker

    rng = np.random.default_rng(42)
    # values: a record number, then text-like filler drawn from a small alphabet (compressible
    # the way JSON-ish payloads are, not random noise)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789 {}:,\"", dtype=np.uint8)
    t0 = time.perf_counter()
    with Broker(data_dir, config={"log.segment.bytes": str(64 << 20), "num.partitions": str(PARTITIONS)}) as b:
        b.create_topic(TOPIC, partitions=PARTITIONS)
        p = b.producer({"linger.ms": 50, "batch.size": 1 << 20, "compression.type": codec,
                        "buffer.memory": 256 << 20})
        chunk = 500_000
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            filler = alphabet[rng.integers(0, len(alphabet), size=(m, VALUE_BYTES), dtype=np.uint8)]
            ids = np.char.zfill(np.arange(start, start + m).astype("S12"), 12)
            vals = filler.view(f"S{VALUE_BYTES}").ravel()
            vals = np.char.add(ids, vals.astype(f"S{VALUE_BYTES - 12}"))
            keys = np.char.add(b"k", (np.arange(start, start + m) % 100_000).astype("S7"))
            p.send_many(TOPIC, vals, keys)
        assert p.flush(300) == 0
        p.close()
    return time.perf_counter() - t0


def log_files(data_dir):
    out = []
    for p in range(PARTITIONS):
        d = os.path.join(data_dir, f"{TOPIC}-{p}")
        out += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".log")]
    return out


# ----------------------------------------------------------------------------- readers
def kafka_python_udf_df(spark, files):
    """binaryFile + a regular Python UDF over kafka-python's MemoryRecords, then explode."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, LongType, StructField, StructType

    rec = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                      StructField("offset", LongType()), StructField("timestamp", LongType())])

    @F.udf(ArrayType(rec))
    def decode(content):
        from kafka.record import MemoryRecords

        out = []
        records = MemoryRecords(bytes(content))
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            if getattr(batch, "is_control_batch", False):
                continue
            for r in batch:
                out.append((r.key, r.value, r.offset, r.timestamp))
        return out

    parts = F.regexp_extract("path", r"-(\d+)/[^/]*$", 1).cast("int")
    return (spark.read.format("binaryFile").load(files)
            .select(parts.alias("partition"), F.explode(decode("content")).alias("r"))
            .select("r.key", "r.value", "partition", "r.offset"))


def floor_df(spark, n, tasks):
    """Spark's own floor for a Python data source: tasks that yield one prebuilt Arrow batch of
    the same schema and sizes (8-byte keys, 100-byte values) over and over, decoding nothing.
    No reader of this kind can be faster than this on the machine."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafkacore_spark.source import SCHEMA

    class FloorReader(DataSourceReader):
        def __init__(self, columns):
            self.columns = columns  # the user schema's (a subset: .schema("value binary"))

        def partitions(self):
            return [InputPartition(n // tasks + (1 if i < n % tasks else 0)) for i in range(tasks)]

        def read(self, partition):
            import pyarrow as pa

            rows = 100_000
            batch = pa.RecordBatch.from_arrays(
                [pa.array([b"k1234567"] * rows), pa.array([b"x" * VALUE_BYTES] * rows),
                 pa.array([TOPIC] * rows), pa.array([0] * rows, pa.int32()), pa.array(range(rows), pa.int64()),
                 pa.array([0] * rows, pa.int64()).cast(pa.timestamp("us", tz="UTC")), pa.array([0] * rows, pa.int32())],
                names=[f.name for f in SCHEMA.fields])
            batch = pa.RecordBatch.from_arrays([batch.column(c) for c in self.columns], names=self.columns)
            left = partition.value
            while left > 0:
                yield batch if left >= rows else batch.slice(0, left)
                left -= rows

    class FloorSource(DataSource):
        @classmethod
        def name(cls):
            return "kafkacore_bench_floor"

        def schema(self):
            return SCHEMA

        def reader(self, schema):
            return FloorReader([f.name for f in schema.fields])

    spark.dataSource.register(FloorSource)
    return spark.read.format("kafkacore_bench_floor").load()


def queries(df):
    from pyspark.sql import functions as F

    def count():
        return df.count()

    def aggregate():
        rows = (df.groupBy("partition")
                .agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"), F.max("offset").alias("last"))
                .collect())
        return sorted((r["partition"], r["n"], r["bytes"], r["last"]) for r in rows)

    return {"count": count, "aggregate": aggregate}


def value_bytes(df):
    return df.selectExpr("sum(length(value))").collect()[0][0]


def planned_bytes(data_dir, filters):
    """(bytes the source's plan reads, bytes stored) with these filters pushed, as Spark plans it."""
    from kafkacore_spark.options import parse_source_options
    from kafkacore_spark.source import KafkacoreBatchReader

    reader = KafkacoreBatchReader(parse_source_options({"path": data_dir, "subscribe": TOPIC}, streaming=False))
    reader.pushFilters(filters)
    reader.partitions()
    return reader.bytes_planned, reader.bytes_stored


def pushdown_rows(spark, data_dir, n, rounds, row):
    """Column pruning and filter pushdown against the whole read: sum(length(value)) with
    .schema("value binary"); the last 1% by timestamp and an offset BETWEEN on one partition
    (1% of the records), each against the same aggregate over the whole topic and against the
    same filter written so that it cannot be pushed (an expression over the column), which
    must give the same answer."""
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThanOrEqual

    def source(schema=None):
        r = spark.read.format("kafkacore").option("path", data_dir).option("subscribe", TOPIC)
        return (r.schema(schema) if schema else r).load()

    secs, total = best_of(lambda: value_bytes(source("value binary")), rounds)
    row["value only"] = (secs, total)
    print(f"  kafkacore value only  sum(length(value)) {secs:7.2f} s  {n / secs / 1e6:6.2f} M rec/s", flush=True)
    full = source()
    cut = full.selectExpr("percentile_approx(unix_millis(timestamp), 0.99, 100000)").collect()[0][0]
    per_partition = n // PARTITIONS
    lo = per_partition // 2
    hi = lo + n // 100 - 1
    cases = {
        "last 1% by timestamp": (f"timestamp >= timestamp_millis({cut})", f"unix_millis(timestamp) >= {cut}",
                                 [GreaterThanOrEqual(("timestamp",), dt.datetime.fromtimestamp(
                                     cut / 1000, dt.timezone.utc))]),
        "offset BETWEEN, 1 partition": (f"partition = 0 AND offset BETWEEN {lo} AND {hi}",
                                        f"abs(partition) = 0 AND abs(offset) BETWEEN {lo} AND {hi}",
                                        [EqualTo(("partition",), 0), GreaterThanOrEqual(("offset",), lo),
                                         LessThanOrEqual(("offset",), hi)]),
    }
    for name, (pushed, unpushed, filters) in cases.items():
        secs, got = best_of(queries(source().filter(pushed))["aggregate"], rounds)
        whole, want = best_of(queries(source().filter(unpushed))["aggregate"], 1)
        assert got == want and got, f"{name}: pushed {got}, read whole {want}"
        read, stored = planned_bytes(data_dir, filters)
        row[name] = (secs, whole, read, stored)
        print(f"  pushdown {name:28s} {secs:7.2f} s (same filter unpushed {whole:.2f} s), reads "
              f"{read / 1e6:.1f} of {stored / 1e6:.0f} MB ({read / stored:.2%})", flush=True)


def targets(spark, data_dir, n, rounds, pushdown_only=False):
    """Issue 30's target rows, interleaved (see the module doc); prints a markdown table.
    ``pushdown_only``: the whole-topic aggregate, the two pushed ones and the same aggregate
    over a pushed range that holds nothing (Spark's cost for a job of this shape, the ceiling
    of any pushed query's speed-up), without the UDF, which takes minutes on 20M records."""
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThanOrEqual

    def source(schema=None):
        r = spark.read.format("kafkacore").option("path", data_dir).option("subscribe", TOPIC)
        return (r.schema(schema) if schema else r).load()

    files = log_files(data_dir)
    cut = source().selectExpr("percentile_approx(unix_millis(timestamp), 0.99, 100000)").collect()[0][0]
    per_partition = n // PARTITIONS
    lo = per_partition // 2
    hi = lo + n // 100 - 1
    last_pct = f"timestamp >= timestamp_millis({cut})"
    between = f"partition = 0 AND offset BETWEEN {lo} AND {hi}"
    udf = kafka_python_udf_df(spark, files)
    rows = {
        "seven columns, count": lambda: source().count(),
        "floor source, count": floor_df(spark, n, len(files)).count,
        "value only, sum(length(value))": lambda: value_bytes(source("value binary")),
        "kafka-python UDF, sum(length(value))": lambda: value_bytes(udf),
        "floor source value only, sum(length(value))": lambda: value_bytes(
            spark.read.format("kafkacore_bench_floor").schema("value binary").load()),
        "whole topic, aggregate": queries(source())["aggregate"],
        "last 1% by timestamp, aggregate": queries(source().filter(last_pct))["aggregate"],
        "offset BETWEEN on 1 partition, aggregate": queries(source().filter(between))["aggregate"],
        "nothing (offset < 0), aggregate": queries(source().filter("offset < 0"))["aggregate"],
    }
    if pushdown_only:
        for name in ("seven columns, count", "floor source, count", "value only, sum(length(value))",
                     "kafka-python UDF, sum(length(value))", "floor source value only, sum(length(value))"):
            del rows[name]
    best, answers = {}, {}
    for name, fn in rows.items():  # warm-up
        answers[name] = fn()
    for r in range(rounds):
        for name, fn in rows.items():
            t0 = time.perf_counter()
            got = fn()
            secs = time.perf_counter() - t0
            assert got == answers[name], f"{name}: {got} != {answers[name]}"
            best[name] = min(best.get(name, secs), secs)
            print(f"  round {r + 1} {name:42s} {secs:7.2f} s", flush=True)
    if not pushdown_only:
        assert answers["seven columns, count"] == answers["floor source, count"] == n
        assert answers["value only, sum(length(value))"] == answers["kafka-python UDF, sum(length(value))"]
    assert answers["nothing (offset < 0), aggregate"] == []
    unpushed = {"last 1% by timestamp, aggregate": f"unix_millis(timestamp) >= {cut}",
                "offset BETWEEN on 1 partition, aggregate": f"abs(partition) = 0 AND abs(offset) BETWEEN {lo} AND {hi}"}
    for name, where in unpushed.items():
        assert queries(source().filter(where))["aggregate"]() == answers[name], name
    planned = {
        "last 1% by timestamp, aggregate": planned_bytes(data_dir, [GreaterThanOrEqual(
            ("timestamp",), dt.datetime.fromtimestamp(cut / 1000, dt.timezone.utc))]),
        "offset BETWEEN on 1 partition, aggregate": planned_bytes(data_dir, [
            EqualTo(("partition",), 0), GreaterThanOrEqual(("offset",), lo), LessThanOrEqual(("offset",), hi)]),
    }
    print(f"\n{n:,} records of {VALUE_BYTES} bytes, best of {rounds} interleaved rounds after a warm-up; "
          f"load average at the end {os.getloadavg()[0]:.1f}\n")
    print("| row | s | against | ratio | bytes read |")
    print("|---|---|---|---|---|")
    b = best
    if not pushdown_only:
        _print_column_rows(b)
    for name, (read, stored) in planned.items():
        print(f"| {name} | {b[name]:.2f} | whole-topic aggregate {b['whole topic, aggregate']:.2f} s | "
              f"{b['whole topic, aggregate'] / b[name]:.1f}x | {read / 1e6:.1f} of {stored / 1e6:.0f} MB "
              f"({read / stored:.2%}) |")
    empty = b["nothing (offset < 0), aggregate"]
    print(f"| nothing (offset < 0), aggregate | {empty:.2f} | whole-topic aggregate "
          f"{b['whole topic, aggregate']:.2f} s | {b['whole topic, aggregate'] / empty:.1f}x (the ceiling) | 0 |")


def _print_column_rows(b):
    print(f"| seven columns, count | {b['seven columns, count']:.2f} | floor source {b['floor source, count']:.2f} s | "
          f"{b['floor source, count'] / b['seven columns, count']:.2f}x | all |")
    print(f"| .schema(\"value binary\"), sum(length(value)) | {b['value only, sum(length(value))']:.2f} | "
          f"kafka-python UDF {b['kafka-python UDF, sum(length(value))']:.1f} s | "
          f"{b['kafka-python UDF, sum(length(value))'] / b['value only, sum(length(value))']:.1f}x | all |")
    print(f"| floor source, .schema(\"value binary\"), sum(length(value)) | "
          f"{b['floor source value only, sum(length(value))']:.2f} | kafka-python UDF "
          f"{b['kafka-python UDF, sum(length(value))']:.1f} s | "
          f"{b['kafka-python UDF, sum(length(value))'] / b['floor source value only, sum(length(value))']:.1f}x "
          f"(the ceiling) | none |")


def best_of(fn, rounds):
    result, times = None, []
    fn()  # warm-up: JIT, Python workers, page cache
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def decoder_alone(data_dir, files):
    """Seconds for one thread to read and decode every file as a task does (no Spark)."""
    from kafkacore_spark.segments import read_range
    from kafkacore_spark.source import _to_spark, all_columns

    t0 = time.perf_counter()
    rows = 0
    for path in files:
        part = int(os.path.basename(os.path.dirname(path)).rsplit("-", 1)[1])
        for batch in read_range(TOPIC, part, path, 0, os.path.getsize(path), 0, 1 << 62):
            rows += _to_spark(batch, all_columns(False)).num_rows
    return time.perf_counter() - t0, rows


# ----------------------------------------------------------------------------- main
def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    import pyspark

    return (f"{platform.machine()}, {os.cpu_count()} cores, {cpu}; Python {platform.python_version()}, "
            f"pyspark {pyspark.__version__}, kafkacore {commit}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline-rounds", type=int, default=1)
    ap.add_argument("--workdir")
    ap.add_argument("--targets", action="store_true", help="only issue 30's target rows, interleaved")
    ap.add_argument("--pushdown-only", action="store_true", help="with --targets: only the pushdown rows")
    args = ap.parse_args()
    n = args.records or (1_000_000 if args.quick else 10_000_000)
    cores = os.cpu_count() or 1

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    work = args.workdir or tempfile.mkdtemp(prefix="kc_bench_spark_")
    os.makedirs(work, exist_ok=True)

    from pyspark.sql import SparkSession

    import kafkacore_spark

    spark = (SparkSession.builder.master("local[2]").appName("kafkacore-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.memory", "6g").config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafkacore_spark.register(spark)
    started = dt.datetime.now(dt.timezone.utc)
    results = []
    try:
        if args.targets:
            codec = args.codecs.split(",")[0]
            data_dir = os.path.join(work, f"data-{codec}")
            shutil.rmtree(data_dir, ignore_errors=True)
            gen = generate(data_dir, n, codec)
            print(f"\n[{codec}] {n:,} records written in {gen:.1f} s ({started:%Y-%m-%d %H:%M} UTC, {machine()})",
                  flush=True)
            targets(spark, data_dir, n, args.rounds, args.pushdown_only)
            return
        for codec in args.codecs.split(","):
            data_dir = os.path.join(work, f"data-{codec}")
            shutil.rmtree(data_dir, ignore_errors=True)
            gen = generate(data_dir, n, codec)
            files = log_files(data_dir)
            size = sum(os.path.getsize(f) for f in files)
            print(f"\n[{codec}] {n:,} records written in {gen:.1f} s: {len(files)} segments, {size / 1e6:.0f} MB",
                  flush=True)
            readers = {
                "kafkacore": (spark.read.format("kafkacore").option("path", data_dir).option("subscribe", TOPIC)
                              .load(), args.rounds),
                "decode_batches": (kafkacore_spark.decode_batches(
                    spark.read.format("binaryFile").load(files), "content", path_column="path"), args.rounds),
                "kafka-python UDF": (kafka_python_udf_df(spark, files), args.baseline_rounds),
            }
            row = {"codec": codec, "records": n, "mb": size / 1e6}
            for name, (df, rounds) in readers.items():
                for q, fn in queries(df).items():
                    secs, result = best_of(fn, rounds)
                    row[(name, q)] = (secs, result)
                    print(f"  {name:18s} {q:9s} {secs:7.2f} s  {n / secs / 1e6:6.2f} M rec/s", flush=True)
            for q in ("count", "aggregate"):
                want = row[("kafkacore", q)][1]
                for name in readers:
                    assert row[(name, q)][1] == want, f"{name} {q} gave {row[(name, q)][1]}, kafkacore {want}"
            assert row[("kafkacore", "count")][1] == n
            udf_secs, udf_total = best_of(lambda: value_bytes(readers["kafka-python UDF"][0]), args.baseline_rounds)
            row["udf value only"] = udf_secs
            print(f"  kafka-python UDF   sum(length(value)) {udf_secs:7.2f} s", flush=True)
            pushdown_rows(spark, data_dir, n, args.rounds, row)
            assert row["value only"][1] == udf_total, (row["value only"][1], udf_total)
            fdf = floor_df(spark, n, len(files))
            fsecs, fcount = best_of(fdf.count, args.rounds)
            assert fcount == n
            row["floor"] = fsecs
            print(f"  Spark floor        count   {fsecs:7.2f} s  {n / fsecs / 1e6:6.2f} M rec/s", flush=True)
            dec, rows = decoder_alone(data_dir, files)
            assert rows == n
            row["decoder"] = dec
            print(f"  decoder alone (1 thread): {dec:.2f} s, {n / dec / 1e6:.2f} M rec/s", flush=True)
            results.append(row)
    finally:
        spark.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\n### Spark decode, {started:%Y-%m-%d %H:%M} UTC ({machine()})\n")
    print(f"{n:,} records of {VALUE_BYTES} bytes, 3 partitions, 64 MiB segments; local[2]; best of "
          f"{args.rounds} (UDF: {args.baseline_rounds}) after a warm-up.\n")
    print("| codec | query | kafkacore s | M rec/s | per core | decode_batches s | kafka-python UDF s | "
          "kafkacore / UDF | kafkacore / decode_batches | decoder share | Spark floor (count) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in results:
        for q in ("count", "aggregate"):
            ours = row[("kafkacore", q)][0]
            db = row[("decode_batches", q)][0]
            udf = row[("kafka-python UDF", q)][0]
            share = row["decoder"] / (ours * cores)
            print(f"| {row['codec']} | {q} | {ours:.2f} | {n / ours / 1e6:.2f} | {n / ours / cores / 1e6:.2f} | "
                  f"{db:.2f} | {udf:.1f} | {udf / ours:.1f}x | {db / ours:.2f}x | {share:.0%} | "
                  + (f"{row['floor']:.2f} s, {n / row['floor'] / 1e6:.2f} M rec/s |" if q == "count" else "|"))
    print("\ndecoder share = the native decoder alone (one thread, same files) / the query's core-seconds "
          f"(wall x {cores}); the rest is Spark: scheduling, Python workers, Arrow into the JVM, the query.")
    print("Spark floor = a Python data source yielding one prebuilt Arrow batch of the same schema and sizes "
          "over and over (no decoding): the fastest any Python data source can feed this session.")
    print("\n| codec | query | kafkacore s | vs | ratio | bytes read |")
    print("|---|---|---|---|---|---|")
    for row in results:
        secs = row["value only"][0]
        print(f"| {row['codec']} | sum(length(value)), .schema(\"value binary\") | {secs:.2f} | kafka-python UDF "
              f"{row['udf value only']:.1f} s | {row['udf value only'] / secs:.1f}x | all |")
        for name in ("last 1% by timestamp", "offset BETWEEN, 1 partition"):
            secs, whole, read, stored = row[name]
            full = row[("kafkacore", "aggregate")][0]
            print(f"| {row['codec']} | aggregate, {name} | {secs:.2f} | whole-topic aggregate {full:.2f} s "
                  f"(same filter unpushed {whole:.2f} s) | {full / secs:.1f}x | {read / 1e6:.1f} of "
                  f"{stored / 1e6:.0f} MB ({read / stored:.2%}) |")
    for row in results:
        print(f"- {row['codec']}: decoder alone {row['decoder']:.2f} s ({n / row['decoder'] / 1e6:.1f} M rec/s "
              f"on one core), {row['mb']:.0f} MB of segments")


if __name__ == "__main__":
    main()
