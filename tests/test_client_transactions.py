"""kafkacore's transactional Producer (docs/transactions.md §9.1) against a real ``kafkacore
serve``: init/begin/commit/abort with confluent-kafka's names, fencing of a second instance,
offsets sent to the transaction, and the errors a wrong call order gets. What it wrote is read
back by confluent-kafka's consumer in both isolation levels."""
import time
import uuid

import pytest

from _kcutil import wait_for
from broker_client import BrokerProcess
from kafkacore import Producer
from kafkacore.client.transaction_manager import ConsumerGroupMetadata
from kafkacore.errors import KafkaConfigError, KafkaError

confluent_kafka = pytest.importorskip("confluent_kafka")
WAIT = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("client-txn") / "data", settings={
        "num.partitions": "2", "transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "2"})
    b.start()
    yield b
    b.stop()


def _read(bootstrap, topic, partitions, isolation):
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4()}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        out, eof = [], set()
        while len(eof) < partitions:
            m = c.poll(WAIT)
            assert m is not None, "no end of partition within the wait"
            if m.error():
                assert m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            out.append(m.value())
        return out
    finally:
        c.close()


def _producer(broker, txn_id, **extra):
    return Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 2, **extra})


def test_committed_records_are_read_committed_and_aborted_ones_are_not(broker):
    topic = f"ct-{uuid.uuid4().hex[:8]}"
    with _producer(broker, f"t-{topic}") as p:
        p.init_transactions(WAIT)
        p.begin_transaction()
        handles = [p.send(topic, b"c%d" % i, key=b"k%d" % i) for i in range(20)]
        p.commit_transaction(WAIT)
        assert all(h.result(0).offset >= 0 for h in handles)
        p.begin_transaction()
        aborted = [p.send(topic, b"a%d" % i) for i in range(20)]
        p.abort_transaction(WAIT)
        p.begin_transaction()
        p.send(topic, b"last")
        p.commit_transaction(WAIT)
    assert sorted(_read(broker.bootstrap, topic, 2, "read_committed")) == sorted(
        [b"c%d" % i for i in range(20)] + [b"last"])
    # aborted records that reached the log before the abort are there for read_uncommitted
    # readers; the others failed in the producer and were never written
    reached = sum(1 for h in aborted if _succeeded(h))
    assert len(_read(broker.bootstrap, topic, 2, "read_uncommitted")) == 21 + reached


def _succeeded(handle):
    try:
        handle.result(0)
        return True
    except KafkaError:
        return False


def test_a_second_instance_fences_the_first(broker):
    topic = f"cf-{uuid.uuid4().hex[:8]}"
    tid = f"t-{topic}"
    first = _producer(broker, tid)
    try:
        first.init_transactions(WAIT)
        first.begin_transaction()
        first.send(topic, b"zombie").result(WAIT)
        with _producer(broker, tid) as second:
            second.init_transactions(WAIT)  # fences the first and aborts its transaction
            second.begin_transaction()
            second.send(topic, b"alive")
            second.commit_transaction(WAIT)
        with pytest.raises(KafkaError) as e:
            first.commit_transaction(WAIT)
        assert e.value.fatal, e.value
        with pytest.raises(KafkaError):
            first.begin_transaction()  # fatal: every call raises it again
    finally:
        first.close(1)
    assert _read(broker.bootstrap, topic, 2, "read_committed") == [b"alive"]


def test_offsets_sent_to_the_transaction_commit_with_it(broker):
    topic = f"co-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    with _producer(broker, f"t-{topic}") as p:
        p.init_transactions(WAIT)
        p.begin_transaction()
        p.send(topic, b"x", partition=0)
        p.send_offsets_to_transaction({(topic, 0): 7}, ConsumerGroupMetadata(group), WAIT)
        p.abort_transaction(WAIT)
        p.begin_transaction()
        p.send(topic, b"y", partition=0)
        p.send_offsets_to_transaction([(topic, 0, 42)], ConsumerGroupMetadata(group), WAIT)
        p.commit_transaction(WAIT)
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        assert c.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=WAIT)[0].offset == 42
    finally:
        c.close()


def _committed(bootstrap, group, topic):
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=WAIT)[0].offset
    finally:
        c.close()


def _plain_commit(bootstrap, group, topic, offset):
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


def test_a_plain_commit_made_while_a_transaction_is_open_is_not_undone_by_its_commit(tmp_path):
    """Kafka's olderThan: at the COMMIT marker a transaction's offset replaces the committed one
    only if that was written before the transaction's; after a restart, the load agrees."""
    topic = f"older-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    with BrokerProcess(tmp_path / "data", settings={"transaction.state.log.num.partitions": "1",
                                                    "offsets.topic.num.partitions": "1"}) as b:
        with _producer(b, f"t-{topic}") as p:
            p.init_transactions(WAIT)
            p.begin_transaction()
            p.send(topic, b"x", partition=0)
            p.send_offsets_to_transaction({(topic, 0): 10}, ConsumerGroupMetadata(group), WAIT)
            _plain_commit(b.bootstrap, group, topic, 20)  # written after the transaction's offsets
            p.commit_transaction(WAIT)
            assert _committed(b.bootstrap, group, topic) == 20
            p.begin_transaction()  # and a transaction whose offsets came last does replace it
            p.send(topic, b"y", partition=0)
            p.send_offsets_to_transaction({(topic, 0): 30}, ConsumerGroupMetadata(f"{group}-2"), WAIT)
            _plain_commit(b.bootstrap, f"{group}-2", topic, 25)
            p.send_offsets_to_transaction({(topic, 0): 31}, ConsumerGroupMetadata(f"{group}-2"), WAIT)
            p.commit_transaction(WAIT)
            assert _committed(b.bootstrap, f"{group}-2", topic) == 31
        b.stop()
        b.start()
        assert _committed(b.bootstrap, group, topic) == 20
        assert _committed(b.bootstrap, f"{group}-2", topic) == 31


def test_calls_out_of_order_and_bad_configs_are_refused(broker):
    with _producer(broker, f"t-order-{uuid.uuid4().hex[:6]}") as p:
        with pytest.raises(KafkaError, match="state"):
            p.begin_transaction()  # before init_transactions
        p.init_transactions(WAIT)
        with pytest.raises(KafkaError, match="state"):
            p.send("anything", b"v")  # outside a transaction
        with pytest.raises(KafkaError, match="state"):
            p.commit_transaction(WAIT)
        p.begin_transaction()
        with pytest.raises(KafkaError, match="state"):
            p.begin_transaction()
        p.abort_transaction(WAIT)  # nothing sent: nothing to end at the coordinator
    with pytest.raises(KafkaConfigError, match="transactional.id"):
        _producer(broker, "x", acks=1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    try:
        with pytest.raises(KafkaConfigError, match="transactional.id"):
            plain.begin_transaction()
    finally:
        plain.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_kafkacore_consumer_read_committed_end_to_end_with_offsets(broker, protocol):
    """kafkacore's own consume-transform-produce: a read_committed Consumer in a group (either
    group protocol: with KIP-848 the group metadata carries the member epoch, which
    TxnOffsetCommit checks), a transactional Producer, output and offsets committed together;
    one transaction aborted midway and redone."""
    from kafkacore import Consumer

    src, dst = f"in-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}"
    with Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        for i in range(40):
            plain.send(src, b"%d" % i, partition=0)
    group = f"g-{src}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "group.protocol": protocol})
    consumer.subscribe([src])
    p = _producer(broker, f"t-{src}")
    try:
        p.init_transactions(WAIT)
        done, aborted_once = 0, False
        deadline = time.monotonic() + WAIT
        while done < 40 and time.monotonic() < deadline:
            recs = consumer.poll(1.0, max_records=15)
            if not recs:
                continue
            p.begin_transaction()
            for r in recs:
                p.send(dst, b"x" + r.value, partition=0)
            metadata = consumer.consumer_group_metadata()
            assert metadata.generation_id > 0 and metadata.member_id
            p.send_offsets_to_transaction({(src, recs[0].partition): recs[-1].offset + 1}, metadata, WAIT)
            if not aborted_once:
                assert p.flush(WAIT) == 0  # the aborted output reaches the log
                p.abort_transaction(WAIT)
                aborted_once = True
                consumer.seek(src, recs[0].partition, recs[0].offset)
                continue
            p.commit_transaction(WAIT)
            done += len(recs)
    finally:
        consumer.close()
        p.close(1)
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": "read_committed",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        reader.assign([(dst, 0, 0)])
        got = []
        deadline = time.monotonic() + WAIT
        while len(got) < 40 and time.monotonic() < deadline:
            got.extend(r.value for r in reader.poll(0.5))
        reader.seek(dst, 0, 0)
        arrow_values = []
        deadline = time.monotonic() + WAIT
        while len(arrow_values) < 40 and time.monotonic() < deadline:
            arrow_values.extend(reader.poll_arrow(0.5).column("value").to_pylist())
    finally:
        reader.close()
    assert got == [b"x%d" % i for i in range(40)]
    assert arrow_values == got  # the Arrow path drops the aborted records too
    assert len(_read(broker.bootstrap, dst, 1, "read_uncommitted")) > 40  # the aborted output is in the log
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        assert c.committed([confluent_kafka.TopicPartition(src, 0)], timeout=WAIT)[0].offset == 40
    finally:
        c.close()


def test_an_abortable_error_that_needs_a_new_epoch_recovers_with_abort(tmp_path):
    """The coordinator forgot the producer's transactional id while it was idle
    (transactional.id.expiration.ms): the next transaction's AddPartitionsToTxn gets
    INVALID_PRODUCER_ID_MAPPING, an abortable error; abort_transaction then gets a new producer
    id/epoch (KIP-360) and the producer goes on with fresh sequences."""
    b = BrokerProcess(tmp_path / "data", settings={
        "transaction.state.log.num.partitions": "1", "transactional.id.expiration.ms": "300",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "200", "num.partitions": "1"})
    b.start()
    try:
        topic = "expiry-recovery"
        with _producer(b, "idle-1") as p:
            p.init_transactions(WAIT)
            p.begin_transaction()
            p.send(topic, b"first")
            p.commit_transaction(WAIT)
            wait_for(lambda: "transactional id 'idle-1' expired" in b.output(), "the coordinator to expire the id", 30)
            p.begin_transaction()
            h = p.send(topic, b"lost")
            with pytest.raises(KafkaError) as e:
                h.result(WAIT)
            assert e.value.txn_requires_abort and not e.value.fatal, e.value
            with pytest.raises(KafkaError):
                p.commit_transaction(WAIT)
            p.abort_transaction(WAIT)
            p.begin_transaction()
            p.send(topic, b"second")
            p.commit_transaction(WAIT)
        # the commit's markers are written after EndTxn is answered (Kafka's order): until then
        # the last stable offset stops a read_committed consumer before "second"
        reads = []  # what a failure reports: the last read
        wait_for(lambda: reads.append(_read(b.bootstrap, topic, 1, "read_committed")) or
                 reads[-1] == [b"first", b"second"],
                 lambda: f"the committed records, and only them (last read: {reads[-1] if reads else None!r})", 30)
    finally:
        b.stop()
