#!/usr/bin/env python3
"""The kernel's share of serving a fetch on loopback: the least CPU any broker spends here to
send a given number of bytes to a consumer on 127.0.0.1 with sendfile.

    python bench/loopback_sendfile_floor.py [--mb 220] [--chunk 1048576] [--rounds 7]

One loop ``os.sendfile``s a page-cached file in ``--chunk`` slices to a
reader process that only ``recv_into``s a buffer. No Python runs per byte, no request is
parsed, no response built: what the sender's process spends is the kernel's loopback TCP
path. On loopback the receiving side's protocol work (softirq) often runs on the sending CPU
and is charged to the sender, which a real network card would move to the consumer's host.

Reported: the sender's CPU seconds (user + system, getrusage) per 110 MB, about what 1M
100-byte records take in a log of 1 MB batches (100 B value + ~10 B of record framing),
so the figure compares with bench_client's "broker CPU per 1M served" (kc.poll). Median,
min and max over ``--rounds`` passes after one warm pass.
"""
import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BYTES_PER_MILLION_RECORDS = 110_000_000

READER = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
buf = memoryview(bytearray(4 << 20))
while s.recv_into(buf):
    pass
"""


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=220, help="bytes sent per pass, in MB (default 220: 2M records)")
    ap.add_argument("--chunk", type=int, default=1 << 20, help="bytes per sendfile call (default 1 MiB)")
    ap.add_argument("--rounds", type=int, default=7, help="timed passes (default 7)")
    ap.add_argument("--workdir", default=os.path.join(HERE, ".work"))
    args = ap.parse_args(argv)
    if args.mb <= 0 or args.chunk <= 0 or args.rounds <= 0:
        ap.error("--mb, --chunk and --rounds must be positive")
    size = args.mb * 1_000_000
    os.makedirs(args.workdir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=args.workdir, prefix="sendfile-floor-") as f:
        block = os.urandom(1 << 20)
        left = size
        while left:
            left -= f.write(block[:min(left, len(block))])
        f.flush()
        with open(f.name, "rb") as warm:  # page-cached before the clock, as a hot log segment is
            while warm.read(1 << 24):
                pass
        listener = socket.create_server(("127.0.0.1", 0))
        reader = subprocess.Popen([sys.executable, "-c", READER, str(listener.getsockname()[1])])
        conn, _ = listener.accept()
        listener.close()
        per_million = []
        try:
            for rnd in range(args.rounds + 1):
                c0, t0 = self_cpu(), time.perf_counter()
                off = 0
                while off < size:
                    n = os.sendfile(conn.fileno(), f.fileno(), off, min(args.chunk, size - off))
                    if n == 0:
                        raise RuntimeError("the reader closed its socket")
                    off += n
                cpu, secs = self_cpu() - c0, time.perf_counter() - t0
                if rnd == 0:
                    continue  # warm pass: connection buffers grown, reader running
                per_million.append(cpu * BYTES_PER_MILLION_RECORDS / size)
                print(f"pass {rnd}: {size / secs / 1e9:.2f} GB/s, sender CPU {cpu:.3f} s "
                      f"= {per_million[-1]:.4f} s per 110 MB", flush=True)
        finally:
            conn.close()
            reader.wait(30)
    print(f"loopback sendfile, {args.chunk} B calls: sender CPU per 110 MB (~1M 100-byte records) "
          f"median {statistics.median(per_million):.4f} s, min {min(per_million):.4f} s, "
          f"max {max(per_million):.4f} s over {len(per_million)} passes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
