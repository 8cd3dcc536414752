#!/usr/bin/env python3
"""The I/O floor under the embedded round trip: the least CPU any in-process broker spends to
append a round trip's bytes to a log file and read them back for its consumer.

    python bench/embedded_io_floor.py [--records 500000] [--rounds 5] [--dir DIR]

One loop appends the bytes of ``--records`` 100-byte records (109 bytes each: value plus
record framing and batch headers, as bench_client's logs hold them) to a fresh file in 1 MiB
``os.write``s (into the page cache, as LogSegment.append does), then ``os.pread``s them
back in 1 MiB reads (one copy out of the page cache, as the embedded fetch's file slices are
read). No Python runs per record, no batch is validated, no index written. Reported: this
process's CPU seconds per 1M records for each half, per round (median last), to set beside
bench_client's nobroker.rt.arrow (the client alone) and emb.rt.arrow (issue 30).

``--grow MB`` first appends MB to a file kept for the whole run each round (as bench_client's
``kafkacore serve`` log grows by its network samples): once the growth has used the memory the
VM's host backs, every new page-cache page costs a host page fault (bench/prefault.py), and
the fresh file's write takes several times longer, with no broker in the process at all.
"""
import argparse
import os
import statistics
import tempfile
import time

BYTES_PER_RECORD = 109
CHUNK = 1 << 20


def one_round(directory, total):
    buf = os.urandom(CHUNK)
    fd, path = tempfile.mkstemp(dir=directory, prefix="io-floor-")
    try:
        c0 = time.process_time()
        left = total
        while left > 0:
            left -= os.write(fd, buf[:min(CHUNK, left)])
        c1 = time.process_time()
        off = 0
        while off < total:
            off += len(os.pread(fd, CHUNK, off))
        c2 = time.process_time()
    finally:
        os.close(fd)
        os.unlink(path)
    return c1 - c0, c2 - c1


def grow(fd, mb):
    """Appends mb MiB to the kept file; seconds it took."""
    buf = os.urandom(CHUNK)
    t0 = time.perf_counter()
    for _ in range(mb):
        os.write(fd, buf)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the file goes (default: the temp directory)")
    ap.add_argument("--grow", type=int, default=0, metavar="MB",
                    help="append MB to a file kept for the run before each round (default 0: none)")
    args = ap.parse_args()
    per_m = 1e6 / args.records
    writes, reads = [], []
    kept_fd, kept_path = tempfile.mkstemp(dir=args.dir, prefix="io-floor-kept-") if args.grow else (None, None)
    try:
        for rnd in range(args.rounds):
            grown = ""
            if kept_fd is not None:
                secs = grow(kept_fd, args.grow)
                grown = f"  (kept file at {(rnd + 1) * args.grow} MiB, +{args.grow} MiB in {secs:.2f} s)"
            w, r = one_round(args.dir, args.records * BYTES_PER_RECORD)
            writes.append(w * per_m)
            reads.append(r * per_m)
            print(f"write {writes[-1]:.3f} s  pread {reads[-1]:.3f} s  per 1M records{grown}", flush=True)
    finally:
        if kept_fd is not None:
            os.close(kept_fd)
            os.unlink(kept_path)
    w, r = statistics.median(writes), statistics.median(reads)
    print(f"median: write {w:.3f} + pread {r:.3f} = {w + r:.3f} s of CPU per 1M records")


if __name__ == "__main__":
    main()
