"""``kafkacore perf reference``: the scenarios of Kafka's two best-known published benchmarks,
run with their published settings against any cluster, beside the published figures.

The sources (the figures and settings below are facts taken from them, with the source named):

- ``kreps2014``: Jay Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second (On Three
  Cheap Machines)", LinkedIn Engineering, 2014, and the benchmark commands published with it.
  Three brokers, each a 6-core Intel Xeon 2.5 GHz with 32 GB, six 7200 rpm SATA disks and
  1 GbE; three more such machines ran ZooKeeper and the load. 100-byte records, 6 partitions,
  50 million records per run, ``buffer.memory=67108864``, ``batch.size=8196`` (64000 for the
  acks=all run, 128000 for the record-size sweep, which writes 1000 MiB per size).
- ``confluent2020``: "Benchmarking Apache Kafka, Apache Pulsar, and RabbitMQ: Which is the
  Fastest?", Confluent blog, 2020: three AWS i3en.2xlarge brokers (8 vCPU each); peak 605 MB/s,
  p99 end-to-end latency 5 ms at a 200 MB/s load. It ran the OpenMessaging Benchmark: workload
  ``1-topic-100-partitions-1kb-4p-4c-*`` (1 topic, 100 partitions, 1 KiB records, 4 producers)
  and driver ``kafka-throughput.yaml`` (replication factor 3, min.insync.replicas=2, acks=all,
  linger.ms=1, batch.size=1048576).

Every load runs in processes of its own (spawned; each producer and consumer one process, as
each ran on its own machine or thread in the sources), started together once all are connected.
A *driver* names the functions that run them: ``KAFKACORE_DRIVER`` uses kafkacore's Producer and
Consumer; bench/bench_kafka_reference.py adds confluent-kafka's. ``run_reference`` runs the
scenarios asked for and returns one result dict per scenario (the JSON of ``-o json`` and of the
benchmark script), ``format_table`` prints them.

Rates are records/s and MB/s with MB = 1024 * 1024 bytes of record values (Kafka's perf tools'
unit, and the 2014 post's: 821,557 records/s of 100 bytes is its 78.3 MB/s). A scenario needing
more brokers than the cluster has (replication factor 3) is skipped with the reason.
"""
from __future__ import annotations

import os
import resource
import time
import uuid
from dataclasses import dataclass, field

from .common import MB, RECORD_OVERHEAD
from .progress import LIVE_LINE_DELAY

KREPS_2014 = "kreps2014"
CONFLUENT_2020 = "confluent2020"
SOURCES = {
    KREPS_2014: {
        "title": 'Jay Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second (On Three Cheap '
                 'Machines)", LinkedIn Engineering, 2014',
        "url": "",  # the LinkedIn Engineering blog; its address was not re-checked for this table
        "hardware": "3 brokers x (6-core Xeon 2.5 GHz, 32 GB, 6 x 7200 rpm SATA, 1 GbE); load from 3 more machines",
        "broker_cores": 18},
    CONFLUENT_2020: {
        "title": '"Benchmarking Apache Kafka, Apache Pulsar, and RabbitMQ: Which is the Fastest?", '
                 'Confluent blog, 2020',
        "url": "https://www.confluent.io/blog/kafka-fastest-messaging-system/",
        "hardware": "3 brokers x AWS i3en.2xlarge (8 vCPU, 64 GiB, NVMe); load from separate workers",
        "broker_cores": 24},
}
KREPS_BUFFER_MEMORY = 67108864
CONFLUENT_LOAD_FRACTION = 200 / 605  # its p99 was measured at 200 MB/s of a 605 MB/s peak
READY_TIMEOUT_S = 120.0  # spawning, importing and connecting every load process
IDLE_TIMEOUT_S = 60.0  # a consumer that sees no record this long gives up
CPU_BOUND = 0.85  # a process busy this share of a core is what bound the run


@dataclass(frozen=True)
class Published:
    source: str
    records_per_sec: float | None = None
    mb_per_sec: float | None = None
    latency_ms: dict | None = None
    note: str = ""


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    kind: str  # produce, consume, produce_consume, growth, sizes, latency_serial, latency_paced
    published: Published
    record_size: int = 100
    partitions: int = 6
    replication: int = 1
    acks: str = "1"
    batch_size: int = 8196
    producers: int = 1
    consumers: int = 0
    linger_ms: int | None = None
    topic_configs: dict = field(default_factory=dict)

    def producer_props(self) -> dict:
        props = {"acks": self.acks, "batch.size": str(self.batch_size)}
        if self.linger_ms is not None:
            props["linger.ms"] = str(self.linger_ms)
        if self.published.source == KREPS_2014:
            props["buffer.memory"] = str(KREPS_BUFFER_MEMORY)
            props.setdefault("linger.ms", "0")  # the Java producer's default in 2014
        return props


_K = KREPS_2014
SCENARIOS = (
    Scenario("1", "one producer, no replication", "produce", Published(_K, 821_557, 78.3)),
    Scenario("2", "one producer, 3x replication, acks=1", "produce", Published(_K, 786_980, 75.1), replication=3),
    Scenario("3", "one producer, 3x replication, acks=all", "produce", Published(_K, 421_823, 40.2),
             replication=3, acks="all", batch_size=64000),
    Scenario("4", "three producers, 3x replication, acks=1", "produce", Published(_K, 2_024_032, 193.0),
             replication=3, producers=3),
    Scenario("5", "throughput as stored data grows", "growth",
             Published(_K, note="flat to about 1 TB stored (a chart; no figures given)")),
    Scenario("6", "record sizes 10 B to 100 KB", "sizes",
             Published(_K, note="a chart only; 100 B is scenario 2's 786,980 records/s"), batch_size=128000),
    Scenario("7a", "one consumer", "consume", Published(_K, 940_521, 89.7), consumers=1),
    Scenario("7b", "three consumers", "consume", Published(_K, 2_615_968, 249.5), consumers=3),
    Scenario("8", "a producer and a consumer at once", "produce_consume", Published(_K, 795_064, 75.8),
             consumers=1),
    Scenario("9a", "end-to-end latency, one record at a time", "latency_serial",
             Published(_K, latency_ms={"p50": 2, "p99": 3, "p99.9": 14}), partitions=1, linger_ms=0),
    Scenario("9b", "end-to-end latency at 200/605 of peak, 3x replication, acks=all", "latency_paced",
             Published(CONFLUENT_2020, latency_ms={"p99": 5}, note="at 200 MB/s"),
             record_size=1024, partitions=100, replication=3, acks="all", batch_size=1048576, linger_ms=1,
             producers=1, consumers=1, topic_configs={"min.insync.replicas": "2"}),
    Scenario("10", "peak MB/s, 3x replication, acks=all", "produce", Published(CONFLUENT_2020, mb_per_sec=605),
             record_size=1024, partitions=100, replication=3, acks="all", batch_size=1048576, linger_ms=1,
             producers=4, topic_configs={"min.insync.replicas": "2"}),
)
BY_KEY = {s.key: s for s in SCENARIOS}
# the order they run in: 9b's load is a share of 10's peak, 7 reads what 1-3 wrote, growth is the longest
RUN_ORDER = ("1", "2", "3", "4", "10", "7a", "7b", "8", "9a", "9b", "6", "5")
RECORD_SIZES = (10, 100, 1000, 10_000, 100_000)

SCALES = {
    # records per producer run; bytes written by the growth run (in steps); bytes per record size;
    # serial latency samples, or as many as come in latency_seconds (a broker that answers a
    # round trip in 250 ms would take 20 minutes for 5000); seconds of paced load; bytes of the peak run
    "quick": {"records": 100_000, "growth_bytes": 256 * MB, "growth_steps": 8, "size_bytes": 8 * MB,
              "latency_records": 500, "latency_seconds": 10, "paced_seconds": 3, "peak_bytes": 32 * MB},
    "full": {"records": 2_000_000, "growth_bytes": 20 * 1024 * MB, "growth_steps": 20, "size_bytes": 256 * MB,
             "latency_records": 5000, "latency_seconds": 60, "paced_seconds": 20, "peak_bytes": 1024 * MB},
    # a few seconds a scenario: the tests' (they check the machinery, not the figures)
    "tiny": {"records": 2000, "growth_bytes": 2 * MB, "growth_steps": 2, "size_bytes": 64 * 1024,
             "latency_records": 20, "latency_seconds": 10, "paced_seconds": 1, "peak_bytes": MB},
}


class ScenarioError(Exception):
    """A scenario could not run to its end (a load process failed or timed out)."""


def parse_keys(text: str | None) -> list[str]:
    """'1,2,7' -> the scenarios in run order; '7' names 7a and 7b; None: all of them."""
    if not text:
        return list(RUN_ORDER)
    wanted = set()
    for item in (t.strip() for t in text.split(",") if t.strip()):
        found = [k for k in BY_KEY if k == item or k.rstrip("ab") == item]
        if not found:
            raise ValueError(f"no scenario {item!r} (there are {', '.join(BY_KEY)})")
        wanted.update(found)
    return [k for k in RUN_ORDER if k in wanted]


# -- load processes ---------------------------------------------------------------------------
def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _child(fn, spec, counter, barrier, queue):
    """One load process: ``fn(spec, counter, ready)`` connects, calls ready() (which returns
    when every process of the scenario is connected) and works; its result goes to ``queue``."""
    marks = {}

    def ready():
        barrier.wait(READY_TIMEOUT_S)
        marks["cpu"] = _cpu_seconds()

    try:
        out = fn(spec, counter, ready)
        out["cpu_s"] = _cpu_seconds() - marks.get("cpu", 0.0)
        queue.put(("ok", spec["worker"], out))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which says which scenario failed
        barrier.abort()
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f" (at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno})" if tb else ""
        queue.put(("error", spec["worker"], f"{spec['role']}: {type(e).__name__}: {e}{where}"))


def run_jobs(jobs, total, report, probe=None, timeout=3600.0):
    """Runs [(fn, spec)] in spawned processes started together; ``report(done)`` is called
    about ten times a second with the units done (the processes' counters summed). Returns
    (results in job order, span seconds, {process: share of a core}) or raises ScenarioError."""
    import multiprocessing as mp
    import queue as queue_mod
    from threading import BrokenBarrierError

    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(jobs) + 1)
    results_q = ctx.Queue()
    counters = [ctx.Value("q", 0, lock=False) for _ in jobs]
    procs = [ctx.Process(target=_child, args=(fn, dict(spec, worker=i), counters[i], barrier, results_q),
                         daemon=True, name=f"kafkacore-perf-{spec['role']}-{i}")
             for i, (fn, spec) in enumerate(jobs)]
    results, errors = {}, []
    try:
        for p in procs:
            p.start()
        try:
            barrier.wait(READY_TIMEOUT_S)
        except BrokenBarrierError:
            errors.extend(_drain(results_q, results, 5.0))
            raise ScenarioError("; ".join(errors) or "a load process did not start") from None
        before = probe() if probe else {}
        started = time.monotonic()
        deadline = started + timeout
        while len(results) + len(errors) < len(jobs):
            try:
                status, i, out = results_q.get(timeout=0.1)
                if status == "ok":
                    results[i] = out
                else:
                    errors.append(out)
            except queue_mod.Empty:
                pass
            report(sum(c.value for c in counters))
            if any(p.exitcode not in (None, 0) and i not in results for i, p in enumerate(procs)):
                _drain(results_q, results, 1.0, errors)
                errors = errors or ["a load process died without a result"]
            if errors:
                break
            if time.monotonic() > deadline:
                errors.append(f"not done within {timeout:.0f} s")
                break
        report(sum(c.value for c in counters))
        after = probe() if probe else {}
    finally:
        for p in procs:
            if p.is_alive() and errors:
                p.terminate()
            p.join(30)
    if errors or len(results) < len(jobs):
        raise ScenarioError("; ".join(errors) or "a load process died without a result")
    out = [results[i] for i in range(len(jobs))]
    span = max(r["t1"] for r in out) - min(r["t0"] for r in out)
    span = max(span, 1e-9)
    busy = {}
    for (fn, spec), r in zip(jobs, out):
        name = f"{spec['role']} {spec.get('index', 0) + 1}"
        busy[name] = r["cpu_s"] / max(r["t1"] - r["t0"], 1e-9)
    for name, cpu in after.items():
        if name in before:
            busy[name] = (cpu - before[name]) / max(time.monotonic() - started, 1e-9)
    return out, span, busy


def _drain(q, results, wait, errors=None):
    """Errors (and late results) still in the queue."""
    import queue as queue_mod

    found = []
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            status, i, out = q.get(timeout=0.1)
        except queue_mod.Empty:
            continue
        if status == "ok":
            results[i] = out
        else:
            found.append(out)
    if errors is not None:
        errors.extend(found)
    return found


def percentiles(samples_ms) -> dict:
    s = sorted(samples_ms)
    if not s:
        return {}
    pick = {"p50": 0.5, "p99": 0.99, "p99.9": 0.999}
    out = {k: round(s[min(len(s) - 1, int(len(s) * q))], 3) for k, q in pick.items()}
    out["max"] = round(s[-1], 3)
    out["samples"] = len(s)
    return out


# -- kafkacore's clients ------------------------------------------------------------------------
def _kc_props(spec, extra):
    return {"bootstrap.servers": spec["bootstrap"], **spec.get("client_props", {}), **extra}


def kc_produce(spec, counter, ready):
    from ..client.producer import Producer
    from ..record.layout import RECORD_BATCH_OVERHEAD

    producer = Producer(_kc_props(spec, spec["props"]))
    try:
        topic, n, size = spec["topic"], spec["records"], spec["size"]
        producer.partitions_for(topic)
        per_batch = (producer.config["batch.size"] - RECORD_BATCH_OVERHEAD) // (size + RECORD_OVERHEAD)
        chunk = max(1, min(per_batch, 10_000))
        values = (os.urandom(size),) * chunk
        handles = []
        ready()
        t0 = time.monotonic()
        sent = 0
        while sent < n:
            k = min(chunk, n - sent)
            handles.append(producer.send_many(topic, values if k == chunk else values[:k]))
            sent += k
            counter.value = sent
        left = producer.flush(600)
        t1 = time.monotonic()
        if left:
            raise ScenarioError(f"{left} records unacknowledged after 600 s")
        for h in handles:
            h.result(0)  # raises the first error of any batch
        return {"records": n, "bytes": n * size, "t0": t0, "t1": t1}
    finally:
        producer.close(10)


def kc_consume(spec, counter, ready):
    from ..client.consumer import Consumer

    consumer = Consumer(_kc_props(spec, {"enable.auto.commit": "false"}))
    try:
        topic, n = spec["topic"], spec["records"]
        consumer.assign([(topic, p) for p in range(spec["partitions"])])
        consumer.seek_to_beginning()
        ready()
        t0 = last = time.monotonic()
        got = 0
        while got < n:
            batch = consumer.poll_arrow(0.2, max_records=min(100_000, n - got))
            now = time.monotonic()
            if batch.num_rows:
                got += batch.num_rows
                counter.value = got
                last = now
            elif now - last > IDLE_TIMEOUT_S:
                raise ScenarioError(f"read {got} of {n} records: none came for {IDLE_TIMEOUT_S:.0f} s")
        return {"records": got, "bytes": got * spec["size"], "t0": t0, "t1": time.monotonic()}
    finally:
        consumer.close(autocommit=False)


def kc_latency_serial(spec, counter, ready):
    """Kafka's EndToEndLatency tool's loop: send one record, wait for its acknowledgement, poll
    until the consumer has it; the time from send to receipt is one sample."""
    from ..client.consumer import Consumer
    from ..client.producer import Producer

    producer = Producer(_kc_props(spec, spec["props"]))
    consumer = Consumer(_kc_props(spec, {"enable.auto.commit": "false"}))
    try:
        topic, n = spec["topic"], spec["records"]
        value = os.urandom(spec["size"])
        consumer.assign([(topic, 0)])
        consumer.seek(topic, 0, 0)  # a new topic: from its start, whatever auto.offset.reset says
        producer.send(topic, value, partition=0).result(30)  # a first record: connections and positions set up
        deadline = time.monotonic() + 30
        while not consumer.poll(1.0, max_records=1):
            if time.monotonic() > deadline:
                raise ScenarioError("the warm-up record was not consumed within 30 s")
        samples = []
        ready()
        t0 = time.monotonic()
        for i in range(n):
            if time.monotonic() - t0 > spec["seconds"]:
                break
            sent = time.perf_counter()
            producer.send(topic, value, partition=0).result(30)
            deadline = time.monotonic() + 30
            while not consumer.poll(1.0, max_records=1):
                if time.monotonic() > deadline:
                    raise ScenarioError(f"record {i} not consumed within 30 s")
            samples.append((time.perf_counter() - sent) * 1000)
            counter.value = i + 1
        return {"records": len(samples), "bytes": len(samples) * spec["size"], "t0": t0, "t1": time.monotonic(),
                "latency_ms": percentiles(samples)}
    finally:
        producer.close(10)
        consumer.close(autocommit=False)


def kc_paced_produce(spec, counter, ready):
    """``rate`` records/s for ``seconds``, each value opening with its send time
    (CLOCK_MONOTONIC ns, the same clock in every process of this machine)."""
    from ..client.producer import Producer

    producer = Producer(_kc_props(spec, spec["props"]))
    try:
        topic, rate, size = spec["topic"], spec["rate"], spec["size"]
        producer.partitions_for(topic)
        pad = os.urandom(size - 8)
        total = int(rate * spec["seconds"])
        ready()
        t0 = time.monotonic()
        for i in range(total):
            ahead = t0 + i / rate - time.monotonic()
            if ahead >= 0.001:  # sleep when ahead, never spin: the brokers need the cores
                time.sleep(ahead)
            producer.send(topic, time.monotonic_ns().to_bytes(8, "big") + pad)
            counter.value = i + 1
        left = producer.flush(120)
        if left:
            raise ScenarioError(f"{left} records unacknowledged after 120 s")
        return {"records": total, "bytes": total * size, "t0": t0, "t1": time.monotonic()}
    finally:
        producer.close(10)


def kc_latency_consume(spec, counter, ready):
    from ..client.consumer import Consumer

    consumer = Consumer(_kc_props(spec, {"enable.auto.commit": "false"}))
    try:
        topic, n = spec["topic"], spec["records"]
        consumer.assign([(topic, p) for p in range(spec["partitions"])])
        consumer.seek_to_beginning()  # a new topic: from its start, whatever auto.offset.reset says
        consumer.poll(0)
        samples = []
        ready()
        t0 = last = time.monotonic()
        while len(samples) < n:
            records = consumer.poll(0.2)
            now_ns = time.monotonic_ns()
            for r in records:
                samples.append((now_ns - int.from_bytes(r.value[:8], "big")) / 1e6)
            if records:
                counter.value = len(samples)
                last = time.monotonic()
            elif time.monotonic() - last > IDLE_TIMEOUT_S:
                raise ScenarioError(f"read {len(samples)} of {n} records: none came for {IDLE_TIMEOUT_S:.0f} s")
        return {"records": len(samples), "bytes": len(samples) * spec["size"], "t0": t0, "t1": time.monotonic(),
                "latency_ms": percentiles(samples)}
    finally:
        consumer.close(autocommit=False)


KAFKACORE_DRIVER = {"name": "kafkacore", "produce": kc_produce, "consume": kc_consume,
                    "latency_serial": kc_latency_serial, "paced_produce": kc_paced_produce,
                    "latency_consume": kc_latency_consume}


# -- the scenarios ------------------------------------------------------------------------------
class Runner:
    """Runs scenarios against one cluster with one driver. ``admin``: kafkacore's AdminClient
    for the cluster; ``probe()``: {process name: CPU seconds} of processes the load does not
    own (the brokers, when the caller started them), for what bound each run;
    ``progress(label, total)`` -> an object with update(done) and close()."""

    def __init__(self, admin, bootstrap, driver, scale, progress, probe=None, client_props=None,
                 cores=None, log=None, target="cluster"):
        self.admin, self.bootstrap, self.driver, self.scale = admin, bootstrap, driver, scale
        self.progress, self.probe, self.client_props = progress, probe, dict(client_props or {})
        self.cores = cores or os.cpu_count() or 1
        self.log = log or (lambda msg: None)
        self.target = target
        self.brokers = len(admin.describe_cluster().brokers)
        self.filled = {}  # replication factor -> (topic, records) written by 1-3, read by 7
        self.created = []
        self.peak_mb = None  # set by 10 (or 1), the load of 9b is a share of it

    # each scenario kind returns the measured part of its result dict
    def run(self, key: str) -> dict:
        s = BY_KEY[key]
        base = {"key": s.key, "title": s.title, "client": self.driver["name"], "target": self.target}
        if s.replication > self.brokers:
            return dict(base, skipped=f"needs {s.replication} brokers, the cluster has {self.brokers}")
        if s.kind == "latency_paced" and self.peak_mb is None:
            return dict(base, skipped="needs scenario 10's (or 1's) peak in the same run")
        load0 = os.getloadavg()[0]
        try:
            out = getattr(self, "_" + s.kind)(s)
        except Exception as e:  # noqa: BLE001 - one scenario's failure is its result; the others still run
            self.log(f"scenario {s.key} ({s.title}) failed: {e}")
            return dict(base, error=str(e))
        out.update(base, loadavg=[round(load0, 2), round(os.getloadavg()[0], 2)])
        if key in ("10", "1") and out.get("mb_per_sec") and (key == "10" or self.peak_mb is None):
            self.peak_mb = out["mb_per_sec"]
        return out

    def close(self):
        for topic in self.created:
            try:
                self.admin.delete_topic(topic)
            except Exception as e:  # noqa: BLE001 - the run's results stand; say what is left behind
                self.log(f"could not delete topic {topic}: {e}")
        self.created.clear()

    def _topic(self, s: Scenario, partitions=None, tag="") -> str:
        name = f"kc-ref-{s.key}{tag}-{self.driver['name']}-{uuid.uuid4().hex[:6]}"
        self.admin.create_topic(name, partitions or s.partitions, s.replication, configs=s.topic_configs or None)
        self.created.append(name)
        return name

    def _spec(self, s, role, topic, **kw):
        spec = {"role": role, "bootstrap": self.bootstrap, "topic": topic, "size": s.record_size,
                "partitions": s.partitions, "props": s.producer_props(), "client_props": self.client_props}
        spec.update(kw)
        return spec

    def _jobs(self, label, jobs, total):
        bar = self.progress(f"{label} ({self.driver['name']}, {self.target})", total)
        try:
            return run_jobs(jobs, total, bar.update, self.probe)
        finally:
            bar.close()

    def _rates(self, results, span, busy, size, records=None):
        records = sum(r["records"] for r in results) if records is None else records
        return {"records": records, "seconds": round(span, 3), "records_per_sec": round(records / span, 1),
                "mb_per_sec": round(records * size / span / MB, 2), "busy": _round(busy),
                "bound": bound_by(busy, self.cores)}

    def _produce(self, s: Scenario) -> dict:
        n = self.scale["records"]
        if s.key == "10":
            n = max(1, self.scale["peak_bytes"] // s.record_size // s.producers)
        topic = self._topic(s)
        jobs = [(self.driver["produce"], self._spec(s, "producer", topic, records=n, index=i))
                for i in range(s.producers)]
        out = self._rates(*self._jobs(f"{s.key}. {s.title}", jobs, n * s.producers), s.record_size)
        if s.producers == 1 and s.key in ("1", "2", "3"):
            self.filled.setdefault(s.replication, (topic, n))
        return out

    def _consume(self, s: Scenario) -> dict:
        rf = 3 if self.brokers >= 3 else 1  # the 2014 consumers read its 3x replicated topic
        if rf not in self.filled:
            fill = Scenario(s.key, s.title, "produce", s.published, replication=rf)
            topic = self._topic(fill, tag="-fill")
            n = self.scale["records"]
            self._jobs(f"{s.key}. writing the records to read", [(self.driver["produce"], self._spec(
                fill, "producer", topic, records=n))], n)
            self.filled[rf] = (topic, n)
        topic, n = self.filled[rf]
        jobs = [(self.driver["consume"], self._spec(s, "consumer", topic, records=n, index=i))
                for i in range(s.consumers)]
        out = self._rates(*self._jobs(f"{s.key}. {s.title}", jobs, n * s.consumers), s.record_size)
        out["replication"] = rf
        return out

    def _produce_consume(self, s: Scenario) -> dict:
        n = self.scale["records"]
        topic = self._topic(s)
        jobs = [(self.driver["produce"], self._spec(s, "producer", topic, records=n)),
                (self.driver["consume"], self._spec(s, "consumer", topic, records=n))]
        results, span, busy = self._jobs(f"{s.key}. {s.title}", jobs, 2 * n)
        prod = results[0]
        out = self._rates([prod], prod["t1"] - prod["t0"], busy, s.record_size)
        cons = results[1]
        out["consumer_records_per_sec"] = round(cons["records"] / max(cons["t1"] - cons["t0"], 1e-9), 1)
        return out

    def _latency_serial(self, s: Scenario) -> dict:
        topic = self._topic(s)
        n = self.scale["latency_records"]
        results, span, busy = self._jobs(f"{s.key}. {s.title}", [(self.driver["latency_serial"], self._spec(
            s, "producer+consumer", topic, records=n, seconds=self.scale["latency_seconds"]))], n)
        return {"records": results[0]["records"], "seconds": round(span, 3), "latency_ms": results[0]["latency_ms"],
                "busy": _round(busy), "bound": "one record at a time: round trips, not throughput"}

    def _latency_paced(self, s: Scenario) -> dict:
        topic = self._topic(s)
        rate = max(100.0, self.peak_mb * CONFLUENT_LOAD_FRACTION * MB / s.record_size)
        n = int(rate * self.scale["paced_seconds"])
        jobs = [(self.driver["paced_produce"], self._spec(s, "producer", topic, rate=rate,
                                                          seconds=self.scale["paced_seconds"])),
                (self.driver["latency_consume"], self._spec(s, "consumer", topic, records=n))]
        results, span, busy = self._jobs(f"{s.key}. {s.title}", jobs, 2 * n)
        return {"records": n, "seconds": round(span, 3), "load_mb_per_sec": round(rate * s.record_size / MB, 2),
                "load_fraction_of_peak": round(CONFLUENT_LOAD_FRACTION, 3), "latency_ms": results[1]["latency_ms"],
                "busy": _round(busy), "bound": bound_by(busy, self.cores)}

    def _sizes(self, s: Scenario) -> dict:
        points = []
        for size in RECORD_SIZES:
            sized = Scenario(s.key, s.title, "produce", s.published, record_size=size, batch_size=s.batch_size,
                             replication=3 if self.brokers >= 3 else 1)
            topic = self._topic(sized, tag=f"-{size}")
            n = max(10, min(self.scale["size_bytes"] // size, self.scale["records"] * 2))
            results, span, busy = self._jobs(f"{s.key}. records of {size} B", [(self.driver["produce"], self._spec(
                sized, "producer", topic, records=n))], n)
            point = self._rates(results, span, busy, size)
            point["record_size"] = size
            points.append(point)
            self._delete(topic)
        return {"points": points, "replication": 3 if self.brokers >= 3 else 1,
                "bound": f"{points[0]['record_size']} B: {points[0]['bound']}"}

    def _growth(self, s: Scenario) -> dict:
        topic = self._topic(s)
        steps = self.scale["growth_steps"]
        per_step = max(1, self.scale["growth_bytes"] // s.record_size // steps)
        points = []
        try:
            for i in range(steps):
                stored = self._stored(topic)
                results, span, busy = self._jobs(f"{s.key}. {s.title}, step {i + 1}/{steps} "
                                                 f"({stored / 2**30:.1f} GiB stored)", [(
                                                     self.driver["produce"], self._spec(
                                                         s, "producer", topic, records=per_step))], per_step)
                point = self._rates(results, span, busy, s.record_size)
                point["stored_bytes"] = stored
                points.append(point)
            final = self._stored(topic)
        finally:
            self._delete(topic)  # the disk it took goes back before the next scenario
        return {"points": points, "stored_bytes": final, "records_per_sec": round(
            sum(p["records"] for p in points) / sum(p["seconds"] for p in points), 1),
            "bound": points[-1]["bound"] if points else ""}

    def _stored(self, topic) -> int:
        try:
            return sum(v for (t, _, _), v in self.admin.log_dir_sizes().items() if t == topic)
        except Exception as e:  # noqa: BLE001 - a broker without DescribeLogDirs: count what was sent
            raise ScenarioError(f"cannot read the topic's size on disk (DescribeLogDirs): {e}") from None

    def _delete(self, topic):
        if topic in self.created:
            self.created.remove(topic)
            self.admin.delete_topic(topic)


def _round(busy: dict) -> dict:
    return {k: round(v, 2) for k, v in busy.items()}


def bound_by(busy: dict, cores: int, loadavg: float | None = None) -> str:
    """What bound a run, from each process's share of a core over it: the busiest process when
    it used most of a core; the machine when the processes together used most of its cores;
    the machine's other work when they did not but the load average says the cores were
    taken; else none of them (the run waited: on the disk, the network, or round trips)."""
    if not busy:
        return "unknown"
    name, top = max(busy.items(), key=lambda kv: kv[1])
    total = sum(busy.values())
    busiest = f"{name} {top * 100:.0f}% of a core"
    if total >= CPU_BOUND * cores:
        return f"CPU: all {cores} cores ({total * 100:.0f}%; {busiest})"
    if top >= CPU_BOUND:
        return f"CPU of {busiest}"
    if loadavg is None:
        loadavg = os.getloadavg()[0]
    if loadavg >= cores:
        return f"CPU taken by other work (load average {loadavg:.1f} on {cores} cores; {busiest})"
    return f"waiting, not CPU ({busiest})"


def per_core(value, cores):
    return None if value is None else value / cores


def format_table(results: list[dict], cores: int) -> list[str]:
    """The table ``kafkacore perf reference`` prints and bench/ writes: one line per result."""
    head = ("scenario", "published", "per core", "measured", "per core", "bound")
    rows = [head]
    order = list(BY_KEY)
    for r in sorted(results, key=lambda r: order.index(r["key"])):  # stable: targets, clients as run
        s = BY_KEY[r["key"]]
        pub, src = s.published, SOURCES[s.published.source]
        published = _figure(pub.records_per_sec, pub.mb_per_sec, pub.latency_ms) or pub.note
        pub_core = _figure(per_core(pub.records_per_sec, src["broker_cores"]),
                           per_core(pub.mb_per_sec, src["broker_cores"]), None)
        label = f"{s.key}. {s.title} [{r['client']}, {r['target']}]"
        if "skipped" in r or "error" in r:
            rows.append((label, published, pub_core, "skipped: " + r["skipped"] if "skipped" in r
                         else "failed: " + r["error"], "", ""))
            continue
        if "points" in r:
            measured = "; ".join(
                f"{_size(p)}: {p['records_per_sec']:,.0f}/s {p['mb_per_sec']:.1f} MB/s" for p in r["points"])
            ours_core = ""
        else:
            measured = _figure(r.get("records_per_sec"), r.get("mb_per_sec"), r.get("latency_ms"))
            ours_core = _figure(per_core(r.get("records_per_sec"), cores), per_core(r.get("mb_per_sec"), cores), None)
        rows.append((label, published, pub_core, measured, ours_core, r.get("bound", "")))
    return rows


def _size(point):
    if "record_size" in point:
        return f"{point['record_size']} B"
    return f"{point['stored_bytes'] / 2**30:.1f} GiB"


def _figure(rps, mbps, lat) -> str:
    parts = []
    if rps is not None:
        parts.append(f"{rps:,.0f} rec/s")
    if mbps is not None:
        parts.append(f"{mbps:,.1f} MB/s")
    if lat:
        parts.append(" ".join(f"{k} {v:g} ms" for k, v in lat.items() if k.startswith("p")))
    return ", ".join(parts)


def text_table(rows) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


# -- progress and the command ---------------------------------------------------------------------
class StderrProgress:
    """A scenario's progress on stderr: the live bar on a terminal; elsewhere a line when it
    starts, every ``interval`` seconds and when it ends (a log shows where a long run is)."""

    def __init__(self, label, total, interval=5.0, stream=None):
        import sys

        from .progress import Progress

        self.stream = stream or sys.stderr
        self.label, self.total, self.interval = label, total, interval
        self.bar = Progress(total, label, unit="records", delay=LIVE_LINE_DELAY, stream=self.stream)
        self.started = time.monotonic()
        self.next_line = self.started + interval
        self.done = 0
        if not self.bar.enabled:
            self._line(f"{label}: started")

    def update(self, done):
        self.done = done
        if self.bar.enabled:
            self.bar.update(done)
        elif time.monotonic() >= self.next_line:
            self.next_line = time.monotonic() + self.interval
            self._line(f"{self.label}: {done:,} of {self.total:,} records")

    def close(self):
        self.bar.close()
        self._line(f"{self.label}: {self.done:,} records in {time.monotonic() - self.started:.1f} s")

    def _line(self, text):
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=self.stream, flush=True)


def machine() -> dict:
    """What the figures were measured on: cores, memory, CPU model, load at the start."""
    info = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}
    try:
        with open("/proc/meminfo") as f:
            info["memory_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:  # not Linux: the figures stand without these
        pass
    return info


def run_cli(args) -> int:
    import sys

    from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ToolError, admin_client, bootstrap_servers, client_settings
    from .output import emit

    try:
        keys = parse_keys(args.scenarios)
    except ValueError as e:
        raise ToolError(str(e), EXIT_USAGE) from None
    scale = SCALES["quick" if args.quick else "full"]
    cores = args.cores or os.cpu_count() or 1
    settings = client_settings(args)
    settings.pop("bootstrap.servers", None)
    results = []
    with admin_client(args) as admin:
        runner = Runner(admin, bootstrap_servers(args), KAFKACORE_DRIVER, scale, StderrProgress,
                        client_props=settings, cores=cores, log=lambda m: print(m, file=sys.stderr, flush=True))
        try:
            for i, key in enumerate(keys):
                print(f"[{i + 1}/{len(keys)}] scenario {key}: {BY_KEY[key].title}", file=sys.stderr, flush=True)
                results.append(runner.run(key))
        finally:
            runner.close()
    results.sort(key=lambda r: list(BY_KEY).index(r["key"]))
    if args.output == "table":
        print(text_table(format_table(results, cores)))
        for source in sorted({BY_KEY[r["key"]].published.source for r in results}):
            print(f"{source}: {SOURCES[source]['title']}; {SOURCES[source]['hardware']}")
    else:
        emit(args, {"machine": machine(), "cores": cores, "scale": "quick" if args.quick else "full",
                    "results": results})
    failed = [r for r in results if "error" in r]
    if failed:
        raise ToolError(f"{len(failed)} scenario(s) failed: " + "; ".join(f"{r['key']}: {r['error']}" for r in failed),
                        EXIT_FAILED)
    return EXIT_OK
