"""kafka.isolation.level on real local Spark (docs/transactions.md section 9.3, plan step 12):
confluent-kafka's transactional producers write committed, aborted (flushed first, so the log
holds their records) and interleaved transactions, with non-transactional records between, over
several segments of each partition; a transaction is left open, and one more is committed after
it opened. Read from the broker and from its data directory (segment files) while it runs:

- read_committed gives exactly the committed and non-transactional records below the last
  stable offset, the first offset of the open transaction in each partition, so the
  transaction committed behind it is not read yet;
- read_uncommitted gives every record;
- a read_committed stream (Trigger.AvailableNow, small micro-batches, so many ranges end
  inside aborted data) gives the same as the batch read.

The reads cut ranges small (maxRecordsPerPartition, maxBytesPerPartition) so tasks start and
end inside aborted transactions."""
import pytest

from _records import collect

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "spark-txn"
PARTITIONS = 2
WAIT = 30


class Written:
    """Each record's (topic, partition, offset) -> (key, value, timestamp ms, ()) by fate."""

    def __init__(self):
        self.committed, self.aborted, self.open = {}, {}, {}


def _send(p, written, fate, tag, n):
    """n records over both partitions (explicit partitions, so every partition gets a share);
    their positions arrive in delivery reports."""
    pending = []

    def done(err, msg):
        assert err is None, err
        pending.append(msg)

    for i in range(n):
        value = (b"%s-%d-" % (tag, i)) * 40  # big enough that each partition spans several segments
        p.produce(TOPIC, value, key=b"%s-%d" % (tag, i % 5), partition=i % PARTITIONS, on_delivery=done)
    assert p.flush(WAIT) == 0
    assert len(pending) == n
    target = getattr(written, fate)
    for m in pending:
        target[(m.topic(), m.partition(), m.offset())] = (m.key(), m.value(), m.timestamp()[1], ())


def _txn_producer(bootstrap, txn_id, **extra):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    p.init_transactions(WAIT)
    return p


@pytest.fixture(scope="module")
def txns(broker):
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until the creation answers
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(WAIT)
    w = Written()
    a = _txn_producer(bs, "spark-txn-a")
    b = _txn_producer(bs, "spark-txn-b")
    plain = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    _send(plain, w, "committed", b"plain0", 40)
    for r in range(12):  # small transactions: several per segment, so splits start after an abort
        # a and b interleave: b's transaction is open while a's commits and aborts, and b's
        # own fate alternates
        b.begin_transaction()
        b_recs = Written()
        _send(b, b_recs, "committed", b"b%d" % r, 40)
        a.begin_transaction()
        _send(a, w, "committed" if r % 2 else "aborted", b"a%d" % r, 60)
        if r % 2:
            a.commit_transaction(WAIT)
        else:
            a.abort_transaction(WAIT)
        _send(plain, w, "committed", b"plain%d" % (r + 1), 20)
        if r % 3 == 2:
            b.abort_transaction(WAIT)
            w.aborted.update(b_recs.committed)
        else:
            b.commit_transaction(WAIT)
            w.committed.update(b_recs.committed)
    # left open (a long timeout, so the coordinator does not abort it during the tests), then
    # a transaction committed behind it: not stable yet
    c = _txn_producer(bs, "spark-txn-open", **{"transaction.timeout.ms": 900_000})
    c.begin_transaction()
    _send(c, w, "open", b"open", 20)
    a.begin_transaction()
    behind = Written()
    _send(a, behind, "committed", b"behind", 20)
    a.commit_transaction(WAIT)
    lso = {p: min(o for (_t, q, o) in w.open if q == p) for p in range(PARTITIONS)}
    w.open.update(behind.committed)
    w.stable = {pos: v for pos, v in w.committed.items() if pos[2] < lso[pos[1]]}
    w.everything = {**w.committed, **w.aborted, **w.open}
    assert all(pos[2] >= lso[pos[1]] for pos in behind.committed) and len(w.aborted) > 300
    yield w
    c.abort_transaction(WAIT)
    for p in (a, b, c):
        p.flush(WAIT)


def _read(spark, where, broker, isolation, **opts):
    r = spark.read.format("kafkacore").option("subscribe", TOPIC).option("kafka.isolation.level", isolation)
    r = r.option("path", broker.data_dir) if where == "path" else r.option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _same(got, expected):
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    wrong = sorted(k for k in set(got) & set(expected) if got[k] != expected[k])
    assert not (missing or extra or wrong), (
        f"{len(got)} records read, {len(expected)} expected: missing {missing[:10]}, unexpected {extra[:10]}, "
        f"different {wrong[:10]}")


def test_batch_reads_by_isolation_level(spark, broker, txns):
    import os

    segments = [f for f in os.listdir(os.path.join(broker.data_dir, f"{TOPIC}-0")) if f.endswith(".log")]
    assert len(segments) > 3  # aborted lists cross segments
    _same(collect(_read(spark, "path", broker, "read_committed", maxBytesPerPartition="3000"), False), txns.stable)
    _same(collect(_read(spark, "broker", broker, "read_committed", maxRecordsPerPartition="97"), False), txns.stable)
    _same(collect(_read(spark, "path", broker, "read_uncommitted", maxBytesPerPartition="3000"), False),
          txns.everything)
    _same(collect(_read(spark, "broker", broker, "read_uncommitted"), False), txns.everything)


@pytest.mark.parametrize("where", ["path", "broker"])
def test_pushed_filters_read_committed(spark, broker, txns, where):
    """Offset and timestamp bounds pushed into read_committed reads: ranges that start and end
    inside aborted transactions still give exactly the stable records they admit."""
    times = sorted(v[2] for v in txns.stable.values())
    since = times[len(times) // 3]
    cond = f"offset BETWEEN 150 AND 1400 AND timestamp >= timestamp_millis({since}) AND partition = 1"
    got = collect(_read(spark, where, broker, "read_committed").filter(cond), False)
    _same(got, {pos: v for pos, v in txns.stable.items() if 150 <= pos[2] <= 1400 and v[2] >= since and pos[1] == 1})
    got = collect(_read(spark, where, broker, "read_uncommitted").filter("offset > 700"), False)
    _same(got, {pos: v for pos, v in txns.everything.items() if pos[2] > 700})


def test_read_committed_stream(spark, broker, txns, tmp_path):
    out = str(tmp_path / "out")
    df = (spark.readStream.format("kafkacore").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", TOPIC).option("startingOffsets", "earliest")
          .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "400").load())
    q = (df.writeStream.format("parquet").option("path", out)
         .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert q.awaitTermination(300), "the AvailableNow query did not stop"
    assert q.exception() is None, q.exception()
    assert len([p for p in q.recentProgress if p["numInputRows"]]) > 3
    _same(collect(spark.read.parquet(out), False), txns.stable)


@pytest.mark.parametrize("seed", range(2))
def test_path_splits_cut_at_every_batch_read_the_committed_records(tmp_path, seed):
    """Without Spark: the path source's plan and task reads over a Log written here with random
    interleaved transactions, cut at every offset-index entry (maxBytesPerPartition=1) so splits
    start right after aborts, inside aborted transactions and between a producer's aborted and
    committed ones. Together they read exactly the committed and non-transactional records
    below the LSO; read_uncommitted reads them all."""
    import random

    from kafkacore.storage import Log, LogConfig
    from kafkacore_spark.backends import PathBackend, read_split
    from kafkacore_spark.options import parse_source_options

    from test_storage_transactions import Scenario
    from test_storage_txn_view import history

    rnd = random.Random(seed)
    lg = Log(str(tmp_path / "t-0"), LogConfig({"segment.bytes": 2000, "index.interval.bytes": 1}))
    try:
        s = Scenario(lg)
        for _ in history(s, rnd, 150, pids=(11, 12, 13)):
            pass
        assert s.first, "the history ends with open transactions"  # so the LSO is below the end
        lso = lg.last_stable_offset

        def read(isolation):
            opts = parse_source_options({"path": str(tmp_path), "subscribe": "t", "maxBytesPerPartition": "1",
                                         "kafka.isolation.level": isolation}, streaming=False)
            backend = PathBackend(opts)
            tp = ("t", 0)
            end = backend.latest([tp])[tp]
            splits = backend.plan({tp: (0, end)})
            assert len(splits) > 50
            got = {}
            for split in splits:
                for batch in read_split(split, opts):
                    for o, v in zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist()):
                        assert o not in got
                        got[o] = v
            return end, got

        end, got = read("read_committed")
        assert end == lso < lg.log_end_offset
        assert got == {o: v for o, v in s.visible.items() if o < lso}
        end, got = read("read_uncommitted")
        assert end == lg.log_end_offset and len(got) > len(s.visible)
    finally:
        lg.close()
