#!/usr/bin/env python3
"""A consumer joining a consuming group: the KIP-848 consumer protocol beside the classic one,
on the same ``kafkacore serve`` broker (issue 29's first target: stable again, the newcomer
assigned, within 1 s with ``group.protocol=consumer``).

    python bench/bench_groups.py [--members 10] [--partitions 20] [--rounds 3] [--heartbeat-ms 500]

For each protocol and round: ``--members`` confluent-kafka consumers share a topic of
``--partitions`` partitions while a producer keeps writing; once they are settled, one more
consumer subscribes. Timed from its ``subscribe()`` until the group is settled again: every
partition owned by exactly one member (from the members' own assign/revoke callbacks), every
member owning at least one, the newcomer among them. Also counted: moments a partition had two
owners (must be 0) and records not consumed while the group changed (the stop-the-world, as
the number of members that lost their whole assignment).

Both protocols heartbeat every ``--heartbeat-ms`` (the classic clients' heartbeat.interval.ms;
the broker's group.consumer.heartbeat.interval.ms), so the comparison is of the protocols, not
of their default intervals (Kafka's are 3 s and 5 s). The classic rows use librdkafka's default
assignors (range, eager) and cooperative-sticky.
"""
import argparse
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)


class Member:
    def __init__(self, bootstrap, topic, group, conf, board, name):
        import confluent_kafka

        self.name, self.board = name, board
        self.owned = set()
        self.emptied = 0
        self.stop = threading.Event()
        self.c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                           "auto.offset.reset": "latest", **conf})
        self.c.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assign(self, c, parts):
        self.board.assign(self, {p.partition for p in parts})
        if self.board.eager:
            c.assign(parts)
        else:
            c.incremental_assign(parts)

    def _revoke(self, c, parts):
        revoked = {p.partition for p in parts}
        if self.owned and revoked >= self.owned and not self.stop.is_set():
            self.emptied += 1
        self.board.revoke(self, revoked)
        if self.board.eager:
            c.unassign()
        else:
            c.incremental_unassign(parts)

    def _run(self):
        while not self.stop.is_set():
            self.c.poll(0.05)
        self.c.close()


class Board:
    """Who owns what, updated from the callbacks; counts a partition given while still owned."""

    def __init__(self, eager):
        self.eager = eager
        self.lock = threading.Lock()
        self.owner = {}
        self.overlaps = 0

    def assign(self, member, parts):
        with self.lock:
            for p in parts:
                if self.owner.get(p) not in (None, member):
                    self.overlaps += 1
                self.owner[p] = member
            member.owned |= parts

    def revoke(self, member, parts):
        with self.lock:
            for p in parts:
                if self.owner.get(p) is member:
                    del self.owner[p]
            member.owned -= parts

    def settled(self, members, partitions):
        with self.lock:
            return len(self.owner) == partitions and all(m.owned for m in members) and \
                sum(len(m.owned) for m in members) == partitions


def wait(pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.005)
    return False


def one_round(bootstrap, topic, partitions, n, label, conf, eager, group):
    board = Board(eager)
    members = [Member(bootstrap, topic, group, conf, board, f"m{i}") for i in range(n)]
    try:
        if not wait(lambda: board.settled(members, partitions), 120):
            raise RuntimeError(f"{label}: the first {n} members did not settle")
        time.sleep(1.0)  # steady state
        for m in members:
            m.emptied = 0  # counted from the join on (the first members' own settling does not count)
        t0 = time.monotonic()
        members.append(Member(bootstrap, topic, group, conf, board, "new"))
        ok = wait(lambda: board.settled(members, partitions), 120)
        took = time.monotonic() - t0
        if not ok:
            raise RuntimeError(f"{label}: not settled after the join")
        return took, board.overlaps, sum(1 for m in members[:-1] if m.emptied)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.thread.join(60)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    ap.add_argument("--workdir", default=os.path.join(HERE, ".work", "groups"))
    args = ap.parse_args(argv)

    import shutil

    import confluent_kafka
    from broker_client import BrokerProcess, auto_create

    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    hb = args.heartbeat_ms
    settings = {"num.partitions": str(args.partitions), "group.initial.rebalance.delay.ms": "3000",
                "group.consumer.heartbeat.interval.ms": str(hb),
                "group.consumer.min.heartbeat.interval.ms": str(min(hb, 5000))}
    rows = [("consumer (KIP-848, uniform)", {"group.protocol": "consumer"}, False),
            ("classic, range (eager)", {"heartbeat.interval.ms": hb}, True),
            ("classic, cooperative-sticky", {"heartbeat.interval.ms": hb,
                                             "partition.assignment.strategy": "cooperative-sticky"}, False)]
    print(f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}), "
          f"{args.members} members + 1 joining, {args.partitions} partitions, heartbeats every {hb} ms, "
          f"load average {os.getloadavg()[0]:.2f}")
    with BrokerProcess(os.path.join(args.workdir, "data"), settings=settings) as b:
        with b.client() as c:
            auto_create(c, "bench-groups")
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        done = threading.Event()

        def produce():
            while not done.is_set():
                for i in range(50):
                    producer.produce("bench-groups", b"x" * 100)
                producer.poll(0)
                time.sleep(0.01)
            producer.flush(30)
        feeder = threading.Thread(target=produce, daemon=True)
        feeder.start()
        results = {}
        try:
            for r in range(args.rounds):
                for label, conf, eager in rows:
                    took, overlaps, emptied = one_round(b.bootstrap, "bench-groups", args.partitions, args.members,
                                                        label, conf, eager, f"bench-{r}-{len(results)}-{id(conf)}")
                    results.setdefault(label, []).append((took, overlaps, emptied))
                    print(f"  round {r + 1} {label}: {took * 1000:.0f} ms, overlaps {overlaps}, "
                          f"members emptied {emptied}", flush=True)
        finally:
            done.set()
            feeder.join(30)
    print(f"\n| protocol | join -> settled, median of {args.rounds} (ms) | min-max (ms) | partitions owned twice | "
          "members that lost everything (per round) |")
    print("|---|---|---|---|---|")
    for label, _conf, _eager in rows:
        took = [t for t, _o, _e in results[label]]
        print(f"| {label} | {statistics.median(took) * 1000:.0f} | {min(took) * 1000:.0f}-{max(took) * 1000:.0f} | "
              f"{sum(o for _t, o, _e in results[label])} | "
              f"{statistics.median(e for _t, _o, e in results[label]):.0f} |")


if __name__ == "__main__":
    main()
