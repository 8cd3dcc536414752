"""confluent-kafka (librdkafka) against the broker: admin, every codec with and without
idempotence, Java-compatible key partitioning, consumer groups, commits across consumer and
broker restarts."""
import logging
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402
    TIMESTAMP_CREATE_TIME, Consumer, KafkaError, KafkaException, Producer, TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from _compat import (  # noqa: E402
    CODECS, TANSU_END_OFFSETS, EndOffsetMismatch, check_end_offsets, HEARTBEAT_INTERVAL_MS, MAX_POLL_INTERVAL_MS, SESSION_TIMEOUT_MS, WAIT, CommitRetry, Rec,
    broker_restart_scenario, check_roundtrip, commit_resume_scenario, group_rebalance_scenario,
    make_records, wait_until,
)

LOG = logging.getLogger("compat.librdkafka")


def _tp_error(tp):
    return tp.error if tp.error is not None and tp.error.code() != KafkaError.NO_ERROR else None


class ConfluentConsumer:
    def __init__(self, client, group, topic, on_assign=None, on_revoke=None, strategy=None):
        self.topic = topic
        conf = client.conf(**{
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
        })
        if strategy:
            conf["partition.assignment.strategy"] = strategy
        self.cooperative = strategy == "cooperative-sticky"
        self.c = Consumer(conf, logger=LOG)

        def assign_cb(consumer, partitions):
            if on_assign:
                on_assign([tp.partition for tp in partitions])

        def revoke_cb(consumer, partitions):
            if on_revoke:
                on_revoke([tp.partition for tp in partitions])

        self.c.subscribe([topic], on_assign=assign_cb, on_revoke=revoke_cb)

    def poll(self, max_records=50):
        out = []
        for msg in self.c.consume(num_messages=max_records, timeout=0.2):
            if msg.error():
                raise KafkaException(msg.error())
            out.append(to_record(msg))
        return out

    def commit(self, offsets):
        tps = [TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())]
        try:
            result = self.c.commit(offsets=tps, asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() in (KafkaError.REBALANCE_IN_PROGRESS, KafkaError._STATE):
                raise CommitRetry(str(e)) from e
            raise
        errors = [(tp.partition, _tp_error(tp)) for tp in result if _tp_error(tp)]
        assert not errors, f"commit errors: {errors}"

    def committed(self, partitions):
        got = self.c.committed([TopicPartition(self.topic, p) for p in partitions], timeout=WAIT)
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in got}

    def close(self):
        self.c.close()


def to_record(msg):
    ts_type, ts = msg.timestamp()
    assert ts_type == TIMESTAMP_CREATE_TIME, f"timestamp type {ts_type} at {msg.partition()}/{msg.offset()}"
    headers = tuple((k, v) for k, v in (msg.headers() or ()))
    return msg.partition(), msg.offset(), Rec(msg.key(), msg.value(), headers, ts)


class ConfluentClient:
    record_options = {}

    def __init__(self, bootstrap, strategy=None):
        self.bootstrap = bootstrap
        self.strategy = strategy  # partition.assignment.strategy of group members (None: the default)
        self.admin = AdminClient(self.conf(), logger=LOG)

    def conf(self, **extra):
        return {"bootstrap.servers": self.bootstrap, "client.id": "compat-confluent", **extra}

    def create_topic(self, name, partitions):
        for fut in self.admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10).values():
            fut.result(WAIT)
        self.wait_topic(name, partitions)

    def wait_topic(self, name, partitions):
        def ready():
            md = self.admin.list_topics(name, timeout=10).topics.get(name)
            return md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values())
        wait_until(ready, desc=f"metadata of {name} with {partitions} partitions")

    def producer(self, codec="none", idempotence=False):
        return Producer(self.conf(**{
            "compression.type": codec,
            "enable.idempotence": idempotence,
            "acks": "all",
            # the Java client's key hash; librdkafka's default (consistent_random) is CRC32-based
            "partitioner": "murmur2_random",
            "linger.ms": 5,
        }), logger=LOG)

    def produce(self, topic, records, codec="none", idempotence=False, producer=None):
        p = producer or self.producer(codec, idempotence)
        results = [None] * len(records)

        def report(i):
            def cb(err, msg):
                results[i] = (err, msg.partition(), msg.offset())
            return cb

        for i, r in enumerate(records):
            p.produce(topic, value=r.value, key=r.key, headers=list(r.headers), timestamp=r.timestamp,
                      on_delivery=report(i))
            p.poll(0)
        assert p.flush(WAIT) == 0, "records still queued after flush"
        errors = [(i, res[0]) for i, res in enumerate(results) if res is None or res[0] is not None]
        assert not errors, f"{len(errors)} records failed, first: {errors[:3]}"
        return [(part, off) for _, part, off in results]

    def group_consumer(self, group, topic, on_assign=None, on_revoke=None):
        return ConfluentConsumer(self, group, topic, on_assign, on_revoke, self.strategy)

    def _plain_consumer(self, group=None):
        return Consumer(self.conf(**{"group.id": group or f"compat-reader-{uuid.uuid4().hex[:8]}",
                                     "enable.auto.commit": False}), logger=LOG)

    def read_all(self, topic, counts):
        c = self._plain_consumer()
        try:
            c.assign([TopicPartition(topic, p, 0) for p in counts])
            out = []
            deadline = time.monotonic() + WAIT
            while len(out) < sum(counts.values()):
                assert time.monotonic() < deadline, f"read {len(out)} of {sum(counts.values())} records"
                for msg in c.consume(num_messages=500, timeout=0.2):
                    if msg.error():
                        raise KafkaException(msg.error())
                    out.append(to_record(msg))
            return out
        finally:
            c.close()

    def end_offsets(self, topic, partitions):
        c = self._plain_consumer()
        try:
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=WAIT, cached=False)[1]
                    for p in partitions}
        finally:
            c.close()

    def committed_for(self, group, topic, partitions):
        c = self._plain_consumer(group)
        try:
            got = c.committed([TopicPartition(topic, p) for p in partitions], timeout=WAIT)
            return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in got}
        finally:
            c.close()


@pytest.fixture(scope="module")
def client(broker):
    return ConfluentClient(broker.bootstrap)


def test_admin_create_topics(client, unique_name):
    names = [unique_name("a-"), unique_name("b-")]
    futures = client.admin.create_topics([NewTopic(names[0], 3, 1), NewTopic(names[1], 6, 1)], operation_timeout=10)
    for fut in futures.values():
        assert fut.result(WAIT) is None
    client.wait_topic(names[0], 3)
    client.wait_topic(names[1], 6)
    md = client.admin.list_topics(timeout=10)
    assert {n: len(md.topics[n].partitions) for n in names} == {names[0]: 3, names[1]: 6}
    assert [b.id for b in md.brokers.values()] == [md.controller_id] and len(md.brokers) == 1

    again = client.admin.create_topics([NewTopic(names[0], 3, 1)], operation_timeout=10)[names[0]]
    with pytest.raises(KafkaException) as e:
        again.result(WAIT)
    assert e.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.xfail_tansu(reason="accepts a replication factor above the number of brokers")
def test_admin_rejects_replication_factor_above_broker_count(client, unique_name):
    name = unique_name()
    fut = client.admin.create_topics([NewTopic(name, 1, 2)], operation_timeout=10)[name]
    with pytest.raises(KafkaException) as e:
        fut.result(WAIT)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR


@pytest.mark.xfail_tansu(reason=TANSU_END_OFFSETS, raises=EndOffsetMismatch)
@pytest.mark.parametrize("idempotence", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_roundtrip(client, unique_name, codec, idempotence):
    topic = unique_name()
    client.create_topic(topic, 3)
    sent = make_records(300, topic, **client.record_options)
    placed = client.produce(topic, sent, codec=codec, idempotence=idempotence)
    counts = {p: sum(1 for q, _ in placed if q == p) for p in range(3)}
    check_roundtrip(sent, placed, client.read_all(topic, counts), 3)
    check_end_offsets(client, topic, counts)


@pytest.mark.xfail_tansu(reason=TANSU_END_OFFSETS, raises=EndOffsetMismatch)
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_group_rebalance(broker, unique_name, strategy):
    client = ConfluentClient(broker.bootstrap, strategy=strategy)
    topic, group = unique_name(), unique_name("g-")
    client.create_topic(topic, 6)
    group_rebalance_scenario(client, topic, group, 6)


@pytest.mark.xfail_tansu(reason=TANSU_END_OFFSETS, raises=EndOffsetMismatch)
def test_commit_and_resume(client, unique_name):
    topic = unique_name()
    client.create_topic(topic, 3)
    commit_resume_scenario(client, topic, unique_name("g-"))


@pytest.mark.broker_restart
def test_resume_after_broker_restart(client, broker, unique_name):
    topic = unique_name()
    client.create_topic(topic, 3)
    broker_restart_scenario(client, broker, topic, unique_name("g-"))
