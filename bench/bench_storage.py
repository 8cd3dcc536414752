#!/usr/bin/env python3
"""Side-by-side benchmark of kafkacore's storage engine against the system's own tools.

    python bench/bench_storage.py [--quick] [--json out.json] [--only SECTION] [--workdir DIR]

One run measures, on the same disk and in the same run:

1. append: Log.append of 1 MiB and of 16 KiB batches beside `fio` (psync, sequential buffered
   writes, no fsync) and `dd if=/dev/zero` with the same block size and total bytes; the ratio
   is ours / the better of the two. Targets >= 0.5x (1 MiB) and >= 0.3x (16 KiB).
2. read: Log.read(offset, 1 MiB) + os.sendfile of the slice to a loopback TCP socket drained
   by another process, beside `iperf3` over loopback. Target >= 0.5x.
3. lookup: Log.read(offset, 1) at random offsets of a 1 GiB log of ~1 KiB batches, each call
   timed alone; target median < 5 us. (segment.translate_offset alone is shown too.)
4. recovery: reopening that log without the clean-shutdown marker (recovery point 0), beside a
   plain pread + CRC-32C of the same bytes (information).
5. compaction: LogCleaner.clean_log of a compacted topic, uncompressed and lz4 (information).
6. the pure-Python twins (KAFKACORE_NO_EXTENSIONS=1, in a child process, smaller sizes) for the
   lookup and append paths (information).

Page-cache fairness: every write sample (ours, fio, dd) starts on a fresh file in the same
directory and its files are deleted right after (dirty pages dropped, never written back), and
right before each sample the same amount is written to a scratch file and deleted (twice), so
every side is likely to get page-cache pages the kernel (and, on a VM, the host) has just had in
use. Samples of the sides alternate, in a rotating order, and the reported rate is the median
(the best samples are in the notes, every sample in the JSON).

See bench/README.md for details. fio and iperf3 are installed by ci/bench_deps.sh when missing.
"""
import argparse
import bisect
import datetime
import gc
import json
import multiprocessing
import os
import platform
import random
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)  # benchmark the working tree, not some installed copy

import kafkacore  # noqa: E402
from kafkacore.checksum import crc32c  # noqa: E402
from kafkacore.record import RecordBatchBuilder, iter_batches  # noqa: E402
from kafkacore.storage import Log, LogCleaner, LogConfig  # noqa: E402
from kafkacore.storage._hot import IS_NATIVE as STORAGE_NATIVE  # noqa: E402

perf_counter_ns = time.perf_counter_ns

MiB = 1 << 20
GiB = 1 << 30
BASE_TS = 1_700_000_000_000
BATCH_OVERHEAD = 61
SECTIONS = ("append", "lookup", "read", "recovery", "compaction", "twins")

# The read/lookup/recovery log: every batch exactly SMALL_BATCH bytes holding SMALL_RECORDS
# records, so offsets map to positions by arithmetic (for checks and for the read loop).
SMALL_BATCH = 1024
SMALL_RECORDS = 4


class Config:
    def __init__(self, quick):
        self.quick = quick
        self.append_bytes = 64 * MiB if quick else 1536 * MiB  # per write sample; > segment.bytes: a roll
        self.append_rounds = 2 if quick else 5
        self.distinct_batches = 8
        self.log_bytes = 64 * MiB if quick else GiB            # read / lookup / recovery log
        self.lookups = 20_000 if quick else 200_000
        self.read_seconds = 1.0 if quick else 5.0              # per side per round (iperf3 -t)
        self.read_rounds = 1 if quick else 3
        self.recovery_rounds = 1 if quick else 3
        self.compact_bytes = 32 * MiB if quick else 256 * MiB
        self.compact_keys = 10_000 if quick else 100_000
        self.compact_segment_bytes = 8 * MiB if quick else 64 * MiB
        self.twin_seconds = 1.0 if quick else 3.0              # per twin append row
        self.twin_lookups = 1_000 if quick else 5_000


# ----------------------------------------------------------------------------- rows


class Row:
    """kind "speedup": ratio = ours / peer, met when >= target. "latency": ours is a median in
    microseconds, met when < target. "info": no target."""

    def __init__(self, group, what, unit, kind, target=None, peer_name=""):
        self.group, self.what, self.unit, self.kind = group, what, unit, kind
        self.target, self.peer_name = target, peer_name
        self.ours = self.peer = self.ratio = None
        self.met = None
        self.error = None
        self.note = ""
        self.stats = {}

    def finish(self, ours, peer=None):
        self.ours, self.peer = ours, peer
        if self.kind == "latency":
            self.met = round(ours, 2) < self.target  # judged as printed
            return self
        if peer:
            self.ratio = ours / peer
        if self.kind == "speedup":
            self.met = self.ratio is not None and round(self.ratio, 2) >= self.target
        return self

    def to_json(self):
        return {k: getattr(self, k) for k in ("group", "what", "unit", "kind", "target", "peer_name", "ours",
                                              "peer", "ratio", "met", "error", "note", "stats")}

    @classmethod
    def from_json(cls, d):
        r = cls(d["group"], d["what"], d["unit"], d["kind"], d["target"], d["peer_name"])
        for k in ("ours", "peer", "ratio", "met", "error", "note", "stats"):
            setattr(r, k, d[k])
        return r


class Mismatch(AssertionError):
    pass


def expect(cond, msg):
    if not cond:
        raise Mismatch(msg)


def median(xs):
    return statistics.median(xs) if xs else None


def percentile(sorted_xs, p):
    if not sorted_xs:
        return None
    i = min(len(sorted_xs) - 1, max(0, int(round(p / 100 * len(sorted_xs) + 0.5)) - 1))
    return sorted_xs[i]


# ----------------------------------------------------------------------------- data


def batch_of_size(size, value_size, rnd, ts0, builder=RecordBatchBuilder):
    """An uncompressed batch of exactly `size` bytes: records of `value_size` random bytes
    (null keys), the last record's value sized to fill the batch exactly."""
    n = max(1, (size - BATCH_OVERHEAD) // (value_size + 11))
    values = [rnd.randbytes(value_size) for _ in range(n - 1)]
    tail = rnd.randbytes(2 * value_size + 64)
    w = value_size
    for _ in range(32):
        if w < 0 or w > len(tail):
            break
        b = builder()
        b.extend(values + [tail[:w]], None, [ts0 + i for i in range(n)])
        data = b.build()
        if len(data) == size:
            return data, n
        w += size - len(data)
    raise RuntimeError(f"cannot build a batch of exactly {size} bytes from {value_size}-byte values")


class DeferredScheduler:
    """Keeps the jobs a Log schedules (the rolled segment's background fsync) instead of running
    them inline: in a broker they run on the scheduler thread, and none of the peers fsyncs.
    The benchmark drops them (the files are deleted unflushed)."""

    def __init__(self):
        self.jobs = []

    def schedule(self, delay_ms, fn, period_ms=None):
        self.jobs.append(fn)

    def shutdown(self, run_pending=False):
        pass


def discard_log(lg):
    """Closes a log's descriptors without flushing and deletes its directory."""
    for seg in lg.segments:
        seg.offset_index.close()
        seg.time_index.close()
        seg.file.close()
    lg.closed = True
    shutil.rmtree(lg.dir, ignore_errors=True)


def prime_page_cache(workdir, nbytes, passes=2):
    """Writes nbytes to a scratch file and deletes it, `passes` times. Afterwards the free pages
    the next writer gets are ones just used, as they would be in a steady broker. Without this,
    a VM whose free memory is handed back to the host (free page reporting) pays a host fault
    per fresh page, and the side that happens to get such pages looks 5-10x slower. Returns
    the rate of each pass (B/s), for the JSON."""
    path = os.path.join(workdir, "prime.tmp")
    buf = bytearray(MiB)
    rates = []
    for _ in range(passes):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        t0 = time.perf_counter()
        pos = 0
        while pos < nbytes:
            pos += os.pwrite(fd, buf, pos)
        rates.append(nbytes / (time.perf_counter() - t0))
        os.close(fd)
        os.unlink(path)
    return rates


# ----------------------------------------------------------------------------- tools


DEPS_SCRIPT = os.path.join(ROOT, "ci", "bench_deps.sh")


def ensure_tools(install=True):
    """fio, iperf3 and dd on PATH; runs ci/bench_deps.sh to install fio/iperf3 when missing.
    Returns None when all are there, else a message saying what is missing."""
    missing = [t for t in ("fio", "iperf3", "dd") if shutil.which(t) is None]
    if not missing:
        return None
    if install and os.path.exists(DEPS_SCRIPT):
        print(f"{', '.join(missing)} not found; running {os.path.relpath(DEPS_SCRIPT, ROOT)}", flush=True)
        subprocess.run(["bash", DEPS_SCRIPT])
        missing = [t for t in ("fio", "iperf3", "dd") if shutil.which(t) is None]
        if not missing:
            return None
    return (f"missing tools: {', '.join(missing)}. Install them (as root: ci/bench_deps.sh, or "
            f"apt-get install -y fio iperf3) and run again; --only can skip the sections needing them.")


def _tool_version(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "not available"


def run_fio(path, bs, total):
    """fio sequential buffered write of `total` bytes in `bs` blocks to a new file; B/s as fio
    reports it (io bytes / job runtime, excluding fio's start-up)."""
    cmd = ["fio", "--name=seqwrite", f"--filename={path}", "--ioengine=psync", "--rw=write", f"--bs={bs}",
           f"--size={total}", "--end_fsync=0", "--direct=0", "--fallocate=none", "--output-format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"fio failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    job = json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]["write"]
    expect(job["io_bytes"] == total, f"fio wrote {job['io_bytes']} bytes, not {total}")
    expect(os.path.getsize(path) == total, "fio's file has the wrong size")
    return float(job["bw_bytes"])


_DD_RE = re.compile(r"^(\d+) bytes .* copied, ([0-9.eE+-]+) s", re.M)


def run_dd(path, bs, total):
    """dd if=/dev/zero of=path bs=... count=... conv=notrunc; B/s from dd's own byte count and
    elapsed time (excluding its start-up)."""
    cmd = ["dd", "if=/dev/zero", f"of={path}", f"bs={bs}", f"count={total // bs}", "conv=notrunc"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    if out.returncode != 0:
        raise RuntimeError(f"dd failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    m = _DD_RE.search(out.stderr)
    if not m:
        raise RuntimeError(f"cannot parse dd's output: {out.stderr.strip()[-200:]}")
    nbytes, secs = int(m.group(1)), float(m.group(2))
    expect(nbytes == total and os.path.getsize(path) == total, f"dd wrote {nbytes} bytes, not {total}")
    return nbytes / secs


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port):
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def run_iperf3(seconds):
    """One iperf3 test over loopback (server -s -1, client -c 127.0.0.1 -t seconds -J): the
    receiver's bytes per second, and the parsed JSON summary."""
    port = _free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"iperf3 server did not start: {server.stderr.read().strip()[-300:]}")
            time.sleep(0.02)
        out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", f"{seconds:g}", "-J"],
                             capture_output=True, text=True, timeout=seconds + 60)
        j = json.loads(out.stdout)
        if "error" in j:
            raise RuntimeError(f"iperf3: {j['error']}")
        received = j["end"]["sum_received"]
        server.wait(timeout=10)
        return received["bits_per_second"] / 8, {"seconds": received["seconds"], "bytes": received["bytes"],
                                                  "retransmits": j["end"]["sum_sent"].get("retransmits")}
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


# ----------------------------------------------------------------------------- 1. append


def _append_sample_ours(workdir, bufs, n, copy):
    d = os.path.join(workdir, "append-0")
    shutil.rmtree(d, ignore_errors=True)
    sched = DeferredScheduler()
    lg = Log(d, LogConfig(), scheduler=sched)
    try:
        app = lg.append
        k = len(bufs)
        gc.collect()
        if copy:
            t0 = perf_counter_ns()
            for i in range(n):
                app(bytearray(bufs[i % k]))
            dt = perf_counter_ns() - t0
        else:
            t0 = perf_counter_ns()
            for i in range(n):
                app(bufs[i % k])
            dt = perf_counter_ns() - t0
        total = n * len(bufs[0])
        expect(lg.size_in_bytes == total, f"log holds {lg.size_in_bytes} bytes, not {total}")
        # a random batch reads back whole and intact
        per = lg.log_end_offset // n
        o = random.randrange(lg.log_end_offset)
        data = lg.read(o, 1).read()
        batches = list(iter_batches(data))
        expect(len(batches) == 1 and batches[0].base_offset == o // per * per and len(data) == len(bufs[0]),
               "a batch read back from the log is not the one appended")
        batches[0].validate()
        return total * 1e9 / dt, len(lg.segments)
    finally:
        discard_log(lg)


def bench_append(cfg, workdir):
    rows = []
    for label, size, target in (("1 MiB", MiB, 0.5), ("16 KiB", 16 * 1024, 0.3)):
        rnd = random.Random(size)
        bufs = [bytearray(batch_of_size(size, 1000, rnd, BASE_TS)[0]) for _ in range(cfg.distinct_batches)]
        n = cfg.append_bytes // size
        total = n * size
        row = Row("1 append", f"append {label} batches, {total / MiB:.0f} MiB", "B", "speedup", target)
        info = Row("1 append", "(info) same, + bytearray copy per append", "B", "info")
        samples = {"ours": [], "ours_copy": [], "fio": [], "dd": []}
        prime = []
        segments = None
        try:
            peer_file = os.path.join(workdir, "peer.dat")

            def fio_side():
                try:
                    return run_fio(peer_file, size, total)
                finally:
                    _unlink_quiet(peer_file)

            def dd_side():
                try:
                    return run_dd(peer_file, size, total)
                finally:
                    _unlink_quiet(peer_file)

            sides = [("ours", lambda: _append_sample_ours(workdir, bufs, n, False)),
                     ("ours_copy", lambda: _append_sample_ours(workdir, bufs, n, True)),
                     ("fio", fio_side), ("dd", dd_side)]
            for r in range(cfg.append_rounds):
                order = sides[r % len(sides):] + sides[:r % len(sides)]  # rotate: no side always first
                for name, fn in order:
                    prime.append(prime_page_cache(workdir, total))
                    got = fn()
                    if isinstance(got, tuple):
                        got, segments = got
                    samples[name].append(got)
        except Exception as e:  # report and keep going
            row.error = info.error = f"{type(e).__name__}: {e}"
            rows += [row, info]
            continue
        m = {k: median(v) for k, v in samples.items()}
        peer = max(m["fio"], m["dd"])
        better = "fio" if m["fio"] >= m["dd"] else "dd"
        peer_desc = f"best of fio {_fmt_rate(m['fio'], 'B')} / dd {_fmt_rate(m['dd'], 'B')} (bs={_bs(size)})"
        row.peer_name = info.peer_name = peer_desc
        row.finish(m["ours"], peer)
        info.finish(m["ours_copy"], peer)
        stats = {"samples_Bps": samples, "medians_Bps": m, "better_peer": better, "batch_bytes": size,
                 "total_bytes": total, "appends": n, "segments_after": segments,
                 "prime_rates_Bps": prime, "rounds": cfg.append_rounds}
        row.stats = info.stats = stats
        best = {k: max(v) for k, v in samples.items()}
        stats["best_Bps"] = best
        row.note = (f"{n} appends, {segments} segment(s), {total / n / m['ours'] * 1e6:.1f} us per append; "
                    f"best samples: ours {_fmt_rate(best['ours'])}, fio {_fmt_rate(best['fio'])}, "
                    f"dd {_fmt_rate(best['dd'])} -> {best['ours'] / max(best['fio'], best['dd']):.2f}x")
        info.note = f"best sample {_fmt_rate(best['ours_copy'])}"
        rows += [row, info]
    return rows


def _unlink_quiet(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _bs(size):
    return f"{size // MiB}M" if size % MiB == 0 else f"{size // 1024}k"


# ----------------------------------------------------------------------------- shared log


def build_small_batch_log(cfg, workdir, name="reads-0"):
    """A log of cfg.log_bytes in SMALL_BATCH-byte batches of SMALL_RECORDS records (random
    values), appended 1 MiB (1024 batches) per call. Returns the open Log."""
    rnd = random.Random(42)
    per_chunk = MiB // SMALL_BATCH
    chunks = []
    for c in range(8):
        parts = []
        for i in range(per_chunk):
            data, count = batch_of_size(SMALL_BATCH, 200, rnd, BASE_TS + c * per_chunk + i)
            assert count == SMALL_RECORDS, count
            parts.append(data)
        chunks.append(bytearray(b"".join(parts)))
    d = os.path.join(workdir, name)
    shutil.rmtree(d, ignore_errors=True)
    lg = Log(d, LogConfig(), scheduler=DeferredScheduler())
    for i in range(cfg.log_bytes // MiB):
        lg.append(chunks[i % len(chunks)])
    expect(lg.size_in_bytes == cfg.log_bytes, "small-batch log has the wrong size")
    expect(lg.log_end_offset == cfg.log_bytes // SMALL_BATCH * SMALL_RECORDS, "small-batch log has the wrong end")
    return lg


# ----------------------------------------------------------------------------- 3. lookup


def _timer_overhead_ns():
    pc = perf_counter_ns
    xs = []
    for _ in range(10_000):
        t0 = pc()
        xs.append(pc() - t0)
    return statistics.median(xs)


def time_lookups(lg, offsets, fn):
    """Per-call latencies (ns) of fn(o) for each offset, each timed alone."""
    pc = perf_counter_ns
    lat = []
    add = lat.append
    for o in offsets:
        t0 = pc()
        fn(o)
        add(pc() - t0)
    return lat


def lookup_rows(lg, n, group, prefix="", target=5.0):
    """Rows for log.read(o, 1) (with target) and segment.translate_offset (info) at n random
    offsets, checked against the log's known layout first."""
    rnd = random.Random(7)
    end = lg.log_end_offset
    offsets = [rnd.randrange(end) for _ in range(n)]
    segments = lg.segments
    bases = [s.base_offset for s in segments]

    def check():
        for o in offsets[:2000]:
            sl = lg.read(o, 1)
            want = o // SMALL_RECORDS * SMALL_RECORDS
            expect(sl.first_offset == want and sl.length == SMALL_BATCH,
                   f"read({o}, 1) gave a slice at offset {sl.first_offset}, {sl.length} bytes")
            head = os.pread(sl.fileno(), 12, sl.position)
            expect(struct.unpack(">q", head[:8])[0] == want, f"read({o}, 1) points at the wrong batch")

    def seg_for(o):
        return segments[bisect.bisect_right(bases, o) - 1]

    read = lg.read
    pairs = [(seg_for(o), o) for o in offsets]
    rows = []
    overhead = _timer_overhead_ns()
    for what, kind, fn, items in (
            (f"{prefix}Log.read(offset, 1), {n // 1000}k random offsets", "latency", lambda o: read(o, 1), offsets),
            (f"{prefix}(info) segment.translate_offset alone", "info", lambda p: p[0].translate_offset(p[1]), pairs),
            (f"{prefix}(info) Log.read(offset, 1 MiB), a fetch", "info", lambda o: read(o, MiB), offsets[:n // 4])):
        row = Row(group, what, "us", kind if kind == "latency" and target is not None else "info", target)
        try:
            check()
            gc.collect()
            for x in items[:2000]:  # warm caches and branch predictors
                fn(x)
            lat = time_lookups(lg, items, fn)
        except Exception as e:
            row.error = f"{type(e).__name__}: {e}"
            rows.append(row)
            continue
        lat.sort()
        med = percentile(lat, 50) / 1000
        p99 = percentile(lat, 99) / 1000
        row.stats = {"n": len(lat), "median_us": med, "p90_us": percentile(lat, 90) / 1000, "p99_us": p99,
                     "p999_us": percentile(lat, 99.9) / 1000, "max_us": lat[-1] / 1000,
                     "mean_us": sum(lat) / len(lat) / 1000, "timer_overhead_ns": overhead,
                     "log_bytes": lg.size_in_bytes, "batches": lg.size_in_bytes // SMALL_BATCH,
                     "index_entries": sum(s.offset_index.entries for s in segments), "segments": len(segments)}
        row.peer_name = f"p99 {p99:.2f} us"
        if row.kind == "latency":
            row.finish(med)
        else:
            row.ours = med
        row.note = (f"p99 {p99:.2f} us, max {lat[-1] / 1000:.0f} us; {row.stats['index_entries']} index entries; "
                    f"timer {overhead:.0f} ns included")
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- 2. read


def _drain(port, pass_bytes, conn):
    """Reader process: connects, receives passes of pass_bytes with recv_into a preallocated
    buffer, acknowledges each pass with one byte; sends the CRC-32C of the first pass through
    conn (the content check)."""
    s = socket.create_connection(("127.0.0.1", port))
    buf = bytearray(MiB)
    mv = memoryview(buf)
    got = 0
    first = True
    crc = 0
    recv_into = s.recv_into
    while True:
        n = recv_into(mv)
        if n == 0:
            break
        if first:
            crc = crc32c(mv[:n], crc)
        got += n
        if got == pass_bytes:
            s.sendall(b"k")
            if first:
                conn.send(crc)
                first = False
            got = 0
        elif got > pass_bytes:
            conn.send(-1)
            break
    s.close()


def _send_log(lg, sock, max_bytes=MiB):
    """One pass: Log.read(offset, max_bytes) + sendfile of each slice, to the log end."""
    fd = sock.fileno()
    read = lg.read
    offset = lg.log_start_offset
    end = lg.log_end_offset
    sent_total = 0
    while offset < end:
        sl = read(offset, max_bytes)
        length = sl.length
        sent = 0
        while sent < length:
            sent += sl.sendfile(fd, sent)
        sent_total += length
        offset = sl.first_offset + length // SMALL_BATCH * SMALL_RECORDS
    return sent_total


def bench_read(cfg, lg):
    row = Row("2 read", f"read 1 MiB + sendfile to loopback TCP, {lg.size_in_bytes / MiB:.0f} MiB log", "B",
              "speedup", 0.5, "iperf3 loopback (receiver)")
    size = lg.size_in_bytes
    ctx = multiprocessing.get_context("fork")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    parent_conn, child_conn = ctx.Pipe()
    reader = ctx.Process(target=_drain, args=(listener.getsockname()[1], size, child_conn), daemon=True)
    ours, peer, passes, iperf_info = [], [], [], []
    try:
        reader.start()
        sock, _ = listener.accept()
        try:
            # check pass (untimed): everything arrives, and it is the log's bytes
            expect(_send_log(lg, sock) == size, "a pass sent the wrong number of bytes")
            expect(sock.recv(1) == b"k", "reader did not acknowledge the pass")
            want = 0
            for seg in lg.segments:
                want = crc32c(os.pread(seg.file.fd, seg.size, 0), want)
            expect(parent_conn.recv() == want, "the reader received different bytes than the log holds")
            for _r in range(cfg.read_rounds):
                # ours: whole passes for about read_seconds
                gc.collect()
                t_start = perf_counter_ns()
                nbytes = 0
                while True:
                    t0 = perf_counter_ns()
                    nbytes += _send_log(lg, sock)
                    if sock.recv(1) != b"k":
                        raise RuntimeError("reader did not acknowledge the pass")
                    t1 = perf_counter_ns()
                    passes.append(size * 1e9 / (t1 - t0))
                    if (t1 - t_start) / 1e9 >= cfg.read_seconds:
                        break
                ours.append(nbytes * 1e9 / (perf_counter_ns() - t_start))
                rate, info = run_iperf3(cfg.read_seconds)
                peer.append(rate)
                iperf_info.append(info)
        finally:
            sock.close()
        reader.join(timeout=30)
    except Exception as e:
        row.error = f"{type(e).__name__}: {e}"
        return [row]
    finally:
        listener.close()
        if reader.is_alive():
            reader.kill()
    row.finish(median(ours), median(peer))
    row.stats = {"ours_rounds_Bps": ours, "iperf3_rounds_Bps": peer, "ours_passes_Bps": passes,
                 "iperf3": iperf_info, "seconds_per_side": cfg.read_seconds, "log_bytes": size}
    row.note = (f"{len(passes)} passes of {size / MiB:.0f} MiB in {cfg.read_rounds} round(s); best rounds: ours "
                f"{_fmt_rate(max(ours))}, iperf3 {_fmt_rate(max(peer))} -> {max(ours) / max(peer):.2f}x")
    return [row]


# ----------------------------------------------------------------------------- 4. recovery


def _pread_crc(lg):
    """Reference: read every segment's bytes in 8 MiB preads and CRC-32C them (the I/O and
    checksum floor of recovery, which also parses and checks every batch header)."""
    buf = bytearray(8 * MiB)
    mv = memoryview(buf)
    crc = 0
    t0 = perf_counter_ns()
    for seg in lg.segments:
        fd = os.open(seg.log_path, os.O_RDONLY)
        try:
            pos = 0
            while True:
                got = os.preadv(fd, [mv], pos)
                if got <= 0:
                    break
                crc = crc32c(mv[:got], crc)
                pos += got
        finally:
            os.close(fd)
    return perf_counter_ns() - t0, crc


def bench_recovery(cfg, lg):
    """Returns (rows, the reopened log)."""
    row = Row("4 recovery", f"recover {lg.size_in_bytes / MiB:.0f} MiB, no clean shutdown", "B", "info",
              None, "pread 8 MiB + crc32c, same bytes")
    size = lg.size_in_bytes
    end = lg.log_end_offset
    d = lg.dir
    ours, ref, close_s = [], [], []
    try:
        for _r in range(cfg.recovery_rounds):
            t0 = time.perf_counter()
            lg.close()  # fsyncs: the data is on disk and still in the page cache
            close_s.append(time.perf_counter() - t0)
            gc.collect()
            t0 = perf_counter_ns()
            lg = Log(d, LogConfig(), recovery_point=0, clean_shutdown=False, scheduler=DeferredScheduler())
            dt = perf_counter_ns() - t0
            res = lg.load_result
            expect(res.recovered_segments >= 1 and res.truncated_bytes == 0 and lg.log_end_offset == end,
                   f"recovery gave end {lg.log_end_offset} (want {end}), {res.recovered_segments} segments "
                   f"recovered, {res.truncated_bytes} bytes cut")
            ours.append(size * 1e9 / dt)
            rdt, _crc = _pread_crc(lg)
            ref.append(size * 1e9 / rdt)
    except Exception as e:
        row.error = f"{type(e).__name__}: {e}"
        return [row], lg
    row.finish(median(ours), median(ref))
    row.stats = {"ours_Bps": ours, "reference_Bps": ref, "close_fsync_s": close_s, "log_bytes": size,
                 "index_entries": sum(s.offset_index.entries for s in lg.segments)}
    row.note = (f"{size / median(ours):.2f} s for {size / MiB:.0f} MiB ({size // SMALL_BATCH} batches), "
                "incl. index rebuild + fsync")
    return [row], lg


# ----------------------------------------------------------------------------- 5. compaction


def _text_pool(rnd, nbytes):
    words = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9)))
             for _ in range(2000)]
    out = bytearray()
    while len(out) < nbytes:
        out += b" ".join(rnd.choice(words) for _ in range(200)) + b"\n"
    return bytes(out[:nbytes])


def bench_compaction(cfg, workdir):
    rows = []
    rnd = random.Random(3)
    pool = _text_pool(rnd, 4 * MiB)
    value_size = 1000
    per_batch = 16
    n_records = cfg.compact_bytes // (value_size + 30)
    n_batches = n_records // per_batch
    n_records = n_batches * per_batch
    keys = [rnd.randrange(cfg.compact_keys) for _ in range(n_records)]
    starts = [rnd.randrange(len(pool) - value_size) for _ in range(n_records)]
    expected = {}
    for i, k in enumerate(keys):
        expected[b"key-%06d" % k] = i  # offsets are assigned from 0, one per record
    for codec in ("none", "lz4"):
        topic = f"compact{codec}"
        row = Row("5 compaction",
                  f"clean_log, {n_records // 1000}k records / {cfg.compact_keys // 1000}k keys, {codec}",
                  "B", "info", None)
        try:
            d = os.path.join(workdir, f"{topic}-0")
            shutil.rmtree(d, ignore_errors=True)
            config = LogConfig({"cleanup.policy": "compact", "segment.bytes": cfg.compact_segment_bytes})
            lg = Log(d, config, scheduler=DeferredScheduler())
            for b in range(n_batches):
                lo = b * per_batch
                builder = RecordBatchBuilder(compression=codec)
                builder.extend([pool[s:s + value_size] for s in starts[lo:lo + per_batch]],
                               [b"key-%06d" % k for k in keys[lo:lo + per_batch]],
                               [BASE_TS + i for i in range(lo, lo + per_batch)])
                lg.append(bytearray(builder.build()))
            lg.roll()  # everything written becomes cleanable (the active segment never is)
            log_bytes = lg.size_in_bytes
            segs_before = len(lg.segments) - 1
            cdir = os.path.join(workdir, f"cleaner-{codec}")
            os.makedirs(cdir, exist_ok=True)
            cleaner = LogCleaner(cdir, lambda lg=lg: {(topic, 0): lg}, background=False)
            gc.collect()
            t0 = perf_counter_ns()
            stats = cleaner.clean_log(lg)
            dt = perf_counter_ns() - t0
            expect(stats is not None and stats.bytes_read == log_bytes,
                   f"the cleaner read {stats and stats.bytes_read} of {log_bytes} bytes")
            # afterwards each key is there once, at its latest offset
            seen = {}
            count = 0
            for batch in iter_batches(lg.read_batches_bytes()):
                for rec in batch:
                    seen[rec.key] = rec.offset
                    count += 1
            expect(count == len(expected) and seen == expected,
                   f"after cleaning: {count} records, {len(seen)} keys; want {len(expected)} latest records")
            row.finish(stats.bytes_read * 1e9 / dt)
            row.stats = {"seconds": dt / 1e9, "log_bytes": log_bytes, "bytes_written": stats.bytes_written,
                         "records_read": stats.records_read, "records_kept": stats.records_kept,
                         "segments": segs_before, "records_per_s": stats.records_read * 1e9 / dt,
                         "segment_bytes": cfg.compact_segment_bytes, "codec": codec}
            row.note = (f"{log_bytes / MiB:.0f} MiB log in {dt / 1e9:.2f} s, "
                        f"{stats.records_read * 1e9 / dt / 1e3:.0f} k rec/s, "
                        f"kept {stats.records_kept / stats.records_read:.0%}; incl. fsync of cleaned segments")
            discard_log(lg)
            shutil.rmtree(cdir, ignore_errors=True)
        except Exception as e:
            row.error = f"{type(e).__name__}: {e}"
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- 6. twins


def twins_child(args):
    """Runs in a child with KAFKACORE_NO_EXTENSIONS=1: lookups on the (closed) small-batch log
    and time-bounded appends of the batches the parent wrote to files. Prints rows as JSON."""
    from kafkacore.storage._hot import IS_NATIVE

    assert not IS_NATIVE and not kafkacore.native_extensions(), "twins child must run without extensions"
    cfg = Config(args.quick)
    rows = []
    t0 = time.perf_counter()
    lg = Log(args.log_dir, LogConfig(), scheduler=DeferredScheduler())
    open_s = time.perf_counter() - t0
    for r in lookup_rows(lg, cfg.twin_lookups, "6 twins", prefix="twin ", target=None):
        r.stats["open_clean_s"] = open_s
        rows.append(r)
    lg.close()
    for path in args.batch_files:
        with open(path, "rb") as f:
            blob = f.read()
        size = int(os.path.basename(path).split("-")[1].split(".")[0])
        bufs = [bytearray(blob[i:i + size]) for i in range(0, len(blob), size)]
        row = Row("6 twins", f"twin append {size // 1024} KiB batches" if size < MiB else "twin append 1 MiB batches",
                  "B", "info")
        d = os.path.join(args.workdir, "twin-append-0")
        shutil.rmtree(d, ignore_errors=True)
        tl = Log(d, LogConfig(), scheduler=DeferredScheduler())
        try:
            n = 0
            t0 = perf_counter_ns()
            while True:
                tl.append(bufs[n % len(bufs)])
                n += 1
                el = perf_counter_ns() - t0
                if el >= cfg.twin_seconds * 1e9 and n >= 3:
                    break
            row.ours = n * size * 1e9 / el
            row.stats = {"appends": n, "seconds": el / 1e9, "batch_bytes": size}
            row.note = f"{n} appends in {el / 1e9:.1f} s"
        except Exception as e:
            row.error = f"{type(e).__name__}: {e}"
        finally:
            discard_log(tl)
        rows.append(row)
    json.dump([r.to_json() for r in rows], sys.stdout)
    return 0


def run_twins(cfg, workdir, log_dir, native_rows):
    """The twins child process; its rows get the native figure as the peer (ratio = twin /
    native)."""
    files = []
    for size in (MiB, 16 * 1024):
        rnd = random.Random(size)
        path = os.path.join(workdir, f"twinbatches-{size}.bin")
        with open(path, "wb") as f:
            for _ in range(2):
                f.write(batch_of_size(size, 1000, rnd, BASE_TS)[0])
        files.append(path)
    env = dict(os.environ, KAFKACORE_NO_EXTENSIONS="1")
    env.pop("KAFKACORE_REQUIRE_EXTENSIONS", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--twins-child", "--log-dir", log_dir, "--workdir", workdir,
           "--batch-files", *files]
    if cfg.quick:
        cmd.append("--quick")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for path in files:
        os.unlink(path)
    if proc.returncode != 0:
        row = Row("6 twins", "twins (child process)", "B", "info")
        row.error = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return [row]
    rows = [Row.from_json(d) for d in json.loads(proc.stdout)]
    # the native figure of the same path as the peer; ratio = twin speed / native speed
    native_of = {"twin Log.read": "Log.read(offset, 1)",
                 "twin (info) segment.translate_offset": "(info) segment.translate_offset",
                 "twin (info) Log.read(offset, 1 MiB)": "(info) Log.read(offset, 1 MiB)",
                 "twin append 1 MiB": "append 1 MiB", "twin append 16 KiB": "append 16 KiB"}
    for r in rows:
        prefix = next((k for k in native_of if r.what.startswith(k)), None)
        native = prefix and next((x for x in native_rows if x.what.startswith(native_of[prefix]) and x.ours), None)
        if not native or not r.ours:
            continue
        r.peer = native.ours
        r.ratio = r.ours / native.ours if r.unit == "B" else native.ours / r.ours
        r.peer_name = "native (this run)" if r.unit == "B" else \
            f"native (this run); twin p99 {r.stats.get('p99_us', 0):.1f} us"
    return rows


# ----------------------------------------------------------------------------- reporting


def _read_first(path, default="?"):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def _mount_of(path):
    path = os.path.realpath(path)
    best = None
    try:
        with open("/proc/mounts") as f:
            for line in f:
                dev, mnt, fstype, opts = line.split()[:4]
                inside = path == mnt or path.startswith(mnt.rstrip("/") + "/")
                if inside and (best is None or len(mnt) > len(best[1])):
                    best = (dev, mnt, fstype, opts)
    except OSError:
        pass
    return best


def machine_info(workdir):
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        model = platform.processor() or "unknown"
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    mount = _mount_of(workdir)
    dev = mount[0] if mount else "?"
    block = os.path.basename(dev) if dev.startswith("/dev/") else None
    st = os.statvfs(workdir)
    from kafkacore import checksum, partitioner, record

    native = {"crc": checksum._native is not None, "murmur2": partitioner._native is not None,
              "records": record._native is not None, "storage": STORAGE_NATIVE}
    git = {}
    try:
        git["head"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
        git["modified"] = [ln[3:] for ln in dirty if ln.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "mem_bytes": mem,
        "loadavg_start": os.getloadavg(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "kafkacore": kafkacore.__version__,
        "kafkacore_native": native,
        "git": git,
        "workdir": workdir,
        "filesystem": {"device": dev, "mount": mount[1] if mount else "?", "type": mount[2] if mount else "?",
                       "options": mount[3] if mount else "?", "free_bytes": st.f_bavail * st.f_frsize,
                       "rotational": _read_first(f"/sys/block/{block}/queue/rotational") if block else "?",
                       "scheduler": _read_first(f"/sys/block/{block}/queue/scheduler") if block else "?"},
        "vm": {k: _read_first(f"/proc/sys/vm/{k}") for k in
               ("dirty_ratio", "dirty_background_ratio", "dirty_expire_centisecs", "dirty_writeback_centisecs")},
        "tools": {"fio": _tool_version(["fio", "--version"]), "iperf3": _tool_version(["iperf3", "--version"]),
                  "dd": _tool_version(["dd", "--version"])},
        "env": {k: v for k, v in os.environ.items() if k.startswith("KAFKACORE_")},
    }


def _fmt_rate(rate, unit="B"):
    if rate is None:
        return "-"
    return f"{rate / 1e9:.2f} GB/s" if rate >= 1e9 else f"{rate / 1e6:.0f} MB/s"


def _fmt_value(v, unit):
    if v is None:
        return "-"
    if unit == "us":
        return f"{v:.2f} us"
    return _fmt_rate(v)


def _fmt_ratio(row):
    if row.ratio is None:
        return "-"
    return f"{row.ratio:.2f}x" if row.ratio >= 0.1 else f"{row.ratio:.1g}x"


def _fmt_target(row):
    if row.kind == "info":
        return "info"
    if row.kind == "latency":
        return f"< {row.target:g} us"
    return f">= {row.target:g}x"


def _fmt_met(row):
    if row.error:
        return "WRONG" if "Mismatch" in row.error else "ERROR"
    if row.met is None:
        return "-"
    return "yes" if row.met else "NO"


COLUMNS = [("what", 52), ("ours", 10), ("peer", 10), ("ratio", 6), ("target", 9), ("met", 5), ("peer is", 40)]


def print_header(info, cfg):
    print(f"kafkacore bench_storage  ({'quick' if cfg.quick else 'full'} mode)  {info['date']}")
    mem = f", {info['mem_bytes'] / GiB:.0f} GiB RAM" if info["mem_bytes"] else ""
    print(f"CPU: {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable){mem}, "
          f"loadavg {tuple(round(x, 2) for x in info['loadavg_start'])}")
    print(f"Python: {info['python']}")
    print(f"Platform: {info['platform']}")
    fs = info["filesystem"]
    print(f"Work dir: {info['workdir']} on {fs['device']} ({fs['type']}, {fs['options']}), "
          f"rotational={fs['rotational']}, {fs['free_bytes'] / GiB:.0f} GiB free; "
          f"vm.dirty_ratio={info['vm']['dirty_ratio']}, "
          f"dirty_background_ratio={info['vm']['dirty_background_ratio']}")
    print("Tools: " + "; ".join(f"{v}" for v in info["tools"].values()))
    nat = info["kafkacore_native"]
    git = info["git"]
    print(f"kafkacore {info['kafkacore']} (git {git.get('head', '?')}"
          + (f", modified: {' '.join(git['modified'])}" if git.get("modified") else "") + "): "
          + ", ".join(f"{k}={'native' if v else 'TWIN'}" for k, v in nat.items()))
    if not all(nat.values()):
        print("WARNING: not all native extensions are in use; 'ours' includes pure-Python twins.")
    print(flush=True)


def print_table_header():
    print("  ".join(f"{name:<{w}}" for name, w in COLUMNS))
    print("  ".join("-" * w for _, w in COLUMNS), flush=True)


def print_row(row):
    cells = [row.what, _fmt_value(row.ours, row.unit), _fmt_value(row.peer, row.unit),
             _fmt_ratio(row), _fmt_target(row), _fmt_met(row), row.peer_name]
    print("  ".join(f"{c:<{w}}" for c, (_, w) in zip(cells, COLUMNS)).rstrip(), flush=True)


def print_footer(rows):
    print()
    targets = [r for r in rows if r.kind != "info"]
    met = sum(1 for r in targets if r.met)
    print(f"targets met: {met}/{len(targets)}")
    for r in rows:
        if r.error:
            print(f"  {_fmt_met(r)} {r.what}: {r.error}")
    print("notes:")
    for r in rows:
        if r.note and not r.error:
            print(f"  {r.what}: {r.note}")
    for r in rows:
        st = r.stats or {}
        if r.kind == "info" or r.error:
            continue
        if "samples_Bps" in st:
            print(f"  samples, {r.what} (MB/s): " + "; ".join(
                f"{k} {[round(x / 1e6) for x in v]}" for k, v in st["samples_Bps"].items()))
        if "ours_rounds_Bps" in st:
            print(f"  rounds, {r.what} (MB/s): ours {[round(x / 1e6) for x in st['ours_rounds_Bps']]}; "
                  f"iperf3 {[round(x / 1e6) for x in st['iperf3_rounds_Bps']]}")
    print(f"loadavg at end: {tuple(round(x, 2) for x in os.getloadavg())}")


# ----------------------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="~64 MiB everywhere: a smoke run of a few seconds")
    ap.add_argument("--json", metavar="PATH", help="also write machine info and all rows as JSON")
    ap.add_argument("--only", metavar="SECTIONS",
                    help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--workdir", metavar="DIR", default=os.path.join(HERE, ".work"),
                    help="where the logs and the peers' files go (default bench/.work, same disk as the repo)")
    ap.add_argument("--no-twins", action="store_true", help="skip the pure-Python twins child")
    ap.add_argument("--no-install", action="store_true", help="do not run ci/bench_deps.sh for missing tools")
    ap.add_argument("--twins-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--log-dir", help=argparse.SUPPRESS)
    ap.add_argument("--batch-files", nargs="*", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cfg = Config(args.quick)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # collected explicitly between measurements
    try:
        if args.twins_child:
            return twins_child(args)
        only = set(SECTIONS) if not args.only else {s.strip() for s in args.only.split(",") if s.strip()}
        unknown = only - set(SECTIONS)
        if unknown:
            ap.error(f"unknown section(s) {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
        if args.no_twins:
            only.discard("twins")
        need_tools = only & {"append", "read"}
        if need_tools:
            problem = ensure_tools(install=not args.no_install)
            if problem:
                print(f"bench_storage: {problem}", file=sys.stderr)
                return 2
        os.makedirs(args.workdir, exist_ok=True)
        workdir = os.path.join(os.path.abspath(args.workdir), f"run-{os.getpid()}")
        os.makedirs(workdir)
        try:
            return run(cfg, args, only, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            try:
                os.rmdir(os.path.abspath(args.workdir))  # only when empty
            except OSError:
                pass
    finally:
        if gc_was_enabled:
            gc.enable()


def run(cfg, args, only, workdir):
    info = machine_info(workdir)
    print_header(info, cfg)
    if os.stat(workdir).st_dev != os.stat(ROOT).st_dev:
        print(f"note: {workdir} is not on the repository's filesystem")
    need = cfg.append_bytes * 2 + cfg.log_bytes + cfg.compact_bytes * 2
    if info["filesystem"]["free_bytes"] < need:
        print(f"bench_storage: {workdir} has {info['filesystem']['free_bytes'] / GiB:.1f} GiB free; "
              f"this mode needs about {need / GiB:.1f} GiB", file=sys.stderr)
        return 2
    print_table_header()
    rows = []

    def emit(new):
        for r in new:
            rows.append(r)
            print_row(r)

    if "append" in only:
        emit(bench_append(cfg, workdir))
    if only & {"lookup", "read", "recovery", "twins"}:
        t0 = time.perf_counter()
        lg = build_small_batch_log(cfg, workdir)
        built_s = time.perf_counter() - t0
        try:
            if "lookup" in only:
                new = lookup_rows(lg, cfg.lookups, "3 lookup")
                for r in new:
                    r.stats["log_build_s"] = built_s
                emit(new)
            if "read" in only:
                emit(bench_read(cfg, lg))
            if "recovery" in only:
                new, lg = bench_recovery(cfg, lg)
                emit(new)
            lg.close()
            if "twins" in only:
                emit(run_twins(cfg, workdir, lg.dir, rows))
        finally:
            discard_log(lg)
    gc.collect()
    if "compaction" in only:
        emit(bench_compaction(cfg, workdir))
    print_footer(rows)
    if args.json:
        info["loadavg_end"] = os.getloadavg()
        with open(args.json, "w") as f:
            json.dump({"machine": info, "mode": "quick" if cfg.quick else "full",
                       "rows": [r.to_json() for r in rows]}, f, indent=2)
        print(f"wrote {args.json}")
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
