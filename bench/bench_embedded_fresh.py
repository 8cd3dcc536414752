"""Issue 30's embedded measurement exactly as an application runs it: every sample in a fresh
interpreter, on a fresh ``kafkacore.Broker(tmpdir)``, against the same child code over loopback
to one running ``kafkacore serve`` (a fresh topic per sample).

A child makes its broker (or connects), ``create_topic(t, partitions=3)`` (loopback: the
broker's num.partitions=3 creates it), ``producer({})`` with kafkacore's defaults (acks=all,
idempotent) and a consumer, then starts the clock: N records of 100 bytes with ``send()`` or
``send_many`` of a numpy ``S100`` array in 100k slices, then ``flush()`` (the send half); then
reads the N records back from offset 0 (the read half), with ``poll()`` touching each value
after ``send()``, or with ``poll_arrow()`` summing the value bytes after ``send_many`` (the
columnar round trip). Everything first-use costs in a process (imports, fresh memory) is
inside the clock, as it is for a user; nothing is prefaulted. Embedded and loopback children
alternate order each round; medians are printed with the load average during the run.

    .venv/bin/python bench/bench_embedded_fresh.py                    # 5 rounds, 500k records
    .venv/bin/python bench/bench_embedded_fresh.py --rounds 3 --modes many
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

VALUE_SIZE = 100
SLICE = 100_000

CHILD = r'''
import json, shutil, sys, tempfile, time
import numpy as np
import kafkacore

side, mode, port, topic, n, workdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
raw = np.random.default_rng(1).bytes(n * VALUE_SIZE)
arr = np.frombuffer(raw, dtype=f"S{VALUE_SIZE}")
# (sliced from the bytes: a numpy S item drops its trailing NULs, send_many sends the full width)
vals = [raw[i:i + VALUE_SIZE] for i in range(0, n * VALUE_SIZE, VALUE_SIZE)] if mode == "send" else None
if side == "embedded":
    data_dir = tempfile.mkdtemp(prefix="embedded-", dir=workdir)
    broker = kafkacore.Broker(data_dir)
    broker.create_topic(topic, partitions=3)
    p, c = broker.producer({}), broker.consumer({})
else:
    p = kafkacore.Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
    deadline = time.monotonic() + 30
    while len(p.partitions_for(topic)) != 3:  # auto-created with num.partitions=3
        if time.monotonic() > deadline:
            raise SystemExit(f"{topic} has no 3 partitions")
        time.sleep(0.05)
    c = kafkacore.Consumer({"bootstrap.servers": f"127.0.0.1:{port}"})
tps = [(topic, q) for q in range(3)]
c.end_offsets(tps)  # connected, metadata known
t0 = time.perf_counter()
if mode == "send":
    send = p.send
    for v in vals:
        send(topic, v)
else:
    for i in range(0, n, SLICE):
        p.send_many(topic, arr[i:i + SLICE])
left = p.flush(300)
t1 = time.perf_counter()
assert left == 0, f"{left} records not acknowledged"
c.assign([(t, q, 0) for t, q in tps])
got = nbytes = 0
if mode == "send":
    while got < n:
        for r in c.poll(1.0, max_records=100_000):
            got += 1
            nbytes += len(r.value)
else:
    import pyarrow.compute as pc
    while got < n:
        b = c.poll_arrow(1.0, max_records=100_000)
        if b.num_rows:
            got += b.num_rows
            nbytes += pc.sum(pc.binary_length(b.column(1))).as_py()
t2 = time.perf_counter()
assert got == n and nbytes == n * VALUE_SIZE, (got, nbytes)
print(json.dumps({"send": t1 - t0, "read": t2 - t1}))
c.close()
p.close()
if side == "embedded":
    broker.close()
    shutil.rmtree(data_dir, ignore_errors=True)
'''.replace("VALUE_SIZE", str(VALUE_SIZE)).replace("SLICE", str(SLICE))

MODES = {"many": "send_many(numpy S100) in 100k slices + poll_arrow()", "send": "send() loop + poll()"}


def start_broker(workdir):
    data_dir = tempfile.mkdtemp(prefix="loopback-", dir=workdir)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "serve", "--data-dir", data_dir, "--host",
                             "127.0.0.1", "--port", str(port), "--set", "num.partitions=3"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("kafkacore serve did not start")
            time.sleep(0.05)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--modes", default="many,send", help="comma-separated: many, send")
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r}: {', '.join(MODES)}")
    workdir = tempfile.mkdtemp(prefix="bench-embedded-fresh-")
    proc, port = start_broker(workdir)
    res, loads, k = {}, [], 0
    try:
        for rnd in range(args.rounds):
            for mode in modes:
                for side in (("embedded", "loopback") if rnd % 2 == 0 else ("loopback", "embedded")):
                    k += 1
                    loads.append(os.getloadavg()[0])
                    out = subprocess.run([sys.executable, "-c", CHILD, side, mode, str(port), f"fresh-{k}",
                                          str(args.records), workdir], capture_output=True, text=True, timeout=600)
                    if out.returncode:
                        raise SystemExit(f"{side} {mode} failed:\n{out.stderr[-3000:]}")
                    x = json.loads(out.stdout.strip().splitlines()[-1])
                    res.setdefault((side, mode), []).append(x)
                    print(f"round {rnd + 1}/{args.rounds} {side:8s} {mode}: send + flush {x['send']:.3f} s, "
                          f"read {x['read']:.3f} s", flush=True)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)
    med = statistics.median
    print(f"\n{args.records:,} records x {VALUE_SIZE} B, {args.rounds} rounds, medians; load average during the run "
          f"{med(loads):.1f} (min {min(loads):.1f}, max {max(loads):.1f}) on {os.cpu_count()} cores\n")
    print("| shape | send + flush, embedded / loopback | read, embedded / loopback | round trip, embedded / loopback "
          "| embedded vs loopback (round trip) |")
    print("|---|---|---|---|---|")
    for mode in modes:
        e, n = res[("embedded", mode)], res[("loopback", mode)]
        es, ns = med(x["send"] for x in e), med(x["send"] for x in n)
        er, nr = med(x["read"] for x in e), med(x["read"] for x in n)
        et, nt = med(x["send"] + x["read"] for x in e), med(x["send"] + x["read"] for x in n)
        print(f"| {MODES[mode]} | {es:.3f} / {ns:.3f} s ({ns / es:.2f}x) | {er:.3f} / {nr:.3f} s ({nr / er:.2f}x) "
              f"| {et:.3f} / {nt:.3f} s | {nt / et:.2f}x |")


if __name__ == "__main__":
    main()
