#!/usr/bin/env python3
"""A producer held to a client quota, beside a neighbour without one (docs/security.md, "Client
quotas").

    python bench/bench_quota.py [--seconds 30] [--warmup S] [--quota 1048576] [--window-num 11] [--workdir DIR]

One ``kafkacore serve`` broker (Kafka's quota.window.num / quota.window.size.seconds unless
--window-num says otherwise). AlterClientQuotas sets producer_byte_rate for (user ANONYMOUS,
client id ``held``). Then, for --seconds each:

1. ``neighbour-alone``: a confluent-kafka producer (client id ``neighbour``, no quota) sends
   1000-byte values as fast as it can;
2. ``held`` and ``neighbour`` together, each in its own process.

Rates are value bytes acknowledged per second, from the first acknowledgement to the end of the
period (the held producer's queue is purged at the end: what it still holds is not counted).
Kafka's measurement lets a new client send the first ``quota.window.num - 1`` windows' worth at
once, and a greedy client is then admitted in bursts about ``quota.window.num`` windows apart
(the window holding a burst expires whole): over a period that is not many such cycles the held
rate depends on where it starts and ends in one (docs/security.md).
Printed: the held rate and its ratio to the quota (target 0.9-1.1), the neighbour's rate beside
it and alone, their ratio, and the throttle times librdkafka reported.
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

VALUE = b"b" * 1000


def produce(bootstrap, client_id, topic, seconds, out, warmup=0.0, batch_size=None):
    from confluent_kafka import KafkaError, Producer

    acked, throttles, errors = [], [], []

    def delivered(err, msg):
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))
        elif err.code() not in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT):
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": 1,
                  **({"batch.size": batch_size} if batch_size else {}),
                  "throttle_cb": lambda ev: throttles.append(round(ev.throttle_time * 1000))})  # seconds
    start = time.monotonic()
    measured_from = start + warmup
    end = measured_from + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, VALUE, on_delivery=delivered)
            p.poll(0)
        except BufferError:
            p.poll(0.01)
    p.poll(0)
    p.purge(in_queue=True, in_flight=True)
    p.flush(30)
    # the measured period: from the first acknowledgement, or after the warm-up when there is one
    first = measured_from if warmup else (acked[0][0] if acked else end)
    total = sum(n for t, n in acked if first <= t < end)
    out.put({"client": client_id, "rate": total / max(end - first, 1e-9), "bytes": total,
             "throttles": len(throttles), "max_throttle_ms": max(throttles, default=0), "errors": errors[:3]})


def run_together(bootstrap, specs, seconds, warmup=0.0, batch_size=None):
    out = mp.Queue()
    procs = [mp.Process(target=produce, args=(bootstrap, cid, topic, seconds, out, warmup, batch_size))
             for cid, topic in specs]
    for p in procs:
        p.start()
    results = {r["client"]: r for r in (out.get(timeout=warmup + seconds + 90) for _ in procs)}
    for p in procs:
        p.join(30)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--quota", type=int, default=1048576, help="producer_byte_rate of the held client (bytes/s)")
    ap.add_argument("--window-num", type=int, default=None, help="quota.window.num (default: Kafka's, 11)")
    ap.add_argument("--warmup", type=float, default=0.0,
                    help="seconds sent before the measured period (the first quota.window.num windows admit a "
                         "new client's burst, as Kafka's do: --warmup 11 measures the steady state)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="the held producer's batch.size (librdkafka's default 1000000 makes each request up to "
                         "a second of a 1 MiB/s quota; Kafka's Java producer defaults to 16384)")
    ap.add_argument("--workdir", default=os.path.join(HERE, ".work", "quota"))
    args = ap.parse_args()

    from broker_client import BrokerProcess, request
    from kafkacore.protocol.api_table import ApiKey
    from kafkacore.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
    from kafkacore.protocol.messages.create_topics_request import CreatableTopic

    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    settings = {} if args.window_num is None else {"quota.window.num": str(args.window_num)}
    with BrokerProcess(os.path.join(args.workdir, "data"), settings=settings) as broker:
        with broker.client() as conn:
            for topic in ("held", "neighbour"):
                resp = conn.call(ApiKey.CREATE_TOPICS, 5, request(ApiKey.CREATE_TOPICS, topics=[CreatableTopic(
                    name=topic, num_partitions=1, replication_factor=1)], timeout_ms=10000))
                assert resp.topics[0].error_code == 0, resp.topics[0].error_message
            entry = EntryData(entity=[EntityData(entity_type="user", entity_name="ANONYMOUS"),
                                      EntityData(entity_type="client-id", entity_name="held")],
                              ops=[OpData(key="producer_byte_rate", value=float(args.quota), remove=False)])
            resp = conn.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request(ApiKey.ALTER_CLIENT_QUOTAS, entries=[entry]))
            assert resp.entries[0].error_code == 0, resp.entries[0].error_message
        alone = run_together(broker.bootstrap, [("neighbour", "neighbour")], args.seconds)["neighbour"]
        both = run_together(broker.bootstrap, [("held", "held"), ("neighbour", "neighbour")], args.seconds,
                            args.warmup, args.batch_size)
    held, beside = both["held"], both["neighbour"]
    mb = 1024 * 1024
    print(f"quota: {args.quota / mb:.2f} MiB/s, {args.seconds:.0f} s per run after {args.warmup:.0f} s of warm-up, "
          f"quota.window.num={args.window_num or 11}, load {os.getloadavg()[0]:.1f}")
    print(f"held (quota)          : {held['rate'] / mb:8.3f} MiB/s = {held['rate'] / args.quota:.3f}x the quota "
          f"({held['throttles']} throttled responses, max {held['max_throttle_ms']} ms; errors {held['errors']})")
    print(f"neighbour beside it   : {beside['rate'] / mb:8.3f} MiB/s (throttled responses: {beside['throttles']})")
    print(f"neighbour alone       : {alone['rate'] / mb:8.3f} MiB/s")
    print(f"neighbour beside/alone: {beside['rate'] / alone['rate']:.3f}")
    print(json.dumps({"held": held, "neighbour_beside": beside, "neighbour_alone": alone}))
    return 0 if not (held["errors"] or beside["errors"] or alone["errors"]) else 1


if __name__ == "__main__":
    sys.exit(main())
