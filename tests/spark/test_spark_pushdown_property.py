"""Pruned and pushed reads against the whole read filtered by Spark, over the logs pushdown is
most likely to get wrong (issue 30's property test): a data directory written here by
kafkacore's own storage engine (real Log objects on real files, compacted by the real
LogCleaner), then read through format("kafkacore") on real local Spark.

- partition 0: a compacted log of few keys: offset gaps everywhere, segments emptied by the
  cleaner in the middle of the log, transactional batches (aborted ones removed by the
  cleaner), and records appended after the pass;
- partition 1: interleaved transactions of three producers, committed and aborted, with plain
  records between, ending with a transaction left open (the LSO below the log end);
- partition 2: nothing (one empty segment);
- partition 3: records, then an empty active segment after a roll.

Timestamps are random within a few seconds, out of order within every partition (CreateTime),
so a timestamp lower bound must come from the time index's max-so-far semantics, never from
the order of the records. Each example: random predicates (=, <, <=, >, >=, BETWEEN, IN on
partition, offset and timestamp), a random pruned schema, random split sizes, either isolation
level; the pushed read must give exactly the rows of the unpushed read (cached, so nothing is
pushed into it) followed by Spark's own filter.

The same property is then checked against a broker (broker_data below): its fetches, its
ListOffsets by timestamp and its own log cleaner, over topics written by librdkafka producers."""
import os
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacore.record import RecordBatchBuilder
from kafkacore.storage import Log, LogCleaner, LogConfig
from kafkacore.storage.segment_files import list_segments

from _records import BASE_TS

TOPIC = "prop"
SPREAD_MS = 3000  # timestamps in [BASE_TS, BASE_TS + SPREAD_MS)
NEVER = str(1 << 62)
CONFIG = {"segment.bytes": 1500, "index.interval.bytes": 200, "segment.ms": NEVER, "retention.ms": "-1",
          "file.delete.delay.ms": 0}


class _Writer:
    """Appends plain and transactional batches of random records with random timestamps."""

    def __init__(self, lg, rnd, keys):
        self.lg, self.rnd, self.keys = lg, rnd, keys
        self.seq, self.open = {}, set()
        self.n = 0

    def _batch(self, n, pid=-1, transactional=False):
        seq = self.seq.get(pid, 0) if pid >= 0 else -1
        b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                               transactional=transactional)
        for _ in range(n):
            self.n += 1
            key = b"k%d" % self.rnd.randrange(self.keys)
            b.append(b"v%d-" % self.n * self.rnd.randint(1, 6), key=key,
                     timestamp_ms=BASE_TS + self.rnd.randrange(SPREAD_MS))
        if pid >= 0:
            self.seq[pid] = seq + n
        return b.build()

    def plain(self):
        self.lg.append(self._batch(self.rnd.randint(1, 4)))

    def txn(self, pid):
        self.open.add(pid)
        self.lg.append(self._batch(self.rnd.randint(1, 4), pid, transactional=True))

    def end(self, pid, commit):
        self.open.discard(pid)
        self.lg.append_marker(pid, 0, 0, commit, timestamp_ms=BASE_TS + self.rnd.randrange(SPREAD_MS))

    def history(self, steps, pids):
        for _ in range(steps):
            r = self.rnd.random()
            pid = self.rnd.choice(pids)
            if r < 0.3:
                self.plain()
            elif r < 0.75 or pid not in self.open:
                self.txn(pid)
            else:
                self.end(pid, commit=self.rnd.random() < 0.5)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("pushdown-property")
    rnd = random.Random(30)

    def log(p, **extra):
        return Log(str(root / f"{TOPIC}-{p}"), LogConfig({**CONFIG, **extra}))

    # 0: compacted: the cleaner leaves gaps and emptied segments; more records after the pass
    lg = log(0, **{"cleanup.policy": "compact"})
    w = _Writer(lg, rnd, keys=6)
    w.history(120, pids=(21, 22))
    for pid in sorted(w.open):
        w.end(pid, commit=False)
    for _ in range(30):
        w.plain()
    lg.roll()
    cleaner = LogCleaner(str(tmp_path_factory.mktemp("cleaner")), lambda: {(lg.topic, lg.partition): lg}, background=False)
    assert cleaner.clean_log(lg) is not None
    w.history(20, pids=(21,))
    for pid in sorted(w.open):
        w.end(pid, commit=True)
    lg.close()
    # 1: interleaved transactions, one left open
    lg = log(1)
    w = _Writer(lg, rnd, keys=50)
    w.history(160, pids=(11, 12, 13))
    w.txn(14)  # open: the LSO stays at its first offset
    w.plain()
    lg.close()
    # 2: nothing
    log(2).close()
    # 3: records, then an empty active segment
    lg = log(3)
    w = _Writer(lg, rnd, keys=50)
    for _ in range(60):
        w.plain()
    lg.roll()
    lg.close()

    segs = {p: list_segments(str(root / f"{TOPIC}-{p}")) for p in range(4)}
    assert any(s.size == 0 for s in segs[0][:-1]), "compaction emptied a segment in the middle of the log"
    assert segs[2] and all(s.size == 0 for s in segs[2])
    assert segs[3][-1].size == 0 and len(segs[3]) > 2
    return str(root)


def _read(spark, data_dir, isolation, schema=None, **opts):
    r = (spark.read.format("kafkacore").option("path", data_dir).option("subscribe", TOPIC)
         .option("kafka.isolation.level", isolation))
    if schema is not None:
        r = r.schema(schema)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


@pytest.fixture(scope="module")
def full(spark, data_dir):
    """Each isolation level's whole read, unpushed and held by Spark: its own filter runs on it."""
    out = {iso: _read(spark, data_dir, iso).cache() for iso in ("read_committed", "read_uncommitted")}
    counts = {iso: df.count() for iso, df in out.items()}
    # the open and aborted transactions' records are read uncommitted only
    assert counts["read_uncommitted"] > counts["read_committed"] > 300, counts
    offsets = sorted(r[0] for r in out["read_uncommitted"].filter("partition = 0").select("offset").collect())
    assert any(b - a > 1 for a, b in zip(offsets, offsets[1:])), "compaction left offset gaps in partition 0"
    yield out
    for df in out.values():
        df.unpersist()


_CMP = st.sampled_from(["=", "<", "<=", ">", ">="])
_times = st.integers(BASE_TS - 5, BASE_TS + SPREAD_MS + 5)


def _ts(ms):
    return f"timestamp_millis({ms})"


def _predicates(last_offset):
    """A predicate on partition, offset or timestamp; offsets around 0..last_offset."""
    offsets = st.integers(-2, last_offset + 20)
    return st.one_of(
        st.tuples(_CMP, st.integers(-1, 4)).map(lambda t: f"partition {t[0]} {t[1]}"),
        st.lists(st.integers(-1, 4), min_size=1, max_size=3).map(
            lambda ps: f"partition IN ({', '.join(map(str, ps))})"),
        st.tuples(_CMP, offsets).map(lambda t: f"offset {t[0]} {t[1]}"),
        st.tuples(offsets, st.integers(0, last_offset // 2)).map(
            lambda t: f"offset BETWEEN {t[0]} AND {t[0] + t[1]}"),
        st.lists(offsets, min_size=1, max_size=4).map(lambda os_: f"offset IN ({', '.join(map(str, os_))})"),
        st.tuples(_CMP, _times).map(lambda t: f"timestamp {t[0]} {_ts(t[1])}"),
        st.tuples(_CMP, _times, st.integers(1, 999)).map(
            lambda t: f"timestamp {t[0]} timestamp_micros({t[1] * 1000 + t[2]})"),
        st.tuples(_times, st.integers(0, SPREAD_MS)).map(
            lambda t: f"timestamp BETWEEN {_ts(t[0])} AND {_ts(t[0] + t[1])}"),
        st.lists(_times, min_size=1, max_size=3).map(lambda ts: f"timestamp IN ({', '.join(map(_ts, ts))})"),
    )


# None: every column; otherwise a pruned schema in another order (the filters' columns included)
_SCHEMAS = [None, "offset bigint, timestamp timestamp, partition int",
            "value binary, partition int, timestamp timestamp, offset bigint, key binary"]


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(predicates=st.lists(_predicates(680), min_size=1, max_size=3),
       isolation=st.sampled_from(["read_committed", "read_uncommitted"]),
       schema=st.sampled_from(_SCHEMAS),
       split_bytes=st.sampled_from(["1500", "4096", str(16 << 20)]))
def test_pruned_pushed_read_is_spark_filter_of_the_whole_read(spark, data_dir, full, predicates, isolation, schema,
                                                               split_bytes):
    where = " AND ".join(f"({p})" for p in predicates)
    pushed = _read(spark, data_dir, isolation, schema, maxBytesPerPartition=split_bytes).filter(where)
    cols = ["partition", "offset", "timestamp"] + (["value", "key"] if schema is None or "value" in schema else [])
    got = sorted(tuple(r) for r in pushed.select(*cols).collect())
    expected = sorted(tuple(r) for r in full[isolation].filter(where).select(*cols).collect())
    assert got == expected, (where, isolation, schema, split_bytes)


# -- the same property over a broker: its fetches, its ListOffsets, its cleaner ------------------
# A broker of this module's own, whose log cleaner looks for work every 200 ms: a compacted
# topic's cleaner pass must have run (and settled) before the reads are compared. Topic configs
# are Kafka's: small segments, a dirty ratio that any overwrite passes.
B_COMPACT, B_TXN = "bprop-compact", "bprop-txn"
WAIT = 30


@pytest.fixture(scope="module")
def cleaning_broker(tmp_path_factory):
    from broker_client import BrokerProcess

    settings = {"log.cleaner.backoff.ms": "200", "log.retention.ms": "-1", "num.partitions": "1"}
    with BrokerProcess(tmp_path_factory.mktemp("pushdown-property-broker"), settings) as b:
        yield b


def _settled_cleaning(data_dir, topic, partition):
    """The cleaner's checkpoint for the partition has reached its active segment: every segment
    it may clean is clean, and nothing more is written, so the log no longer changes."""
    from kafkacore.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile

    segs = list_segments(os.path.join(data_dir, f"{topic}-{partition}"))
    done = OffsetCheckpointFile(os.path.join(data_dir, CLEANER_OFFSET_CHECKPOINT)).read().get((topic, partition))
    return len(segs) > 2 and done == segs[-1].base_offset


@pytest.fixture(scope="module")
def broker_data(cleaning_broker):
    """bprop-compact: partition 0 a compacted log of 30 keys (plain records, an aborted and a
    committed transaction) whose cleaner pass left offset gaps and emptied segments; partition
    1 nothing. bprop-txn (delete policy): partitions 0 and 1 interleaved committed and aborted
    transactions of two producers between plain records, partition 1 ending in a transaction
    left open (the LSO below the high watermark); partition 2 nothing. Timestamps random, out
    of order. Written by confluent-kafka (librdkafka) producers, small batches."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = cleaning_broker.bootstrap
    rnd = random.Random(31)
    admin = AdminClient({"bootstrap.servers": bs})
    futures = admin.create_topics([
        NewTopic(B_COMPACT, num_partitions=2, replication_factor=1,
                 config={"cleanup.policy": "compact", "segment.bytes": "1024", "index.interval.bytes": "200",
                         "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}),
        NewTopic(B_TXN, num_partitions=3, replication_factor=1,
                 config={"segment.bytes": "2048", "index.interval.bytes": "200"})])
    for f in futures.values():
        f.result(WAIT)
    small = {"bootstrap.servers": bs, "linger.ms": 0, "batch.num.messages": 3}

    def send(p, topic, partition, n, keys):
        for _ in range(n):
            p.produce(topic, b"v-%d-" % rnd.randrange(10 ** 6) * rnd.randint(1, 4),
                      key=b"k%d" % rnd.randrange(keys), partition=partition,
                      timestamp=BASE_TS + rnd.randrange(SPREAD_MS))
            p.poll(0)
        assert p.flush(WAIT) == 0

    def txn_producer(txn_id, **extra):
        p = ck.Producer({**small, "transactional.id": txn_id, **extra})
        p.init_transactions(WAIT)
        return p

    plain = ck.Producer(small)
    a, b = txn_producer("bprop-a"), txn_producer("bprop-b")
    # the compacted log
    send(plain, B_COMPACT, 0, 150, keys=30)
    a.begin_transaction()
    send(a, B_COMPACT, 0, 12, keys=30)
    a.abort_transaction(WAIT)
    a.begin_transaction()
    send(a, B_COMPACT, 0, 12, keys=30)
    a.commit_transaction(WAIT)
    send(plain, B_COMPACT, 0, 150, keys=30)
    # transactions
    for r in range(10):
        b.begin_transaction()
        send(b, B_TXN, r % 2, rnd.randint(3, 12), keys=100)
        a.begin_transaction()
        send(a, B_TXN, (r + 1) % 2, rnd.randint(3, 12), keys=100)
        (a.commit_transaction if r % 2 else a.abort_transaction)(WAIT)
        send(plain, B_TXN, r % 2, rnd.randint(1, 6), keys=100)
        (b.abort_transaction if r % 3 == 2 else b.commit_transaction)(WAIT)
    held = txn_producer("bprop-open", **{"transaction.timeout.ms": 900_000})
    held.begin_transaction()
    send(held, B_TXN, 1, 7, keys=100)  # left open: partition 1's LSO stays at its first offset
    send(plain, B_TXN, 1, 5, keys=100)

    deadline = time.monotonic() + 60
    while not _settled_cleaning(cleaning_broker.data_dir, B_COMPACT, 0):
        assert time.monotonic() < deadline, "the log cleaner did not clean bprop-compact-0 within 60 s"
        time.sleep(0.2)
    segs = list_segments(os.path.join(cleaning_broker.data_dir, f"{B_COMPACT}-0"))
    assert any(s.size == 0 for s in segs[:-1]), "compaction emptied a segment in the middle of the log"
    yield
    held.abort_transaction(WAIT)


@pytest.fixture(scope="module")
def broker_full(spark, cleaning_broker, broker_data):
    """Each isolation level's whole broker read, unpushed and held by Spark."""
    def read(iso):
        return (spark.read.format("kafkacore").option("kafka.bootstrap.servers", cleaning_broker.bootstrap)
                .option("subscribe", f"{B_COMPACT},{B_TXN}").option("kafka.isolation.level", iso).load())

    out = {iso: read(iso).cache() for iso in ("read_committed", "read_uncommitted")}
    counts = {iso: df.count() for iso, df in out.items()}
    assert counts["read_uncommitted"] > counts["read_committed"] > 100, counts
    # aborted records (not only the open transaction's) are read uncommitted only
    txn0 = {iso: df.filter(f"topic = '{B_TXN}' AND partition = 0").count() for iso, df in out.items()}
    assert txn0["read_uncommitted"] > txn0["read_committed"] > 0, txn0
    offsets = sorted(r[0] for r in out["read_uncommitted"].filter(f"topic = '{B_COMPACT}' AND partition = 0")
                     .select("offset").collect())
    assert offsets and offsets[-1] - offsets[0] + 1 > len(offsets), "compaction left offset gaps"
    assert out["read_uncommitted"].filter(f"topic = '{B_TXN}' AND partition = 2").count() == 0
    yield out
    for df in out.values():
        df.unpersist()


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(predicates=st.lists(_predicates(330), min_size=1, max_size=3),
       isolation=st.sampled_from(["read_committed", "read_uncommitted"]),
       schema=st.sampled_from(_SCHEMAS),
       max_records=st.sampled_from([None, "9", "100"]))
def test_pruned_pushed_broker_read_is_spark_filter_of_the_whole_read(spark, cleaning_broker, broker_full, predicates,
                                                                      isolation, schema, max_records):
    """Pushed ranges against a broker: partitions skipped, offsets cut, timestamp lower bounds by
    ListOffsets; tasks fetch them (maxRecordsPerPartition pieces starting and ending in gaps and
    in aborted transactions)."""
    where = " AND ".join(f"({p})" for p in predicates)
    r = (spark.read.format("kafkacore").option("kafka.bootstrap.servers", cleaning_broker.bootstrap)
         .option("subscribe", f"{B_COMPACT},{B_TXN}").option("kafka.isolation.level", isolation))
    if schema is not None:
        r = r.schema(schema if "topic" in schema else schema + ", topic string")
    if max_records is not None:
        r = r.option("maxRecordsPerPartition", max_records)
    cols = ["topic", "partition", "offset", "timestamp"] + (["value", "key"] if schema is None or "value" in schema
                                                            else [])
    got = sorted(tuple(x) for x in r.load().filter(where).select(*cols).collect())
    expected = sorted(tuple(x) for x in broker_full[isolation].filter(where).select(*cols).collect())
    assert got == expected, (where, isolation, schema, max_records)
