#!/usr/bin/env python3
"""The replicated cluster's benchmarks (issue 14): three `kafkacore serve` brokers and a real
ZooKeeper on 127.0.0.1 (kafkacore.cluster.local_cluster, as `kafkacore cluster up`), driven by
confluent-kafka (librdkafka), in one run.

    python bench/bench_cluster.py [--quick] [--only SECTION,...] [--records N] [--json FILE]

Sections:

- ``throughput``: a Producer (linger.ms=5, no compression, 100-byte values, no keys) sends N
  records (default 1M) to a 1-partition topic, twice on the same cluster: RF=3 with acks=all
  and min.insync.replicas=2, and RF=1 with acks=1. Time from the first produce() to the end of
  flush(); each broker's CPU (user+system, /proc) per 1M records. Target: RF=3 acks=all >= 0.5x
  RF=1 acks=1 (Kafka's published single-producer figures: 0.51x on three machines; here three
  brokers share two cores). Then the same load against a single-node `kafkacore serve` (no
  ZooKeeper, acks=1), started after the cluster is stopped: its CPU per 1M is the reference
  for the per-broker figures at RF=3.
- ``latency``: RF=3 acks=all, a Producer (linger.ms=0) paced at 10k msg/s for 5 s after 1 s of
  warm-up, the send time in each value; a Consumer in another process takes the difference on
  receipt (end to end: the record is only readable once the ISR has it). Target p99 <= 5 ms,
  with a plain acks=all producer as in the target's source; then the same with an idempotent
  producer, reported for information.
- ``catchup``: N MiB (default 1 GiB) are written to an RF=2 partition on brokers 1 and 2, then
  reassigned to 1, 2, 3 (KIP-455): time from broker 3's first replicated bytes on disk until the
  leader writes broker 3 into the ISR (the state znode), as MiB/s beside iperf3 over loopback in
  the same run. Target >= 0.25x iperf3. The time from the request to those first bytes (the
  controller's work, and the wait for a fetch already in flight from broker 3 to broker 1: up to
  replica.fetch.wait.max.ms, as in Kafka) is a fixed latency, not throughput; it is reported
  beside, with the rate over the whole span.
- ``failover``: SIGKILL of a leader while an acks=all producer writes: time to the first write
  acknowledged by the new leader (target <= zookeeper.session.timeout.ms + 2 s; the run uses a
  6 s session); then a controlled shutdown (SIGTERM) of the new leader: the longest gap between
  acknowledgements (target <= 2 s).

Needs ZooKeeper and Java from the system (apt-get install zookeeper), confluent-kafka, iperf3
(ci/bench_deps.sh) for ``catchup``. Results for the record go in bench/RESULTS.md.
"""
import argparse
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacore.cluster.local_cluster import LocalCluster, free_port
from prefault import prefault_memory

SECTIONS = ("throughput", "latency", "catchup", "failover")
SESSION_MS = 6000
SETTINGS = {"zookeeper.session.timeout.ms": str(SESSION_MS), "replica.lag.time.max.ms": "10000",
            "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4",
            "log.segment.bytes": str(256 << 20), "auto.leader.rebalance.enable": "false"}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def quiet(conf):
    return dict(conf, **{"log_level": 3})


def create_topic(bootstrap, name, partitions, rf, configs=None, assignment=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if assignment:
        topic = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=configs or {})
    else:
        topic = NewTopic(name, partitions, rf, config=configs or {})
    admin.create_topics([topic], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        t = admin.list_topics(name, timeout=10).topics.get(name)
        rf_now = len(assignment[0]) if assignment else rf
        if t and t.partitions and all(p.leader >= 0 and len(p.isrs) == rf_now for p in t.partitions.values()):
            return {p: m for p, m in t.partitions.items()}
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} not ready")


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def brokers_cpu(cluster):
    return {i: proc_cpu_seconds(b.proc.pid) for i, b in cluster.brokers.items()}


def produce(bootstrap, topic, n, acks, size=100):
    value = os.urandom(size)
    p = Producer(quiet({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                        "queue.buffering.max.messages": 1000000, "enable.idempotence": acks == "all"}))
    errors = []
    p.produce(topic, value, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    p.flush(60)
    t0 = time.perf_counter()
    for _ in range(n - 1):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(300)
    elapsed = time.perf_counter() - t0
    if left or errors:
        raise RuntimeError(f"{left} records unflushed, {len(errors)} errors ({errors[:3]})")
    return elapsed


def bench_throughput(cluster, n, results):
    bs = cluster.bootstrap_servers
    create_topic(bs, "tp-rf3", 1, 3, {"min.insync.replicas": "2"})
    create_topic(bs, "tp-rf1", 1, 1)
    for name, topic, acks in (("RF=3 acks=all", "tp-rf3", "all"), ("RF=1 acks=1", "tp-rf1", "1")):
        before = brokers_cpu(cluster)
        elapsed = produce(bs, topic, n, acks)
        after = brokers_cpu(cluster)
        cpu = {b: (after[b] - before[b]) * 1e6 / n for b in after}
        rate = n / elapsed
        results[f"throughput {name}"] = {"records_per_s": rate, "cpu_s_per_1M_by_broker": cpu}
        log(f"{name}: {rate:,.0f} rec/s; broker CPU per 1M: " + ", ".join(f"{b}: {c:.2f} s" for b, c in cpu.items()))
    ratio = results["throughput RF=3 acks=all"]["records_per_s"] / results["throughput RF=1 acks=1"]["records_per_s"]
    results["throughput ratio"] = ratio
    log(f"RF=3 acks=all / RF=1 acks=1: {ratio:.2f}x (target >= 0.5x)")


def bench_single_node(n, results):
    """The single-node broker under the same load: the CPU reference for RF=3."""
    root = tempfile.mkdtemp(prefix="kc_bench_single.")
    port = free_port()
    log_path = os.path.join(root, "broker.log")
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "serve", "--port", str(port), "--data-dir",
                                 os.path.join(root, "data")], stdout=out, stderr=subprocess.STDOUT)
    bs = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                AdminClient({"bootstrap.servers": bs}).list_topics(timeout=2)
                break
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.2)
        create_topic(bs, "tp-single", 1, 1)
        before = proc_cpu_seconds(proc.pid)
        elapsed = produce(bs, "tp-single", n, "1")
        cpu = (proc_cpu_seconds(proc.pid) - before) * 1e6 / n
        results["throughput single node acks=1"] = {"records_per_s": n / elapsed, "cpu_s_per_1M": cpu}
        log(f"single node acks=1: {n / elapsed:,.0f} rec/s; broker CPU per 1M: {cpu:.2f} s")
    finally:
        proc.terminate()
        proc.wait(60)
        shutil.rmtree(root, ignore_errors=True)


def _latency_consumer(bootstrap, topic, n, queue):
    c = Consumer(quiet({"bootstrap.servers": bootstrap, "group.id": f"lat-{os.getpid()}", "enable.auto.commit": False,
                        "fetch.wait.max.ms": 100, "fetch.min.bytes": 1, "socket.nagle.disable": True}))
    c.assign([TopicPartition(topic, 0, 0)])
    lat = []
    deadline = time.monotonic() + 120
    # poll() one record at a time: consume(num, timeout) returns only when num records are in
    # or the timeout passed, which would be measured as latency
    while len(lat) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        now = time.perf_counter_ns()
        if m is None or m.error():
            continue
        sent = int.from_bytes(m.value()[:8], "big")
        if sent:
            lat.append((now - sent) / 1e6)
    c.close()
    queue.put(lat)


def settle():
    """Before a timed part: the earlier sections' dirty pages written back (os.sync), so the
    kernel's flusher threads do not take the two cores from what is measured."""
    os.sync()
    time.sleep(1)


def bench_latency(cluster, seconds, results, rate=10000):
    """Twice, each on its own topic. First a plain acks=all producer, the target's setup: the
    OpenMessaging Benchmark's Kafka driver, behind Confluent's published figure, configures
    acks=all, linger.ms=1 and no idempotence (driver-kafka/kafka-latency.yaml; idempotence was
    off by default before Kafka 3.0); linger.ms=0 here. Then an idempotent producer, for
    information: librdkafka's idempotent producer holds records longer on its own side (the
    brokers' Produce times are the same; bench/RESULTS.md, 2026-11-26 afternoon)."""
    _latency_run(cluster, seconds, results, rate, "lat-rf3", False, "latency RF=3 acks=all")
    _latency_run(cluster, seconds, results, rate, "lat-rf3-idem", True, "latency RF=3 acks=all idempotent")


def _latency_run(cluster, seconds, results, rate, topic, idempotent, key):
    bs = cluster.bootstrap_servers
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    settle()
    total = rate * seconds
    q = multiprocessing.Queue()
    consumer = multiprocessing.Process(target=_latency_consumer, args=(bs, topic, total, q))
    consumer.start()
    p = Producer(quiet({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0, "enable.idempotence": idempotent,
                        "socket.nagle.disable": True}))
    pad = b"\0" * 92
    warm_end = time.monotonic() + 1.0
    while time.monotonic() < warm_end:  # warm-up records carry 0: not measured
        p.produce(topic, b"\0" * 8 + pad, partition=0)
        p.poll(0)
        time.sleep(0.001)
    p.flush(30)
    interval = 1.0 / rate
    t0 = time.perf_counter()
    for i in range(total):
        # paced as Kafka's ThroughputThrottler paces its perf tool: sleep when ahead, never
        # spin (a spinning load generator takes one of the two cores the brokers need)
        ahead = t0 + i * interval - time.perf_counter()
        if ahead >= 0.001:
            time.sleep(ahead)
        p.produce(topic, time.perf_counter_ns().to_bytes(8, "big") + pad, partition=0)
        p.poll(0)
    achieved = total / (time.perf_counter() - t0)
    p.flush(60)
    lat = q.get(timeout=180)
    consumer.join(30)
    lat.sort()
    pct = {k: lat[min(len(lat) - 1, int(len(lat) * f))] for k, f in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))}
    results[key] = dict(pct, records=len(lat), rate=achieved)
    log(f"end-to-end latency at {rate} msg/s (sent at {achieved:,.0f}/s), RF=3 acks=all, "
        f"{'idempotent' if idempotent else 'plain'} producer: p50 {pct['p50']:.2f} ms, p99 {pct['p99']:.2f} ms, "
        f"p99.9 {pct['p999']:.2f} ms over {len(lat)} records" + (" (info)" if idempotent else " (target p99 <= 5 ms)"))


def iperf3_mib_s(seconds=3):
    if shutil.which("iperf3") is None:
        return None
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
                             capture_output=True, text=True, timeout=seconds + 30)
        return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 8 / (1 << 20)
    finally:
        server.kill()
        server.wait()


def page_cache_write_mib_s(directory, mib):
    """The machine's bound for a follower's append: ``mib`` MiB written in 1 MiB pwrites to a
    new file in the data directory's file system (no fsync, as the follower's append)."""
    path = os.path.join(directory, "page-cache-probe")
    chunk = os.urandom(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        t0 = time.perf_counter()
        for k in range(mib):
            os.pwrite(fd, chunk, k << 20)
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    return mib / elapsed


def _first_bytes(path, timeout):
    """When the file at path first holds bytes (polled every millisecond)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.stat(path).st_size > 0:
                return time.perf_counter()
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"no replicated bytes in {path} within {timeout} s")
        time.sleep(0.001)


def bench_catchup(cluster, mib, results, prefault=True, repeat=5):
    """A new replica (KIP-455 reassignment onto a running broker) catching up ``mib`` MiB: from
    its first replicated bytes on disk to the leader's ISR write that takes it in (read from the
    partition's state znode, so neither a process start nor the ISR change's 2.5 s notification
    to the controller is counted). The time before the first bytes is reported apart: the
    controller's work and, when broker 3 already fetches other partitions from broker 1, that
    fetcher's long poll in flight (up to replica.fetch.wait.max.ms, 500 ms), which Kafka's
    fetcher waits out the same way. ``repeat`` rounds, each beside its own iperf3 run (loopback
    varies 3-4.4 GB/s from minute to minute here), the median reported; between rounds broker 3
    is moved off the partition again and its log deleted."""
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient
    from kazoo.client import KazooClient

    bs = cluster.bootstrap_servers
    create_topic(bs, "catchup", 1, 2, {"min.insync.replicas": "1"}, assignment=[[1, 2]])
    size = 10240
    n = mib * (1 << 20) // size
    value = os.urandom(size)
    p = Producer(quiet({"bootstrap.servers": bs, "acks": "1", "linger.ms": 20, "batch.size": 1 << 20,
                        "queue.buffering.max.kbytes": 1 << 20}))
    for _ in range(n):
        while True:
            try:
                p.produce("catchup", value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(600)
    settle()
    zk = KazooClient(hosts=cluster.zookeeper.connect_string)
    zk.start(30)
    admin = KafkaAdminClient(bootstrap_servers=bs)
    gib = max(1, -(-mib * 3 // 2 // 1024))  # the new replica's pages, with room
    state = "/brokers/topics/catchup/partitions/0/state"
    tp = KTopicPartition("catchup", 0)
    first_segment = os.path.join(cluster.brokers[3].data_dir, "catchup-0", f"{0:020d}.log")
    runs, starts, whole = [], [], []
    try:
        for _ in range(repeat):
            if prefault:
                prefault_memory(gib)
            t_request = time.perf_counter()
            admin.alter_partition_reassignments({tp: [1, 2, 3]})
            t_first = _first_bytes(first_segment, 30)
            while 3 not in json.loads(zk.get(state)[0])["isr"]:
                time.sleep(0.01)
            t_isr = time.perf_counter()
            elapsed = t_isr - t_first
            iperf = iperf3_mib_s()
            runs.append((mib / elapsed, iperf))
            starts.append(t_first - t_request)
            whole.append(mib / (t_isr - t_request))
            log(f"  catch-up {mib / elapsed:,.0f} MiB/s ({elapsed:.2f} s); iperf3 " +
                (f"{iperf:,.0f} MiB/s: {mib / elapsed / iperf:.2f}x" if iperf else "not installed") +
                f"; request to first bytes {t_first - t_request:.2f} s ({mib / (t_isr - t_request):,.0f} MiB/s"
                " over the whole span)")
            # broker 3 leaves again (its log deleted) for the next round
            admin.alter_partition_reassignments({tp: [1, 2]})
            deadline = time.monotonic() + 60
            while (3 in json.loads(zk.get(state)[0])["isr"]
                   or os.path.exists(os.path.join(cluster.brokers[3].data_dir, "catchup-0"))):
                if time.monotonic() > deadline:
                    raise RuntimeError("broker 3 did not leave the catchup partition within 60 s")
                time.sleep(0.05)
    finally:
        admin.close()
        zk.stop()
    rate = statistics.median(r for r, _b in runs)
    ratios = [r / b for r, b in runs if b]
    base = statistics.median(b for _r, b in runs if b) if ratios else None
    ratio = statistics.median(ratios) if ratios else None
    if prefault:
        prefault_memory(gib)
    disk = page_cache_write_mib_s(cluster.root, mib)
    results["catchup"] = {"mib": mib, "runs": runs, "mib_per_s": rate, "iperf3_mib_per_s": base, "ratio": ratio,
                          "request_to_first_bytes_s": starts, "whole_span_mib_per_s": whole,
                          "page_cache_write_mib_per_s": disk, "memory_prefaulted": prefault}
    log(f"a new replica catching up {mib} MiB, median of {len(runs)}: {rate:,.0f} MiB/s" +
        (f"; iperf3 loopback {base:,.0f} MiB/s; median ratio {ratio:.2f}x (target >= 0.25x)" if ratios
         else "; no iperf3") +
        f"; writing {mib} MiB to a new file {disk:,.0f} MiB/s ({rate / disk:.2f}x of it)" +
        f"; request to first bytes {statistics.median(starts):.2f} s (median), whole span"
        f" {statistics.median(whole):,.0f} MiB/s" +
        ("" if prefault else "; memory not prefaulted"))


def bench_failover(cluster, results):
    bs = cluster.bootstrap_servers
    md = create_topic(bs, "failover", 1, 3, {"min.insync.replicas": "2"})
    leader = md[0].leader
    acks = []  # (produced at, acknowledged at), both perf_counter()
    p = Producer(quiet({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0, "enable.idempotence": True,
                        "topic.metadata.refresh.interval.ms": 500, "retry.backoff.ms": 50}))

    def run_for(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            produced = time.perf_counter()
            p.produce("failover", b"x" * 100, partition=0,
                      on_delivery=lambda err, msg, t=produced: err is None and acks.append((t, time.perf_counter())))
            p.poll(0.002)

    run_for(1.0)
    killed = time.perf_counter()
    cluster.brokers[leader].kill()
    run_for(SESSION_MS / 1000 + 6)
    p.flush(60)
    # the first record produced after the kill that was acknowledged: only the new leader can have
    # written it (acknowledgements of earlier records may still be delivered by poll() after the
    # kill, and would measure nothing)
    after = [acked for produced, acked in acks if produced > killed]
    kill_s = (min(after) - killed) if after else None
    cluster.brokers[leader].start()
    time.sleep(3)
    new_leader = AdminClient({"bootstrap.servers": bs}).list_topics("failover", timeout=10).topics["failover"] \
        .partitions[0].leader
    acks.clear()
    run_for(1.0)
    stopping = time.perf_counter()
    cluster.brokers[new_leader].signal(signal.SIGTERM)  # a controlled shutdown while producing
    run_for(5.0)
    p.flush(60)
    cluster.brokers[new_leader].proc.wait(60)
    cluster.brokers[new_leader].proc = None
    window = sorted(acked for _produced, acked in acks if acked > stopping - 0.5)
    gap = max((b - a for a, b in zip(window, window[1:])), default=None)
    results["failover"] = {"sigkill_to_first_ack_s": kill_s, "controlled_shutdown_max_gap_s": gap}
    log(f"failover after SIGKILL: first acks=all write on the new leader after {kill_s:.2f} s "
        f"(target <= {SESSION_MS / 1000 + 2:.0f} s); controlled shutdown: longest gap between acks {gap:.2f} s "
        f"(target <= 2 s)")
    cluster.brokers[new_leader].start()


def machine():
    return {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "python": sys.version.split()[0],
            "kernel": os.uname().release}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--only", help=f"comma-separated sections: {', '.join(SECTIONS)}")
    ap.add_argument("--records", type=int, help="records for throughput (default 1M, quick 100k)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--no-prefault", action="store_true",
                    help="catchup: do not touch fresh memory first (see prefault_memory)")
    args = ap.parse_args(argv)
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    unknown = only - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections: {', '.join(sorted(unknown))}")
    n = args.records or (100_000 if args.quick else 1_000_000)
    results = {"machine": machine()}
    root = tempfile.mkdtemp(prefix="kc_bench_cluster.")
    cluster = LocalCluster(root, brokers=3, settings=SETTINGS)
    try:
        cluster.start()
        time.sleep(1)
        if "throughput" in only:
            bench_throughput(cluster, n, results)
        if "latency" in only:
            bench_latency(cluster, 2 if args.quick else 5, results)
        if "catchup" in only:
            bench_catchup(cluster, 64 if args.quick else 1024, results, prefault=not args.no_prefault)
        if "failover" in only:
            bench_failover(cluster, results)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    if "throughput" in only:
        bench_single_node(n, results)
    print(json.dumps(results, indent=1, default=str))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
