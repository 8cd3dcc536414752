#!/usr/bin/env python3
"""Side-by-side benchmarks of kafkacore's native hot paths against established peers.

    python bench/bench_native.py [--quick] [--json out.json] [--only SUBSTRING]

Every comparison runs both sides in the same process, alternating ours/peer samples so
drift (thermal, other load) hits both alike. A sample times one call of a function that
does a fixed amount of work (perf_counter_ns, GC disabled while timing, collected between
comparisons); each side is warmed up first, and the reported rate comes from the MEDIAN
sample. The number of samples is chosen from the first one so a comparison takes about
two seconds in full mode (a quarter of a second with --quick), but never fewer than 5 (3).

Before timing, each comparison checks that both sides compute the same thing (same
partitions, same decoded values...); a row that fails that check says WRONG.

See bench/README.md for what each row measures. The targets are the project issue's.
"""
import argparse
import datetime
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)  # benchmark the working tree, not some installed copy

import kafkacore  # noqa: E402
from kafkacore import record as kc_record  # noqa: E402
from kafkacore.record import RecordBatchBuilder, decode_to_arrow, iter_batches  # noqa: E402

perf_counter_ns = time.perf_counter_ns

RECORD_BATCH_OVERHEAD = 61  # v2 batch header size; the records section starts here
VALUE_SIZE = 100
RECORDS_PER_BATCH = 1000
BASE_TS = 1_700_000_000_000
NUM_PARTITIONS = 64

# zstd level of the raw reference calls in the overhead rows (see _raw_codec)
ZSTD_LEVEL = 3


# ----------------------------------------------------------------------------- data


def make_values(n, size=VALUE_SIZE, seed=1):
    """n distinct, mildly compressible JSON-ish event payloads of exactly `size` bytes.

    Random bytes would not compress (making the codec rows meaningless) and one repeated
    value would compress absurdly well; this is in between, like real event streams."""
    rnd = random.Random(seed)
    events = [b"click", b"view", b"purchase", b"scroll", b"login", b"logout"]
    out = []
    for i in range(n):
        head = b'{"id":%d,"user":"u%06d","event":"%s","amount":%d.%02d,"ok":%s,"pad":"' % (
            i, rnd.randrange(1_000_000), rnd.choice(events), rnd.randrange(10_000),
            rnd.randrange(100), rnd.choice([b"true", b"false"]))
        body = bytes(rnd.choice(b"abcdefghij") for _ in range(size))
        out.append((head + body)[: size - 2] + b'"}')
    return out


def make_timestamps(n):
    return [BASE_TS + i for i in range(n)]


def make_keys(n):
    return [b"key-%d" % i for i in range(n)]


def build_batches(builder_cls, values, timestamps, n_batches, compression="none"):
    """n_batches batches (consecutive offsets) of the given records, built by kafkacore's
    API (native or twin, whichever builder_cls is)."""
    out = []
    per = len(values)
    for i in range(n_batches):
        b = builder_cls(compression=compression, base_offset=i * per)
        b.extend(values, None, timestamps)
        out.append(b.build())
    return out


# ----------------------------------------------------------------------------- timing


class Side:
    """One side of a comparison: fn() does a fixed amount of work worth `units` units."""

    def __init__(self, fn, units, warmup=None):
        self.fn = fn
        self.units = units
        self.warmup = warmup or fn


class Config:
    def __init__(self, quick, only=None):
        self.quick = quick
        self.only = only.lower() if only else None  # run only rows whose group/name contain this
        self.budget_ns = int((0.25 if quick else 2.0) * 1e9)  # per comparison, both sides
        self.min_samples = 3 if quick else 5
        self.max_samples = 200 if quick else 2000
        # fixed work per sample (quick mode uses less where one sample would be long)
        self.n_keys = 50_000 if quick else 1_000_000
        self.crc_calls = 16 if quick else 64          # 1 MiB buffers per sample
        self.build_batches = 2 if quick else 10       # 1000-record batches per build sample
        self.read_batches = 10 if quick else 100      # 1000-record batches per read sample
        self.codec_batches = 2 if quick else 10
        self.twin_build_batches = 1
        self.twin_read_batches = 2 if quick else 10


def _sample(fn):
    t0 = perf_counter_ns()
    fn()
    return perf_counter_ns() - t0


def run_pair(ours, peer, cfg):
    """Warm both sides, then alternate samples. Returns (ours_ns list, peer_ns list)."""
    gc.collect()
    ours.warmup()
    peer.warmup()
    t_ours, t_peer = [_sample(ours.fn)], [_sample(peer.fn)]
    per_side = cfg.budget_ns // 2

    def samples_for(first):
        # A side whose one sample already takes a quarter of the budget (kafka-python's
        # murmur2 loop over 1M keys) gets 3 samples, not min_samples: its samples are long
        # enough to be steady, and the comparison stays at a few seconds.
        least = 3 if first * 4 > cfg.budget_ns else cfg.min_samples
        return max(least, min(cfg.max_samples, int(per_side // max(first, 1))))

    n_ours, n_peer = samples_for(t_ours[0]), samples_for(t_peer[0])
    while len(t_ours) < n_ours or len(t_peer) < n_peer:
        if len(t_ours) < n_ours:
            t_ours.append(_sample(ours.fn))
        if len(t_peer) < n_peer:
            t_peer.append(_sample(peer.fn))
    return t_ours, t_peer


def _spread(samples):
    """Relative inter-quartile range: a noise indicator for the JSON and the warnings."""
    if len(samples) < 4:
        return (max(samples) - min(samples)) / statistics.median(samples)
    q = statistics.quantiles(samples, n=4)
    return (q[2] - q[0]) / q[1]


class Row:
    def __init__(self, group, what, unit, kind, target=None, peer_name=""):
        self.group, self.what, self.unit, self.kind = group, what, unit, kind
        self.target, self.peer_name = target, peer_name
        self.ours_rate = self.peer_rate = self.ratio = None
        self.met = None
        self.error = None
        self.stats = {}

    def to_json(self):
        return {k: getattr(self, k) for k in ("group", "what", "unit", "kind", "target", "peer_name",
                                              "ours_rate", "peer_rate", "ratio", "met", "error", "stats")}

    @classmethod
    def from_json(cls, d):
        r = cls(d["group"], d["what"], d["unit"], d["kind"], d["target"], d["peer_name"])
        for k in ("ours_rate", "peer_rate", "ratio", "met", "error", "stats"):
            setattr(r, k, d[k])
        return r


def compare(group, what, unit, kind, ours, peer, cfg, target=None, peer_name="", check=None):
    """Run one comparison and return its Row.

    kind "speedup": ratio = ours rate / peer rate, met when >= target.
    kind "overhead": ratio = ours time / reference time - 1, met when <= target.
    kind "info": no target.
    Returns None (without running anything) when --only excludes the row."""
    if cfg.only is not None and cfg.only not in f"{group} {what}".lower():
        return None
    row = Row(group, what, unit, kind, target, peer_name)
    started = time.perf_counter()
    try:
        if check is not None:
            check()
        t_ours, t_peer = run_pair(ours, peer, cfg)
    except Exception as e:  # report and keep going: one broken path must not hide the rest
        row.error = f"{type(e).__name__}: {e}"
        row.met = False
        return row
    m_ours, m_peer = statistics.median(t_ours), statistics.median(t_peer)
    row.ours_rate = ours.units * 1e9 / m_ours
    row.peer_rate = peer.units * 1e9 / m_peer
    if kind == "overhead":
        # same work on both sides, so compare time per unit
        row.ratio = (m_ours / ours.units) / (m_peer / peer.units) - 1.0
        row.met = round(row.ratio * 100, 1) <= target * 100  # judged as printed: 0.1% steps
    else:
        row.ratio = row.ours_rate / row.peer_rate
        row.met = None if kind == "info" else round(row.ratio, 2) >= target  # as printed: 0.01x steps
    row.stats = {
        "ours_median_ns": m_ours, "peer_median_ns": m_peer,
        "ours_units_per_sample": ours.units, "peer_units_per_sample": peer.units,
        "ours_samples": len(t_ours), "peer_samples": len(t_peer),
        "ours_min_ns": min(t_ours), "peer_min_ns": min(t_peer),
        "ours_spread": _spread(t_ours), "peer_spread": _spread(t_peer),
        "elapsed_s": time.perf_counter() - started,
    }
    return row


class Mismatch(AssertionError):
    pass


def expect(cond, msg):
    if not cond:
        raise Mismatch(msg)


# ----------------------------------------------------------------------------- comparisons


CRC_SIZES = [64, 256, 1024, 4096, 65536, 1 << 20]


def _size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1024 else f"{n} B"


def bench_crc(cfg):
    """kafkacore.crc32c against google-crc32c and the crc32c package, per buffer size: one
    row per peer and size (a sample: the same buffer checksummed over and over, 16 MiB in all,
    4 MiB with --quick; the buffer stays in cache, so large sizes measure the kernel, small
    ones mostly the call). Targets (issue 30): >= 1.5x the faster package on 1 MiB, no loss
    (>= 1.0x) below."""
    import crc32c as crc32c_pkg
    import google_crc32c

    ours_crc, g_value, p_crc = kafkacore.crc32c, google_crc32c.value, crc32c_pkg.crc32c
    total = (4 if cfg.quick else 16) << 20
    for size in CRC_SIZES:
        buf = random.Random(7).randbytes(size)
        calls = max(1, total // size)
        units = calls * size
        rng = range(calls)

        def ours(buf=buf, rng=rng):
            for _ in rng:
                ours_crc(buf)

        def google(buf=buf, rng=rng):
            for _ in rng:
                g_value(buf)

        def pkg(buf=buf, rng=rng):
            for _ in rng:
                p_crc(buf)

        def check(buf=buf):
            expect(ours_crc(buf) == g_value(buf) == p_crc(buf), "CRC-32C values differ")
            expect(ours_crc(b"123456789") == 0xE3069283, "CRC-32C check value wrong")

        target = 1.5 if size >= 1 << 20 else 1.0
        name = _size_name(size)
        yield compare("1 crc32c", f"crc32c {name} buffers", "B", "speedup", Side(ours, units),
                      Side(google, units), cfg, target, "google_crc32c.value", check)
        yield compare("1 crc32c", f"crc32c {name} (crc32c pkg)", "B", "speedup", Side(ours, units),
                      Side(pkg, units), cfg, target, "crc32c.crc32c", check)


def bench_partition(cfg):
    from kafka.partitioner.default import murmur2 as kp_murmur2

    keys = make_keys(cfg.n_keys)
    n = NUM_PARTITIONS
    p4k = kafkacore.partitions_for_keys

    def ours():
        p4k(keys, n)

    def peer():
        # what a Python producer does per record with kafka-python's partitioner
        for k in keys:
            (kp_murmur2(k) & 0x7FFFFFFF) % n

    warm_keys = keys[:10_000]

    def peer_warm():
        for k in warm_keys:
            (kp_murmur2(k) & 0x7FFFFFFF) % n

    def check():
        got = p4k(keys[:20_000], n)
        want = [(kp_murmur2(k) & 0x7FFFFFFF) % n for k in keys[:20_000]]
        expect(str(got.dtype) == "int32", f"partitions_for_keys returned {got.dtype}, not int32")
        expect(got.tolist() == want, "partitions differ from kafka-python's murmur2")

    count = f"{len(keys) / 1e6:g}M" if len(keys) >= 1_000_000 else f"{len(keys) // 1000}k"
    yield compare("2 murmur2", f"partition {count} keys, {n} partitions", "key", "speedup",
                  Side(ours, len(keys), warmup=lambda: p4k(warm_keys, n)),
                  Side(peer, len(keys), warmup=peer_warm), cfg, 25.0,
                  "kafka-python murmur2 loop", check)


def _aiokafka_builder():
    from aiokafka.record._crecords import DefaultRecordBatchBuilder

    def new():
        return DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                         producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    return new


def _aiokafka_values(buf):
    from aiokafka.record._crecords import MemoryRecords

    out = []
    mr = MemoryRecords(bytes(buf))
    while mr.has_next():
        for rec in mr.next_batch():
            out.append((rec.offset, rec.timestamp, rec.key, rec.value))
    return out


def build_workloads(builder_cls, values, tss, nb):
    """The append and extend workloads for a builder class (native or twin): nb batches of
    the given values with explicit timestamps, each built."""
    nrec = len(values)

    def append_all():
        for _ in range(nb):
            b = builder_cls()
            app = b.append
            for i in range(nrec):
                app(values[i], None, tss[i])
            b.build()

    def extend_all():
        for _ in range(nb):
            b = builder_cls()
            b.extend(values, None, tss)
            b.build()

    return append_all, extend_all


def kafka_python_build_workload(builder_cls, values, tss, nb):
    """kafka-python's pure-Python builder doing the same work as build_workloads' append."""
    nrec = len(values)
    no_headers = []

    def kp_build():
        for _ in range(nb):
            b = builder_cls(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                            producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
            app = b.append
            for i in range(nrec):
                app(i, tss[i], None, values[i], no_headers)
            b.build()

    return kp_build


def bench_build(cfg):
    """Rows 3 and 4: building uncompressed batches of 1000 x 100-byte records, null keys,
    explicit timestamps (the same ints on both sides), no headers. One sample builds
    `build_batches` batches: construct a builder, add 1000 records, build()."""
    values = make_values(RECORDS_PER_BATCH)
    tss = make_timestamps(RECORDS_PER_BATCH)
    nrec = len(values)
    nb = cfg.build_batches
    units = nb * nrec
    aio_new = _aiokafka_builder()
    no_headers = []

    ours_append, ours_extend = build_workloads(RecordBatchBuilder, values, tss, nb)

    def peer():
        for _ in range(nb):
            b = aio_new()
            app = b.append
            for i in range(nrec):
                app(i, tss[i], None, values[i], no_headers)
            b.build()

    want = [(i, tss[i], None, values[i]) for i in range(nrec)]

    def check_append():
        b = RecordBatchBuilder()
        for i in range(nrec):
            b.append(values[i], None, tss[i])
        expect(_aiokafka_values(b.build()) == want, "aiokafka reads different records from append+build")
        p = aio_new()
        for i in range(nrec):
            p.append(i, tss[i], None, values[i], no_headers)
        expect(_aiokafka_values(p.build()) == want, "peer builder self-check failed")

    def check_extend():
        b = RecordBatchBuilder()
        b.extend(values, None, tss)
        expect(_aiokafka_values(b.build()) == want, "aiokafka reads different records from extend+build")

    import numpy as np

    tss_np = np.array(tss, dtype=np.int64)

    def ours_extend_np():
        for _ in range(nb):
            b = RecordBatchBuilder()
            b.extend(values, None, tss_np)
            b.build()

    def check_extend_np():
        b = RecordBatchBuilder()
        b.extend(values, None, tss_np)
        expect(_aiokafka_values(b.build()) == want, "aiokafka reads different records from extend(numpy ts)")

    yield compare("3 append", "append+build 1000 x 100 B", "rec", "speedup", Side(ours_append, units),
                  Side(peer, units), cfg, 1.5, "aiokafka Cython builder", check_append)
    yield compare("4 extend", "extend+build 1000 x 100 B", "rec", "speedup", Side(ours_extend, units),
                  Side(peer, units), cfg, 4.0, "aiokafka Cython builder", check_extend)
    # information: the same with the timestamps as a numpy int64 array instead of a list
    yield compare("4 extend", "extend+build, numpy timestamps", "rec", "info", Side(ours_extend_np, units),
                  Side(peer, units), cfg, None, "aiokafka Cython builder", check_extend_np)


def _aiokafka_iterate(buf):
    from aiokafka.record._crecords import MemoryRecords

    def peer():
        mr = MemoryRecords(buf)
        while mr.has_next():
            for rec in mr.next_batch():
                rec.value
    return peer


def bench_read(cfg):
    """Rows 5 and 6 over one buffer of `read_batches` uncompressed batches of 1000 x 100 B
    (a fetch response's worth). The peer is aiokafka's Cython MemoryRecords/DefaultRecordBatch
    iteration touching rec.value: the least work any consumer does per record, so it is the
    demanding baseline for decode_to_arrow too, which also fills the key, offset, timestamp,
    timestampType and headers columns and checks every batch's CRC."""
    values = make_values(RECORDS_PER_BATCH)
    tss = make_timestamps(RECORDS_PER_BATCH)
    buf = b"".join(build_batches(RecordBatchBuilder, values, tss, cfg.read_batches))
    units = cfg.read_batches * len(values)
    peer = _aiokafka_iterate(buf)

    def ours_iter():
        for batch in iter_batches(buf):
            for rec in batch:
                rec.value

    def ours_arrow():
        decode_to_arrow(buf)

    def check_iter():
        got = [(r.offset, r.timestamp_ms, r.key, r.value) for b in iter_batches(buf) for r in b]
        expect(got == _aiokafka_values(buf), "iter_batches and aiokafka read different records")

    def check_arrow():
        t = decode_to_arrow(buf)
        expect(t.num_rows == units, f"decode_to_arrow gave {t.num_rows} rows, expected {units}")
        expect(t.column("value").to_pylist() == values * cfg.read_batches, "decode_to_arrow values differ")
        expect(t.column("offset").to_pylist() == list(range(units)), "decode_to_arrow offsets differ")

    yield compare("5 iterate", f"iterate {cfg.read_batches} x 1000 x 100 B", "rec", "speedup",
                  Side(ours_iter, units), Side(peer, units), cfg, 1.2, "aiokafka Cython iterate", check_iter)
    def ours_arrow_nocrc():
        decode_to_arrow(buf, check_crcs=False)

    yield compare("6 arrow", f"decode_to_arrow {cfg.read_batches} x 1000 x 100 B", "rec", "speedup",
                  Side(ours_arrow, units), Side(peer, units), cfg, 3.5, "aiokafka Cython iterate", check_arrow)
    # information: one 1000-record batch (a small fetch) with topic and partition given, as
    # Spark's source always does: shows decode_to_arrow's fixed cost per call
    one = build_batches(RecordBatchBuilder, values, tss, 1)[0]
    one_peer = _aiokafka_iterate(one)

    def ours_arrow_small():
        decode_to_arrow(one, topic="events", partition=3)

    def check_small():
        t = decode_to_arrow(one, topic="events", partition=3)
        expect(t.column("topic").to_pylist() == ["events"] * len(values), "topic column differs")
        expect(t.column("partition").to_pylist() == [3] * len(values), "partition column differs")

    yield compare("6 arrow", "decode_to_arrow 1 x 1000, topic+partition", "rec", "info",
                  Side(ours_arrow_small, len(values)), Side(one_peer, len(values)), cfg, None,
                  "aiokafka Cython iterate", check_small)
    # information: aiokafka's iteration does not verify CRCs; this is decode_to_arrow without it
    yield compare("6 arrow", "decode_to_arrow, check_crcs=False", "rec", "info",
                  Side(ours_arrow_nocrc, units), Side(peer, units), cfg, None, "aiokafka Cython iterate",
                  lambda: expect(decode_to_arrow(buf, check_crcs=False).num_rows == units, "row count differs"))


def txn_buffer(values, tss, n_txns, compression="none"):
    """n_txns transactions of one 1000-record batch each, producers 1 and 2 alternating,
    every other one aborted (ABORT markers), as a read_committed fetch returns them: the
    buffer, the Fetch response's aborted list, the committed records' offsets."""
    from kafkacore.record.control import end_txn_marker_batch
    parts, aborted, committed = [], [], []
    per = len(values)
    offset = 0
    for i in range(n_txns):
        pid = 1 + i % 2
        b = RecordBatchBuilder(compression=compression, base_offset=offset)
        b.set_producer_state(pid, 0, 0, transactional=True)
        b.extend(values, None, tss)
        parts.append(b.build())
        commit = i % 2 == 0
        if commit:
            committed += range(offset, offset + per)
        else:
            aborted.append((pid, offset))
        parts.append(end_txn_marker_batch(pid, 0, 0, commit, BASE_TS, base_offset=offset + per))
        offset += per + 1
    return b"".join(parts), aborted, committed


def bench_read_committed(cfg):
    """Row 6 (information): decode_to_arrow of `read_batches` transactions of 1000 x 100 B,
    half of them aborted, with the Fetch response's aborted list (read_committed: the
    aborted batches are CRC-checked and dropped, never decoded or decompressed) against
    the same call without it (read_uncommitted: every record decoded). Rates are in input
    records, so the ratio is the time saved."""
    values = make_values(RECORDS_PER_BATCH)
    tss = make_timestamps(RECORDS_PER_BATCH)
    nb = cfg.read_batches
    for codec in ("none", "lz4"):
        buf, aborted, committed = txn_buffer(values, tss, nb, codec)
        units = nb * len(values)

        def committed_side(buf=buf, aborted=aborted):
            decode_to_arrow(buf, aborted=aborted)

        def uncommitted_side(buf=buf):
            decode_to_arrow(buf)

        def check(buf=buf, aborted=aborted, committed=committed):
            t = decode_to_arrow(buf, aborted=aborted)
            expect(t.column("offset").to_pylist() == committed, "read_committed rows are not the committed records")
            expect(decode_to_arrow(buf).num_rows == units, "read_uncommitted does not read every record")

        yield compare("6 arrow", f"decode_to_arrow half aborted, {codec}", "rec",
                      "info", Side(committed_side, units), Side(uncommitted_side, units), cfg, None,
                      "same, aborted=None", check)


def _raw_codec(name):
    import lz4.frame
    import zstandard

    # The framing Kafka specifies (and kafkacore.record.codecs documents): LZ4 frames of
    # independent 64 KiB blocks without content checksum or size; zstd at its default
    # level 3. So the raw call does the same compression work as the batch path.
    if name == "lz4":
        args = dict(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, content_checksum=False,
                    store_size=False)
        return (lambda d: lz4.frame.compress(d, **args)), lz4.frame.decompress
    zc = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    zd = zstandard.ZstdDecompressor()
    return zc.compress, zd.decompress


def bench_codecs(cfg):
    """Row 7: what kafkacore adds on top of the codec itself, per codec.

    The reference does the same codec work by hand with the same library and the same
    framing settings, around kafkacore's own uncompressed path, so the difference is the
    batch path's overhead (extra copies, framing, dispatch), not the codec:

      build:   ours = RecordBatchBuilder(compression=codec) + extend + build()
               ref  = RecordBatchBuilder("none") + extend + build() + raw compress of the
                      records section (prepared once from an uncompressed batch)
      iterate: ours = iter_batches over compressed batches, touching rec.value
               ref  = raw decompress of each records section + the same iteration over the
                      uncompressed batches
      arrow:   ours = decode_to_arrow(compressed batches)
               ref  = raw decompress of each records section + decode_to_arrow(uncompressed)

    The reference's build and decode_to_arrow CRC the uncompressed bytes while ours CRC the
    (smaller) compressed ones; that favours ours by a few microseconds per 100 KB batch,
    small next to the codec. Overhead = ours time / reference time - 1 (target <= 10%)."""
    values = make_values(RECORDS_PER_BATCH)
    tss = make_timestamps(RECORDS_PER_BATCH)
    nb = cfg.codec_batches
    units = nb * len(values) * VALUE_SIZE  # rates are in uncompressed value bytes
    plain = build_batches(RecordBatchBuilder, values, tss, nb)
    plain_buf = b"".join(plain)
    section = plain[0][RECORD_BATCH_OVERHEAD:]  # the uncompressed records section, built once

    for codec in ("lz4", "zstd"):
        compress, decompress = _raw_codec(codec)
        comp = build_batches(RecordBatchBuilder, values, tss, nb, compression=codec)
        comp_buf = b"".join(comp)
        comp_sections = [c[RECORD_BATCH_OVERHEAD:] for c in comp]

        def ours_build(codec=codec):
            for _ in range(nb):
                b = RecordBatchBuilder(compression=codec)
                b.extend(values, None, tss)
                b.build()

        def ref_build(compress=compress):
            for _ in range(nb):
                b = RecordBatchBuilder()
                b.extend(values, None, tss)
                b.build()
                compress(section)

        def ours_iter(comp_buf=comp_buf):
            for batch in iter_batches(comp_buf):
                for rec in batch:
                    rec.value

        def ref_iter(decompress=decompress, comp_sections=comp_sections):
            for s in comp_sections:
                decompress(s)
            for batch in iter_batches(plain_buf):
                for rec in batch:
                    rec.value

        def ours_arrow(comp_buf=comp_buf):
            decode_to_arrow(comp_buf)

        def ref_arrow(decompress=decompress, comp_sections=comp_sections):
            for s in comp_sections:
                decompress(s)
            decode_to_arrow(plain_buf)

        def check_build(codec=codec, compress=compress, decompress=decompress, comp=comp):
            raw = compress(section)
            ours_section = comp[0][RECORD_BATCH_OVERHEAD:]
            expect(decompress(ours_section) == section, f"{codec} batch does not decompress to the records")
            # same settings -> the same compression work; allow a little framing difference
            expect(abs(len(raw) - len(ours_section)) <= max(64, len(raw) // 50),
                   f"{codec}: batch section {len(ours_section)} B vs raw {len(raw)} B: not like-for-like")
            got = [(r.offset, r.value) for r in next(iter(iter_batches(comp[0])))]
            expect(got == list(enumerate(values)), f"{codec} batch reads back different records")

        def check_arrow(comp_buf=comp_buf):
            t = decode_to_arrow(comp_buf)
            expect(t.column("value").to_pylist() == values * nb, "decode_to_arrow of compressed batches differs")

        tag = f"{nb} x 1000 x 100 B"
        yield compare("7 codecs", f"{codec} build overhead, {tag}", "B", "overhead", Side(ours_build, units),
                      Side(ref_build, units), cfg, 0.10, f"build(none) + {codec} raw", check_build)
        yield compare("7 codecs", f"{codec} iterate overhead, {tag}", "B", "overhead", Side(ours_iter, units),
                      Side(ref_iter, units), cfg, 0.10, f"{codec} raw + iterate(none)", None)
        yield compare("7 codecs", f"{codec} arrow overhead, {tag}", "B", "overhead", Side(ours_arrow, units),
                      Side(ref_arrow, units), cfg, 0.10, f"{codec} raw + arrow(none)", check_arrow)


def bench_twins(cfg):
    """Row 8 (information): the pure-Python twins against kafka-python's pure-Python
    record classes, same workloads as rows 3-6 but fewer batches per sample. Runs in a
    child process with KAFKACORE_NO_EXTENSIONS=1, so the twins use the pure-Python CRC-32C
    too; note that kafka-python uses the `crc32c` C package for its CRC when installed."""
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
    from kafka.record.memory_records import MemoryRecords as KpMemoryRecords
    from kafkacore.record import batch_py

    assert not kafkacore.native_extensions(), "twins child must run without extensions"
    Builder = batch_py.RecordBatchBuilder
    values = make_values(RECORDS_PER_BATCH)
    tss = make_timestamps(RECORDS_PER_BATCH)
    nrec = len(values)
    nb = cfg.twin_build_batches

    ours_append, ours_extend = build_workloads(Builder, values, tss, nb)

    kp_build = kafka_python_build_workload(KpBuilder, values, tss, nb)

    rb = cfg.twin_read_batches
    buf = b"".join(build_batches(Builder, values, tss, rb))

    def ours_iter():
        for batch in batch_py.iter_batches(buf):
            for rec in batch:
                rec.value

    def ours_arrow():
        kc_record.decode_to_arrow(buf)

    def kp_iter():
        mr = KpMemoryRecords(buf)
        while mr.has_next():
            for rec in mr.next_batch():
                rec.value

    def check():
        b = Builder()
        b.extend(values, None, tss)
        mr = KpMemoryRecords(b.build())
        got = [(r.offset, r.timestamp, r.key, r.value) for r in mr.next_batch()]
        expect(got == [(i, tss[i], None, values[i]) for i in range(nrec)], "kafka-python reads the twin differently")

    bu, ru = nb * nrec, rb * nrec
    yield compare("8 twins", "twin append+build 1000 x 100 B", "rec", "info", Side(ours_append, bu),
                  Side(kp_build, bu), cfg, None, "kafka-python builder", check)
    yield compare("8 twins", "twin extend+build 1000 x 100 B", "rec", "info", Side(ours_extend, bu),
                  Side(kp_build, bu), cfg, None, "kafka-python builder", None)
    yield compare("8 twins", f"twin iterate {rb} x 1000 x 100 B", "rec", "info", Side(ours_iter, ru),
                  Side(kp_iter, ru), cfg, None, "kafka-python iterate", None)
    yield compare("8 twins", f"twin decode_to_arrow {rb} x 1000", "rec", "info", Side(ours_arrow, ru),
                  Side(kp_iter, ru), cfg, None, "kafka-python iterate", None)


def bench_twin_native_crc(cfg):
    """Row 8, information, in this process: the twin builder with kafkacore.checksum's
    crc32c (the compiled one when built), to show how much of the twin's build time is its
    pure-Python CRC-32C. kafka-python's builder uses the `crc32c` C package likewise."""
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
    from kafkacore import checksum
    from kafkacore.record import batch_py

    if checksum._native is None:
        return
    values = make_values(RECORDS_PER_BATCH)
    tss = make_timestamps(RECORDS_PER_BATCH)
    nrec = len(values)
    nb = cfg.twin_build_batches

    def ours():
        for _ in range(nb):
            b = batch_py.RecordBatchBuilder()
            app = b.append
            for i in range(nrec):
                app(values[i], None, tss[i])
            b.build()

    kp_build = kafka_python_build_workload(KpBuilder, values, tss, nb)

    yield compare("8 twins", "twin append+build, native CRC", "rec", "info", Side(ours, nb * nrec),
                  Side(kp_build, nb * nrec), cfg, None, "kafka-python builder", None)


def run_twins_child(cfg, only):
    """Runs bench_twins in a fresh interpreter with the extensions disabled."""
    env = dict(os.environ, KAFKACORE_NO_EXTENSIONS="1")
    env.pop("KAFKACORE_REQUIRE_EXTENSIONS", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--twins-child"]
    if cfg.quick:
        cmd.append("--quick")
    if only:
        cmd += ["--only", only]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        row = Row("8 twins", "twins (child process)", "rec", "info")
        row.error = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return [row]
    return [Row.from_json(d) for d in json.loads(proc.stdout)]


# ----------------------------------------------------------------------------- reporting


def _dist_version(name):
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_info():
    model, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        model = platform.processor() or "unknown"
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    from kafkacore import checksum, partitioner

    native = {m: (mod._native is not None) for m, mod in
              (("crc", checksum), ("murmur2", partitioner), ("records", kc_record))}
    import_errors = {}
    from kafkacore._loader import extensions_disabled

    if not extensions_disabled():
        import importlib

        for name, ok in native.items():
            if not ok:
                try:
                    importlib.import_module(f"kafkacore._ext.{name}")
                except ImportError as e:
                    import_errors[name] = str(e)
    hw = None
    if checksum._native is not None and hasattr(checksum._native, "hardware_available"):
        hw = bool(checksum._native.hardware_available())
        if hasattr(checksum._native, "implementation"):
            hw = checksum._native.implementation()
    libs = ["kafkacore", "numpy", "pyarrow", "lz4", "zstandard", "cramjam", "google-crc32c", "crc32c",
            "kafka-python", "aiokafka", "Cython"]
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu_flags": sorted(flags & {"sse4_2", "pclmulqdq", "avx2", "avx512f", "vpclmulqdq"}),
        "loadavg_start": load,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "versions": {lib: (kafkacore.__version__ if lib == "kafkacore" else _dist_version(lib)) for lib in libs},
        "kafkacore_native": native,
        "kafkacore_native_import_errors": import_errors,
        "kafkacore_crc_hardware": hw,
        "env": {k: v for k, v in os.environ.items() if k.startswith("KAFKACORE_")},
    }


def _fmt_rate(rate, unit):
    if rate is None:
        return "-"
    if unit == "B":
        return f"{rate / 1e9:.2f} GB/s" if rate >= 1e9 else f"{rate / 1e6:.0f} MB/s"
    name = {"rec": "rec/s", "key": "keys/s"}[unit]
    if rate >= 1e6:
        return f"{rate / 1e6:.2f} M {name}"
    return f"{rate / 1e3:.1f} k {name}"


def _fmt_ratio(row):
    if row.ratio is None:
        return "-"
    if row.kind == "overhead":
        return f"{row.ratio * 100:+.1f}%"
    return f"{row.ratio:.2f}x"


def _fmt_target(row):
    if row.kind == "info":
        return "info"
    if row.kind == "overhead":
        return f"<= {row.target * 100:.0f}%"
    return f">= {row.target:g}x"


def _fmt_met(row):
    if row.error:
        return "WRONG" if "Mismatch" in row.error else "ERROR"
    if row.met is None:
        return "-"
    return "yes" if row.met else "NO"


def print_header(info, cfg):
    print(f"kafkacore bench_native  ({'quick' if cfg.quick else 'full'} mode)  {info['date']}")
    print(f"CPU: {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable), "
          f"flags: {' '.join(info['cpu_flags']) or '-'}, loadavg {info['loadavg_start']}")
    print(f"Python: {info['python']}")
    print(f"Platform: {info['platform']}")
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    nat = info["kafkacore_native"]
    print("kafkacore native modules: " + ", ".join(f"{k}={'native' if v else 'TWIN'}" for k, v in nat.items())
          + (f", crc hardware={info['kafkacore_crc_hardware']}" if info["kafkacore_crc_hardware"] is not None else ""))
    if not all(nat.values()):
        print("WARNING: not all native extensions are in use; 'ours' includes pure-Python twins "
              "for the modules marked TWIN.")
        for name, err in info["kafkacore_native_import_errors"].items():
            print(f"  kafkacore._ext.{name} failed to import: {err}")
    print(flush=True)


COLUMNS = [("what", 41), ("ours", 16), ("peer", 16), ("ratio", 8), ("target", 8), ("met", 5), ("peer is", 28)]


def print_table_header():
    print("  ".join(f"{name:<{w}}" for name, w in COLUMNS))
    print("  ".join("-" * w for _, w in COLUMNS), flush=True)


def print_row(row):
    cells = [row.what, _fmt_rate(row.ours_rate, row.unit), _fmt_rate(row.peer_rate, row.unit), _fmt_ratio(row),
             _fmt_target(row), _fmt_met(row), row.peer_name]
    print("  ".join(f"{c:<{w}}" for c, (_, w) in zip(cells, COLUMNS)).rstrip(), flush=True)


def print_footer(rows):
    errors = [r for r in rows if r.error]
    noisy = [r for r in rows if r.stats and max(r.stats["ours_spread"], r.stats["peer_spread"]) > 0.15]
    targets = [r for r in rows if r.kind != "info"]
    met = sum(1 for r in targets if r.met)
    print()
    print(f"targets met: {met}/{len(targets)}")
    for r in errors:
        print(f"  {_fmt_met(r)} {r.what}: {r.error}")
    for r in noisy:
        print(f"  noisy: {r.what}: inter-quartile spread ours {r.stats['ours_spread']:.0%}, "
              f"peer {r.stats['peer_spread']:.0%} (re-run on a quiet machine)")
    try:
        print(f"loadavg at end: {os.getloadavg()}")
    except OSError:
        pass


BENCHES = [bench_crc, bench_partition, bench_build, bench_read, bench_read_committed, bench_codecs]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller samples, ~0.25 s per comparison")
    ap.add_argument("--json", metavar="PATH", help="also write machine info and all rows as JSON")
    ap.add_argument("--only", metavar="SUBSTRING", help="run only rows whose group or name contains this")
    ap.add_argument("--no-twins", action="store_true", help="skip row 8 (pure-Python twins subprocess)")
    ap.add_argument("--require-native", action="store_true",
                    help="exit with status 2 unless every kafkacore module is the compiled one")
    ap.add_argument("--twins-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cfg = Config(args.quick, args.only)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # collected explicitly between comparisons; no collector pauses inside samples
    try:
        if args.twins_child:
            rows = [r for r in bench_twins(cfg) if r is not None]
            json.dump([r.to_json() for r in rows], sys.stdout)
            return 0

        info = machine_info()
        print_header(info, cfg)
        if args.require_native and not all(info["kafkacore_native"].values()):
            print("--require-native: some kafkacore modules are pure-Python twins; not benchmarking.")
            return 2
        print_table_header()
        rows = []
        for bench in BENCHES:
            for row in bench(cfg):
                if row is not None:
                    rows.append(row)
                    print_row(row)
        if not args.no_twins:
            for row in run_twins_child(cfg, args.only):
                rows.append(row)
                print_row(row)
            for row in bench_twin_native_crc(cfg):
                if row is not None:
                    rows.append(row)
                    print_row(row)
        print_footer(rows)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": info, "mode": "quick" if cfg.quick else "full",
                           "rows": [r.to_json() for r in rows]}, f, indent=2)
            print(f"wrote {args.json}")
        return 1 if any(r.error for r in rows) else 0
    finally:
        if gc_was_enabled:
            gc.enable()


if __name__ == "__main__":
    sys.exit(main())
