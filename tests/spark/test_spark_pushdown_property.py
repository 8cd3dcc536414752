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
pushed into it) followed by Spark's own filter."""
import random

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
_offsets = st.integers(-2, 700)
_times = st.integers(BASE_TS - 5, BASE_TS + SPREAD_MS + 5)


def _ts(ms):
    return f"timestamp_millis({ms})"


_predicates = st.one_of(
    st.tuples(_CMP, st.integers(-1, 4)).map(lambda t: f"partition {t[0]} {t[1]}"),
    st.lists(st.integers(-1, 4), min_size=1, max_size=3).map(lambda ps: f"partition IN ({', '.join(map(str, ps))})"),
    st.tuples(_CMP, _offsets).map(lambda t: f"offset {t[0]} {t[1]}"),
    st.tuples(_offsets, st.integers(0, 300)).map(lambda t: f"offset BETWEEN {t[0]} AND {t[0] + t[1]}"),
    st.lists(_offsets, min_size=1, max_size=4).map(lambda os_: f"offset IN ({', '.join(map(str, os_))})"),
    st.tuples(_CMP, _times).map(lambda t: f"timestamp {t[0]} {_ts(t[1])}"),
    st.tuples(_CMP, _times, st.integers(1, 999)).map(
        lambda t: f"timestamp {t[0]} timestamp_micros({t[1] * 1000 + t[2]})"),
    st.tuples(_times, st.integers(0, SPREAD_MS)).map(lambda t: f"timestamp BETWEEN {_ts(t[0])} AND {_ts(t[0] + t[1])}"),
    st.lists(_times, min_size=1, max_size=3).map(lambda ts: f"timestamp IN ({', '.join(map(_ts, ts))})"),
)
# None: every column; otherwise a pruned schema in another order (the filters' columns included)
_SCHEMAS = [None, "offset bigint, timestamp timestamp, partition int",
            "value binary, partition int, timestamp timestamp, offset bigint, key binary"]


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(predicates=st.lists(_predicates, min_size=1, max_size=3),
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
