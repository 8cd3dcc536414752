"""Producing records the tests remember, and putting Spark rows in the same shape."""
from kafkacore import Producer

BASE_TS = 1_700_000_000_000


def produce(bootstrap, topic, n, codec="none", start=0, with_headers=True, partition=None, timestamp=None):
    """n keyed records (every 7th key null, every 5th value empty, headers with a repeated key)
    at explicit timestamps (record i's is BASE_TS + 10 i, or timestamp(i)); returns their
    expected rows, (topic, partition, offset) -> row."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "compression.type": codec,
                  "batch.size": 8192})
    handles = []
    for i in range(start, start + n):
        key = None if i % 7 == 0 else b"key-%d" % (i % 50)
        value = b"" if i % 5 == 0 else (b"value-%d-" % i) * (1 + i % 4)
        headers = [("src", b"t%d" % i), ("n", str(i).encode()), ("src", b"last-%d" % i)] if with_headers else None
        ts = BASE_TS + i * 10 if timestamp is None else timestamp(i)
        handles.append((key, value, headers, ts, p.send(topic, value, key=key, headers=headers, timestamp_ms=ts,
                                                         partition=partition)))
    assert p.flush(30) == 0
    p.close()
    out = {}
    for key, value, headers, ts, h in handles:
        md = h.result(0)
        out[(md.topic, md.partition, md.offset)] = (key, value, ts, tuple(headers or ()))
    return out


def collect(df, with_headers=True):
    """The DataFrame's rows -> (topic, partition, offset) -> (key, value, timestamp ms, headers);
    timestamps are read as unix_millis in Spark, so no time zone is involved."""
    from pyspark.sql import functions as F

    rows = df.withColumn("ts_ms", F.expr("unix_millis(timestamp)")).collect()
    out = {}
    for r in rows:
        headers = tuple((h["key"], bytes(h["value"])) for h in (r["headers"] or ())) if with_headers else ()
        key = None if r["key"] is None else bytes(r["key"])
        pos = (r["topic"], r["partition"], r["offset"])
        assert pos not in out, f"record {pos} read twice"
        assert r["timestampType"] == 0
        out[pos] = (key, bytes(r["value"]), r["ts_ms"], headers)
    return out


def without_headers(expected):
    return {pos: (k, v, ts, ()) for pos, (k, v, ts, _h) in expected.items()}
