"""``kafkacore perf produce`` / ``perf consume``: throughput and latency of kafkacore's own
producer and consumer against a cluster, reported as kafka-producer-perf-test.sh and
kafka-consumer-perf-test.sh report theirs, so the numbers compare.

perf produce sends ``--num-records`` records of ``--record-size`` bytes (one random payload of
letters, no key, as Kafka's tool sends by default) through ``Producer.send_many``, the
producer's fastest path: records go in chunks of about one batch each (``batch.size`` worth),
paced to ``--throughput`` records/s when one is given. Latency is Kafka's definition, from the
moment a record is handed to the producer to its acknowledgement, measured per chunk: from the
call that hands the chunk over (which waits when buffer.memory is full, as ``send`` does) to
the acknowledgement of the last batch holding its records, counted once for every record of
the chunk. A chunk is at most a batch, so this is the latency of each batch.

perf consume reads ``--messages`` records (default: every record the topic holds when it
starts) with ``poll_arrow`` (records decoded natively into Arrow, no Python object per
record), from the beginning, or as group ``--group`` (committed offsets first). Bytes counted
are keys plus values. MB is 1024 * 1024 bytes, as in Kafka's tools.

While running, a live line on stderr when it is a terminal, else a line every
``--reporting-interval`` ms (5000, Kafka's); the summary goes to stdout, as JSON with -o json.
"""
from __future__ import annotations

import random
import string
import sys
import threading
import time
from collections import deque

from .clients import add_property_option, make_consumer, make_producer, properties, topic_partitions
from .common import (EXIT_FAILED, EXIT_OK, EXIT_USAGE, MB, RECORD_OVERHEAD, ToolError, add_noun, add_verb,
                     error_line, plural, positive_int)
from .output import emit
from .progress import LIVE_LINE_DELAY, Progress

REPORTING_INTERVAL_MS = 5000  # Kafka's perf tools' default
CONSUME_TIMEOUT_MS = 10000  # kafka-consumer-perf-test.sh's --timeout default
PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999))
ARROW_POLL_RECORDS = 100_000


def register(sub, common):
    verbs = add_noun(sub, "perf", "producer and consumer performance tests (records/s, MB/s, latency)")
    pp = add_verb(verbs, "produce", common, run_produce,
                  "send N records of S bytes and report throughput and latency percentiles")
    pp.add_argument("topic", metavar="TOPIC")
    pp.add_argument("--num-records", type=positive_int, required=True, metavar="N", help="records to send")
    pp.add_argument("--record-size", type=positive_int, required=True, metavar="BYTES", help="bytes per record value")
    pp.add_argument("--throughput", type=float, default=-1, metavar="R",
                    help="at most R records/s (default -1: as fast as possible)")
    pp.add_argument("--reporting-interval", type=positive_int, default=REPORTING_INTERVAL_MS, metavar="MS",
                    help=f"ms between progress lines when stderr is not a terminal (default {REPORTING_INTERVAL_MS})")
    add_property_option(pp, "producer")
    pc = add_verb(verbs, "consume", common, run_consume, "read N records and report throughput")
    pc.add_argument("topic", metavar="TOPIC")
    pc.add_argument("--messages", type=positive_int, metavar="N",
                    help="records to read (default: all the topic holds when the test starts)")
    pc.add_argument("--group", "-g", metavar="GROUP", help="read as a member of GROUP (default: no group, "
                                                            "every partition from the beginning)")
    pc.add_argument("--timeout", type=positive_int, default=CONSUME_TIMEOUT_MS, metavar="MS",
                    help=f"give up when no record came for MS (default {CONSUME_TIMEOUT_MS})")
    pc.add_argument("--reporting-interval", type=positive_int, default=REPORTING_INTERVAL_MS, metavar="MS",
                    help=f"ms between progress lines when stderr is not a terminal (default {REPORTING_INTERVAL_MS})")
    add_property_option(pc, "consumer")
    pr = add_verb(verbs, "reference", common, run_reference,
                  "run the scenarios of Kafka's published benchmarks (2014, 2020) and print them beside the "
                  "published figures")
    pr.add_argument("--scenarios", metavar="LIST", help="comma-separated scenario numbers, e.g. 1,2,7 "
                                                        "(default: all of 1-10)")
    pr.add_argument("--quick", action="store_true", help="small amounts (minutes); default: the full sizes")
    pr.add_argument("--cores", type=positive_int, metavar="N",
                    help="cores the cluster and this load share, for the per-core figures "
                         "(default: this machine's)")


class _Reporter:
    """Progress while a test runs: the live bar on a terminal, else a line every interval."""

    def __init__(self, total, label, interval_ms):
        self.bar = Progress(total, label, unit="records", delay=LIVE_LINE_DELAY)
        self.interval = interval_ms / 1000
        self.next_line = time.monotonic() + self.interval

    def update(self, done, note_fn, line_fn):
        now = time.monotonic()
        if self.bar.enabled:
            self.bar.update(done, note_fn())
        elif now >= self.next_line:
            self.next_line = now + self.interval
            print(line_fn(), file=sys.stderr, flush=True)

    def close(self):
        self.bar.close()


def run_reference(args) -> int:
    from .perf_reference import run_cli  # the scenarios load only when asked for

    return run_cli(args)


# -- perf produce ----------------------------------------------------------------------------
class _Acks(threading.Thread):
    """Waits for each chunk's batches in the order they were sent and records its latency.
    Batches of one broker are answered in order, so waiting in order costs no accuracy."""

    def __init__(self):
        super().__init__(name="kafkacore-perf-acks", daemon=True)
        self.queue = deque()
        self.ready = threading.Condition()
        self.finished = False
        self.lock = threading.Lock()
        self.samples = []  # (latency seconds, records)
        self.acked = self.failed = 0
        self.window = [0, 0.0, 0.0, time.monotonic()]  # records, latency sum, max, start
        self.error = None

    def add(self, started, count, handle):
        with self.ready:
            self.queue.append((started, count, handle))
            self.ready.notify()

    def finish(self):
        with self.ready:
            self.finished = True
            self.ready.notify()

    def run(self):
        while True:
            with self.ready:
                while not self.queue and not self.finished:
                    self.ready.wait()
                if not self.queue:
                    return
                started, count, handle = self.queue.popleft()
            error = None
            for r in handle.results:
                r.wait()
                error = error or r.error
            latency = time.monotonic() - started
            with self.lock:
                if error is None:
                    self.acked += count
                    self.samples.append((latency, count))
                    w = self.window
                    w[0] += count
                    w[1] += latency * count
                    w[2] = max(w[2], latency)
                else:
                    self.failed += count
                    self.error = self.error or error

    def take_window(self):
        """(records, avg latency, max latency, seconds) since the last call."""
        now = time.monotonic()
        with self.lock:
            n, total, worst, since = self.window
            self.window = [0, 0.0, 0.0, now]
        return n, (total / n if n else 0.0), worst, now - since


def latency_summary(samples) -> dict:
    """avg, max and percentiles (ms) of [(latency seconds, records)], weighted by records."""
    total = sum(n for _, n in samples)
    if not total:
        return {"avg": 0.0, "max": 0.0, **{name: 0.0 for name, _ in PERCENTILES}}
    ordered = sorted(samples)
    out = {"avg": sum(lat * n for lat, n in samples) / total * 1000, "max": ordered[-1][0] * 1000}
    for name, q in PERCENTILES:
        rank, seen = q * total, 0
        for lat, n in ordered:
            seen += n
            if seen >= rank:
                out[name] = lat * 1000
                break
    return {k: round(v, 3) for k, v in out.items()}


def run_produce(args) -> int:
    if args.throughput == 0 or args.throughput < -1:
        raise ToolError("--throughput must be positive, or -1 for no limit", EXIT_USAGE)
    props = properties(args)
    from ..record.layout import RECORD_BATCH_OVERHEAD

    topic_partitions(props, args.topic, create=True)
    producer = make_producer(props)
    size = args.record_size
    payload = "".join(random.Random(size).choice(string.ascii_uppercase) for _ in range(size)).encode()
    # a chunk of about one batch, so that each measured latency is a batch's
    per_batch = max(1, (producer.config["batch.size"] - RECORD_BATCH_OVERHEAD) // (size + RECORD_OVERHEAD))
    chunk = per_batch
    if args.throughput > 0:
        chunk = max(1, min(chunk, int(args.throughput / 50)))  # paced in steps of ~20 ms
    values = (payload,) * chunk
    acks = _Acks()
    acks.start()
    reporter = _Reporter(args.num_records, f"perf produce {args.topic}", args.reporting_interval)

    def note():
        with acks.lock:
            done, samples = acks.acked, acks.samples[-50:]
        elapsed = max(time.monotonic() - started, 1e-9)
        recent = sum(lat * n for lat, n in samples) / max(sum(n for _, n in samples), 1)
        return f"{done * size / elapsed / MB:.1f} MB/s, latency {recent * 1000:.1f} ms"

    def line():
        n, avg, worst, secs = acks.take_window()
        return (f"{plural(acks.acked, 'record')} acknowledged: {n / secs:.1f} records/s ({n * size / secs / MB:.2f} MB/s) "
                f"in the last {secs:.1f} s, latency avg {avg * 1000:.1f} ms, max {worst * 1000:.1f} ms")

    sent = 0
    started = time.monotonic()
    try:
        while sent < args.num_records:
            n = min(chunk, args.num_records - sent)
            t0 = time.monotonic()
            handle = producer.send_many(args.topic, values if n == chunk else values[:n])
            acks.add(t0, n, handle)
            sent += n
            if acks.error is not None:
                break
            reporter.update(acks.acked, note, line)
            if args.throughput > 0:
                ahead = sent / args.throughput - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        acks.finish()
        while acks.is_alive():
            acks.join(0.1)
            reporter.update(acks.acked, note, line)
        elapsed = time.monotonic() - started
    finally:
        acks.finish()
        reporter.close()
        producer.close(10)
    lat = latency_summary(acks.samples)
    secs = max(elapsed, 1e-9)
    summary = {"topic": args.topic, "records": acks.acked, "failed": acks.failed, "record_size": size,
               "seconds": round(elapsed, 3), "records_per_sec": round(acks.acked / secs, 1),
               "mb_per_sec": round(acks.acked * size / secs / MB, 2), "latency_ms": lat}
    if args.output == "table":
        print(f"{plural(acks.acked, 'record')} sent in {elapsed:.2f} s: {summary['records_per_sec']:.1f} records/s "
              f"({summary['mb_per_sec']:.2f} MB/s), latency avg {lat['avg']:.2f} ms, max {lat['max']:.2f} ms, "
              + ", ".join(f"{name} {lat[name]:.2f} ms" for name, _ in PERCENTILES))
    else:
        emit(args, summary)
    if acks.error is not None:
        raise ToolError(f"{plural(acks.failed, 'record')} failed: {error_line(acks.error)}", EXIT_FAILED)
    return EXIT_OK


# -- perf consume ----------------------------------------------------------------------------
def run_consume(args) -> int:
    import pyarrow.compute as pc

    overrides = {"group.id": args.group, "auto.offset.reset": "earliest"}
    props = properties(args, overrides)
    count = topic_partitions(props, args.topic)
    tps = [(args.topic, p) for p in range(count)]
    started = time.monotonic()
    consumer = make_consumer(props)
    assigned_at = []
    try:
        if args.group is not None:
            consumer.subscribe([args.topic], on_assign=lambda c, added: assigned_at.append(time.monotonic()))
        else:
            consumer.assign(tps)
            consumer.seek_to_beginning()
            assigned_at.append(time.monotonic())
        wanted = args.messages
        if wanted is None:
            begin, end = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
            wanted = sum(end[tp] - begin[tp] for tp in tps)
        reporter = _Reporter(wanted, f"perf consume {args.topic}", args.reporting_interval)
        records = nbytes = 0
        window = [0, 0, time.monotonic()]
        last_record = time.monotonic()
        timed_out = False

        def note():
            return f"{nbytes / max(time.monotonic() - started, 1e-9) / MB:.1f} MB/s"

        def line():
            now = time.monotonic()
            n, b, since = window
            secs = max(now - since, 1e-9)
            window[:] = [0, 0, now]
            return (f"{plural(records, 'record')} read: {n / secs:.1f} records/s ({b / secs / MB:.2f} MB/s) "
                    f"in the last {secs:.1f} s")

        try:
            while records < wanted:
                batch = consumer.poll_arrow(0.2, max_records=min(ARROW_POLL_RECORDS, wanted - records))
                now = time.monotonic()
                if batch.num_rows:
                    got = batch.num_rows
                    size = sum((pc.sum(pc.binary_length(batch.column(name))).as_py() or 0)
                               for name in ("key", "value"))
                    records += got
                    nbytes += size
                    window[0] += got
                    window[1] += size
                    last_record = now
                elif now - last_record > args.timeout / 1000:
                    timed_out = True
                    break
                reporter.update(records, note, line)
        finally:
            reporter.close()
        ended = time.monotonic()
    finally:
        consumer.close()
    elapsed = max(ended - started, 1e-9)
    rebalance = (assigned_at[0] - started) if assigned_at else 0.0
    fetch = max(elapsed - rebalance, 1e-9)
    summary = {"topic": args.topic, "records": records, "mb": round(nbytes / MB, 4), "seconds": round(elapsed, 3),
               "mb_per_sec": round(nbytes / elapsed / MB, 2), "records_per_sec": round(records / elapsed, 1),
               "rebalance_time_ms": round(rebalance * 1000, 1), "fetch_time_ms": round(fetch * 1000, 1),
               "fetch_mb_per_sec": round(nbytes / fetch / MB, 2), "fetch_records_per_sec": round(records / fetch, 1)}
    if args.output == "table":
        print(f"{plural(records, 'record')} ({summary['mb']:.2f} MB) read in {elapsed:.2f} s: {summary['records_per_sec']:.1f} "
              f"records/s ({summary['mb_per_sec']:.2f} MB/s); rebalance {summary['rebalance_time_ms']:.0f} ms, "
              f"fetch {summary['fetch_time_ms']:.0f} ms: {summary['fetch_records_per_sec']:.1f} records/s "
              f"({summary['fetch_mb_per_sec']:.2f} MB/s)")
    else:
        emit(args, summary)
    if timed_out:
        raise ToolError(f"read {records} of {wanted} records: none came for {args.timeout} ms", EXIT_FAILED)
    return EXIT_OK
