"""Client quotas enforced on a real broker process (broker/quotas.py): confluent-kafka clients
held to producer_byte_rate / consumer_byte_rate, throttled and never failed, beside a client
without a quota that is not slowed; KIP-599's THROTTLING_QUOTA_EXCEEDED and the mute of older
versions; request_percentage; the quota metrics in /metrics.

The broker measures over quota.window.num=2 windows of 1 s (Kafka's default is 11): the rate
then settles within a couple of seconds, so a few seconds' measurement is steady state."""
import threading
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from _exposition import parse_exposition
from broker_client import BrokerProcess, free_port, request
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from kafkacore.protocol.messages.create_topics_request import CreatableTopic

QUOTA = 150_000  # bytes/s
VALUE = b"q" * 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("quota-enforce") / "data",
                      settings={"quota.window.num": "2", "metrics.port": str(free_port())})
    b.metrics_port = int(b.settings["metrics.port"])
    with b:
        yield b


def _set_quota(broker, client_id, **quotas):
    entry = EntryData(entity=[EntityData(entity_type="user", entity_name="ANONYMOUS"),
                              EntityData(entity_type="client-id", entity_name=client_id)],
                      ops=[OpData(key=k, value=float(v), remove=False) for k, v in quotas.items()])
    with broker.client() as conn:
        resp = conn.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request(ApiKey.ALTER_CLIENT_QUOTAS, entries=[entry]))
    assert [(e.error_code, e.error_message) for e in resp.entries] == [(0, None)]


class _Producing:
    """A confluent-kafka producer sending 1000-byte values as fast as it may from a thread;
    delivered value bytes by delivery time, errors and throttle events kept."""

    def __init__(self, broker, topic, client_id):
        self.throttles, self.errors, self.delivered = [], [], []
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5,
                                  "batch.size": 65536, "acks": 1,
                                  "throttle_cb": lambda ev: self.throttles.append(ev.throttle_time)})
        self.topic = topic
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg):
        if err is not None and err.code() not in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT):
            self.errors.append(err)
        else:
            self.delivered.append((time.monotonic(), len(msg.value())))

    def _run(self):
        p = self.producer
        while not self.stop.is_set():
            try:
                p.produce(self.topic, VALUE, on_delivery=self._delivered)
                p.poll(0)
            except BufferError:
                p.poll(0.05)
        # what is still queued or in flight would take a while at the quota
        p.purge(in_queue=True, in_flight=True)
        p.flush(30)

    def rate(self, start, end):
        return sum(n for t, n in self.delivered if start <= t < end) / (end - start)


def _create_topic(broker, name, partitions=1):
    with broker.client() as conn:
        resp = conn.call(ApiKey.CREATE_TOPICS, 5, request(ApiKey.CREATE_TOPICS, topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=10000))
    assert resp.topics[0].error_code == 0, resp.topics[0].error_message


def _scrape(broker):
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as r:
        return parse_exposition(r.read().decode())[0]


def _quota_metric(samples, name, resource, client_id):
    return samples[name][frozenset({("resource", resource), ("user", "ANONYMOUS"), ("clientid", client_id)})]


def test_a_producer_is_held_to_its_byte_rate_and_its_neighbour_is_not(broker):
    _create_topic(broker, "held")
    _set_quota(broker, "held-producer", producer_byte_rate=QUOTA)
    held = _Producing(broker, "held", "held-producer")
    free = _Producing(broker, "held", "free-producer")
    start = time.monotonic()
    held.thread.start()
    free.thread.start()
    time.sleep(8)  # the measurement's length, not a wait for an event
    held.stop.set()
    free.stop.set()
    held.thread.join(40)
    free.thread.join(40)
    held.producer = free.producer = None  # destroyed now, not after the module's broker has stopped
    assert not held.errors and not free.errors  # a throttled producer is slowed, never failed
    rate = held.rate(start + 2, start + 8)  # after the first window's burst
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, rate
    assert held.throttles and max(held.throttles) > 0  # librdkafka saw throttle_time_ms
    assert not free.throttles
    free_rate = free.rate(start + 2, start + 8)
    assert free_rate > 10 * QUOTA, free_rate  # not slowed by its neighbour's quota
    samples = _scrape(broker)
    assert _quota_metric(samples, "kafka_server_quota_throttle_time", "Produce", "held-producer") > 0
    assert 0 < _quota_metric(samples, "kafka_server_quota_byte_rate", "Produce", "held-producer") < 2 * QUOTA
    assert not any(dict(labels).get("clientid") == "free-producer"
                   for labels in samples["kafka_server_quota_byte_rate"])


def test_a_consumer_is_held_to_its_byte_rate(broker):
    _create_topic(broker, "to-fetch")
    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "filler", "batch.size": 16384,
                  "linger.ms": 5})
    for _ in range(2500):  # 2.5 MB: more than the 8 s at the quota can read
        while True:
            try:
                p.produce("to-fetch", VALUE)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(30) == 0
    del p
    _set_quota(broker, "held-consumer", consumer_byte_rate=QUOTA)
    throttles = []
    # fetches small next to the quota: a throttled fetch is answered empty and its bytes taken back
    # (Kafka's), so a consumer whose responses are as large as a quota window reads well under it
    c = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "held-consumer", "group.id": "held",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": 16384, "fetch.max.bytes": 32768, "message.max.bytes": 32768,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    c.subscribe(["to-fetch"])
    got = []
    try:
        while not got:  # the group's assignment
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append((time.monotonic(), len(msg.value())))
        start = got[0][0]
        while time.monotonic() < start + 8:
            msg = c.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((time.monotonic(), len(msg.value())))
    finally:
        c.close()
    rate = sum(n for t, n in got if start + 2 <= t < start + 8) / 6
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, rate
    assert throttles and max(throttles) > 0
    samples = _scrape(broker)
    assert _quota_metric(samples, "kafka_server_quota_throttle_time", "Fetch", "held-consumer") > 0


def _create_v(conn, version, name, partitions):
    resp = conn.call(ApiKey.CREATE_TOPICS, version, request(ApiKey.CREATE_TOPICS, topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=10000))
    return resp, resp.topics[0]


def test_controller_mutations_over_the_quota_are_refused_from_kip_599_versions(broker):
    _set_quota(broker, "mutator", controller_mutation_rate=2)  # a bucket of 2 * 2 windows = 4 partitions
    with broker.client(client_id="mutator") as conn:
        _resp, first = _create_v(conn, 6, "mut-a", 10)
        assert first.error_code == 0  # taken while the bucket is not empty: it is now 6 below zero
        resp, refused = _create_v(conn, 6, "mut-b", 1)
        assert (refused.error_code, refused.error_message) == (89, "The throttling quota has been exceeded.")
        assert 2000 < resp.throttle_time_ms <= 3000  # 6 tokens at 2 per second
        # ... and the connection is muted for that long: the next request is read once the bucket
        # is back at zero, and taken
        throttle_s = resp.throttle_time_ms / 1000
        sent = time.monotonic()
        resp, again = _create_v(conn, 6, "mut-b", 1)
        assert time.monotonic() - sent >= throttle_s - 0.2
        assert again.error_code == 0
    with broker.client(client_id="mutator") as conn:
        # v5 (before KIP-599) is never refused: it is done, and the client throttled
        resp, old = _create_v(conn, 5, "mut-c", 4)
        assert old.error_code == 0 and resp.throttle_time_ms > 0
        with broker.client(client_id="no-quota") as other:  # a client without the quota
            resp, free = _create_v(other, 6, "mut-d", 10)
            assert free.error_code == 0 and resp.throttle_time_ms == 0


def test_request_time_over_request_percentage_is_throttled(broker):
    _set_quota(broker, "busy", request_percentage=0.5)  # 5 ms of handler time per second
    with broker.client(client_id="busy") as conn:
        throttled = None
        deadline = time.monotonic() + 15
        while throttled is None and time.monotonic() < deadline:
            # the channel is muted from when the throttled response leaves the broker, which is
            # after this request was sent: from here to the next answer is at least the throttle
            # (timing from when the response arrived would not be: the mute runs meanwhile)
            sent = time.monotonic()
            resp = conn.call(ApiKey.METADATA, 12, request(ApiKey.METADATA, topics=None))
            if resp.throttle_time_ms:
                throttled = resp.throttle_time_ms
        assert throttled is not None and 0 < throttled <= 1000  # a request throttle is at most one window
        conn.call(ApiKey.METADATA, 12, request(ApiKey.METADATA, topics=None))
        assert time.monotonic() - sent >= throttled / 1000 * 0.99  # muted meanwhile (float slack only)
    with broker.client(client_id="idle") as conn:
        for _ in range(200):
            assert conn.call(ApiKey.METADATA, 12, request(ApiKey.METADATA, topics=None)).throttle_time_ms == 0
