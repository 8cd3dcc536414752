"""A history checker for the cluster's fault tests: every record a producer got acknowledged is
read back exactly once, in per-key order, and nothing appears that was never sent.

Records carry their own identity: the value is ``<key>:<sequence>``, sequences per key counting
from 0, so order and duplicates are visible without any broker-side help."""
from __future__ import annotations

import threading
import time
from collections import defaultdict

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from _cluster import client_conf


class AckedProducer:
    """confluent-kafka's idempotent acks=all producer, remembering what was acknowledged."""

    def __init__(self, bootstrap, topic, keys=8, **extra):
        self.topic = topic
        self.keys = [f"k{i}".encode() for i in range(keys)]
        self.next_seq = defaultdict(int)
        self.acked = {}  # (key, seq) -> (partition, offset)
        self.failed = []
        self._lock = threading.Lock()
        # metadata.max.age.ms: librdkafka's default is 3 x topic.metadata.refresh.interval.ms (3 s
        # here), and a refresh sent to a broker a test has SIGSTOPped waits out socket.timeout.ms
        # (60 s): the cached leaders then expired and every record waited for metadata (two CI
        # runs of the seed scenario: 100 records unacknowledged for 30 s, the brokers idle)
        conf = {**client_conf(bootstrap), "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                "message.timeout.ms": 60000, "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
                "metadata.max.age.ms": 60000}
        conf.update(extra)
        self.producer = Producer(conf)
        self.sent = 0
        # the producer id and the topic's metadata before any fault: an idempotent producer
        # whose InitProducerId went to a broker the test then pauses would wait out its timeout
        self.send(1)
        self.flush(60)

    def _on_delivery(self, err, msg):
        key = msg.key()
        seq = int(msg.value().split(b":")[1])
        with self._lock:
            if err is None:
                self.acked[(key, seq)] = (msg.partition(), msg.offset())
            else:
                self.failed.append(((key, seq), err))

    def send(self, n):
        for _ in range(n):
            key = self.keys[self.sent % len(self.keys)]
            seq = self.next_seq[key]
            self.next_seq[key] += 1
            self.sent += 1
            while True:
                try:
                    self.producer.produce(self.topic, key=key, value=key + b":%d" % seq, on_delivery=self._on_delivery)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.producer.poll(0)

    def run_for(self, seconds, rate=500):
        """Sends at about ``rate`` records a second for ``seconds``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            self.send(max(1, rate // 20))
            time.sleep(max(0.0, 0.05 - (time.monotonic() - t0)))

    def close(self, timeout=60):
        """Flushes and destroys the producer (confluent-kafka has no close(): the handle goes
        when its last reference does). Its periodic metadata refresh, which names the topic,
        would otherwise auto-create a topic a test has just deleted."""
        self.flush(timeout)
        self.producer = None

    def flush(self, timeout=60):
        left = self.producer.flush(timeout)
        assert left == 0, f"{left} records still unacknowledged after {timeout} s"


def produce_in_background(producer, stop, errors, rate=300):
    """A thread that has ``producer`` (an AckedProducer) send about ``rate`` records a second
    until ``stop`` is set; a fatal producer error (a sequence gap, say) lands in ``errors``,
    where the history check says what it cost."""
    def produce():
        try:
            while not stop.is_set():
                producer.run_for(0.5, rate=rate)
        except (KafkaException, KafkaError) as e:
            errors.append(e)

    thread = threading.Thread(target=produce, name=f"acked-producer-{producer.topic}", daemon=True)
    thread.start()
    return thread


def read_values(bootstrap, topic, partitions, isolation, timeout=60):
    """Every record value of the topic up to its end, as a consumer with ``isolation``
    ("read_committed" or "read_uncommitted") sees them."""
    c = Consumer({**client_conf(bootstrap), "group.id": f"values-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, eof = [], set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise AssertionError(m.error())
            out.append(m.value())
        assert len(eof) == partitions, f"no end of {topic} within {timeout} s"
        return out
    finally:
        c.close()


def read_all(bootstrap, topic, partitions, timeout=60):
    """{partition: [(offset, key, value)]} of the whole topic up to its end offsets."""
    c = Consumer({**client_conf(bootstrap), "group.id": f"history-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": "read_uncommitted"})
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {}
        deadline = time.monotonic() + timeout
        for p in range(partitions):
            while True:
                try:
                    ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        c.assign(tps)
        out = {p: [] for p in range(partitions)}
        while any(len(out[p]) < ends[p] for p in out) and time.monotonic() < deadline:
            for msg in c.consume(500, 0.5):
                if msg.error():
                    continue
                out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
        missing = {p: ends[p] - len(out[p]) for p in out if len(out[p]) < ends[p]}
        assert not missing, f"could not read up to the end offsets {ends}: missing {missing}"
        return out
    finally:
        c.close()


def check_history(acked, read):
    """Every acknowledged record read back once at its acknowledged place; per key, sequences
    strictly increasing and without duplicates; nothing read that was not sent."""
    seen = {}
    problems = []
    by_key = defaultdict(list)
    for p, records in read.items():
        offsets = [o for o, _k, _v in records]
        if offsets != sorted(set(offsets)):
            problems.append(f"partition {p}: offsets not increasing or repeated")
        for offset, key, value in records:
            k, _, seq = value.partition(b":")
            ident = (k, int(seq))
            if ident in seen:
                problems.append(f"duplicate {ident} at {p}/{offset} and {seen[ident]}")
            seen[ident] = (p, offset)
            by_key[k].append((p, offset, int(seq)))
    for ident, place in acked.items():
        if ident not in seen:
            problems.append(f"acknowledged {ident} at {place} is lost")
        elif seen[ident] != place:
            problems.append(f"acknowledged {ident} at {place} but read at {seen[ident]}")
    for k, items in by_key.items():
        seqs = [s for _p, _o, s in sorted(items)]
        if seqs != sorted(seqs):
            problems.append(f"key {k}: order broken")
    assert not problems, "\n".join(problems[:20]) + (f"\n... {len(problems)} problems" if len(problems) > 20 else "")
    return len(seen)
