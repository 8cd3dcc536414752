#!/usr/bin/env python3
"""Share-fetch throughput against the classic consumer's on the same data (issue 29: ">= 0.5x
the classic consumer's with trivial work").

    python bench/bench_share_fetch.py [--records 500000] [--size 100] [--rounds 3]

One ``kafkacore serve`` broker, one topic of one partition holding ``--records`` records of
``--size`` bytes. Each round reads the whole topic twice, alternating: confluent-kafka's classic
Consumer (a fresh group, auto.offset.reset=earliest) and its ShareConsumer (a fresh share group,
share.auto.offset.reset=earliest set on the GROUP resource; implicit acknowledgement, so each
poll accepts the previous poll's records). Timed from the first record to the last; the ratio
is share / classic on the medians. Broker CPU per 1M records is printed beside it (the machine
is shared: CPU is steadier than wall time).
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

TOPIC = "bench-share"


def broker_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def classic(bootstrap, n, group, timeout):
    import confluent_kafka
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([TOPIC])
    got, t0 = 0, None
    deadline = time.monotonic() + timeout
    try:
        while got < n and time.monotonic() < deadline:
            for m in c.consume(10000, 1.0):
                if m.error() is None:
                    if t0 is None:
                        t0 = time.perf_counter()
                    got += 1
        return got, time.perf_counter() - t0
    finally:
        c.close()


def share(bootstrap, admin, n, group, timeout):
    import confluent_kafka
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.subscribe([TOPIC])
    got, t0 = 0, None
    offsets = set()
    deadline = time.monotonic() + timeout
    try:
        while got < n and time.monotonic() < deadline:
            for m in c.poll(1.0):
                if m.error() is None:
                    if t0 is None:
                        t0 = time.perf_counter()
                    got += 1
                    offsets.add(m.offset())
        took = time.perf_counter() - t0
        c.commit_sync(30)
        if len(offsets) != got:
            raise SystemExit(f"the share consumer got {got - len(offsets)} records twice")
        return got, took
    finally:
        c.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--workdir", default="/tmp/bench-share-fetch")
    ap.add_argument("--set", action="append", default=[], metavar="K=V", help="a broker setting")
    args = ap.parse_args(argv)

    import shutil

    import confluent_kafka
    import confluent_kafka.admin
    from broker_client import BrokerProcess, auto_create

    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    settings = {"num.partitions": "1", "offsets.topic.num.partitions": "1",
                **dict(s.split("=", 1) for s in args.set)}
    print(f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}), "
          f"{args.records} records of {args.size} bytes, one partition, load average {os.getloadavg()[0]:.2f}")
    with BrokerProcess(os.path.join(args.workdir, "data"), settings=settings) as b:
        with b.client() as c:
            auto_create(c, TOPIC)
        p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20,
                                      "batch.num.messages": 10000, "queue.buffering.max.messages": 1_000_000})
        value = b"x" * args.size
        for i in range(args.records):
            while True:
                try:
                    p.produce(TOPIC, value, partition=0)
                    break
                except BufferError:
                    p.poll(0.1)
        assert p.flush(60) == 0
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": b.bootstrap})
        pid = b.proc.pid
        results = {"classic": [], "share": []}
        for r in range(args.rounds):
            for kind in ("classic", "share") if r % 2 == 0 else ("share", "classic"):
                cpu0 = broker_cpu(pid)
                if kind == "classic":
                    got, took = classic(b.bootstrap, args.records, f"bc-{r}", args.timeout)
                else:
                    got, took = share(b.bootstrap, admin, args.records, f"bs-{r}", args.timeout)
                cpu = (broker_cpu(pid) - cpu0) / got * 1e6 if got else float("nan")
                results[kind].append((got / took, cpu))
                print(f"  round {r + 1} {kind}: {got} records in {took:.2f} s, {got / took:,.0f}/s, "
                      f"broker CPU {cpu:.2f} s per 1M, load {os.getloadavg()[0]:.2f}", flush=True)
                if got < args.records:
                    print(f"  ({kind} read only {got} of {args.records} before the timeout)")
    med = {k: statistics.median(rate for rate, _ in v) for k, v in results.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in results.items()}
    print(f"\n| consumer | records/s (median of {args.rounds}) | broker CPU s per 1M |")
    print("|---|---|---|")
    for k in ("classic", "share"):
        print(f"| {k} | {med[k]:,.0f} | {cpu[k]:.2f} |")
    print(f"share / classic: {med['share'] / med['classic']:.2f}x")


if __name__ == "__main__":
    main()
