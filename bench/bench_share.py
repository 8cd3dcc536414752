#!/usr/bin/env python3
"""Share groups (KIP-932) on ONE partition: issue 29's share targets, on one ``kafkacore serve``.

    python bench/bench_share.py [--records 1500] [--work-ms 2] [--members 1,2,4,8] [--rounds 1]
                                [--throughput-records 200000]

1. Scaling: ``--records`` records on a one-partition topic, each needing ``--work-ms`` of work,
   read by 1, 2, 4 and 8 kafkacore ShareConsumers (implicit acknowledgement), each in its own
   process. The members join first; then the records are written, and the time runs from the
   first write until every record is accepted. Speed-up = time with 1 member / time with k
   (target: >= 0.9 x k up to 4). Beside it, the same number of classic-group consumers
   (kafkacore.Consumer, one group) on the same kind of topic: only one of them owns the
   partition, so they stay at 1x. The "work" is a sleep (what a record needing an I/O round
   trip costs): CPU work could not scale past the machine's cores.
2. Throughput with trivial work: one ShareConsumer against one classic Consumer reading the
   same ``--throughput-records`` records (records/s; target: share >= 0.5x classic).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

SETTINGS = {"num.partitions": "1", "offsets.topic.num.partitions": "1",
            "group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "100",
            "group.share.record.lock.duration.ms": "30000"}

# One member: joins, says "ready" once it has the partition (share) or has joined (classic),
# then sleeps work_ms per record and prints how many it finished after each poll; stops when
# the stop file exists.
MEMBER = textwrap.dedent("""
    import os, sys, time
    from kafkacore import Consumer, ShareConsumer
    bootstrap, kind, group, topic, work_ms, stop = sys.argv[1:7]
    work = float(work_ms) / 1000.0
    if kind == "share":
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 10})
    else:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "max.poll.records": 10})
    c.subscribe([topic])
    joined = time.monotonic() + 30
    ready = False
    while not os.path.exists(stop):
        recs = c.poll(0.1)
        if not ready and (c.assignment() or kind == "classic" and time.monotonic() > joined):
            ready = True
            print("ready", flush=True)
        for r in recs:
            time.sleep(work)
        if recs:
            print(len(recs), flush=True)
    c.close()
""")


def set_group_earliest(bootstrap, group):
    import confluent_kafka.admin as ka
    admin = ka.AdminClient({"bootstrap.servers": bootstrap})
    res = ka.ConfigResource(ka.ResourceType.GROUP, group, incremental_configs=[ka.ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=ka.AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def produce(bootstrap, topic, n, batch=10):
    from kafkacore import Producer
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as p:
        for i in range(0, n, batch):
            for j in range(i, min(n, i + batch)):
                p.send(topic, b"x" * 100, partition=0)
            p.flush()


def new_topic(broker, name):
    from broker_client import auto_create
    with broker.client() as c:
        auto_create(c, name)


def scaling_run(broker, kind, members, records, work_ms, tag):
    topic, group = f"{kind}-{tag}-{members}", f"g-{kind}-{tag}-{members}"
    new_topic(broker, topic)
    if kind == "share":
        set_group_earliest(broker.bootstrap, group)
    stop = os.path.join(tempfile.mkdtemp(), "stop")
    procs = [subprocess.Popen([sys.executable, "-c", MEMBER, broker.bootstrap, kind, group, topic, str(work_ms), stop],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
             for _ in range(members)]
    try:
        for p in procs:
            line = p.stdout.readline()
            assert line.strip() == "ready", line
        if kind == "classic":
            time.sleep(1.0)  # the last joiner's rebalance settles
        start = time.monotonic()
        produce(broker.bootstrap, topic, records)
        done = [0] * members
        import selectors
        sel = selectors.DefaultSelector()
        for i, p in enumerate(procs):
            sel.register(p.stdout, selectors.EVENT_READ, i)
        while sum(done) < records:
            for key, _ in sel.select(120):
                line = key.fileobj.readline()
                if not line:
                    raise RuntimeError("a member died")
                done[key.data] += int(line)
        elapsed = time.monotonic() - start
    finally:
        open(stop, "w").close()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    return elapsed, done


def throughput(broker, n):
    from kafkacore import Consumer, ShareConsumer
    topic, group = "tp-trivial", "tp-share"
    new_topic(broker, topic)
    from kafkacore import Producer
    # batch.size: the Java producer's default (16 KiB), not kafkacore's 1 MB: a share fetch
    # acquires whole batches, so batches of ~130 records are what a share group usually reads
    with Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 16384}) as p:
        for _ in range(n):
            p.send(topic, b"x" * 100, partition=0)
    set_group_earliest(broker.bootstrap, group)
    out = {}
    for kind in ("share", "classic", "share", "classic"):
        if kind == "share":
            group = f"tp-share-{len(out)}-{time.monotonic_ns()}"
            set_group_earliest(broker.bootstrap, group)
            c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        else:
            c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"tp-classic-{time.monotonic_ns()}",
                          "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got, start = 0, None
        while got < n:
            recs = c.poll(1.0)
            if recs and start is None:
                start = time.monotonic()
                first = len(recs)
            got += len(recs)
        rate = (n - first) / (time.monotonic() - start)
        c.close()
        out.setdefault(kind, []).append(rate)
    return {k: statistics.median(v) for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1500)
    ap.add_argument("--work-ms", type=float, default=2.0)
    ap.add_argument("--members", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--throughput-records", type=int, default=200000)
    args = ap.parse_args()
    from broker_client import BrokerProcess
    with BrokerProcess(os.path.join(tempfile.mkdtemp(), "data"), settings=SETTINGS) as broker:
        print(f"load average at start: {os.getloadavg()[0]:.1f}")
        counts = [int(x) for x in args.members.split(",")]
        results = {}
        for rnd in range(args.rounds):
            for kind in ("share", "classic"):
                for k in counts:
                    t, done = scaling_run(broker, kind, k, args.records, args.work_ms, f"r{rnd}")
                    results.setdefault((kind, k), []).append(t)
                    print(f"{kind:7s} {k} member(s): {t:6.2f} s  per member {done}", flush=True)
        print(f"\n{args.records} records x {args.work_ms} ms of work, one partition (median of {args.rounds}):")
        print("| members | share: s | share speed-up (x of linear) | classic: s | classic speed-up |")
        print("|---|---|---|---|---|")
        base = {kind: statistics.median(results[(kind, counts[0])]) for kind in ("share", "classic")}
        for k in counts:
            s, c = statistics.median(results[("share", k)]), statistics.median(results[("classic", k)])
            print(f"| {k} | {s:.2f} | {base['share'] / s:.2f}x ({base['share'] / s / k:.2f}) | {c:.2f} | "
                  f"{base['classic'] / c:.2f}x |")
        rates = throughput(broker, args.throughput_records)
        print(f"\ntrivial work, {args.throughput_records} records: share {rates['share']:,.0f} rec/s, classic "
              f"{rates['classic']:,.0f} rec/s, ratio {rates['share'] / rates['classic']:.2f}x")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
