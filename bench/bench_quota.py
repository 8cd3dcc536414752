#!/usr/bin/env python3
"""A producer held to a client quota, beside a neighbour without one (docs/security.md, "Client
quotas").

    python bench/bench_quota.py [--seconds 30] [--warmup S] [--quota 1048576] [--window-num 11] [--rounds 3]
                                [--pace-period 1] [--batch-size N] [--workdir DIR]

One ``kafkacore serve`` broker (Kafka's quota.window.num / quota.window.size.seconds unless
--window-num says otherwise). AlterClientQuotas sets producer_byte_rate for (user ANONYMOUS,
client id ``held``). Then, for --seconds each:

1. ``neighbour-alone``: a confluent-kafka producer (client id ``neighbour``, no quota) sends
   1000-byte values as fast as it can;
2. --rounds times, alternating which goes first, two runs of two processes each:
   - ``held`` (the quota, sending as fast as it is let) beside ``neighbour``;
   - the paced control: ``paced`` (no quota; it holds itself to the quota's rate, the same
     bytes a second in the same values and batch settings as ``held``, a --pace-period's worth
     at a time: by default a second's, so that its requests are as large as the throttled
     client's, about one 1 MB request a second) beside ``neighbour``.
   The neighbour beside ``held`` over the neighbour beside ``paced`` is what the quota mechanism
   costs a client without one, apart from the CPU two busy clients take from it on a small
   machine (the neighbour beside/alone ratio mixes both).

Rates are value bytes acknowledged per second, from the first acknowledgement to the end of the
period (the held producer's queue is purged at the end: what it still holds is not counted).
Kafka's measurement lets a new client send the first ``quota.window.num - 1`` windows' worth at
once, and a greedy client is then admitted in bursts about ``quota.window.num`` windows apart
(the window holding a burst expires whole): over a period that is not many such cycles the held
rate depends on where it starts and ends in one (docs/security.md).
Printed: the held rate and its ratio to the quota (target 0.9-1.1), the neighbour's rate beside
it, beside the paced control and alone, the ratios (per round and the median), and the throttle
times librdkafka reported.
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

VALUE = b"b" * 1000
# the neighbour writes 100-200 MB/s: a run of 7 x 41 s filled 20 GB of /tmp before the topics
# kept only their last segments (Kafka's retention.bytes, checked every second here, the files
# removed a second after, not Kafka's 60 s: ~9 GB were waiting with 60 s)
TOPIC_CONFIGS = {"segment.bytes": str(64 << 20), "retention.bytes": str(256 << 20), "file.delete.delay.ms": "1000"}
BROKER_SETTINGS = {"log.retention.check.interval.ms": "1000"}


def produce(bootstrap, client_id, topic, seconds, out, warmup=0.0, batch_size=None, pace=None, pace_period=0.0):
    """Sends VALUE as fast as it can, or with ``pace`` (bytes/s) no faster than that: before each
    value it waits until the bytes handed to the producer so far are within the pace, counted
    in steps of ``pace_period`` seconds (0: value by value; 1: a second's worth at once, which
    librdkafka sends in requests as large as the throttled client's)."""
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
    handed = 0
    while time.monotonic() < end:
        if pace:
            elapsed = time.monotonic() - start
            if pace_period:
                elapsed = (elapsed // pace_period + 1) * pace_period
            ahead = handed / pace - elapsed
            if ahead > 0:
                p.poll(min(ahead, 0.005))  # serves delivery reports while it waits
                continue
        try:
            p.produce(topic, VALUE, on_delivery=delivered)
            handed += len(VALUE)
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


def run_together(bootstrap, specs, seconds, warmup=0.0, batch_size=None, pace=None, pace_period=0.0):
    """``specs``: (client id, topic) of each process; the ``held`` and ``paced`` clients get
    ``batch_size``, ``paced`` also ``pace``; the neighbour keeps librdkafka's defaults."""
    out = mp.Queue()
    procs = [mp.Process(target=produce, args=(bootstrap, cid, topic, seconds, out, warmup,
                                              batch_size if cid != "neighbour" else None,
                                              pace if cid == "paced" else None, pace_period))
             for cid, topic in specs]
    for p in procs:
        p.start()
    results = {r["client"]: r for r in (out.get(timeout=warmup + seconds + 90) for _ in procs)}
    for p in procs:
        p.join(30)
    return results


def kafka_arithmetic(quota, request_bytes, seconds, warmup, window_num=11, handle_s=0.015, horizon=400.0):
    """What Kafka's quota arithmetic alone gives a client that sends ``request_bytes`` requests
    as fast as its throttles let it (one request handled every ``handle_s``): the rate over every
    span of ``seconds`` starting at ``warmup`` or later (stepped by 0.25 s), through the same
    Rate and throttle formula the broker uses (kafkacore.security.client_quotas, Kafka's
    SampledStat Rate and QuotaUtils.throttleTime). (min, max, mean) as multiples of the quota."""
    import bisect

    from kafkacore.security.client_quotas import Rate
    rate, t, sent = Rate(1.0, window_num, 0.0), 0.0, []
    while t < horizon:
        rate.record(request_bytes, t)
        sent.append(t)
        observed, window = rate.measure(t)
        t += handle_s + (max(observed - quota, 0.0) / quota * window)
    spans = []
    start = warmup
    while start + seconds <= horizon - 1:
        n = bisect.bisect_left(sent, start + seconds) - bisect.bisect_left(sent, start)
        spans.append(n * request_bytes / seconds / quota)
        start += 0.25
    return min(spans), max(spans), sum(spans) / len(spans)


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
    ap.add_argument("--rounds", type=int, default=3,
                    help="pairs of runs (quota-held beside the neighbour, paced control beside the neighbour), "
                         "alternating which goes first")
    ap.add_argument("--pace-period", type=float, default=1.0,
                    help="the paced client hands over this many seconds' worth of values at once (1: requests "
                         "as large as the throttled client's; 0: value by value, many small requests)")
    ap.add_argument("--workdir", default=os.path.join(HERE, ".work", "quota"))
    ap.add_argument("--request-bytes", type=int, default=1000000,
                    help="the held producer's request size for the Kafka-arithmetic line (librdkafka's "
                         "batch.size 1000000 by default)")
    args = ap.parse_args()

    from broker_client import BrokerProcess, request
    from kafkacore.protocol.api_table import ApiKey
    from kafkacore.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
    from kafkacore.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig

    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    settings = dict(BROKER_SETTINGS, **({} if args.window_num is None else {"quota.window.num": str(args.window_num)}))
    with BrokerProcess(os.path.join(args.workdir, "data"), settings=settings) as broker:
        with broker.client() as conn:
            for topic in ("held", "neighbour", "paced"):
                resp = conn.call(ApiKey.CREATE_TOPICS, 5, request(ApiKey.CREATE_TOPICS, topics=[CreatableTopic(
                    name=topic, num_partitions=1, replication_factor=1,
                    configs=[CreatableTopicConfig(name=k, value=v) for k, v in TOPIC_CONFIGS.items()])],
                    timeout_ms=10000))
                assert resp.topics[0].error_code == 0, resp.topics[0].error_message
            entry = EntryData(entity=[EntityData(entity_type="user", entity_name="ANONYMOUS"),
                                      EntityData(entity_type="client-id", entity_name="held")],
                              ops=[OpData(key="producer_byte_rate", value=float(args.quota), remove=False)])
            resp = conn.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request(ApiKey.ALTER_CLIENT_QUOTAS, entries=[entry]))
            assert resp.entries[0].error_code == 0, resp.entries[0].error_message
        loads = [os.getloadavg()[0]]
        alone = run_together(broker.bootstrap, [("neighbour", "neighbour")], args.seconds)["neighbour"]
        rounds = []
        for i in range(args.rounds):
            # a paced run between two held runs outlasts the quota's windows (11 s): every held
            # run starts from a cold quota, as the first
            pair = {}
            for arm in (("held", "paced") if i % 2 == 0 else ("paced", "held")):
                loads.append(os.getloadavg()[0])
                pair[arm] = run_together(broker.bootstrap, [(arm, arm), ("neighbour", "neighbour")], args.seconds,
                                         args.warmup, args.batch_size, pace=args.quota,
                                         pace_period=args.pace_period)
            rounds.append(pair)
        loads.append(os.getloadavg()[0])
    mb = 1024 * 1024

    def med(arm, client):
        return statistics.median(r[arm][client]["rate"] for r in rounds)

    ratios = [r["held"]["neighbour"]["rate"] / r["paced"]["neighbour"]["rate"] for r in rounds]
    print(f"quota: {args.quota / mb:.2f} MiB/s, {args.seconds:.0f} s per run after {args.warmup:.0f} s of warm-up, "
          f"quota.window.num={args.window_num or 11}, batch.size {args.batch_size or 'librdkafka default'} "
          f"(held, paced), paced in steps of {args.pace_period:g} s, {args.rounds} rounds; load average "
          f"{min(loads):.1f}-{max(loads):.1f}")
    for i, r in enumerate(rounds, 1):
        held, paced = r["held"]["held"], r["paced"]["paced"]
        print(f"round {i}: held {held['rate'] / mb:.3f} MiB/s = {held['rate'] / args.quota:.3f}x the quota "
              f"({held['throttles']} throttled responses, max {held['max_throttle_ms']} ms), neighbour beside it "
              f"{r['held']['neighbour']['rate'] / mb:.1f} MiB/s; paced {paced['rate'] / mb:.3f} MiB/s "
              f"({paced['throttles']} throttled), neighbour beside it {r['paced']['neighbour']['rate'] / mb:.1f} MiB/s;"
              f" beside held / beside paced {ratios[i - 1]:.3f}")
    print(f"held (quota), median         : {med('held', 'held') / mb:8.3f} MiB/s = "
          f"{med('held', 'held') / args.quota:.3f}x the quota")
    # the envelope over handling times from 2 to 60 ms per request (where the bursts fall moves with it)
    model = [kafka_arithmetic(args.quota, args.batch_size or args.request_bytes, args.seconds, args.warmup,
                              args.window_num or 11, handle_s=h) for h in (0.002, 0.015, 0.06)]
    print(f"Kafka's arithmetic alone     : {min(m[0] for m in model):.3f}x-{max(m[1] for m in model):.3f}x the quota "
          f"over {args.seconds:.0f} s spans from {args.warmup:.0f} s on (means {', '.join(f'{m[2]:.3f}' for m in model)}"
          f"), {args.batch_size or args.request_bytes}-byte requests sent as fast as the throttles allow, handled in "
          f"2-60 ms: the range any broker computing Kafka's rate would show")
    print(f"paced control, median        : {med('paced', 'paced') / mb:8.3f} MiB/s = "
          f"{med('paced', 'paced') / args.quota:.3f}x the quota")
    print(f"neighbour beside held        : {med('held', 'neighbour') / mb:8.3f} MiB/s (median)")
    print(f"neighbour beside paced       : {med('paced', 'neighbour') / mb:8.3f} MiB/s (median)")
    print(f"neighbour alone              : {alone['rate'] / mb:8.3f} MiB/s")
    print(f"neighbour beside held/paced  : {statistics.median(ratios):.3f} (median; rounds "
          f"{', '.join(f'{x:.3f}' for x in ratios)}): what the quota mechanism costs the neighbour")
    print(f"neighbour beside held/alone  : {med('held', 'neighbour') / alone['rate']:.3f} (CPU contention included)")
    print(json.dumps({"rounds": rounds, "neighbour_alone": alone, "loads": loads}))
    errors = [r for pair in rounds for run in pair.values() for r in run.values() if r["errors"]]
    never_throttled = all(r[arm]["neighbour"]["throttles"] == 0 and r["paced"]["paced"]["throttles"] == 0
                          for r in rounds for arm in r)
    return 0 if not (errors or alone["errors"]) and never_throttled else 1


if __name__ == "__main__":
    sys.exit(main())
